//! The instrumented device's objects: each wraps the real one made by the device it was given,
//! and forwards every call of wgpu's backend interface (`wgpu::custom`) to it. The program and
//! its frameworks see ordinary `wgpu` handles; the encoders and passes add timing on the way
//! (`pass.rs`).
//!
//! Every object the instrumented device makes is one of these, so a call that takes another
//! object (a bind group's buffers, a pass's views) finds the real one inside it. A public handle
//! that is not one (a surface's texture view, an object of the device before it was
//! instrumented) is passed through as it is: it is already the real device's.

use super::pass::{EncoderPasses, OwnWrites, PassTimer, Recording};
use super::{wgpu, Shared};
use crate::diagnostics::note_once;
use super::super::attach;
use crate::record::{ActivityKind, MemoryKind};
use crate::wgpu::memory::Allocation;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use wgpu::custom::*;

/// A forwarded object without state of its own.
#[derive(Debug)]
pub(crate) struct Forward<T>(pub(crate) T);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The real object behind a public handle the instrumented device made; any other handle is
/// already a real one.
pub(crate) trait Real: Sized {
    fn real(&self) -> &Self;
}

/// The real pipeline behind one this device made (the pipeline itself if another device made
/// it): lent to `gpuspan-testing`, so that a benchmark times the very pipeline gpuspan timed, raw.
pub fn real_compute_pipeline(pipeline: &wgpu::ComputePipeline) -> &wgpu::ComputePipeline {
    pipeline.real()
}

macro_rules! real_via_forward {
    ($($t:ident),*) => {$(
        impl Real for wgpu::$t {
            fn real(&self) -> &Self {
                self.as_custom::<Forward<wgpu::$t>>().map_or(self, |f| &f.0)
            }
        }
    )*};
}
real_via_forward!(
    BindGroupLayout, BindGroup, TextureView, Sampler, Tlas, QuerySet, PipelineLayout, ShaderModule,
    PipelineCache, RenderBundle, Blas
);

impl Real for wgpu::Texture {
    fn real(&self) -> &Self {
        self.as_custom::<Texture>().map_or(self, |t| &t.texture)
    }
}

only_30! {
    impl Real for wgpu::ExternalTexture {
        fn real(&self) -> &Self {
            self.as_custom::<Forward<wgpu::ExternalTexture>>().map_or(self, |f| &f.0)
        }
    }
}

only_29! {
    /// wgpu 29 cannot look inside an external texture: it is passed as it is (external
    /// textures, experimental, are not supported on an instrumented wgpu 29 device).
    impl Real for wgpu::ExternalTexture {
        fn real(&self) -> &Self {
            self
        }
    }
}

impl Real for wgpu::Buffer {
    fn real(&self) -> &Self {
        self.as_custom::<Buffer>().map_or(self, |b| &b.buffer)
    }
}

impl Real for wgpu::ComputePipeline {
    fn real(&self) -> &Self {
        self.as_custom::<Pipeline<wgpu::ComputePipeline>>().map_or(self, |p| &p.pipeline)
    }
}

impl Real for wgpu::RenderPipeline {
    fn real(&self) -> &Self {
        self.as_custom::<Pipeline<wgpu::RenderPipeline>>().map_or(self, |p| &p.pipeline)
    }
}

/// The real object inside a dispatch handle made by the instrumented device. One that is not
/// (made by another device) cannot be turned back into a public handle: the call is skipped and
/// said once.
macro_rules! inner {
    ($d:expr, $t:ident) => {
        $d.as_custom::<Forward<wgpu::$t>>().map(|f| &f.0)
    };
}

fn foreign(what: &str) {
    note_once(format_args!(
        "a wgpu {what} not made by the instrumented device was given to it; gpuspan cannot forward it and skips the \
         call: make every object through the device gpuspan::wgpu::instrument returned"
    ));
}

fn buffer_of(d: &DispatchBuffer) -> Option<&wgpu::Buffer> {
    let b = d.as_custom::<Buffer>().map(|b| &b.buffer);
    if b.is_none() {
        foreign("buffer");
    }
    b
}

fn slice_of(buffer: &wgpu::Buffer, offset: u64, size: Option<wgpu::BufferSize>) -> wgpu::BufferSlice<'_> {
    match size {
        Some(s) => buffer.slice(offset..offset + s.get()),
        None => buffer.slice(offset..),
    }
}

// --- objects without calls of their own ---

macro_rules! plain {
    ($($t:ident: $iface:ident),*) => {$(
        impl $iface for Forward<wgpu::$t> {}
    )*};
}
plain!(
    BindGroupLayout: BindGroupLayoutInterface,
    BindGroup: BindGroupInterface,
    TextureView: TextureViewInterface,
    Sampler: SamplerInterface,
    Tlas: TlasInterface,
    PipelineLayout: PipelineLayoutInterface,
    RenderBundle: RenderBundleInterface
);

impl ShaderModuleInterface for Forward<wgpu::ShaderModule> {
    fn get_compilation_info(&self) -> std::pin::Pin<Box<dyn ShaderCompilationInfoFuture>> {
        Box::pin(self.0.get_compilation_info())
    }
}

/// A texture, counted in its device's memory while it lives (`wgpu/memory.rs`).
#[derive(Debug)]
pub(crate) struct Texture {
    pub(crate) texture: wgpu::Texture,
    memory: Option<Allocation>,
}

impl Texture {
    /// A surface's texture (`instance.rs`): the surface owns its memory, so it is not counted.
    pub(crate) fn of_surface(texture: wgpu::Texture) -> Texture {
        Texture { texture, memory: None }
    }
}

impl TextureInterface for Texture {
    fn create_view(&self, desc: &wgpu::TextureViewDescriptor<'_>) -> DispatchTextureView {
        DispatchTextureView::custom(Forward(self.texture.create_view(desc)))
    }
    fn destroy(&self) {
        if let Some(m) = &self.memory {
            m.free();
        }
        self.texture.destroy();
    }
}

fn texture_of(d: &DispatchTexture) -> Option<&wgpu::Texture> {
    let t = d.as_custom::<Texture>().map(|t| &t.texture);
    if t.is_none() {
        foreign("texture");
    }
    t
}

/// A texture's logical size: each mip level's texel blocks × the format's block size (its
/// aspects' for depth-stencil formats), × layers and samples. `None` where wgpu gives no block
/// size (planar video formats).
fn texture_bytes(desc: &wgpu::TextureDescriptor<'_>) -> Option<u64> {
    let format = desc.format;
    let block = format.block_copy_size(None).map(u64::from).or_else(|| {
        let depth = format.block_copy_size(Some(wgpu::TextureAspect::DepthOnly));
        let stencil = format.block_copy_size(Some(wgpu::TextureAspect::StencilOnly));
        // Depth24Plus has no copyable layout: 4 bytes, as every backend stores it.
        let depth = depth.or(format.has_depth_aspect().then_some(4));
        (depth.is_some() || stencil.is_some()).then(|| u64::from(depth.unwrap_or(0) + stencil.unwrap_or(0)))
    })?;
    let (bw, bh) = format.block_dimensions();
    let mut bytes = 0u64;
    for level in 0..desc.mip_level_count {
        let e = desc.mip_level_size(level)?;
        let blocks = u64::from(e.width.div_ceil(bw.max(1))) * u64::from(e.height.div_ceil(bh.max(1)));
        bytes += blocks * u64::from(e.depth_or_array_layers) * block;
    }
    Some(bytes * u64::from(desc.sample_count.max(1)))
}

impl ExternalTextureInterface for Forward<wgpu::ExternalTexture> {
    fn destroy(&self) {
        self.0.destroy();
    }
}

