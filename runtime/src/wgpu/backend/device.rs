//! The devices gpuspan knows: each with its queue, its clock mapping, and its profiler frames.

use super::{wgpu, wgpu_profiler};
use super::frame::Frame;
use super::pool::Pool;
use crate::placement::{Bounds, ClockMap};
use crate::record::DeviceLabel;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use wgpu_profiler::GpuProfiler;

/// Everything gpuspan keeps per wgpu device.
pub(crate) struct DeviceState {
    pub label: DeviceLabel,
    pub device: wgpu::Device,
    /// What the registry finds `device` by ([`Identity`]): wgpu's equality alone confuses two
    /// instances' devices.
    identity: Identity,
    /// The queue's [`Identity`], set with `queue`.
    queue_identity: OnceLock<Identity>,
    /// Needed for the timestamp period, calibration, and resolving queries recorded in passes.
    pub queue: OnceLock<wgpu::Queue>,
    pub features: wgpu::Features,
    /// How its scopes are timed, from `features`.
    pub mode: super::Mode,
    pub clock: Mutex<Option<ClockMap>>,
    /// A record placed its GPU work before its call by more than the mapping's stated error:
    /// the resolver re-calibrates at its next round instead of waiting for the period.
    pub clock_contradicted: AtomicBool,
    /// Host facts about the clock offset, and what placing records with them found.
    pub bounds: Mutex<Bounds>,
    /// Profilers whose frame has been delivered, ready for reuse (their query pools too).
    pub idle: Mutex<Vec<GpuProfiler>>,
    /// Frames not yet delivered, in the order they were opened.
    pub in_flight: Mutex<Vec<Arc<Frame>>>,
    /// Queue brackets' timestamp slots, in batches (`pool.rs`).
    pub brackets: Mutex<Pool>,
    /// gpuspan's own submissions on the queue (brackets, resolves, calibrations), counted just
    /// before each: a selected span's bracket tells the program's submissions from them.
    pub own_submits: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceState").field("label", &self.label).finish_non_exhaustive()
    }
}

impl DeviceState {
    /// gpuspan is about to submit `n` command buffers' worth of its own on the queue.
    pub(super) fn own_submit(&self, n: u64) {
        self.own_submits.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn timestamp_period(&self) -> Option<f32> {
        self.queue.get().map(wgpu::Queue::get_timestamp_period)
    }

    pub(super) fn clock(&self) -> Option<ClockMap> {
        self.clock.lock().ok().and_then(|c| *c)
    }

    /// Frames and bracket batches not yet delivered.
    pub(super) fn in_flight_count(&self) -> usize {
        self.in_flight.lock().map_or(0, |f| f.len()) + self.brackets.lock().map_or(0, |p| p.len())
    }

    /// Takes a fresh clock mapping for the device. Returns whether one is available.
    pub(super) fn calibrate(&self) -> bool {
        let Some(queue) = self.queue.get() else { return false };
        match super::calibration::calibrate(&self.device, queue, 5, &self.own_submits) {
            Ok(map) => {
                if let Ok(mut c) = self.clock.lock() {
                    *c = Some(map);
                }
                true
            }
            Err(e) => {
                // Said as it is: a failed recalibration keeps the mapping the device had, and a
                // first one that fails may succeed at the next try (issue 39: "timed on the host"
                // was said while every record was GPU-timed).
                let mapped = self.clock().is_some();
                if mapped {
                    crate::diagnostics::note_once(format_args!(
                        "GPU clock recalibration failed on {} ({e}); its scopes keep the previous mapping, whose stated error grows with its age",
                        self.label.name
                    ));
                } else {
                    crate::diagnostics::note_once(format_args!(
                        "GPU clock calibration failed on {} ({e}); until a calibration succeeds its scopes are timed on the host",
                        self.label.name
                    ));
                }
                mapped
            }
        }
    }
}

fn devices() -> &'static RwLock<Vec<Arc<DeviceState>>> {
    &super::REGISTRY.devices
}

/// Every device registered so far.
pub(crate) fn all() -> Vec<Arc<DeviceState>> {
    devices().read().map(|d| d.clone()).unwrap_or_default()
}

/// The registered device whose queue `queue` is (an instrumented queue is looked up by
/// `super::find_by_queue`).
pub(crate) fn find_by_queue(queue: &wgpu::Queue) -> Option<Arc<DeviceState>> {
    let id = Identity::of_queue(queue);
    devices().read().ok()?.iter().find(|d| d.queue.get().is_some_and(|q| q == queue && id.same(d.queue_identity()))).cloned()
}

/// The registered device `device` (of identity `id`) is, instrumented handles aside.
fn find_as(device: &wgpu::Device, id: Identity) -> Option<Arc<DeviceState>> {
    devices().read().ok()?.iter().find(|d| d.is(device, id)).cloned()
}

