//! A device's panel: busy bars, VRAM in the seed's colours, power, temperature band, clocks,
//! PCIe, throttle reasons and the utilization sparkline's data.

use crate::table;
use gpuspan_capture::live::Device;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

/// The seed's VRAM colours: green, yellow over 70 %, red over 90 %.
pub fn vram_color(used_pct: f64) -> Color {
    if used_pct > 90.0 {
        Color::Red
    } else if used_pct > 70.0 {
        Color::Yellow
    } else {
        Color::Green
    }
}

/// The seed's temperature band and its colour.
pub fn temperature_band(celsius: u32) -> (&'static str, Color) {
    match celsius {
        0..=50 => ("COOL", Color::Green),
        51..=70 => ("WARM", Color::Cyan),
        71..=85 => ("HOT", Color::Yellow),
        _ => ("CRITICAL", Color::Red),
    }
}

/// `[████░░░░]` filled to `pct` (0–100) over `width` cells.
fn bar(pct: f64, width: usize) -> (String, String) {
    let filled = ((pct.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
    ("█".repeat(filled), "░".repeat(width - filled.min(width)))
}

fn bar_line(label: &str, pct: Option<f64>, width: usize, color: Color, tail: String) -> Line<'static> {
    match pct {
        Some(p) => {
            let (full, empty) = bar(p, width);
            Line::from(vec![
                Span::raw(format!("{label:<6}[")),
                Span::styled(full, Style::default().fg(color)),
                Span::styled(empty, Style::default().fg(Color::DarkGray)),
                Span::raw(format!("] {p:>5.1}%{tail}")),
            ])
        }
        None => Line::from(format!("{label:<6}n/a{tail}")),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// A device panel's lines, above its sparkline.
pub fn device_lines(d: &Device, width: usize) -> Vec<Line<'static>> {
    let bar_width = width.saturating_sub(30).clamp(10, 40);
    let Some(s) = &d.latest else {
        return vec![Line::from("no sample yet")];
    };
    let mut lines = Vec::new();
    let util = |v: Option<u32>| v.map(f64::from);
    lines.push(bar_line("GPU", util(s.gpu_utilization_pct), bar_width, Color::Green, String::new()));
    lines.push(bar_line("Mem", util(s.memory_utilization_pct), bar_width, Color::Green, " busy".into()));
    let total = d.memory_total_bytes;
    let used_pct = s.memory_used_bytes.filter(|_| total > 0).map(|u| u as f64 * 100.0 / total as f64);
    let vram_tail = s.memory_used_bytes.map_or_else(String::new, |u| format!(" ({} / {})", gib(u), gib(total)));
    lines.push(bar_line("VRAM", used_pct, bar_width, used_pct.map_or(Color::Green, vram_color), vram_tail));
    let power = match (s.power_w, s.power_limit_w) {
        (Some(p), Some(l)) => format!("Power {p:.0} W / {l:.0} W ({:.0}%)", p * 100.0 / l.max(1.0)),
        (Some(p), None) => format!("Power {p:.0} W"),
        _ => "Power n/a".to_owned(),
    };
    let mut power_temp = vec![Span::raw(format!("{power:<30}"))];
    match s.temperature_c {
        Some(t) => {
            let (band, color) = temperature_band(t);
            power_temp.push(Span::raw("Temp "));
            power_temp.push(Span::styled(format!("{t}°C ({band})"), Style::default().fg(color)));
        }
        None => power_temp.push(Span::raw("Temp n/a")),
    }
    lines.push(Line::from(power_temp));
    let mhz = |v: Option<u32>| v.map_or_else(|| "n/a".to_owned(), |m| format!("{m} MHz"));
    lines.push(Line::from(format!("Clocks SM {}  Memory {}", mhz(s.sm_clock_mhz), mhz(s.memory_clock_mhz))));
    let link = match (s.pcie_generation, s.pcie_width) {
        (Some(g), Some(w)) => format!("Gen{g} x{w}"),
        _ => "link n/a".to_owned(),
    };
    let speed = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), table::bandwidth);
    lines.push(Line::from(format!(
        "PCIe {link} | RX {} | TX {}",
        speed(s.pcie_rx_bytes_per_s),
        speed(s.pcie_tx_bytes_per_s)
    )));
    let throttle = match &s.throttle_reasons {
        None => "n/a".to_owned(),
        Some(r) if r.is_empty() => "none".to_owned(),
        Some(r) => r.join(", "),
    };
    let color = if s.throttle_reasons.as_ref().is_some_and(|r| r.iter().any(|x| x != "gpu_idle")) {
        Color::Yellow
    } else {
        Color::Reset
    };
    lines.push(Line::from(vec![Span::raw("Throttle "), Span::styled(throttle, Style::default().fg(color))]));
    lines
}