impl BlasInterface for Forward<wgpu::Blas> {
    fn prepare_compact_async(&self, callback: BlasCompactCallback) {
        self.0.prepare_compaction_async(callback);
    }
    fn ready_for_compaction(&self) -> bool {
        self.0.ready_for_compaction()
    }
}

impl QuerySetInterface for Forward<wgpu::QuerySet> {
    only_30! {
        fn destroy(&self) {
            self.0.destroy();
        }
    }
}

impl PipelineCacheInterface for Forward<wgpu::PipelineCache> {
    fn get_data(&self) -> Option<Vec<u8>> {
        self.0.get_data()
    }
}

/// A pipeline, with the label it was made with: a pass without a label of its own is named
/// after its first pipeline.
#[derive(Debug)]
pub(crate) struct Pipeline<P> {
    pub(crate) pipeline: P,
    pub(crate) label: Option<Arc<str>>,
}

impl ComputePipelineInterface for Pipeline<wgpu::ComputePipeline> {
    fn get_bind_group_layout(&self, index: u32) -> DispatchBindGroupLayout {
        DispatchBindGroupLayout::custom(Forward(self.pipeline.get_bind_group_layout(index)))
    }
}

impl RenderPipelineInterface for Pipeline<wgpu::RenderPipeline> {
    fn get_bind_group_layout(&self, index: u32) -> DispatchBindGroupLayout {
        DispatchBindGroupLayout::custom(Forward(self.pipeline.get_bind_group_layout(index)))
    }
}

// --- buffers and their mappings ---

/// A buffer, with how it is mapped: a mapped range reads or writes as the mapping allows.
#[derive(Debug)]
pub(crate) struct Buffer {
    pub(crate) buffer: wgpu::Buffer,
    /// Mapped for writing (at creation, or `MapMode::Write`).
    write: Mutex<bool>,
    /// Counted in its device's memory while it lives (`wgpu/memory.rs`).
    memory: Allocation,
}

impl BufferInterface for Buffer {
    fn map_async(&self, mode: wgpu::MapMode, range: std::ops::Range<wgpu::BufferAddress>, callback: BufferMapCallback) {
        *lock(&self.write) = mode == wgpu::MapMode::Write;
        self.buffer.map_async(mode, range, callback);
    }

    only_30! {
        fn get_mapped_range(
            &self,
            sub_range: std::ops::Range<wgpu::BufferAddress>,
        ) -> Result<DispatchBufferMappedRange, wgpu::MapRangeError> {
            let view = if *lock(&self.write) {
                MappedRange::Write(Mutex::new(self.buffer.get_mapped_range_mut(sub_range)?))
            } else {
                MappedRange::Read(self.buffer.get_mapped_range(sub_range)?)
            };
            Ok(DispatchBufferMappedRange::custom(view))
        }
    }

    only_29! {
        fn get_mapped_range(&self, sub_range: std::ops::Range<wgpu::BufferAddress>) -> DispatchBufferMappedRange {
            let view = if *lock(&self.write) {
                MappedRange::Write(Mutex::new(self.buffer.get_mapped_range_mut(sub_range)))
            } else {
                MappedRange::Read(self.buffer.get_mapped_range(sub_range))
            };
            DispatchBufferMappedRange::custom(view)
        }
    }

    fn unmap(&self) {
        *lock(&self.write) = false;
        self.buffer.unmap();
    }

    fn destroy(&self) {
        self.memory.free();
        self.buffer.destroy();
    }
}

/// A mapped range of a buffer: the real buffer's view.
#[derive(Debug)]
enum MappedRange {
    Read(wgpu::BufferView),
    Write(Mutex<wgpu::BufferViewMut>),
}

impl BufferMappedRangeInterface for MappedRange {
    fn len(&self) -> usize {
        match self {
            MappedRange::Read(v) => v.len(),
            MappedRange::Write(v) => lock(v).len(),
        }
    }

    unsafe fn read_slice(&self) -> &[u8] {
        match self {
            MappedRange::Read(v) => v,
            // wgpu reads only read mappings (its safety contract).
            MappedRange::Write(_) => &[],
        }
    }

    unsafe fn write_slice(&mut self) -> wgpu::WriteOnly<'_, [u8]> {
        match self {
            MappedRange::Write(v) => v.get_mut().unwrap_or_else(|e| e.into_inner()).slice(..),
            // wgpu writes only write mappings (its safety contract).
            MappedRange::Read(_) => wgpu::WriteOnly::from_mut(&mut []),
        }
    }
}

/// `Queue::write_buffer_with`'s staging memory: the bytes are written with `write_buffer`.
#[derive(Debug)]
struct Staging(Vec<u8>);

impl QueueWriteBufferInterface for Staging {
    fn len(&self) -> usize {
        self.0.len()
    }

    unsafe fn write_slice(&mut self) -> wgpu::WriteOnly<'_, [u8]> {
        wgpu::WriteOnly::from_mut(self.0.as_mut_slice())
    }
}

// --- the device ---

/// The instrumented device.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) device: wgpu::Device,
    pub(crate) shared: Arc<Shared>,
    /// The index the next error scope pushed through this device is given.
    next_error_scope: Mutex<u32>,
}

impl Device {
    pub(crate) fn new(device: wgpu::Device, shared: Arc<Shared>) -> Device {
        Device { device, shared, next_error_scope: Mutex::new(0) }
    }
}

thread_local! {
    /// The error scopes pushed through instrumented devices on this thread (wgpu's error scopes
    /// are per thread, and so are their guards): (device, index given to wgpu, the real scope).
    static ERROR_SCOPES: std::cell::RefCell<Vec<(usize, u32, wgpu::ErrorScopeGuard)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn bind_group_entries<'a>(entries: &'a [wgpu::BindGroupEntry<'a>], arrays: &'a Arrays<'a>) -> Vec<wgpu::BindGroupEntry<'a>> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| wgpu::BindGroupEntry { binding: e.binding, resource: binding_resource(&e.resource, arrays, i) })
        .collect()
}

fn buffer_binding<'a>(b: &wgpu::BufferBinding<'a>) -> wgpu::BufferBinding<'a> {
    wgpu::BufferBinding { buffer: b.buffer.real(), offset: b.offset, size: b.size }
}

/// The unwrapped arrays of a bind group's entries, by entry index.
struct Arrays<'a> {
    buffers: Vec<Vec<wgpu::BufferBinding<'a>>>,
    samplers: Vec<Vec<&'a wgpu::Sampler>>,
    views: Vec<Vec<&'a wgpu::TextureView>>,
    tlases: Vec<Vec<&'a wgpu::Tlas>>,
}

impl<'a> Arrays<'a> {
    fn of(entries: &'a [wgpu::BindGroupEntry<'a>]) -> Arrays<'a> {
        let mut a = Arrays { buffers: Vec::new(), samplers: Vec::new(), views: Vec::new(), tlases: Vec::new() };
        for e in entries {
            let (mut b, mut s, mut v, mut t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            match &e.resource {
                wgpu::BindingResource::BufferArray(x) => b = x.iter().map(buffer_binding).collect(),
                wgpu::BindingResource::SamplerArray(x) => s = x.iter().map(|s| s.real()).collect(),
                wgpu::BindingResource::TextureViewArray(x) => v = x.iter().map(|v| v.real()).collect(),
                wgpu::BindingResource::AccelerationStructureArray(x) => t = x.iter().map(|t| t.real()).collect(),
                _ => {}
            }
            a.buffers.push(b);
            a.samplers.push(s);
            a.views.push(v);
            a.tlases.push(t);
        }
        a
    }
}

