//! `gpuspan::wgpu::instrument`: a device and queue that forward every call to the ones they
//! were made from (`forward.rs`, through wgpu's backend interface, feature `custom`), and time
//! every pass any code begins on them (`pass.rs`). Frameworks that own their encoders (bevy's
//! render graph, vello, burn's device thread) are then timed pass by pass without a change.

pub(crate) mod ended;
mod forward;
mod instance;
mod pass;

pub use forward::real_compute_pipeline;
pub(crate) use instance::instrument_instance;

pub(crate) use ended::unattributed as unattributed_pass;

use super::device::{self, DeviceState};
use super::wgpu;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

/// What every object of one instrumented device shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The real device's state in the registry.
    state: Arc<DeviceState>,
    /// The real queue: the passes' timestamps are resolved on it.
    queue: wgpu::Queue,
    submissions: Mutex<forward::Submissions>,
    /// Transfers seen without a GPU time of their own, by command: (count, bytes).
    untimed: Mutex<Vec<(&'static str, u64, u64)>>,
    /// The buffers and textures made through it (`wgpu/memory.rs`).
    memory: Arc<crate::wgpu::memory::Memory>,
    /// Its passes' labels, shared among passes of the same label.
    labels: pass::Labels,
    /// Passes the last encoder finished had: what the next one makes room for (`pass.rs`).
    passes_per_encoder: AtomicU32,
}

impl Shared {
    fn add_submission(&self, real: wgpu::SubmissionIndex) -> u64 {
        self.submissions.lock().unwrap_or_else(|e| e.into_inner()).add(real)
    }

    fn submission(&self, index: u64) -> Option<wgpu::SubmissionIndex> {
        self.submissions.lock().unwrap_or_else(|e| e.into_inner()).get(index)
    }

    /// A transfer gpuspan cannot time on this device (`queue.write_buffer`/`write_texture`,
    /// whose staged copy wgpu records in its own encoder; a copy without in-encoder
    /// timestamps): its bytes are counted, with no time, for the summary.
    fn untimed(&self, command: &'static str, bytes: u64) {
        let mut u = self.untimed.lock().unwrap_or_else(|e| e.into_inner());
        match u.iter_mut().find(|(c, _, _)| *c == command) {
            Some((_, n, b)) => {
                *n += 1;
                *b += bytes;
            }
            None => u.push((command, 1, bytes)),
        }
    }

    /// The summary's line for this device's untimed transfers, if it had any.
    fn untimed_line(&self) -> Option<String> {
        let u = self.untimed.lock().unwrap_or_else(|e| e.into_inner());
        if u.is_empty() {
            return None;
        }
        let each: Vec<String> =
            u.iter().map(|(c, n, b)| format!("{c} {n}× {}", crate::export::format::bytes(*b))).collect();
        Some(format!(
            "wgpu device {} ({}), instrumented: transfers without a GPU time (bytes only): {}",
            self.state.label.id,
            self.state.label.name,
            each.join(", ")
        ))
    }
}

fn instrumented() -> Vec<Arc<Shared>> {
    super::REGISTRY.instrumented.read().map(|d| d.clone()).unwrap_or_default()
}

/// The summary section of every instrumented device: its memory, its untimed transfers.
fn summary_lines(_: &[crate::export::summary::SiteSummary]) -> Vec<String> {
    instrumented().iter().flat_map(|s| s.memory.summary_lines().into_iter().chain(s.untimed_line())).collect()
}

/// The timeline's memory counter track of every instrumented device.
fn memory_tracks() -> Vec<crate::hooks::CounterTrack> {
    instrumented().iter().map(|s| s.memory.track()).collect()
}

/// The memory account of every instrumented device that allocated, for the capture and OTLP.
fn memory_accounts(samples: bool) -> Vec<(crate::record::DeviceLabel, gpuspan_capture::MemoryAccount)> {
    instrumented().iter().filter_map(|s| Some((s.memory.device().clone(), s.memory.account(samples)?))).collect()
}

/// The live bytes of every instrumented device, for `track_memory` where no device monitor
/// reads memory (`None`: no instrumented device).
fn memory_live() -> Option<u64> {
    let devices = instrumented();
    (!devices.is_empty()).then(|| devices.iter().map(|s| s.memory.live()).sum())
}

/// Registers `device` and `queue` (as `register` does) and returns their instrumented
/// counterparts, registered too: a call given either finds the same device. A device already
/// instrumented (one from an adapter of `instrument_instance`'s instance) is returned as it is.
pub(crate) fn instrument(adapter: &wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue) -> (wgpu::Device, wgpu::Queue) {
    if device.as_custom::<forward::Device>().is_some() {
        return (device, queue);
    }
    let (device, queue) = instrument_parts(adapter, device, queue);
    (wgpu::Device::from_custom(device), wgpu::Queue::from_custom(queue))
}

/// `instrument`'s device and queue before wgpu wraps them in its handles (an instrumented
/// adapter hands them to wgpu itself, `instance.rs`).
fn instrument_parts(adapter: &wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue) -> (forward::Device, forward::Queue) {
    super::register(adapter, &device, &queue);
    let state = device::register(&device, Some(&queue), None);
    let shared = Arc::new(Shared {
        state: state.clone(),
        queue: queue.clone(),
        submissions: Mutex::default(),
        untimed: Mutex::default(),
        memory: crate::wgpu::memory::Memory::new(state.label.clone()),
        labels: pass::Labels::default(),
        passes_per_encoder: AtomicU32::new(0),
    });
    if let Ok(mut all) = super::REGISTRY.instrumented.write() {
        all.push(shared.clone());
    }
    let leaves = crate::hooks::leaves();
    leaves.sections.add(summary_lines);
    leaves.counters.add(memory_tracks);
    leaves.memory.add(memory_live);
    leaves.accounts.add(memory_accounts);
    (forward::Device::new(device, shared.clone()), forward::Queue { queue, shared })
}

/// The registered device an instrumented device forwards to (`None`: not an instrumented one).
pub(crate) fn state_of_device(device: &wgpu::Device) -> Option<Arc<DeviceState>> {
    device.as_custom::<forward::Device>().map(|d| d.shared.state.clone())
}

/// The registered device an instrumented queue forwards to (`None`: not an instrumented one).
pub(crate) fn state_of_queue(queue: &wgpu::Queue) -> Option<Arc<DeviceState>> {
    queue.as_custom::<forward::Queue>().map(|q| q.shared.state.clone())
}
