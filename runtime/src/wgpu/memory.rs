//! GPU memory on any wgpu device: the buffers and textures made through an instrumented device
//! (`gpuspan::wgpu::instrument`), counted from their creation until their last handle is dropped
//! (or they are destroyed). Live bytes by label and by owner, the peak with what held it, and a
//! counter track for the timeline; `track_memory` reads the live total where no device monitor
//! (NVML) can.
//!
//! The sizes are **logical**: what the program asked for (a buffer's size; a texture's texel
//! blocks × the format's block size, over its mips, layers and samples), not the driver's
//! allocation (alignment, padding, compression and the allocator's blocks are not visible
//! through wgpu).
//!
//! The owner of an allocation is the innermost annotated call open on the creating thread, else
//! the innermost `tracing` span entered there (a selected span is one), else `(no scope)`.
//! Major-independent: each major's instrumented device counts into its device's [`Memory`].
//!
//! Every output takes its figures from [`Memory::account`] (the summary's lines are made from
//! it too), so the summary, the capture's `Memory` frame (hence `gpuspan report`/`export`/
//! `timeline`) and the OTLP export state the same numbers (decision 65).

use crate::export::format;
use crate::record::DeviceLabel;
use gpuspan_capture::{Held, MemoryAccount, MemorySample};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Counter samples kept per device for the timeline; later ones are counted, not drawn.
const MAX_SAMPLES: usize = 100_000;

/// Holders named with the peak, largest first.
const PEAK_HOLDERS: usize = 3;

/// One instrumented device's memory.
#[derive(Debug)]
pub(crate) struct Memory {
    device: DeviceLabel,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    live: u64,
    /// Buffers and textures alive.
    objects: u64,
    by_label: BTreeMap<Arc<str>, u64>,
    by_owner: BTreeMap<Arc<str>, u64>,
    peak: u64,
    /// When the peak was first reached (host ns).
    peak_ns: u64,
    /// What held the most at the peak: (label, bytes), largest first.
    peak_labels: Vec<(Arc<str>, u64)>,
    peak_owners: Vec<(Arc<str>, u64)>,
    /// (host ns, live bytes) after each change, for the timeline's counter track.
    samples: Vec<(u64, u64)>,
    samples_dropped: u64,
    /// Textures of a format whose size wgpu does not give (planar video formats): not counted.
    not_sized: u64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds `bytes` (signed by `grow`) to `key`'s entry, removing it at zero.
fn change(map: &mut BTreeMap<Arc<str>, u64>, key: &Arc<str>, bytes: u64, grow: bool) {
    let entry = map.entry(key.clone()).or_insert(0);
    *entry = if grow { *entry + bytes } else { entry.saturating_sub(bytes) };
    if *entry == 0 {
        map.remove(key);
    }
}

/// The largest entries of `map`, largest first.
fn largest(map: &BTreeMap<Arc<str>, u64>, n: usize) -> Vec<(Arc<str>, u64)> {
    let mut all: Vec<(Arc<str>, u64)> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(n);
    all
}

fn held(entries: &[(Arc<str>, u64)]) -> Vec<Held> {
    entries.iter().map(|(k, v)| Held { name: k.to_string(), bytes: *v }).collect()
}

fn listed(entries: &[Held]) -> String {
    entries.iter().map(|h| format!("`{}` {}", h.name, format::bytes(h.bytes))).collect::<Vec<_>>().join(", ")
}

impl Memory {
    pub(crate) fn new(device: DeviceLabel) -> Arc<Memory> {
        Arc::new(Memory { device, state: Mutex::default() })
    }

    /// A buffer or texture of `bytes` (logical) was created, labelled `label`, while `call` was
    /// the innermost annotated call on this thread (if any): counted until the allocation drops.
    pub(crate) fn allocate(
        self: &Arc<Self>,
        label: Option<&str>,
        bytes: u64,
        call: Option<&'static str>,
    ) -> Allocation {
        let label: Arc<str> = Arc::from(label.unwrap_or("(no label)"));
        let owner: Arc<str> = match call {
            Some(c) => Arc::from(c),
            None => {
                tracing::Span::current().metadata().map_or_else(|| Arc::from("(no scope)"), |m| Arc::from(m.name()))
            }
        };
        self.apply(&label, &owner, bytes, true);
        Allocation { memory: self.clone(), bytes, label, owner, live: AtomicBool::new(true) }
    }

    /// A texture whose size cannot be computed: counted apart, said in the summary.
    pub(crate) fn unsized_texture(&self) {
        lock(&self.state).not_sized += 1;
    }

    fn apply(&self, label: &Arc<str>, owner: &Arc<str>, bytes: u64, grow: bool) {
        let mut s = lock(&self.state);
        if grow {
            s.live += bytes;
            s.objects += 1;
        } else {
            s.live = s.live.saturating_sub(bytes);
            s.objects = s.objects.saturating_sub(1);
        }
        change(&mut s.by_label, label, bytes, grow);
        change(&mut s.by_owner, owner, bytes, grow);
        let now = crate::clock::now_ns();
        if s.live > s.peak {
            s.peak = s.live;
            s.peak_ns = now;
            s.peak_labels = largest(&s.by_label, PEAK_HOLDERS);
            s.peak_owners = largest(&s.by_owner, PEAK_HOLDERS);
        }
        if s.samples.len() < MAX_SAMPLES {
            let sample = (now, s.live);
            s.samples.push(sample);
        } else {
            s.samples_dropped += 1;
        }
    }

    /// Live bytes now.
    pub(crate) fn live(&self) -> u64 {
        lock(&self.state).live
    }