fn binding_resource<'a>(r: &wgpu::BindingResource<'a>, arrays: &'a Arrays<'a>, i: usize) -> wgpu::BindingResource<'a> {
    use wgpu::BindingResource as B;
    match r {
        B::Buffer(b) => B::Buffer(buffer_binding(b)),
        B::BufferArray(_) => B::BufferArray(&arrays.buffers[i]),
        B::Sampler(s) => B::Sampler(s.real()),
        B::SamplerArray(_) => B::SamplerArray(&arrays.samplers[i]),
        B::TextureView(v) => B::TextureView(v.real()),
        B::TextureViewArray(_) => B::TextureViewArray(&arrays.views[i]),
        B::AccelerationStructure(t) => B::AccelerationStructure(t.real()),
        B::AccelerationStructureArray(_) => B::AccelerationStructureArray(&arrays.tlases[i]),
        B::ExternalTexture(t) => B::ExternalTexture(t.real()),
        other => other.clone(),
    }
}

fn vertex<'a>(v: &wgpu::VertexState<'a>) -> wgpu::VertexState<'a> {
    wgpu::VertexState { module: v.module.real(), ..v.clone() }
}

fn fragment<'a>(f: &Option<wgpu::FragmentState<'a>>) -> Option<wgpu::FragmentState<'a>> {
    f.as_ref().map(|f| wgpu::FragmentState { module: f.module.real(), ..f.clone() })
}

fn label_of(label: wgpu::Label<'_>) -> Option<Arc<str>> {
    label.map(Arc::from)
}

impl DeviceInterface for Device {
    fn features(&self) -> wgpu::Features {
        self.device.features()
    }

    fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    fn adapter_info(&self) -> wgpu::AdapterInfo {
        self.device.adapter_info()
    }

    fn create_shader_module(
        &self,
        desc: wgpu::ShaderModuleDescriptor<'_>,
        shader_bound_checks: wgpu::ShaderRuntimeChecks,
    ) -> DispatchShaderModule {
        // SAFETY: wgpu passes the checks its caller asked for: the safe `create_shader_module`
        // asks for all of them, and an unsafe caller took on the contract of the checks it left
        // out, which this call forwards unchanged.
        let module = unsafe { self.device.create_shader_module_trusted(desc, shader_bound_checks) };
        DispatchShaderModule::custom(Forward(module))
    }

    unsafe fn create_shader_module_passthrough(
        &self,
        desc: &wgpu::ShaderModuleDescriptorPassthrough<'_>,
    ) -> DispatchShaderModule {
        // SAFETY: forwarded from the caller's unsafe call, with its contract.
        DispatchShaderModule::custom(Forward(unsafe { self.device.create_shader_module_passthrough(desc.clone()) }))
    }

    fn create_bind_group_layout(&self, desc: &wgpu::BindGroupLayoutDescriptor<'_>) -> DispatchBindGroupLayout {
        DispatchBindGroupLayout::custom(Forward(self.device.create_bind_group_layout(desc)))
    }

    fn create_bind_group(&self, desc: &wgpu::BindGroupDescriptor<'_>) -> DispatchBindGroup {
        let arrays = Arrays::of(desc.entries);
        let entries = bind_group_entries(desc.entries, &arrays);
        let real = wgpu::BindGroupDescriptor { label: desc.label, layout: desc.layout.real(), entries: &entries };
        DispatchBindGroup::custom(Forward(self.device.create_bind_group(&real)))
    }

    fn create_pipeline_layout(&self, desc: &wgpu::PipelineLayoutDescriptor<'_>) -> DispatchPipelineLayout {
        let layouts: Vec<Option<&wgpu::BindGroupLayout>> =
            desc.bind_group_layouts.iter().map(|l| l.map(Real::real)).collect();
        let real = wgpu::PipelineLayoutDescriptor { bind_group_layouts: &layouts, ..desc.clone() };
        DispatchPipelineLayout::custom(Forward(self.device.create_pipeline_layout(&real)))
    }

    fn create_render_pipeline(&self, desc: &wgpu::RenderPipelineDescriptor<'_>) -> DispatchRenderPipeline {
        let real = wgpu::RenderPipelineDescriptor {
            layout: desc.layout.map(Real::real),
            vertex: vertex(&desc.vertex),
            fragment: fragment(&desc.fragment),
            cache: desc.cache.map(Real::real),
            ..desc.clone()
        };
        let pipeline = self.device.create_render_pipeline(&real);
        DispatchRenderPipeline::custom(Pipeline { pipeline, label: label_of(desc.label) })
    }

    fn create_mesh_pipeline(&self, desc: &wgpu::MeshPipelineDescriptor<'_>) -> DispatchRenderPipeline {
        let real = wgpu::MeshPipelineDescriptor {
            layout: desc.layout.map(Real::real),
            task: desc.task.as_ref().map(|t| wgpu::TaskState { module: t.module.real(), ..t.clone() }),
            mesh: wgpu::MeshState { module: desc.mesh.module.real(), ..desc.mesh.clone() },
            fragment: fragment(&desc.fragment),
            cache: desc.cache.map(Real::real),
            ..desc.clone()
        };
        let pipeline = self.device.create_mesh_pipeline(&real);
        DispatchRenderPipeline::custom(Pipeline { pipeline, label: label_of(desc.label) })
    }

    fn create_compute_pipeline(&self, desc: &wgpu::ComputePipelineDescriptor<'_>) -> DispatchComputePipeline {
        let real = wgpu::ComputePipelineDescriptor {
            layout: desc.layout.map(Real::real),
            module: desc.module.real(),
            cache: desc.cache.map(Real::real),
            ..desc.clone()
        };
        let pipeline = self.device.create_compute_pipeline(&real);
        DispatchComputePipeline::custom(Pipeline { pipeline, label: label_of(desc.label) })
    }

    unsafe fn create_pipeline_cache(&self, desc: &wgpu::PipelineCacheDescriptor<'_>) -> DispatchPipelineCache {
        // SAFETY: forwarded from the caller's unsafe call, with its contract.
        DispatchPipelineCache::custom(Forward(unsafe { self.device.create_pipeline_cache(desc) }))
    }

    fn create_buffer(&self, desc: &wgpu::BufferDescriptor<'_>) -> DispatchBuffer {
        let buffer = self.device.create_buffer(desc);
        let memory = self.shared.memory.allocate(desc.label, desc.size, attach::innermost_call());
        DispatchBuffer::custom(Buffer { buffer, write: Mutex::new(desc.mapped_at_creation), memory })
    }

    fn create_texture(&self, desc: &wgpu::TextureDescriptor<'_>) -> DispatchTexture {
        let texture = self.device.create_texture(desc);
        let memory = match texture_bytes(desc) {
            Some(bytes) => Some(self.shared.memory.allocate(desc.label, bytes, attach::innermost_call())),
            None => {
                self.shared.memory.unsized_texture();
                None
            }
        };
        DispatchTexture::custom(Texture { texture, memory })
    }

    fn create_external_texture(
        &self,
        desc: &wgpu::ExternalTextureDescriptor<'_>,
        planes: &[&wgpu::TextureView],
    ) -> DispatchExternalTexture {
        let planes: Vec<&wgpu::TextureView> = planes.iter().map(|p| p.real()).collect();
        DispatchExternalTexture::custom(Forward(self.device.create_external_texture(desc, &planes)))
    }

    fn create_blas(
        &self,
        desc: &wgpu::CreateBlasDescriptor<'_>,
        sizes: wgpu::BlasGeometrySizeDescriptors,
    ) -> (Option<u64>, DispatchBlas) {
        let blas = self.device.create_blas(desc, sizes);
        let handle = blas.handle();
        (handle, DispatchBlas::custom(Forward(blas)))
    }

