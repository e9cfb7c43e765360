//! `gpuspan::wgpu::instrument_instance`: an instance that forwards every call to the one it was
//! made from, for frameworks that are handed an instance and make their own adapters, devices
//! and window surfaces from it (bevy's `RenderCreation::Manual`).
//!
//! Its adapters' `request_device` returns an instrumented device and queue (`instrument` of the
//! real pair), so every pass the framework begins is timed. Its surfaces are the real ones
//! inside: wgpu's own surface only accepts a device of its own backend (`configure` panics for
//! an instrumented one), so this surface unwraps the instrumented device, adapter and queue it
//! is given to the real ones, and hands out the real surface texture as the instrumented
//! device's texture type, so that views of it go into instrumented passes.

use super::forward::{self, Texture};
use super::wgpu;
use crate::diagnostics::note_once;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use wgpu::custom::*;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An object of another instance (or of none) given to the instrumented instance's: it cannot
/// be unwrapped, so the call does what wgpu does for an unusable argument, without panicking.
fn foreign(what: &str, instead: &str) {
    note_once(format_args!(
        "a wgpu {what} not made through the instance gpuspan::wgpu::instrument_instance returned was given to one of \
         its surfaces or adapters; gpuspan cannot forward it ({instead}): make adapters, devices and surfaces \
         through that instance"
    ));
}

/// The instrumented instance.
#[derive(Debug)]
pub(crate) struct Instance(pub(crate) wgpu::Instance);

/// `instrument_instance`: an instance already instrumented is returned as it is.
pub(crate) fn instrument_instance(instance: wgpu::Instance) -> wgpu::Instance {
    if instance.as_custom::<Instance>().is_some() {
        return instance;
    }
    wgpu::Instance::from_custom(Instance(instance))
}

impl InstanceInterface for Instance {
    fn new(desc: wgpu::InstanceDescriptor) -> Self {
        Instance(wgpu::Instance::new(desc))
    }

    unsafe fn create_surface(&self, target: wgpu::SurfaceTargetUnsafe) -> Result<DispatchSurface, wgpu::CreateSurfaceError> {
        // SAFETY: `target` comes with the caller's guarantees for `create_surface_unsafe` (the
        // window outlives the surface), passed on unchanged to the real instance.
        let surface = unsafe { self.0.create_surface_unsafe(target)? };
        Ok(DispatchSurface::custom(Surface(surface)))
    }

    fn request_adapter(&self, options: &wgpu::RequestAdapterOptions<'_, '_>) -> Pin<Box<dyn RequestAdapterFuture>> {
        let compatible_surface = options.compatible_surface.and_then(|s| {
            let real = s.as_custom::<Surface>().map(|s| &s.0);
            if real.is_none() {
                foreign("surface", "the adapter is requested without a compatible surface");
            }
            real
        });
        let future = self.0.request_adapter(&wgpu::RequestAdapterOptions { compatible_surface, ..*options });
        Box::pin(async move { future.await.map(|a| DispatchAdapter::custom(Adapter(a))) })
    }

    fn poll_all_devices(&self, force_wait: bool) -> bool {
        self.0.poll_all(force_wait)
    }

    fn wgsl_language_features(&self) -> wgpu::WgslLanguageFeatures {
        self.0.wgsl_language_features()
    }

    fn enumerate_adapters(&self, backends: wgpu::Backends) -> Pin<Box<dyn EnumerateAdapterFuture>> {
        let future = self.0.enumerate_adapters(backends);
        Box::pin(async move { future.await.into_iter().map(|a| DispatchAdapter::custom(Adapter(a))).collect() })
    }
}

/// An adapter of the instrumented instance: its devices are instrumented.
#[derive(Debug)]
pub(crate) struct Adapter(pub(crate) wgpu::Adapter);

impl AdapterInterface for Adapter {
    fn request_device(&self, desc: &wgpu::DeviceDescriptor<'_>) -> Pin<Box<dyn RequestDeviceFuture>> {
        let adapter = self.0.clone();
        let future = self.0.request_device(desc);
        Box::pin(async move {
            let (device, queue) = future.await?;
            let (device, queue) = super::instrument_parts(&adapter, device, queue);
            Ok((DispatchDevice::custom(device), DispatchQueue::custom(queue)))
        })
    }

