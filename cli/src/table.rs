//! Text tables with aligned columns, CSV, and the units the report prints.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters a terminal acts on instead of showing: the control characters (C0, DEL, C1) and
/// the bidirectional overrides and isolates, which reorder what follows them.
fn hostile(c: char) -> bool {
    c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn escape_controls(s: &str, keep_lines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| hostile(c) && !(keep_lines && c == '\n')) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\n' if keep_lines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hostile(c) && u32::from(c) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if hostile(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A name from a capture or a live feed as text shows it: every control character and
/// bidirectional override written as an escape (`\x1b`, `\n`, `\u{202e}`), so that no name can
/// move a terminal's cursor, clear its screen or reorder a line.
pub fn shown(s: &str) -> Cow<'_, str> {
    escape_controls(s, false)
}

/// A whole text as [`shown`] writes a name, its line feeds kept: what every text output passes
/// through last.
pub fn shown_text(s: &str) -> Cow<'_, str> {
    escape_controls(s, true)
}

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
        let shown_cells = |line: &Vec<String>| line.iter().map(|c| shown(c).into_owned()).collect::<Vec<String>>();
        let header = shown_cells(&self.header);
        let rows: Vec<Vec<String>> = self.rows.iter().map(shown_cells).collect();
        let cols = header.len();
        let mut width = vec![0; cols];
        let mut numeric = vec![true; cols];
        for (c, h) in header.iter().enumerate() {
            width[c] = h.chars().count();
        }
        for r in &rows {
            for (c, cell) in r.iter().enumerate().take(cols) {
                width[c] = width[c].max(cell.chars().count());
                numeric[c] &= looks_numeric(cell);
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&header).chain(&rows) {
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
            let cells: Vec<String> = line.iter().map(|c| csv_cell(&shown(c))).collect();
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