    fn create_tlas(&self, desc: &wgpu::CreateTlasDescriptor<'_>) -> DispatchTlas {
        DispatchTlas::custom(Forward(self.device.create_tlas(desc)))
    }

    fn create_sampler(&self, desc: &wgpu::SamplerDescriptor<'_>) -> DispatchSampler {
        DispatchSampler::custom(Forward(self.device.create_sampler(desc)))
    }

    fn create_query_set(&self, desc: &wgpu::QuerySetDescriptor<'_>) -> DispatchQuerySet {
        DispatchQuerySet::custom(Forward(self.device.create_query_set(desc)))
    }

    fn create_command_encoder(&self, desc: &wgpu::CommandEncoderDescriptor<'_>) -> DispatchCommandEncoder {
        let encoder = self.device.create_command_encoder(desc);
        DispatchCommandEncoder::custom(CommandEncoder {
            encoder: Mutex::new(Some(encoder)),
            label: label_of(desc.label),
            passes: AtomicU32::new(0),
            own_writes: Mutex::new(Vec::new()),
            ended: Arc::new(EncoderPasses::new(self.shared.state.clone())),
            shared: self.shared.clone(),
        })
    }

    fn create_render_bundle_encoder(&self, desc: &wgpu::RenderBundleEncoderDescriptor<'_>) -> DispatchRenderBundleEncoder {
        only_29! {
            fn unfinishable() {
                note_once(format_args!(
                    "wgpu 29 cannot finish a render bundle of a device made with wgpu's custom interface \
                     (`RenderBundleEncoder::finish` is unimplemented there): render bundles need wgpu 30 on an \
                     instrumented device"
                ));
            }
        }
        only_30! {
            fn unfinishable() {}
        }
        unfinishable();
        let encoder = self.device.create_render_bundle_encoder(desc);
        DispatchRenderBundleEncoder::custom(RenderBundleEncoder(encoder))
    }

    fn set_device_lost_callback(&self, device_lost_callback: BoxDeviceLostCallback) {
        let once = Mutex::new(Some(device_lost_callback));
        self.device.set_device_lost_callback(move |reason, message| {
            if let Some(f) = lock(&once).take() {
                f(reason, message);
            }
        });
    }

    fn on_uncaptured_error(&self, handler: Arc<dyn wgpu::UncapturedErrorHandler>) {
        self.device.on_uncaptured_error(handler);
    }

    fn push_error_scope(&self, filter: wgpu::ErrorFilter) -> u32 {
        let guard = self.device.push_error_scope(filter);
        let mut next = lock(&self.next_error_scope);
        let index = *next;
        *next = next.wrapping_add(1);
        let me = self as *const Device as usize;
        let _ = ERROR_SCOPES.try_with(|s| s.borrow_mut().push((me, index, guard)));
        index
    }

    fn pop_error_scope(&self, index: u32) -> std::pin::Pin<Box<dyn PopErrorScopeFuture>> {
        let me = self as *const Device as usize;
        let guard = ERROR_SCOPES
            .try_with(|s| {
                let mut s = s.borrow_mut();
                s.iter().rposition(|(d, i, _)| *d == me && *i == index).map(|p| s.remove(p).2)
            })
            .ok()
            .flatten();
        match guard {
            Some(g) => Box::pin(g.pop()),
            None => Box::pin(std::future::ready(None)),
        }
    }

    unsafe fn start_graphics_debugger_capture(&self) {
        // SAFETY: forwarded from the caller's unsafe call, with its contract.
        unsafe { self.device.start_graphics_debugger_capture() }
    }

    unsafe fn stop_graphics_debugger_capture(&self) {
        // SAFETY: forwarded from the caller's unsafe call, with its contract.
        unsafe { self.device.stop_graphics_debugger_capture() }
    }

    fn poll(&self, poll_type: wgpu::wgt::PollType<u64>) -> Result<wgpu::PollStatus, wgpu::PollError> {
        let real = match poll_type {
            wgpu::wgt::PollType::Poll => wgpu::PollType::Poll,
            wgpu::wgt::PollType::Wait { submission_index, timeout } => wgpu::PollType::Wait {
                // An index no longer kept waits for every submission, which includes it.
                submission_index: submission_index.and_then(|i| self.shared.submission(i)),
                timeout,
            },
        };
        self.device.poll(real)
    }

    fn get_internal_counters(&self) -> wgpu::InternalCounters {
        self.device.get_internal_counters()
    }

    fn generate_allocator_report(&self) -> Option<wgpu::AllocatorReport> {
        self.device.generate_allocator_report()
    }

    fn destroy(&self) {
        self.device.destroy();
    }
}

// --- the queue ---

/// The instrumented queue.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) queue: wgpu::Queue,
    pub(crate) shared: Arc<Shared>,
}

/// The real submission indices of the latest submissions, by the index wgpu was given for each.
#[derive(Debug, Default)]
pub(crate) struct Submissions {
    next: u64,
    kept: VecDeque<(u64, wgpu::SubmissionIndex)>,
}

/// Submissions whose real index is kept, for `poll` to wait on one.
const KEPT_SUBMISSIONS: usize = 256;

impl Submissions {
    pub(crate) fn add(&mut self, real: wgpu::SubmissionIndex) -> u64 {
        self.next += 1;
        if self.kept.len() == KEPT_SUBMISSIONS {
            self.kept.pop_front();
        }
        self.kept.push_back((self.next, real));
        self.next
    }

    pub(crate) fn get(&self, index: u64) -> Option<wgpu::SubmissionIndex> {
        self.kept.iter().find(|(i, _)| *i == index).map(|(_, s)| s.clone())
    }
}

impl QueueInterface for Queue {
    fn write_buffer(&self, buffer: &DispatchBuffer, offset: wgpu::BufferAddress, data: &[u8]) {
        if let Some(b) = buffer_of(buffer) {
            self.shared.untimed("write_buffer", data.len() as u64);
            self.queue.write_buffer(b, offset, data);
        }
    }

    fn create_staging_buffer(&self, size: wgpu::BufferSize) -> Option<DispatchQueueWriteBuffer> {
        let len = usize::try_from(size.get()).ok()?;
        Some(DispatchQueueWriteBuffer::custom(Staging(vec![0; len])))
    }