    /// The device the account is of.
    pub(crate) fn device(&self) -> &DeviceLabel {
        &self.device
    }

    /// The timeline's counter track: its name and (host ns, live bytes) samples.
    pub(crate) fn track(&self) -> (String, Vec<(u64, u64)>) {
        (MemoryAccount::track_name(self.device.id), lock(&self.state).samples.clone())
    }

    /// The account as every output states it, if anything was ever allocated through the device
    /// (or a texture could not be sized), with the counter samples if `samples` (else none,
    /// `samples_dropped` still said). Its `device` is 0: the writer names its own key.
    pub(crate) fn account(&self, samples: bool) -> Option<MemoryAccount> {
        let s = lock(&self.state);
        if s.peak == 0 && s.not_sized == 0 {
            return None;
        }
        Some(MemoryAccount {
            device: 0,
            peak_bytes: s.peak,
            peak_ns: s.peak_ns,
            peak_by_label: held(&s.peak_labels),
            peak_by_owner: held(&s.peak_owners),
            live_bytes: s.live,
            live_objects: s.objects,
            live_by_label: held(&largest(&s.by_label, usize::MAX)),
            live_by_owner: held(&largest(&s.by_owner, usize::MAX)),
            not_sized: s.not_sized,
            samples: if samples {
                s.samples.iter().map(|&(time_ns, bytes)| MemorySample { time_ns, bytes }).collect()
            } else {
                Vec::new()
            },
            samples_dropped: s.samples_dropped,
        })
    }

    /// The summary's lines for this device, if anything was ever allocated through it.
    pub(crate) fn summary_lines(&self) -> Vec<String> {
        let Some(a) = self.account(false) else { return Vec::new() };
        let mut lines = vec![format!(
            "wgpu device {} ({}), instrumented: GPU memory (logical sizes, not the driver's allocations): live {} in {} \
             buffers and textures; peak {}, held by {} (owners: {})",
            self.device.id,
            self.device.name,
            format::bytes(a.live_bytes),
            a.live_objects,
            format::bytes(a.peak_bytes),
            listed(&a.peak_by_label),
            listed(&a.peak_by_owner),
        )];
        if a.live_bytes > 0 {
            lines.push(format!(
                "  live by label: {}; by owner: {}",
                listed(&a.live_by_label),
                listed(&a.live_by_owner)
            ));
        }
        if a.not_sized > 0 {
            lines.push(format!(
                "  {} textures of a planar format not counted (wgpu gives no size for them)",
                a.not_sized
            ));
        }
        if a.samples_dropped > 0 {
            lines.push(format!(
                "  {} memory changes after the first {MAX_SAMPLES} not drawn on the timeline (counted above)",
                a.samples_dropped
            ));
        }
        lines
    }
}

/// A counted buffer or texture: its bytes leave the count when it is destroyed or dropped.
#[derive(Debug)]
pub(crate) struct Allocation {
    memory: Arc<Memory>,
    bytes: u64,
    label: Arc<str>,
    owner: Arc<str>,
    live: AtomicBool,
}

impl Allocation {
    /// The object was destroyed (its memory freed before its handles are dropped), or dropped.
    pub(crate) fn free(&self) {
        if self.live.swap(false, Ordering::AcqRel) {
            self.memory.apply(&self.label, &self.owner, self.bytes, false);
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::Memory;
    use crate::record::DeviceLabel;

    #[test]
    fn live_bytes_by_label_and_owner_fall_when_dropped_and_the_peak_names_its_holders() {
        let m = Memory::new(DeviceLabel { id: 0, name: "test".into() });
        let weights = m.allocate(Some("weights"), 4 << 20, Some("load"));
        let scratch = m.allocate(Some("scratch"), 8 << 20, Some("step"));
        assert_eq!(m.live(), 12 << 20);
        drop(scratch);
        scratch_twice_freed_is_counted_once(&m);
        assert_eq!(m.live(), 4 << 20);
        let lines = m.summary_lines().join("\n");
        assert!(lines.contains("live 4.0 MiB in 1 buffers"), "{lines}");
        assert!(
            lines.contains(
                "peak 12.0 MiB, held by `scratch` 8.0 MiB, `weights` 4.0 MiB (owners: `step` 8.0 MiB, `load` 4.0 MiB)"
            ),
            "{lines}"
        );
        assert!(lines.contains("live by label: `weights` 4.0 MiB; by owner: `load` 4.0 MiB"), "{lines}");
        let (_, samples) = m.track();
        let values: Vec<u64> = samples.iter().map(|s| s.1).collect();
        assert_eq!(values, [4 << 20, 12 << 20, 4 << 20, 5 << 20, 4 << 20]);
        let a = m.account(true).expect("allocated");
        assert_eq!((a.peak_bytes, a.live_bytes, a.live_objects), (12 << 20, 4 << 20, 1));
        assert_eq!(a.peak_ns, samples[1].0, "the peak's time is its sample's");
        assert_eq!(
            a.peak_by_owner.iter().map(|h| (h.name.as_str(), h.bytes)).collect::<Vec<_>>(),
            [("step", 8 << 20), ("load", 4 << 20)]
        );
        assert_eq!(a.samples.iter().map(|s| (s.time_ns, s.bytes)).collect::<Vec<_>>(), samples);
        drop(weights);
        assert_eq!(m.live(), 0);
    }

    fn scratch_twice_freed_is_counted_once(m: &std::sync::Arc<Memory>) {
        let a = m.allocate(None, 1 << 20, None);
        a.free();
        drop(a);
    }
}
