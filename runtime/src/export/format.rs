//! Human-readable units for the summary and messages.

/// `1.23 ms`, `456 ns`, `2.00 s`.
pub(crate) fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `64.0 MiB`, `512 B`.
pub(crate) fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Decimal GB/s, as link speeds are quoted: `8.50 GB/s`, `120 MB/s`.
pub(crate) fn bandwidth(bytes_per_s: f64) -> String {
    if bytes_per_s >= 1e9 {
        format!("{:.2} GB/s", bytes_per_s / 1e9)
    } else if bytes_per_s >= 1e6 {
        format!("{:.1} MB/s", bytes_per_s / 1e6)
    } else {
        format!("{:.1} kB/s", bytes_per_s / 1e3)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn units_read_naturally() {
        assert_eq!(super::duration(456), "456 ns");
        assert_eq!(super::duration(1_234_000), "1.23 ms");
        assert_eq!(super::bytes(64 << 20), "64.0 MiB");
        assert_eq!(super::bandwidth(8.5e9), "8.50 GB/s");
    }
}