    fn validate_write_buffer(
        &self,
        buffer: &DispatchBuffer,
        offset: wgpu::BufferAddress,
        size: wgpu::BufferSize,
    ) -> Option<()> {
        let b = buffer_of(buffer)?;
        let fits = offset.checked_add(size.get()).is_some_and(|end| end <= b.size());
        (fits && offset.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) && size.get().is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)).then_some(())
    }

    fn write_staging_buffer(
        &self,
        buffer: &DispatchBuffer,
        offset: wgpu::BufferAddress,
        staging_buffer: &DispatchQueueWriteBuffer,
    ) {
        let (Some(b), Some(s)) = (buffer_of(buffer), staging_buffer.as_custom::<Staging>()) else { return };
        self.shared.untimed("write_buffer", s.0.len() as u64);
        self.queue.write_buffer(b, offset, &s.0);
    }

    fn write_texture(
        &self,
        texture: wgpu::TexelCopyTextureInfo<'_>,
        data: &[u8],
        data_layout: wgpu::TexelCopyBufferLayout,
        size: wgpu::Extent3d,
    ) {
        self.shared.untimed("write_texture", texel_bytes(&texture, size));
        self.queue.write_texture(texture_copy(&texture), data, data_layout, size);
    }

    fn submit(&self, command_buffers: &mut dyn Iterator<Item = DispatchCommandBuffer>) -> u64 {
        // Drained in full, as the interface requires.
        let buffers: Vec<wgpu::CommandBuffer> = command_buffers
            .filter_map(|b| match b.as_custom::<CommandBuffer>() {
                Some(c) => lock(&c.0).take(),
                None => {
                    foreign("command buffer");
                    None
                }
            })
            .collect();
        let real = self.queue.submit(buffers);
        self.shared.add_submission(real)
    }

    fn get_timestamp_period(&self) -> f32 {
        self.queue.get_timestamp_period()
    }

    fn on_submitted_work_done(&self, callback: BoxSubmittedWorkDoneCallback) {
        self.queue.on_submitted_work_done(callback);
    }

    fn compact_blas(&self, blas: &DispatchBlas) -> (Option<u64>, DispatchBlas) {
        match inner!(blas, Blas) {
            Some(b) => {
                let compacted = self.queue.compact_blas(b);
                (compacted.handle(), DispatchBlas::custom(Forward(compacted)))
            }
            None => {
                foreign("acceleration structure");
                (None, blas.clone())
            }
        }
    }

    only_30! {
        fn present(&self, detail: &DispatchSurfaceOutputDetail) {
            // A surface texture of the instrumented instance (`instance.rs`) is presented on the
            // real queue; any other surface's texture is its real device's, which this queue
            // cannot present.
            match detail.as_custom::<super::instance::Frame>() {
                Some(frame) => frame.present(&self.queue),
                None => note_once(format_args!(
                    "Queue::present on the instrumented queue of a surface texture not made through \
                     gpuspan::wgpu::instrument_instance: present it with the queue of the device the surface was \
                     configured with, or make the surface through the instrumented instance"
                )),
            }
        }
    }
}

fn texture_copy<'a>(t: &wgpu::TexelCopyTextureInfo<'a>) -> wgpu::TexelCopyTextureInfo<'a> {
    wgpu::TexelCopyTextureInfo { texture: t.texture.real(), mip_level: t.mip_level, origin: t.origin, aspect: t.aspect }
}

/// The bytes a copy of `size` texels moves in `texture` (its format's block size for the
/// copied aspect, per block of texels): what the copy carries, not the driver's layout.
fn texel_bytes(texture: &wgpu::TexelCopyTextureInfo<'_>, size: wgpu::Extent3d) -> u64 {
    let format = texture.texture.format();
    let block = format.block_copy_size(Some(texture.aspect)).or_else(|| format.block_copy_size(None)).unwrap_or(0);
    let (bw, bh) = format.block_dimensions();
    u64::from(size.width.div_ceil(bw.max(1)))
        * u64::from(size.height.div_ceil(bh.max(1)))
        * u64::from(size.depth_or_array_layers)
        * u64::from(block)
}

fn buffer_copy<'a>(b: &wgpu::TexelCopyBufferInfo<'a>) -> wgpu::TexelCopyBufferInfo<'a> {
    wgpu::TexelCopyBufferInfo { buffer: b.buffer.real(), layout: b.layout }
}

// --- command encoders and buffers ---

/// A finished command buffer, taken when it is submitted.
#[derive(Debug)]
pub(crate) struct CommandBuffer(Mutex<Option<wgpu::CommandBuffer>>);

impl CommandBufferInterface for CommandBuffer {}

/// The instrumented command encoder: every pass begun in it is timed (`pass.rs`).
#[derive(Debug)]
pub(crate) struct CommandEncoder {
    /// Taken by `finish`.
    encoder: Mutex<Option<wgpu::CommandEncoder>>,
    label: Option<Arc<str>>,
    /// Passes begun in it so far: names passes without a label of theirs or their pipeline's.
    passes: AtomicU32,
    /// Passes with their own timestamp writes, read when the encoder finishes.
    own_writes: Mutex<Vec<OwnWrites>>,
    /// Its timed passes and copies that ended, waiting for it to finish.
    ended: Arc<EncoderPasses>,
    shared: Arc<Shared>,
}

impl CommandEncoder {
    fn with<T>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> T) -> Option<T> {
        lock(&self.encoder).as_mut().map(f)
    }

    fn next_pass(&self) -> u32 {
        self.passes.fetch_add(1, Ordering::Relaxed) + 1
    }
}

impl CommandEncoder {
    /// A copy or clear (`command`, moving `kind`'s bytes): timed between two timestamps of its
    /// own where the device has in-encoder timestamps (`PassTimer::begin_copy`), else recorded
    /// as it is and its bytes counted without a time (`Shared::untimed`).
    fn copy(&self, command: &'static str, kind: ActivityKind, record: impl FnOnce(&mut wgpu::CommandEncoder)) {
        let bytes = match &kind {
            ActivityKind::Copy { bytes, .. } | ActivityKind::Set { bytes } => *bytes,
            ActivityKind::Kernel(_) => 0,
        };
        self.with(|e| match PassTimer::begin_copy(&self.shared, &self.ended, command, kind) {
            Some(timer) => timer.time_copy(e, &self.ended, record),
            None => {
                if self.shared.state.mode != super::super::Mode::InEncoders {
                    self.shared.untimed(command, bytes);
                }
                record(e);
            }
        });
    }
}

/// A copy inside the device's memory, of `bytes`.
fn device_copy(bytes: u64) -> ActivityKind {
    ActivityKind::Copy {
        bytes,
        direction: Some(crate::site::Direction::GpuToGpu),
        src: MemoryKind::Device,
        dst: MemoryKind::Device,
    }
}

impl CommandEncoderInterface for CommandEncoder {
    fn copy_buffer_to_buffer(
        &self,
        source: &DispatchBuffer,
        source_offset: wgpu::BufferAddress,
        destination: &DispatchBuffer,
        destination_offset: wgpu::BufferAddress,
        copy_size: Option<wgpu::BufferAddress>,
    ) {
        let (Some(s), Some(d)) = (buffer_of(source), buffer_of(destination)) else { return };
        // `None`: from the offset to the end of the source.
        let bytes = copy_size.unwrap_or_else(|| s.size().saturating_sub(source_offset));
        self.copy("copy_buffer_to_buffer", device_copy(bytes), |e| {
            e.copy_buffer_to_buffer(s, source_offset, d, destination_offset, copy_size)
        });
    }

    fn copy_buffer_to_texture(
        &self,
        source: wgpu::TexelCopyBufferInfo<'_>,
        destination: wgpu::TexelCopyTextureInfo<'_>,
        copy_size: wgpu::Extent3d,
    ) {
        let bytes = texel_bytes(&destination, copy_size);
        self.copy("copy_buffer_to_texture", device_copy(bytes), |e| {
            e.copy_buffer_to_texture(buffer_copy(&source), texture_copy(&destination), copy_size)
        });
    }

    fn copy_texture_to_buffer(
        &self,
        source: wgpu::TexelCopyTextureInfo<'_>,
        destination: wgpu::TexelCopyBufferInfo<'_>,
        copy_size: wgpu::Extent3d,
    ) {
        let bytes = texel_bytes(&source, copy_size);
        self.copy("copy_texture_to_buffer", device_copy(bytes), |e| {
            e.copy_texture_to_buffer(texture_copy(&source), buffer_copy(&destination), copy_size)
        });
    }

    fn copy_texture_to_texture(
        &self,
        source: wgpu::TexelCopyTextureInfo<'_>,
        destination: wgpu::TexelCopyTextureInfo<'_>,
        copy_size: wgpu::Extent3d,
    ) {
        let bytes = texel_bytes(&source, copy_size);
        self.copy("copy_texture_to_texture", device_copy(bytes), |e| {
            e.copy_texture_to_texture(texture_copy(&source), texture_copy(&destination), copy_size)
        });
    }

