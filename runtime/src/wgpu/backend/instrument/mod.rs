//! `gpuspan::wgpu::instrument`: a device and queue that forward every call to the ones they
//! were made from (`forward.rs`, through wgpu's backend interface, feature `custom`), and time
//! every pass any code begins on them (`pass.rs`). Frameworks that own their encoders (bevy's
//! render graph, vello, burn's device thread) are then timed pass by pass without a change.

mod forward;
mod pass;

pub(crate) use pass::{resolved, unattributed as unattributed_pass};

use super::device::{self, DeviceState};
use super::wgpu;
use std::sync::{Arc, Mutex};

/// What every object of one instrumented device shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The real device's state in the registry.
    state: Arc<DeviceState>,
    /// The real queue: the passes' timestamps are resolved on it.
    queue: wgpu::Queue,
    submissions: Mutex<forward::Submissions>,
}

impl Shared {
    fn add_submission(&self, real: wgpu::SubmissionIndex) -> u64 {
        self.submissions.lock().unwrap_or_else(|e| e.into_inner()).add(real)
    }

    fn submission(&self, index: u64) -> Option<wgpu::SubmissionIndex> {
        self.submissions.lock().unwrap_or_else(|e| e.into_inner()).get(index)
    }
}

/// Registers `device` and `queue` (as `register` does) and returns their instrumented
/// counterparts, registered too: a call given either finds the same device.
pub(crate) fn instrument(adapter: &wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue) -> (wgpu::Device, wgpu::Queue) {
    super::register(adapter, &device, &queue);
    let state = device::register(&device, Some(&queue), None);
    let shared = Arc::new(Shared { state: state.clone(), queue: queue.clone(), submissions: Mutex::default() });
    let instrumented_device = wgpu::Device::from_custom(forward::Device::new(device, shared.clone()));
    let instrumented_queue = wgpu::Queue::from_custom(forward::Queue { queue, shared });
    device::alias(&state, &instrumented_device, &instrumented_queue);
    (instrumented_device, instrumented_queue)
}
