//! The record's vocabulary: the enums and the interval that the runtime's records, the capture
//! file and every reader of it share, declared once here (decision 69). Compiled without any
//! dependency (the runtime's uninstrumented build names these types too); with the feature
//! `file` they are serde types, encoded by position: a variant is only ever added last, so
//! older files decode unchanged.

/// What an annotated function does, or that the site is a selected `tracing` span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum SiteKind {
    /// `#[gpu_kernel]`: encodes or launches GPU work.
    Kernel,
    /// `#[gpu_transfer]`: moves data between host and device.
    Transfer,
    /// A `tracing` span selected as a measurement scope (`gpuspan.kind = span`, format 6). Its
    /// records' `span` is the span instance itself, so that the spans and calls made inside it
    /// (their chains pass through it) are its children: self vs inclusive GPU time. The
    /// runtime's own sites never have this kind: a selected span's site is a kernel site there
    /// (it aggregates as one) and says `span` through `Site::is_span`.
    Span,
}

/// Which backend times a site, as decided by the macro from the function's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Backend {
    /// wgpu timestamp queries.
    Wgpu,
    /// CUDA: CUPTI records or CUDA events.
    Cuda,
    /// No GPU resource in the signature: the host clock, labelled as such.
    Host,
}

/// Direction of a transfer or copy (`gpu_transfer.direction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Direction {
    /// Host to device (upload).
    CpuToGpu,
    /// Device to host (download).
    GpuToCpu,
    /// Device to device.
    GpuToGpu,
}

/// A closed interval on the host clock, in Unix-epoch nanoseconds. A complete value (as a
/// `Range` is), so not `#[non_exhaustive]`: write it as a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
pub struct Interval {
    /// The first nanosecond.
    pub start_ns: u64,
    /// The last nanosecond.
    pub end_ns: u64,
}

/// Where a duration came from (`gpu.timing.source`). Every exported duration says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum TimingSource {
    /// GPU timestamp queries (wgpu).
    GpuTimestamp,
    /// CUPTI activity records.
    Cupti,
    /// CUDA events recorded on the scope's stream.
    CudaEvent,
    /// The host clock around the call: no GPU source was available.
    Host,
    /// The timestamp writes of the passes the call began (wgpu, on a device without in-encoder
    /// timestamps: Metal, WebGPU): from the first pass's start to the last one's end. Copies
    /// and other commands outside the passes are not in it (format 7).
    GpuPasses,
}

/// Kind of memory on either side of a copy (`gpu_transfer.src_kind` / `dst_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum MemoryKind {
    /// Ordinary host memory: the driver stages it through a pinned buffer.
    Pageable,
    /// Page-locked host memory: copied by DMA directly.
    Pinned,
    /// Device memory.
    Device,
    /// Unified memory, migrated on demand.
    Managed,
    /// A CUDA array (texture layout).
    Array,
    /// The backend did not say.
    Unknown,
}

/// Launch geometry and resources of one kernel. A complete value, as the format encodes it by
/// position (a new field is a new format version): write it as a literal, or from
/// `KernelGeometry::default()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelGeometry {
    /// Blocks in the grid, x y z (`gpu.cuda.grid_dim`).
    pub grid: [u32; 3],
    /// Threads in a block, x y z (`gpu.cuda.block_dim`).
    pub block: [u32; 3],
    /// `gpu.cuda.registers_per_thread`.
    pub registers_per_thread: u32,
    /// Shared memory declared in the kernel, per block.
    pub static_shared_bytes: u32,
    /// Shared memory given at launch, per block.
    pub dynamic_shared_bytes: u32,
}

/// What one piece of GPU work inside a call was. The kernel's geometry is a newtype variant
/// where it was a struct variant of the same fields until decision 69: postcard encodes both
/// as the variant's index then the fields in order, so the bytes are the same. Exhaustive: the
/// runtime's backends and every reader decide for each kind, and a new kind is a new format
/// version and a new minor version of the API anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
pub enum ActivityKind {
    /// A kernel launch.
    Kernel(KernelGeometry),
    /// A copy.
    Copy {
        /// Bytes copied.
        bytes: u64,
        /// Between host and device, or within devices, when the backend says.
        direction: Option<Direction>,
        /// The source's memory.
        src: MemoryKind,
        /// The destination's memory.
        dst: MemoryKind,
    },
    /// A memset.
    Set {
        /// Bytes set.
        bytes: u64,
    },
}

/// How a record's GPU work was found to be its call's or span's (`gpuspan.attributed`,
/// decision 55).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "file", derive(serde::Serialize, serde::Deserialize))]
pub enum Attributed {
    /// Launched on a thread inside the scope (its window, or its id pushed there).
    Thread,
    /// Launched on a thread with no scope of its own while the scope's span, and no unrelated
    /// one, was entered elsewhere.
    Time,
    /// Some of each.
    ThreadAndTime,
    /// Launched on a thread with no scope while several unrelated selected spans were entered:
    /// not guessed between (the `during several spans` site).
    Ambiguous,
}

impl SiteKind {
    /// `kernel`, `transfer` or `span` (`gpuspan.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Kernel => "kernel",
            SiteKind::Transfer => "transfer",
            SiteKind::Span => "span",
        }
    }
}

impl Backend {
    /// `wgpu`, `cuda` or `host` (`gpu.backend`).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
            Backend::Host => "host",
        }
    }
}

