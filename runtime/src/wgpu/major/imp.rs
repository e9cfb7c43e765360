//! What only the instrumented build (`enabled`) implements for this major's types: the timestamp
//! writes of the passes an annotated body begins, and the adapter's facts for the device monitor.

use super::super::backend;
use super::{api, wgpu};

impl<'a> api::imp::PassDescriptor<'a> for wgpu::ComputePassDescriptor<'a> {
    fn timed(&self, holder: &'a mut Option<Box<dyn std::any::Any>>) -> Self {
        if let Some((set, start, end)) = backend::attach::pass_writes(self.timestamp_writes.is_some()) {
            let Some(query_set) = holder.insert(Box::new(set)).downcast_ref::<wgpu::QuerySet>() else {
                return self.clone();
            };
            return wgpu::ComputePassDescriptor {
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: start,
                    end_of_pass_write_index: Some(end),
                }),
                ..self.clone()
            };
        }
        self.clone()
    }
}

impl<'a> api::imp::PassDescriptor<'a> for wgpu::RenderPassDescriptor<'a> {
    fn timed(&self, holder: &'a mut Option<Box<dyn std::any::Any>>) -> Self {
        if let Some((set, start, end)) = backend::attach::pass_writes(self.timestamp_writes.is_some()) {
            let Some(query_set) = holder.insert(Box::new(set)).downcast_ref::<wgpu::QuerySet>() else {
                return self.clone();
            };
            return wgpu::RenderPassDescriptor {
                timestamp_writes: Some(wgpu::RenderPassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: start,
                    end_of_pass_write_index: Some(end),
                }),
                ..self.clone()
            };
        }
        self.clone()
    }
}

/// A pass begun on this major's encoder in an annotated body (`__private::PassReceiver`): with
/// gpuspan's timestamp writes where the device is timed by its passes.
impl crate::__private::PassReceiver<wgpu::CommandEncoder> {
    /// `wgpu::CommandEncoder::begin_compute_pass`, its descriptor through
    /// [`crate::__private::wgpu_pass`].
    #[inline]
    pub fn begin_compute_pass(&mut self, desc: &wgpu::ComputePassDescriptor<'_>) -> wgpu::ComputePass<'_> {
        begin_compute_pass(self, desc)
    }

    /// `wgpu::CommandEncoder::begin_render_pass`, its descriptor through
    /// [`crate::__private::wgpu_pass`].
    #[inline]
    pub fn begin_render_pass(&mut self, desc: &wgpu::RenderPassDescriptor<'_>) -> wgpu::RenderPass<'_> {
        begin_render_pass(self, desc)
    }
}

/// A pass begun in an annotated body on a guard that dereferences to this major's encoder
/// (`attach`'s, a `Box`, a lock's), unless the guard has its own method of that name, which
/// method resolution finds first (`__private::PassReceiver`).
pub trait PassThroughGuard {
    /// `wgpu::CommandEncoder::begin_compute_pass` on the encoder behind the guard.
    fn begin_compute_pass(&mut self, desc: &wgpu::ComputePassDescriptor<'_>) -> wgpu::ComputePass<'_>;
    /// `wgpu::CommandEncoder::begin_render_pass` on the encoder behind the guard.
    fn begin_render_pass(&mut self, desc: &wgpu::RenderPassDescriptor<'_>) -> wgpu::RenderPass<'_>;
}

impl<G: std::ops::DerefMut<Target = wgpu::CommandEncoder> + ?Sized> PassThroughGuard for G {
    #[inline]
    fn begin_compute_pass(&mut self, desc: &wgpu::ComputePassDescriptor<'_>) -> wgpu::ComputePass<'_> {
        begin_compute_pass(self, desc)
    }

    #[inline]
    fn begin_render_pass(&mut self, desc: &wgpu::RenderPassDescriptor<'_>) -> wgpu::RenderPass<'_> {
        begin_render_pass(self, desc)
    }
}

fn begin_compute_pass<'e>(
    encoder: &'e mut wgpu::CommandEncoder,
    desc: &wgpu::ComputePassDescriptor<'_>,
) -> wgpu::ComputePass<'e> {
    let mut holder = None;
    encoder.begin_compute_pass(&crate::__private::wgpu_pass(&mut holder, desc))
}

fn begin_render_pass<'e>(
    encoder: &'e mut wgpu::CommandEncoder,
    desc: &wgpu::RenderPassDescriptor<'_>,
) -> wgpu::RenderPass<'e> {
    let mut holder = None;
    encoder.begin_render_pass(&crate::__private::wgpu_pass(&mut holder, desc))
}

impl api::imp::Info for wgpu::AdapterInfo {
    fn facts(&self) -> crate::wgpu::AdapterFacts {
        crate::wgpu::AdapterFacts {
            name: self.name.clone(),
            vendor: self.vendor,
            device: self.device,
            device_type: format!("{:?}", self.device_type),
            backend: self.backend.to_str().to_owned(),
            driver: self.driver.clone(),
            driver_info: self.driver_info.clone(),
            pci_bus_id: self.device_pci_bus_id.clone(),
        }
    }
}