    fn begin_compute_pass(&self, desc: &wgpu::ComputePassDescriptor<'_>) -> DispatchComputePass {
        let index = self.next_pass();
        let user_writes = desc.timestamp_writes.as_ref().map(|w| (w.query_set.real(), w.beginning_of_pass_write_index, w.end_of_pass_write_index));
        let timer =
            PassTimer::begin(&self.shared, &self.ended, desc.label, self.label.as_ref(), index, user_writes, &self.own_writes);
        let writes = timer.as_ref().and_then(PassTimer::writes);
        let real = wgpu::ComputePassDescriptor {
            label: desc.label,
            timestamp_writes: match &writes {
                Some((set, start, end)) => Some(wgpu::ComputePassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(*start),
                    end_of_pass_write_index: Some(*end),
                }),
                None => desc.timestamp_writes.as_ref().map(|w| wgpu::ComputePassTimestampWrites {
                    query_set: w.query_set.real(),
                    ..w.clone()
                }),
            },
        };
        let pass = self.with(|e| e.begin_compute_pass(&real).forget_lifetime());
        DispatchComputePass::custom(ComputePass { pass, timing: Recording::new(timer), ended: self.ended.clone() })
    }

    fn begin_render_pass(&self, desc: &wgpu::RenderPassDescriptor<'_>) -> DispatchRenderPass {
        let index = self.next_pass();
        let user_writes = desc.timestamp_writes.as_ref().map(|w| (w.query_set.real(), w.beginning_of_pass_write_index, w.end_of_pass_write_index));
        let timer =
            PassTimer::begin(&self.shared, &self.ended, desc.label, self.label.as_ref(), index, user_writes, &self.own_writes);
        let writes = timer.as_ref().and_then(PassTimer::writes);
        let colors: Vec<Option<wgpu::RenderPassColorAttachment<'_>>> = desc
            .color_attachments
            .iter()
            .map(|c| {
                c.as_ref().map(|c| wgpu::RenderPassColorAttachment {
                    view: c.view.real(),
                    resolve_target: c.resolve_target.map(Real::real),
                    ..c.clone()
                })
            })
            .collect();
        let real = wgpu::RenderPassDescriptor {
            label: desc.label,
            color_attachments: &colors,
            depth_stencil_attachment: desc
                .depth_stencil_attachment
                .as_ref()
                .map(|d| wgpu::RenderPassDepthStencilAttachment { view: d.view.real(), ..d.clone() }),
            timestamp_writes: match &writes {
                Some((set, start, end)) => Some(wgpu::RenderPassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(*start),
                    end_of_pass_write_index: Some(*end),
                }),
                None => desc.timestamp_writes.as_ref().map(|w| wgpu::RenderPassTimestampWrites {
                    query_set: w.query_set.real(),
                    ..w.clone()
                }),
            },
            occlusion_query_set: desc.occlusion_query_set.map(Real::real),
            multiview_mask: desc.multiview_mask,
        };
        let pass = self.with(|e| e.begin_render_pass(&real).forget_lifetime());
        DispatchRenderPass::custom(RenderPass { pass, timing: Recording::new(timer), ended: self.ended.clone() })
    }

    fn finish(&mut self) -> DispatchCommandBuffer {
        let reads = std::mem::take(&mut *lock(&self.own_writes));
        let pending = self.ended.take_pending(&self.shared);
        let buffer = lock(&self.encoder).take().map(|mut e| {
            for r in &reads {
                r.resolve(&mut e);
            }
            if let Some(p) = pending {
                e.on_submitted_work_done(move || p.executed());
            }
            e.finish()
        });
        DispatchCommandBuffer::custom(CommandBuffer(Mutex::new(buffer)))
    }

    fn clear_texture(&self, texture: &DispatchTexture, subresource_range: &wgpu::ImageSubresourceRange) {
        let Some(t) = texture_of(texture) else { return };
        self.with(|e| e.clear_texture(t, subresource_range));
    }

    fn clear_buffer(&self, buffer: &DispatchBuffer, offset: wgpu::BufferAddress, size: Option<wgpu::BufferAddress>) {
        let Some(b) = buffer_of(buffer) else { return };
        let bytes = size.unwrap_or_else(|| b.size().saturating_sub(offset));
        self.copy("clear_buffer", ActivityKind::Set { bytes }, |e| e.clear_buffer(b, offset, size));
    }

    fn insert_debug_marker(&self, label: &str) {
        self.with(|e| e.insert_debug_marker(label));
    }

    fn push_debug_group(&self, label: &str) {
        self.with(|e| e.push_debug_group(label));
    }

    fn pop_debug_group(&self) {
        self.with(|e| e.pop_debug_group());
    }

    fn write_timestamp(&self, query_set: &DispatchQuerySet, query_index: u32) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        self.with(|e| e.write_timestamp(q, query_index));
    }

    fn resolve_query_set(
        &self,
        query_set: &DispatchQuerySet,
        first_query: u32,
        query_count: u32,
        destination: &DispatchBuffer,
        destination_offset: wgpu::BufferAddress,
    ) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        let Some(d) = buffer_of(destination) else { return };
        self.with(|e| e.resolve_query_set(q, first_query..first_query + query_count, d, destination_offset));
    }

    fn mark_acceleration_structures_built<'a>(
        &self,
        blas: &mut dyn Iterator<Item = &'a wgpu::Blas>,
        tlas: &mut dyn Iterator<Item = &'a wgpu::Tlas>,
    ) {
        let blas: Vec<&wgpu::Blas> = blas.map(Real::real).collect();
        let tlas: Vec<&wgpu::Tlas> = tlas.map(Real::real).collect();
        // SAFETY: forwarded from the caller's unsafe call, with its contract.
        self.with(|e| unsafe { e.mark_acceleration_structures_built(blas, tlas) });
    }

    fn build_acceleration_structures<'a>(
        &self,
        _blas: &mut dyn Iterator<Item = &'a wgpu::BlasBuildEntry<'a>>,
        _tlas: &mut dyn Iterator<Item = &'a wgpu::Tlas>,
    ) {
        note_once(format_args!(
            "build_acceleration_structures on an instrumented wgpu device is not forwarded (ray tracing is not \
             supported by gpuspan::wgpu::instrument); build them on a device that is not instrumented"
        ));
    }

    fn transition_resources<'a>(
        &mut self,
        buffer_transitions: &mut dyn Iterator<Item = wgpu::wgt::BufferTransition<&'a DispatchBuffer>>,
        texture_transitions: &mut dyn Iterator<Item = wgpu::wgt::TextureTransition<&'a DispatchTexture>>,
    ) {
        let buffers: Vec<_> = buffer_transitions
            .filter_map(|t| Some(wgpu::wgt::BufferTransition { buffer: buffer_of(t.buffer)?, state: t.state }))
            .collect();
        let textures: Vec<_> = texture_transitions
            .filter_map(|t| {
                Some(wgpu::wgt::TextureTransition {
                    texture: texture_of(t.texture)?,
                    selector: t.selector.clone(),
                    state: t.state,
                })
            })
            .collect();
        self.with(|e| e.transition_resources(buffers.into_iter(), textures.into_iter()));
    }
}

// --- passes ---

/// A compute pass of an instrumented encoder; its timing ends when it is dropped.
#[derive(Debug)]
pub(crate) struct ComputePass {
    /// `None` when its encoder was already finished (wgpu reports that misuse itself).
    pass: Option<wgpu::ComputePass<'static>>,
    timing: Recording,
    /// Its encoder's ended passes, which it joins.
    ended: Arc<EncoderPasses>,
}

impl Drop for ComputePass {
    fn drop(&mut self) {
        if let Some(pass) = &self.pass {
            self.timing.end(&self.ended, |f| pass.on_submitted_work_done(f));
        }
    }
}