impl Direction {
    /// `cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu` (`gpu_transfer.direction`).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::CpuToGpu => "cpu_to_gpu",
            Direction::GpuToCpu => "gpu_to_cpu",
            Direction::GpuToGpu => "gpu_to_gpu",
        }
    }
}

impl Interval {
    /// From `start_ns` to `end_ns`.
    pub fn new(start_ns: u64, end_ns: u64) -> Interval {
        Interval { start_ns, end_ns }
    }

    /// `end_ns - start_ns` (0 for an interval that ends before it starts).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

impl TimingSource {
    /// Every source, in the order of the summary's columns.
    pub const ALL: [TimingSource; 5] = [Self::GpuTimestamp, Self::GpuPasses, Self::Cupti, Self::CudaEvent, Self::Host];

    /// The value of `gpu.timing.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GpuTimestamp => "gpu_timestamp",
            Self::Cupti => "cupti",
            Self::CudaEvent => "cuda_event",
            Self::Host => "host",
            Self::GpuPasses => "gpu_passes",
        }
    }

    /// The GPU backend whose clock this source reads; `None` for the host's.
    pub fn backend(self) -> Option<Backend> {
        match self {
            Self::GpuTimestamp | Self::GpuPasses => Some(Backend::Wgpu),
            Self::Cupti | Self::CudaEvent => Some(Backend::Cuda),
            Self::Host => None,
        }
    }
}

impl MemoryKind {
    /// The value of `gpu_transfer.src_kind` / `dst_kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pageable => "pageable",
            Self::Pinned => "pinned",
            Self::Device => "device",
            Self::Managed => "managed",
            Self::Array => "array",
            Self::Unknown => "unknown",
        }
    }
}

impl Attributed {
    /// The value of `gpuspan.attributed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Thread => "thread",
            Self::Time => "time",
            Self::ThreadAndTime => "thread+time",
            Self::Ambiguous => "ambiguous",
        }
    }
}

#[cfg(all(test, feature = "file"))]
mod tests {
    use crate::*;

    /// The vocabulary's move here (decision 69) kept the format's bytes: a site, a record with a
    /// kernel and a copy, and an attribution, encoded by format 9's writer before the move.
    #[test]
    fn frames_encode_as_before_the_vocabulary_moved() {
        let mut r = Record::new(3, 77, 2, Interval::new(1_000, 9_000));
        let mut g = Gpu::new(Interval::new(2_000, 8_000), TimingSource::Cupti);
        g.device = Some(1);
        r.gpu = Some(g);
        let geometry = KernelGeometry {
            grid: [128, 2, 1],
            block: [256, 1, 1],
            registers_per_thread: 32,
            static_shared_bytes: 1024,
            dynamic_shared_bytes: 4096,
        };
        let kernel = ActivityKind::Kernel(geometry);
        r.activities.push(Activity {
            name: "saxpy".into(),
            interval: Interval::new(2_000, 5_000),
            kind: kernel,
            stream: Some(7),
            device: Some(1),
        });
        let copy = ActivityKind::Copy {
            bytes: 1 << 20,
            direction: Some(Direction::CpuToGpu),
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
        };
        r.activities.push(Activity {
            name: "memcpy HtoD".into(),
            interval: Interval::new(5_000, 8_000),
            kind: copy,
            stream: Some(7),
            device: Some(1),
        });
        r.span = Some(5);
        let mut s = Site::new(3, "saxpy", SiteKind::Span);
        s.backend = Backend::Cuda;
        s.direction = Some(Direction::GpuToGpu);
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, &Header::new("pin", 1)).unwrap();
        w.write(&Frame::Site(s)).unwrap();
        w.write(&Frame::Record(r)).unwrap();
        let how = Attribution { how: Some(Attributed::ThreadAndTime), spans: Some("a".into()) };
        w.write(&Frame::Attribution(how)).unwrap();
        #[rustfmt::skip]
        let before: &[u8] = &[
            71, 80, 85, 83, 80, 67, 65, 80, 9, 0, 11, 0, 0, 0, 33, 166, 101, 216, 0, 3, 112, 105, 110,
            1, 0, 0, 0, 0, 1, 23, 0, 0, 0, 70, 186, 89, 82, 1, 3, 5, 115, 97, 120, 112, 121, 5, 115,
            97, 120, 112, 121, 0, 0, 0, 2, 1, 1, 2, 0, 0, 83, 0, 0, 0, 37, 191, 38, 166, 4, 3, 77, 2,
            232, 7, 168, 70, 0, 0, 1, 208, 15, 192, 62, 240, 46, 1, 0, 0, 1, 1, 0, 2, 5, 115, 97, 120,
            112, 121, 208, 15, 136, 39, 0, 128, 1, 2, 1, 128, 2, 1, 1, 32, 128, 8, 128, 32, 1, 7, 1, 1,
            11, 109, 101, 109, 99, 112, 121, 32, 72, 116, 111, 68, 136, 39, 192, 62, 1, 128, 128, 64,
            1, 0, 1, 2, 1, 7, 1, 1, 0, 1, 5, 6, 0, 0, 0, 227, 186, 0, 110, 11, 1, 2, 1, 1, 97,
        ];
        assert_eq!(out, before);
        let back = Capture::from_reader(&out[..]).unwrap();
        assert_eq!(back.records[0].activities[0].kind, ActivityKind::Kernel(geometry));
        assert_eq!(back.records[0].attributed, Some(Attributed::ThreadAndTime));
    }
}
