//! What validation decides and expansion carries out: a typed plan of one instrumented function.
//!
//! Every value keeps the user's own syntax node (an expression, a parameter's name), so that the
//! code built from it reports a type error at the token the user wrote. Nothing here is a token
//! stream: `expand.rs` is the only module that writes code.

use syn::{Expr, Ident, Path};

/// Which attribute (or block macro) is being expanded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Transfer,
}

impl Kind {
    /// The block form's macro name.
    pub fn block_macro(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Transfer => "transfer",
        }
    }

    pub fn attr(self) -> &'static str {
        match self {
            Kind::Kernel => "#[gpu_kernel]",
            Kind::Transfer => "#[gpu_transfer]",
        }
    }

    /// The kind's name in the span target, `gpuspan::<kind>::<backend>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Transfer => "transfer",
        }
    }
}

/// Where a resource comes from: a parameter found by its type, or an argument's expression.
#[derive(Clone)]
pub enum Operand {
    Param(Ident),
    Arg(Expr),
}

/// Where the GPU time of a call comes from, decided at compile time from the signature.
pub enum Resource {
    /// No GPU resource: host timing, labelled `host`.
    None,
    /// A command recorder (`CommandEncoder`, `ComputePass`, `RenderPass`): queries inside it.
    WgpuRecorder { recorder: Operand, device: Option<Operand> },
    /// A queue: the call's submissions are bracketed by timestamp writes.
    WgpuQueue { queue: Operand, device: Option<Operand> },
    /// Only a device: the submissions on its registered queue are bracketed.
    WgpuDevice { device: Operand },
    /// Only a device, and the body hands its own recorder over with `gpuspan::wgpu::attach`:
    /// timed by that query rather than a queue bracket.
    WgpuAttachable { device: Operand },
    /// CUDA: CUPTI correlation, or events on the stream when CUPTI is missing.
    Cuda { stream: Option<Operand> },
}

impl Resource {
    pub fn backend(&self) -> Backend {
        match self {
            Resource::None => Backend::Host,
            Resource::WgpuRecorder { .. }
            | Resource::WgpuQueue { .. }
            | Resource::WgpuDevice { .. }
            | Resource::WgpuAttachable { .. } => Backend::Wgpu,
            Resource::Cuda { .. } => Backend::Cuda,
        }
    }
}

/// The backend a resource belongs to, as the runtime's `Backend` names it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Host,
    Wgpu,
    Cuda,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Host => "host",
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
        }
    }
}

/// A transfer's direction, as the runtime's `Direction` names it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    CpuToGpu,
    GpuToCpu,
    GpuToGpu,
}

impl Direction {
    /// From the argument's spelling, `cpu_to_gpu` and the like.
    pub fn from_name(name: &str) -> Option<Direction> {
        match name {
            "cpu_to_gpu" => Some(Direction::CpuToGpu),
            "gpu_to_cpu" => Some(Direction::GpuToCpu),
            "gpu_to_gpu" => Some(Direction::GpuToGpu),
            _ => None,
        }
    }

    /// The runtime's variant name.
    pub fn variant(self) -> &'static str {
        match self {
            Direction::CpuToGpu => "CpuToGpu",
            Direction::GpuToCpu => "GpuToCpu",
            Direction::GpuToGpu => "GpuToGpu",
        }
    }
}

/// The host span's level, as `tracing::Level` names it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    /// From a name in any case (`"info"`, `INFO`).
    pub fn from_name(name: &str) -> Option<Level> {
        match name.to_ascii_lowercase().as_str() {
            "trace" => Some(Level::Trace),
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" => Some(Level::Warn),
            "error" => Some(Level::Error),
            _ => None,
        }
    }

    /// `#[tracing::instrument]`'s numbering, 1 (trace) to 5 (error).
    pub fn from_number(n: u8) -> Option<Level> {
        [Level::Trace, Level::Debug, Level::Info, Level::Warn, Level::Error]
            .get(usize::from(n).checked_sub(1)?)
            .copied()
    }

    /// The `tracing::Level` constant.
    pub fn constant(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// How many bytes a transfer moves, as the macro knows it.
pub enum Bytes {
    /// `bytes = <expr>`: any integer type.
    Explicit(Expr),
    /// The one slice parameter.
    SliceParam(Ident),
}

/// One recorded field of the host span.
pub struct Field {
    pub key: FieldKey,
    pub value: FieldValue,
}

pub enum FieldKey {
    /// Dotted keys such as `model.layer`, as in `tracing`.
    Dotted(Vec<Ident>),
    /// `{CONST} = ..`: a constant expression names the field.
    Const(Expr),
}

/// How a field's value is recorded, as `tracing`'s `span!` writes it.
pub use crate::parse::Sigil;

pub enum FieldValue {
    /// `fields(x)` of a parameter `x`: recorded with `Debug`.
    Param(Ident),
    /// `fields(k = expr)`, `k = %expr`, `k = ?expr`, `%x`, `?x`.
    Expr(Expr, Sigil),
    /// `fields(k)` of a name that is no parameter: declared, recorded later with `Span::record`.
    Empty,
    /// A parameter recorded by default (as `tracing` does): as a value for the primitive types
    /// `tracing` records so, else with `Debug` when the type has it (else not at all).
    Auto { param: Ident, as_value: bool },
}

/// A span name or target: a literal, or a constant the user names.
#[derive(Clone)]
pub enum Text {
    Str(String),
    Const(Ident),
}

/// `err`/`ret`: the event emitted with the returned value, as `tracing` emits it.
pub struct Event {
    /// `Display` (`%`) rather than `Debug` (`?`).
    pub display: bool,
    pub level: Level,
}

/// Everything expansion needs to know about one instrumented function or block.
pub struct Plan {
    pub kind: Kind,
    pub name: Text,
    /// `target = ..`; the user's `module_path!()` by default, as in `tracing`.
    pub target: Option<Text>,
    pub parent: Option<Expr>,
    pub follows_from: Option<Expr>,
    pub err: Option<Event>,
    pub ret: Option<Event>,
    pub resource: Resource,
    /// The body's `begin_compute_pass`/`begin_render_pass` descriptors go through gpuspan, for
    /// devices timed by their passes (`passes.rs`): a wgpu resource, or a body that attaches.
    pub time_passes: bool,
    pub direction: Option<Direction>,
    pub bytes: Option<Bytes>,
    pub threshold_us: Option<u64>,
    pub trace_all: bool,
    pub track_memory: bool,
    pub level: Level,
    /// `crate = path`: where the runtime is, when it is not `::gpuspan`.
    pub krate: Option<Path>,
    pub fields: Vec<Field>,
    /// Parameters that the arguments use (`fields(x)`, or inside an argument's expression). With
    /// instrumentation off nothing else may use them, so the off arm borrows each one
    /// (`let _ = &x;`, no machine code) rather than let them warn as unused.
    pub used_params: Vec<Ident>,
    /// Expressions of the arguments that only the instrumented code evaluates (field values,
    /// a constant name): the off arm names them in dead code, so that
    /// an import used only there does not warn as unused when instrumentation is off.
    pub off_refs: Vec<Expr>,
}