    fn is_surface_supported(&self, surface: &DispatchSurface) -> bool {
        match surface.as_custom::<Surface>() {
            Some(s) => self.0.is_surface_supported(&s.0),
            None => {
                foreign("surface", "the adapter reports it unsupported");
                false
            }
        }
    }

    fn features(&self) -> wgpu::Features {
        self.0.features()
    }

    fn limits(&self) -> wgpu::Limits {
        self.0.limits()
    }

    fn downlevel_capabilities(&self) -> wgpu::DownlevelCapabilities {
        self.0.get_downlevel_capabilities()
    }

    fn get_info(&self) -> wgpu::AdapterInfo {
        self.0.get_info()
    }

    fn get_texture_format_features(&self, format: wgpu::TextureFormat) -> wgpu::TextureFormatFeatures {
        self.0.get_texture_format_features(format)
    }

    fn get_presentation_timestamp(&self) -> wgpu::PresentationTimestamp {
        self.0.get_presentation_timestamp()
    }

    fn cooperative_matrix_properties(&self) -> Vec<wgpu::wgt::CooperativeMatrixProperties> {
        self.0.cooperative_matrix_properties()
    }
}

/// A surface of the instrumented instance: the real surface, configured with the real device.
#[derive(Debug)]
pub(crate) struct Surface(wgpu::Surface<'static>);

fn real_adapter(adapter: &DispatchAdapter) -> Option<&wgpu::Adapter> {
    adapter.as_custom::<Adapter>().map(|a| &a.0)
}

impl SurfaceInterface for Surface {
    fn get_capabilities(&self, adapter: &DispatchAdapter) -> wgpu::SurfaceCapabilities {
        match real_adapter(adapter) {
            Some(a) => self.0.get_capabilities(a),
            None => {
                foreign("adapter", "the surface reports no capabilities");
                wgpu::SurfaceCapabilities::default()
            }
        }
    }

    only_30! {
        fn display_hdr_info(&self, adapter: &DispatchAdapter) -> wgpu::DisplayHdrInfo {
            match real_adapter(adapter) {
                Some(a) => self.0.display_hdr_info(a),
                None => {
                    foreign("adapter", "the surface reports no HDR information");
                    wgpu::DisplayHdrInfo::default()
                }
            }
        }
    }

    fn configure(&self, device: &DispatchDevice, config: &wgpu::SurfaceConfiguration) {
        match device.as_custom::<forward::Device>() {
            Some(d) => self.0.configure(&d.device, config),
            None => foreign("device", "the surface is left unconfigured"),
        }
    }

    fn get_current_texture(&self) -> (Option<DispatchTexture>, wgpu::SurfaceStatus, DispatchSurfaceOutputDetail) {
        use wgpu::{CurrentSurfaceTexture as C, SurfaceStatus as S};
        let (frame, status) = match self.0.get_current_texture() {
            C::Success(t) => (Some(t), S::Good),
            C::Suboptimal(t) => (Some(t), S::Suboptimal),
            C::Timeout => (None, S::Timeout),
            C::Occluded => (None, S::Occluded),
            C::Outdated => (None, S::Outdated),
            C::Lost => (None, S::Lost),
            C::Validation => (None, S::Validation),
        };
        let texture = frame.as_ref().map(|f| DispatchTexture::custom(Texture::of_surface(f.texture.clone())));
        (texture, status, DispatchSurfaceOutputDetail::custom(Frame(Mutex::new(frame))))
    }
}

/// The real surface texture of one `get_current_texture`, until it is presented or discarded.
#[derive(Debug)]
pub(crate) struct Frame(Mutex<Option<wgpu::SurfaceTexture>>);

impl Frame {
    only_30! {
        /// `Queue::present` on an instrumented queue: the real texture is presented on the real
        /// queue.
        pub(crate) fn present(&self, queue: &wgpu::Queue) {
            if let Some(frame) = lock(&self.0).take() {
                queue.present(frame);
            }
        }
    }
}

impl SurfaceOutputDetailInterface for Frame {
    only_29! {
        fn present(&self) {
            if let Some(frame) = lock(&self.0).take() {
                frame.present();
            }
        }
    }

    /// Dropping the real texture unpresented discards it (wgpu's `Drop`).
    fn texture_discard(&self) {
        drop(lock(&self.0).take());
    }

    only_30! {
        /// Called while the thread panics: dropping the real texture then releases it (wgpu's
        /// `Drop` tells the two cases apart the same way).
        fn texture_release(&self) {
            drop(lock(&self.0).take());
        }
    }
}
