//! `gpuspan timeline --svg` and `gpuspan merge --svg`: a static picture of the timeline, for
//! documents and reports where no browser opens Perfetto. One band per capture: a row per host
//! thread (the annotated calls), a row per device (the GPU work: kernels and copies, or the
//! calls' GPU intervals), then the counter tracks as step plots scaled to their own peak (work
//! and calls in flight per device, bytes moved, and the device monitor's readings).

use crate::analysis::{self, Index};
use gpuspan_capture::Capture;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

const WIDTH: f64 = 1200.0;
const LABEL: f64 = 300.0;
/// Characters of a label that fit left of the plots (the whole name is in its tooltip).
const LABEL_CHARS: usize = 46;
const ROW: f64 = 18.0;
const PLOT: f64 = 34.0;

/// A counter track: name, unit, (time, value) steps in time order.
type Track = (String, &'static str, Vec<(u64, f64)>);
/// A device's readings of one quantity: (device key, quantity, unit) -> steps.
type Readings = BTreeMap<(u32, &'static str, &'static str), Vec<(u64, f64)>>;

/// A label cut to fit left of the plots, with its whole text as a tooltip.
fn text_label(x: f64, y: f64, text: &str, extra: &str) -> String {
    let shown = if text.chars().count() > LABEL_CHARS {
        format!("{}…", text.chars().take(LABEL_CHARS - 1).collect::<String>())
    } else {
        text.to_owned()
    };
    format!(r#"<text x="{x}" y="{y:.1}"{extra}>{}<title>{}</title></text>"#, escape(&shown), escape(text))
}

/// A device's label without the parenthesised details of its name (`GPU 0: llvmpipe`), so that
/// what a track shows still fits beside it.
fn device(index: &Index<'_>, key: Option<u32>) -> String {
    let full = index.device_label(key);
    match full.find(" (") {
        Some(i) if full.starts_with("GPU ") && i > "GPU 0:".len() => full[..i].to_owned(),
        _ => full,
    }
}

fn escape(s: &str) -> String {
    crate::table::shown(s).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A colour per name, stable across runs.
fn colour(name: &str) -> String {
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("hsl({},62%,55%)", h % 360)
}

/// Steps of a level that goes up at starts and down at ends.
fn level(mut edges: Vec<(u64, i64)>) -> Vec<(u64, f64)> {
    edges.sort_unstable();
    let mut out: Vec<(u64, f64)> = Vec::new();
    let mut at = 0i64;
    for (t, d) in edges {
        at += d;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = at as f64,
            _ => out.push((t, at as f64)),
        }
    }
    out
}

fn tracks(c: &Capture, index: &Index<'_>) -> Vec<Track> {
    let mut out = Vec::new();
    let mut work: BTreeMap<Option<u32>, Vec<(u64, i64)>> = BTreeMap::new();
    for w in analysis::work(c) {
        work.entry(w.device).or_default().extend([(w.interval.start_ns, 1), (w.interval.end_ns, -1)]);
    }
    let mut calls: BTreeMap<Option<u32>, Vec<(u64, i64)>> = BTreeMap::new();
    for r in &c.records {
        if let Some(g) = &r.gpu {
            calls
                .entry(g.device)
                .or_default()
                .extend([(r.host.start_ns, 1), (g.interval.end_ns.max(r.host.start_ns), -1)]);
        }
    }
    for (d, e) in work {
        out.push((format!("{} work in flight", device(index, d)), "", level(e)));
    }
    for (d, e) in calls {
        out.push((format!("{} calls in flight", device(index, d)), "", level(e)));
    }
    let moved = analysis::bytes_moved(c);
    if !moved.is_empty() {
        out.push(("bytes moved".into(), "B", moved.into_iter().map(|(t, total)| (t, total as f64)).collect()));
    }
    let mut readings: Readings = BTreeMap::new();
    for d in &c.samples {
        for s in &d.samples {
            let values = [
                ("utilization", "%", s.gpu_utilization_pct.map(f64::from)),
                ("memory used", "B", s.memory_used_bytes.map(|b| b as f64)),
                ("power", "W", s.power_w),
                ("SM clock", "MHz", s.sm_clock_mhz.map(f64::from)),
                ("PCIe rx", "B/s", s.pcie_rx_bytes_per_s),
                ("PCIe tx", "B/s", s.pcie_tx_bytes_per_s),
            ];
            for (what, unit, v) in values {
                if let Some(v) = v {
                    readings.entry((d.device, what, unit)).or_default().push((s.time_ns, v));
                }
            }
        }
    }
    for ((key, what, unit), steps) in readings {
        out.push((format!("{} {what}", device(index, Some(key))), unit, steps));
    }
    out
}

fn peak_label(v: f64, unit: &str) -> String {
    match unit {
        "B" => crate::table::bytes(v as u64),
        "B/s" => crate::table::bandwidth(v),
        "" => format!("{v:.0}"),
        u => format!("{v:.0} {u}"),
    }
}

/// Writes the captures as one SVG picture on a shared time axis.
pub fn write(captures: &[(&str, &Capture)], out: impl Write) -> io::Result<()> {
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    for (_, c) in captures {
        for r in &c.records {
            lo = lo.min(r.host.start_ns).min(r.gpu.as_ref().map_or(u64::MAX, |g| g.interval.start_ns));
            hi = hi.max(r.host.end_ns).max(r.gpu.as_ref().map_or(0, |g| g.interval.end_ns));
        }
        for s in c.samples.iter().flat_map(|d| &d.samples) {
            lo = lo.min(s.time_ns);
            hi = hi.max(s.time_ns);
        }
    }
    if lo >= hi {
        (lo, hi) = (0, 1);
    }
    let span = (hi - lo) as f64;
    let x = |t: u64| LABEL + (t.saturating_sub(lo)) as f64 / span * (WIDTH - LABEL - 10.0);
    let mut body = String::new();
    let mut y = 30.0;
    for (label, c) in captures {
        let index = Index::new(c);
        let h = &c.header;
        let _ = writeln!(
            body,
            r#"<text x="4" y="{:.1}" font-weight="bold">{} (pid {}) [{}]</text>"#,
            y + 12.0,
            escape(&h.program),
            h.pid,
            escape(label)
        );
        y += ROW + 4.0;
        let row = |name: &str, y: f64, items: &mut dyn Iterator<Item = (u64, u64, String)>, body: &mut String| {
            let _ = writeln!(body, "{}", text_label(4.0, y + 12.0, name, ""));
            for (s, e, what) in items {
                let (x0, x1) = (x(s), x(e));
                let _ = writeln!(
                    body,
                    r#"<rect x="{x0:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                    y + 2.0,
                    (x1 - x0).max(0.5),
                    ROW - 4.0,
                    colour(&what),
                    escape(&what)
                );
            }
        };
        for t in &c.threads {
            let mut items = c
                .records
                .iter()
                .filter(|r| r.thread == t.index)
                .map(|r| (r.host.start_ns, r.host.end_ns, index.site_name(r.site)));
            row(&format!("thread {}", t.name), y, &mut items, &mut body);
            y += ROW;
        }
        let mut devices: BTreeMap<Option<u32>, Vec<(u64, u64, String)>> = BTreeMap::new();
        for w in analysis::work(c) {
            let r = &c.records[w.record];
            let name = r
                .activities
                .iter()
                .find(|a| a.interval == w.interval)
                .map_or_else(|| index.site_name(r.site), |a| a.name.clone());
            devices.entry(w.device).or_default().push((w.interval.start_ns, w.interval.end_ns, name));
        }
        for (d, items) in devices {
            row(&device(&index, d), y, &mut items.into_iter(), &mut body);
            y += ROW;
        }
        for (name, unit, steps) in tracks(c, &index) {
            let peak = steps.iter().map(|s| s.1).fold(0.0, f64::max);
            let _ = writeln!(
                body,
                r##"{}<text x="4" y="{:.1}" fill="#666">peak {}</text>"##,
                text_label(4.0, y + 13.0, &name, ""),
                y + 27.0,
                escape(&peak_label(peak, unit))
            );
            let base = y + PLOT - 2.0;
            let scale = if peak > 0.0 { (PLOT - 6.0) / peak } else { 0.0 };
            let mut path = format!("M{:.2},{base:.1}", x(lo));
            let mut prev = 0.0;
            for (t, v) in &steps {
                let _ = write!(path, " H{:.2} V{:.1}", x(*t), base - prev * scale);
                let _ = write!(path, " V{:.1}", base - v * scale);
                prev = *v;
            }
            let _ = write!(path, " H{:.2}", x(hi));
            let _ = writeln!(
                body,
                r##"<path d="{path}" fill="none" stroke="#2a6fdb" stroke-width="1"/><line x1="{LABEL}" y1="{base:.1}" x2="{:.1}" y2="{base:.1}" stroke="#ccc"/>"##,
                WIDTH - 10.0
            );
            y += PLOT;
        }
        y += 10.0;
    }
    let height = y + 20.0;
    let mut out = out;
    writeln!(
        out,
        r#"<?xml version="1.0" standalone="no"?><svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    )?;
    writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(
        out,
        r##"<text x="4" y="14" fill="#444">gpuspan timeline: {} over {} (hover a box for its name; Perfetto has the detail)</text>"##,
        captures.len().to_string() + if captures.len() == 1 { " capture" } else { " captures" },
        crate::table::duration(hi - lo)
    )?;
    out.write_all(body.as_bytes())?;
    writeln!(out, "</svg>")?;
    out.flush()
}
