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

/// Longest site name the summary table shows (in characters); longer ones end in `…`.
pub(crate) const NAME_WIDTH: usize = 60;

/// A name as a terminal may safely show it: control characters (and the invisible ones that
/// reorder text) escaped, at most [`NAME_WIDTH`] characters. The files keep the full name.
pub(crate) fn name(name: &str) -> String {
    let shown = |c: char| -> String {
        if c.is_control() || is_bidi_control(c) {
            c.escape_default().collect()
        } else {
            c.into()
        }
    };
    let width = |c: char| if c.is_control() || is_bidi_control(c) { c.escape_default().count() } else { 1 };
    // Stops at the first character past the column: a 1 MiB name costs no more than a short one.
    let fits = name.chars().try_fold(0, |n, c| Some(n + width(c)).filter(|n| *n <= NAME_WIDTH)).is_some();
    if fits {
        return name.chars().map(shown).collect();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in name.chars() {
        if used + width(c) > NAME_WIDTH - 1 {
            break;
        }
        used += width(c);
        out.push_str(&shown(c));
    }
    out.push('…');
    out
}

/// `text` with control characters escaped (not cut): notes that quote a site's name.
pub(crate) fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| c.is_control() || is_bidi_control(c);
    if !text.chars().any(hidden) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Unicode's bidirectional controls: invisible, yet they reorder what follows on the terminal.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_escaped_and_cut_to_the_column() {
        assert_eq!(super::name("plain"), "plain");
        assert_eq!(super::name("a\u{1b}[31mb\nc\u{202e}"), "a\\u{1b}[31mb\\nc\\u{202e}");
        let long = "x".repeat(1 << 20);
        let shown = super::name(&long);
        assert_eq!(shown.chars().count(), super::NAME_WIDTH);
        assert!(shown.ends_with('…'));
        let exact = "y".repeat(super::NAME_WIDTH);
        assert_eq!(super::name(&exact), exact, "a name that fits is not cut");
        let escapes = "\n".repeat(100);
        let shown = super::name(&escapes);
        assert!(shown.chars().count() <= super::NAME_WIDTH && shown.ends_with('…'), "{shown}");
        assert!(!shown.contains('\n'));
    }

    #[test]
    fn units_read_naturally() {
        assert_eq!(super::duration(456), "456 ns");
        assert_eq!(super::duration(1_234_000), "1.23 ms");
        assert_eq!(super::bytes(64 << 20), "64.0 MiB");
        assert_eq!(super::bandwidth(8.5e9), "8.50 GB/s");
    }
}
