//! An instrumented wgpu device's memory (`wgpu/memory.rs`, logical sizes) as metrics: a
//! quantity over time, exported where a collector user finds the device monitor's
//! `hw.gpu.memory.usage`, read whenever the reader collects (never on the program's threads).
//! The figures are the account the summary and the capture state (decision 65).
//!
//! | metric | instrument, unit | value |
//! |---|---|---|
//! | `gpuspan.wgpu.memory.usage` | up-down counter, By | live bytes, per device |
//! | `gpuspan.wgpu.memory.owner.usage` | up-down counter, By | live bytes per device and owner (`gpuspan.memory.owner`: the annotated call or span that created them) |
//! | `gpuspan.wgpu.memory.peak` | gauge, By | the most bytes live at once so far, per device |
//!
//! Each point names its device as records do (`gpu.device.id`, `gpu.device.name`).

use crate::hooks::gauges::{Gauge, GaugeKind};
use crate::record::Value;

/// A data point's value and attributes, as the exporter takes them.
type Emit<'a> = &'a mut dyn FnMut(f64, &[(&'static str, Value)]);

/// Calls `each` with every account (without samples) and its device's attributes.
fn accounts(mut each: impl FnMut(&gpuspan_capture::MemoryAccount, &[(&'static str, Value)])) {
    for (device, account) in crate::hooks::leaves().memory_accounts(false) {
        let attributes = [
            ("gpu.device.id", Value::I64(device.id.into())),
            ("gpu.device.name", Value::Str(device.name.to_string().into())),
        ];
        each(&account, &attributes);
    }
}

fn usage(e: Emit<'_>) {
    accounts(|a, attributes| e(a.live_bytes as f64, attributes));
}

fn owner_usage(e: Emit<'_>) {
    accounts(|a, attributes| {
        for h in &a.live_by_owner {
            let mut with_owner = attributes.to_vec();
            with_owner.push(("gpuspan.memory.owner", Value::Str(h.name.clone().into())));
            e(h.bytes as f64, &with_owner);
        }
    });
}

fn peak(e: Emit<'_>) {
    accounts(|a, attributes| e(a.peak_bytes as f64, attributes));
}

/// The memory metrics; without an instrumented device that allocated they have no points.
pub(super) fn gauges() -> Vec<Gauge> {
    use GaugeKind::*;
    vec![
        Gauge {
            name: "gpuspan.wgpu.memory.usage",
            unit: "By",
            description: "GPU memory live in buffers and textures of an instrumented wgpu device (logical sizes)",
            kind: I64UpDownCounter,
            observe: usage,
        },
        Gauge {
            name: "gpuspan.wgpu.memory.owner.usage",
            unit: "By",
            description: "GPU memory live in buffers and textures of an instrumented wgpu device, by the call or span that created them (logical sizes)",
            kind: I64UpDownCounter,
            observe: owner_usage,
        },
        Gauge {
            name: "gpuspan.wgpu.memory.peak",
            unit: "By",
            description: "The most GPU memory live at once in buffers and textures of an instrumented wgpu device (logical sizes)",
            kind: I64Gauge,
            observe: peak,
        },
    ]
}