macro_rules! on_pass {
    ($self:ident, $p:ident => $e:expr) => {
        if let Some($p) = $self.pass.as_mut() {
            $e;
        }
    };
}

impl ComputePassInterface for ComputePass {
    fn set_pipeline(&mut self, pipeline: &DispatchComputePipeline) {
        let Some(p) = pipeline.as_custom::<Pipeline<wgpu::ComputePipeline>>() else { return foreign("pipeline") };
        self.timing.pipeline(p.label.as_ref());
        on_pass!(self, pass => pass.set_pipeline(&p.pipeline));
    }

    fn set_bind_group(&mut self, index: u32, bind_group: Option<&DispatchBindGroup>, offsets: &[wgpu::DynamicOffset]) {
        let group = bind_group.and_then(|g| inner!(g, BindGroup));
        on_pass!(self, pass => pass.set_bind_group(index, group, offsets));
    }

    fn set_immediates(&mut self, offset: u32, data: &[u8]) {
        on_pass!(self, pass => pass.set_immediates(offset, data));
    }

    fn insert_debug_marker(&mut self, label: &str) {
        on_pass!(self, pass => pass.insert_debug_marker(label));
    }

    fn push_debug_group(&mut self, group_label: &str) {
        on_pass!(self, pass => pass.push_debug_group(group_label));
    }

    fn pop_debug_group(&mut self) {
        on_pass!(self, pass => pass.pop_debug_group());
    }

    fn write_timestamp(&mut self, query_set: &DispatchQuerySet, query_index: u32) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        on_pass!(self, pass => pass.write_timestamp(q, query_index));
    }

    fn begin_pipeline_statistics_query(&mut self, query_set: &DispatchQuerySet, query_index: u32) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        on_pass!(self, pass => pass.begin_pipeline_statistics_query(q, query_index));
    }

    fn end_pipeline_statistics_query(&mut self) {
        on_pass!(self, pass => pass.end_pipeline_statistics_query());
    }

    fn dispatch_workgroups(&mut self, x: u32, y: u32, z: u32) {
        on_pass!(self, pass => pass.dispatch_workgroups(x, y, z));
    }

    fn dispatch_workgroups_indirect(&mut self, indirect_buffer: &DispatchBuffer, indirect_offset: wgpu::BufferAddress) {
        let Some(b) = buffer_of(indirect_buffer) else { return };
        on_pass!(self, pass => pass.dispatch_workgroups_indirect(b, indirect_offset));
    }

    only_30! {
        fn transition_resources<'a>(
            &mut self,
            buffer_transitions: &mut dyn Iterator<Item = wgpu::wgt::BufferTransition<&'a DispatchBuffer>>,
            texture_transitions: &mut dyn Iterator<Item = wgpu::wgt::TextureTransition<&'a DispatchTextureView>>,
        ) {
            let buffers: Vec<_> = buffer_transitions
                .filter_map(|t| Some(wgpu::wgt::BufferTransition { buffer: buffer_of(t.buffer)?, state: t.state }))
                .collect();
            let textures: Vec<_> = texture_transitions
                .filter_map(|t| {
                    Some(wgpu::wgt::TextureTransition {
                        texture: inner!(t.texture, TextureView)?,
                        selector: t.selector.clone(),
                        state: t.state,
                    })
                })
                .collect();
            on_pass!(self, pass => pass.transition_resources(buffers.into_iter(), textures.into_iter()));
        }
    }
}

/// A render pass of an instrumented encoder; its timing ends when it is dropped.
#[derive(Debug)]
pub(crate) struct RenderPass {
    pass: Option<wgpu::RenderPass<'static>>,
    timing: Recording,
    /// Its encoder's ended passes, which it joins.
    ended: Arc<EncoderPasses>,
}

impl Drop for RenderPass {
    fn drop(&mut self) {
        if let Some(pass) = &self.pass {
            self.timing.end(&self.ended, |f| pass.on_submitted_work_done(f));
        }
    }
}

/// The indirect-draw calls: a buffer, then the rest of the arguments as they are.
macro_rules! indirect {
    ($($name:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $name(&mut self, indirect_buffer: &DispatchBuffer, indirect_offset: wgpu::BufferAddress $(, $arg: $ty)*) {
            let Some(b) = buffer_of(indirect_buffer) else { return };
            on_pass!(self, pass => pass.$name(b, indirect_offset $(, $arg)*));
        }
    )*};
}

/// The indirect-count draws: two buffers.
macro_rules! indirect_count {
    ($($name:ident),* $(,)?) => {$(
        fn $name(
            &mut self,
            indirect_buffer: &DispatchBuffer,
            indirect_offset: wgpu::BufferAddress,
            count_buffer: &DispatchBuffer,
            count_buffer_offset: wgpu::BufferAddress,
            max_count: u32,
        ) {
            let (Some(b), Some(c)) = (buffer_of(indirect_buffer), buffer_of(count_buffer)) else { return };
            on_pass!(self, pass => pass.$name(b, indirect_offset, c, count_buffer_offset, max_count));
        }
    )*};
}

impl RenderPassInterface for RenderPass {
    fn set_pipeline(&mut self, pipeline: &DispatchRenderPipeline) {
        let Some(p) = pipeline.as_custom::<Pipeline<wgpu::RenderPipeline>>() else { return foreign("pipeline") };
        self.timing.pipeline(p.label.as_ref());
        on_pass!(self, pass => pass.set_pipeline(&p.pipeline));
    }

    fn set_bind_group(&mut self, index: u32, bind_group: Option<&DispatchBindGroup>, offsets: &[wgpu::DynamicOffset]) {
        let group = bind_group.and_then(|g| inner!(g, BindGroup));
        on_pass!(self, pass => pass.set_bind_group(index, group, offsets));
    }

    fn set_index_buffer(
        &mut self,
        buffer: &DispatchBuffer,
        index_format: wgpu::IndexFormat,
        offset: wgpu::BufferAddress,
        size: Option<wgpu::BufferSize>,
    ) {
        let Some(b) = buffer_of(buffer) else { return };
        on_pass!(self, pass => pass.set_index_buffer(slice_of(b, offset, size), index_format));
    }

    only_30! {
        fn set_vertex_buffer(
            &mut self,
            slot: u32,
            buffer: Option<&DispatchBuffer>,
            offset: wgpu::BufferAddress,
            size: Option<wgpu::BufferSize>,
        ) {
            let slice = match buffer {
                Some(b) => match buffer_of(b) {
                    Some(b) => Some(slice_of(b, offset, size)),
                    None => return,
                },
                None => None,
            };
            on_pass!(self, pass => pass.set_vertex_buffer(slot, slice));
        }
    }

    only_29! {
        fn set_vertex_buffer(
            &mut self,
            slot: u32,
            buffer: &DispatchBuffer,
            offset: wgpu::BufferAddress,
            size: Option<wgpu::BufferSize>,
        ) {
            let Some(b) = buffer_of(buffer) else { return };
            on_pass!(self, pass => pass.set_vertex_buffer(slot, slice_of(b, offset, size)));
        }
    }

    fn set_immediates(&mut self, offset: u32, data: &[u8]) {
        on_pass!(self, pass => pass.set_immediates(offset, data));
    }

    fn set_blend_constant(&mut self, color: wgpu::Color) {
        on_pass!(self, pass => pass.set_blend_constant(color));
    }

    fn set_scissor_rect(&mut self, x: u32, y: u32, width: u32, height: u32) {
        on_pass!(self, pass => pass.set_scissor_rect(x, y, width, height));
    }