/// Who a wgpu device (or queue) is, as gpuspan tells them apart. wgpu's `==` compares ids that
/// each `wgpu::Instance` numbers from the start, so the first devices of two instances are
/// equal to it (and a query set of one used on the other panics in wgpu). The backend's own
/// device object is unique among live devices, and the registry keeps each registered device
/// alive (its clone of the handle), so its address cannot be reused while the entry exists.
/// `None` where wgpu gives no backend object (WebGPU, a custom backend): wgpu's equality alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity(Option<usize>);

/// The address of the backend object behind `$handle` (a device or queue), for each backend
/// compiled in.
macro_rules! hal_address {
    ($handle:expr) => {{
        let found: Option<usize> = None;
        // SAFETY: `as_hal` hands a guard on the backend's object; only its address is read,
        // nothing is called on it or destroyed, and the guard is dropped at once.
        #[cfg(any(target_os = "linux", target_os = "android", windows))]
        let found = found
            .or_else(|| unsafe { $handle.as_hal::<wgpu::hal::api::Vulkan>() }.map(|h| &*h as *const _ as *const () as usize))
            .or_else(|| unsafe { $handle.as_hal::<wgpu::hal::api::Gles>() }.map(|h| &*h as *const _ as *const () as usize));
        #[cfg(target_vendor = "apple")]
        let found =
            found.or_else(|| unsafe { $handle.as_hal::<wgpu::hal::api::Metal>() }.map(|h| &*h as *const _ as *const () as usize));
        #[cfg(windows)]
        let found =
            found.or_else(|| unsafe { $handle.as_hal::<wgpu::hal::api::Dx12>() }.map(|h| &*h as *const _ as *const () as usize));
        Identity(found)
    }};
}

impl Identity {
    fn of_device(device: &wgpu::Device) -> Identity {
        hal_address!(device)
    }

    fn of_queue(queue: &wgpu::Queue) -> Identity {
        hal_address!(queue)
    }

    /// Two handles wgpu calls equal are one device unless their backend objects differ.
    fn same(self, other: Identity) -> bool {
        match (self.0, other.0) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }
}

impl DeviceState {
    /// Whether `device` (of identity `id`) is this one.
    fn is(&self, device: &wgpu::Device, id: Identity) -> bool {
        &self.device == device && self.identity.same(id)
    }

    fn queue_identity(&self) -> Identity {
        self.queue_identity.get().copied().unwrap_or(Identity(None))
    }
}

/// The one registered device, when there is exactly one.
pub(crate) fn only() -> Option<Arc<DeviceState>> {
    let d = devices().read().ok()?;
    (d.len() == 1).then(|| d[0].clone())
}

/// Registers a device (once), remembering its queue when one is given. Not an instrumented
/// device's handle, nor the resolver's part: `super::known_device` does both.
pub(crate) fn register(device: &wgpu::Device, queue: Option<&wgpu::Queue>, name: Option<&str>) -> Arc<DeviceState> {
    let identity = Identity::of_device(device);
    let state = match find_as(device, identity) {
        Some(s) => s,
        None => {
            let Ok(mut devices) = devices().write() else {
                unreachable!("the device registry lock is never held across a panic")
            };
            if let Some(s) = devices.iter().find(|d| d.is(device, identity)) {
                s.clone()
            } else {
                let id = devices.len() as u32;
                if id == 0 {
                    crate::hooks::leaves().sections.add(clock_lines);
                }
                let s = Arc::new(DeviceState {
                    label: DeviceLabel { id, name: name.unwrap_or("wgpu device").into() },
                    device: device.clone(),
                    identity,
                    queue_identity: OnceLock::new(),
                    queue: OnceLock::new(),
                    features: device.features(),
                    mode: super::Mode::of(device.features()),
                    clock: Mutex::new(None),
                    clock_contradicted: AtomicBool::new(false),
                    bounds: Mutex::new(Bounds::default()),
                    idle: Mutex::new(Vec::new()),
                    in_flight: Mutex::new(Vec::new()),
                    brackets: Mutex::new(Pool::default()),
                    own_submits: std::sync::atomic::AtomicU64::new(0),
                });
                devices.push(s.clone());
                s
            }
        }
    };
    if let Some(q) = queue {
        if state.queue.set(q.clone()).is_ok() {
            let _ = state.queue_identity.set(Identity::of_queue(q));
        }
    }
    state
}

/// The summary's lines about each device's clock offset (the trust report's per-device part).
fn clock_lines(_: &[crate::export::summary::row::SiteSummary]) -> Vec<String> {
    all()
        .iter()
        .filter_map(|d| d.bounds.lock().ok().filter(|b| b.placed > 0).map(|b| b.line(d.label.id, &d.label.name)))
        .collect()
}
