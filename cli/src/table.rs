//! Text tables with aligned columns, CSV, and the units the report prints.

use std::fmt::Write as _;

/// A table of strings; columns whose cells all look numeric are right-aligned.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Aligned text, two spaces between columns, no trailing spaces.
    pub fn to_text(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        let mut numeric = vec![true; cols];
        for (c, h) in self.header.iter().enumerate() {
            width[c] = h.chars().count();
        }
        for r in &self.rows {
            for (c, cell) in r.iter().enumerate().take(cols) {
                width[c] = width[c].max(cell.chars().count());
                numeric[c] &= looks_numeric(cell);
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let mut l = String::new();
            for (c, cell) in line.iter().enumerate().take(cols) {
                let pad = width[c] - cell.chars().count();
                if c > 0 {
                    l.push_str("  ");
                }
                if numeric[c] {
                    l.extend(std::iter::repeat_n(' ', pad));
                    l.push_str(cell);
                } else {
                    l.push_str(cell);
                    l.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let _ = writeln!(out, "{}", l.trim_end());
        }
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = line.iter().map(|c| csv_cell(c)).collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
        out
    }
}

fn looks_numeric(cell: &str) -> bool {
    cell == "-" || cell.starts_with(|c: char| c.is_ascii_digit() || c == '≤' || c == '≥' || c == '+' || c == '-')
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_owned()
    }
}

/// Nanoseconds in the unit that keeps three or four significant digits.
pub fn duration(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

/// Bytes in binary units.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Bytes per second in decimal units, as link speeds are given.
pub fn bandwidth(bytes_per_s: f64) -> String {
    if bytes_per_s >= 1e9 {
        format!("{:.2} GB/s", bytes_per_s / 1e9)
    } else if bytes_per_s >= 1e6 {
        format!("{:.1} MB/s", bytes_per_s / 1e6)
    } else {
        format!("{:.1} kB/s", bytes_per_s / 1e3)
    }
}

/// `bytes / ns` as bytes per second; `None` without time or bytes.
pub fn rate(bytes: u64, ns: u64) -> Option<f64> {
    (bytes > 0 && ns > 0).then(|| bytes as f64 * 1e9 / ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_alignment() {
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_500), "1.5 µs");
        assert_eq!(duration(2_345_678), "2.35 ms");
        assert_eq!(bytes(4 << 20), "4.0 MiB");
        assert_eq!(bandwidth(8.5e9), "8.50 GB/s");
        let mut t = Table::new(&["site", "calls"]);
        t.row(vec!["saxpy".into(), "8".into()]);
        t.row(vec!["a,b".into(), "16".into()]);
        assert_eq!(t.to_text(), "site   calls\nsaxpy      8\na,b       16\n");
        assert_eq!(t.to_csv(), "site,calls\nsaxpy,8\n\"a,b\",16\n");
    }
}