    fn set_viewport(&mut self, x: f32, y: f32, width: f32, height: f32, min_depth: f32, max_depth: f32) {
        on_pass!(self, pass => pass.set_viewport(x, y, width, height, min_depth, max_depth));
    }

    fn set_stencil_reference(&mut self, reference: u32) {
        on_pass!(self, pass => pass.set_stencil_reference(reference));
    }

    fn draw(&mut self, vertices: std::ops::Range<u32>, instances: std::ops::Range<u32>) {
        on_pass!(self, pass => pass.draw(vertices, instances));
    }

    fn draw_indexed(&mut self, indices: std::ops::Range<u32>, base_vertex: i32, instances: std::ops::Range<u32>) {
        on_pass!(self, pass => pass.draw_indexed(indices, base_vertex, instances));
    }

    fn draw_mesh_tasks(&mut self, group_count_x: u32, group_count_y: u32, group_count_z: u32) {
        on_pass!(self, pass => pass.draw_mesh_tasks(group_count_x, group_count_y, group_count_z));
    }

    indirect!(
        draw_indirect(),
        draw_indexed_indirect(),
        draw_mesh_tasks_indirect(),
        multi_draw_indirect(count: u32),
        multi_draw_indexed_indirect(count: u32),
        multi_draw_mesh_tasks_indirect(count: u32),
    );

    indirect_count!(multi_draw_indirect_count, multi_draw_indexed_indirect_count, multi_draw_mesh_tasks_indirect_count);

    fn insert_debug_marker(&mut self, label: &str) {
        on_pass!(self, pass => pass.insert_debug_marker(label));
    }

    fn push_debug_group(&mut self, group_label: &str) {
        on_pass!(self, pass => pass.push_debug_group(group_label));
    }

    fn pop_debug_group(&mut self) {
        on_pass!(self, pass => pass.pop_debug_group());
    }

    fn write_timestamp(&mut self, query_set: &DispatchQuerySet, query_index: u32) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        on_pass!(self, pass => pass.write_timestamp(q, query_index));
    }

    fn begin_occlusion_query(&mut self, query_index: u32) {
        on_pass!(self, pass => pass.begin_occlusion_query(query_index));
    }

    fn end_occlusion_query(&mut self) {
        on_pass!(self, pass => pass.end_occlusion_query());
    }

    fn begin_pipeline_statistics_query(&mut self, query_set: &DispatchQuerySet, query_index: u32) {
        let Some(q) = inner!(query_set, QuerySet) else { return foreign("query set") };
        on_pass!(self, pass => pass.begin_pipeline_statistics_query(q, query_index));
    }

    fn end_pipeline_statistics_query(&mut self) {
        on_pass!(self, pass => pass.end_pipeline_statistics_query());
    }

    fn execute_bundles(&mut self, render_bundles: &mut dyn Iterator<Item = &DispatchRenderBundle>) {
        let bundles: Vec<&wgpu::RenderBundle> = render_bundles.filter_map(|b| inner!(b, RenderBundle)).collect();
        on_pass!(self, pass => pass.execute_bundles(bundles));
    }
}

// --- render bundles ---

/// A render bundle encoder of the instrumented device. Its commands run inside the render pass
/// that executes the bundle, and are timed with that pass.
#[derive(Debug)]
pub(crate) struct RenderBundleEncoder(wgpu::RenderBundleEncoder<'static>);

// SAFETY: the public encoder's marker (`PhantomData<*const u8>`) keeps it on one thread for the
// web backend, whose handles are JavaScript objects; the native encoder inside it (wgpu-core's,
// the only one an instrumented device wraps) is Send and Sync, and every call here takes
// `&mut self`.
unsafe impl Send for RenderBundleEncoder {}
// SAFETY: as above.
unsafe impl Sync for RenderBundleEncoder {}

/// The bundle encoder's lifetime parameter is a marker only (`RenderBundleEncoder { inner, _p:
/// PhantomData }` in wgpu): the encoder records the objects it is given by handle, each kept
/// alive by wgpu's own reference counting until the bundle is finished.
fn for_bundle<T>(t: &T) -> &'static T {
    // SAFETY: see above: the reference is not kept by the bundle encoder past the call, wgpu
    // holds its own counted handle to the object.
    unsafe { &*(t as *const T) }
}

impl RenderBundleEncoderInterface for RenderBundleEncoder {
    fn set_pipeline(&mut self, pipeline: &DispatchRenderPipeline) {
        let Some(p) = pipeline.as_custom::<Pipeline<wgpu::RenderPipeline>>() else { return foreign("pipeline") };
        self.0.set_pipeline(for_bundle(&p.pipeline));
    }

    fn set_bind_group(&mut self, index: u32, bind_group: Option<&DispatchBindGroup>, offsets: &[wgpu::DynamicOffset]) {
        let group = bind_group.and_then(|g| inner!(g, BindGroup)).map(for_bundle);
        self.0.set_bind_group(index, group, offsets);
    }

    fn set_index_buffer(
        &mut self,
        buffer: &DispatchBuffer,
        index_format: wgpu::IndexFormat,
        offset: wgpu::BufferAddress,
        size: Option<wgpu::BufferSize>,
    ) {
        let Some(b) = buffer_of(buffer) else { return };
        self.0.set_index_buffer(slice_of(for_bundle(b), offset, size), index_format);
    }

    only_30! {
        fn set_vertex_buffer(
            &mut self,
            slot: u32,
            buffer: Option<&DispatchBuffer>,
            offset: wgpu::BufferAddress,
            size: Option<wgpu::BufferSize>,
        ) {
            let slice = match buffer {
                Some(b) => match buffer_of(b) {
                    Some(b) => Some(slice_of(for_bundle(b), offset, size)),
                    None => return,
                },
                None => None,
            };
            self.0.set_vertex_buffer(slot, slice);
        }
    }

    only_29! {
        fn set_vertex_buffer(
            &mut self,
            slot: u32,
            buffer: &DispatchBuffer,
            offset: wgpu::BufferAddress,
            size: Option<wgpu::BufferSize>,
        ) {
            let Some(b) = buffer_of(buffer) else { return };
            self.0.set_vertex_buffer(slot, slice_of(for_bundle(b), offset, size));
        }
    }

    fn set_immediates(&mut self, offset: u32, data: &[u8]) {
        self.0.set_immediates(offset, data);
    }

    fn draw(&mut self, vertices: std::ops::Range<u32>, instances: std::ops::Range<u32>) {
        self.0.draw(vertices, instances);
    }

    fn draw_indexed(&mut self, indices: std::ops::Range<u32>, base_vertex: i32, instances: std::ops::Range<u32>) {
        self.0.draw_indexed(indices, base_vertex, instances);
    }

    fn draw_indirect(&mut self, indirect_buffer: &DispatchBuffer, indirect_offset: wgpu::BufferAddress) {
        let Some(b) = buffer_of(indirect_buffer) else { return };
        self.0.draw_indirect(for_bundle(b), indirect_offset);
    }

    fn draw_indexed_indirect(&mut self, indirect_buffer: &DispatchBuffer, indirect_offset: wgpu::BufferAddress) {
        let Some(b) = buffer_of(indirect_buffer) else { return };
        self.0.draw_indexed_indirect(for_bundle(b), indirect_offset);
    }

    fn finish(self, desc: &wgpu::RenderBundleDescriptor<'_>) -> DispatchRenderBundle
    where
        Self: Sized,
    {
        DispatchRenderBundle::custom(Forward(self.0.finish(desc)))
    }

    only_30! {
        fn finish_boxed(self: Box<Self>, desc: &wgpu::RenderBundleDescriptor<'_>) -> DispatchRenderBundle {
            (*self).finish(desc)
        }
    }
}
