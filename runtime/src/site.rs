//! Static description of each annotated function, registered with `inventory` so the runtime
//! can list every site, including those never reached.

use std::sync::OnceLock;

// Everything only the instrumented build uses: what a scope marks on its site, and the
// registries of sites.
#[cfg(feature = "enabled")]
pub(crate) mod imp;
#[cfg(feature = "enabled")]
pub use imp::SiteRef;

pub use gpuspan_capture::{Backend, Direction, SiteKind};

/// The description of a site the runtime writes itself (its own helpers, CUPTI's unattributed
/// work, unit tests): `name` as name and function, where the macro is invoked, no direction,
/// threshold or options; other fields by struct update (`SiteDesc { trace_all: true,
/// ..site_desc!(..) }`).
#[allow(unused_macros)]
macro_rules! site_desc {
    ($name:expr, $kind:expr, $backend:expr) => {
        $crate::site::SiteDesc {
            name: $name,
            function: $name,
            kind: $kind,
            backend: $backend,
            module_path: module_path!(),
            file: file!(),
            line: line!(),
            direction: None,
            threshold_us: None,
            trace_all: false,
            track_memory: false,
        }
    };
}
#[allow(unused_imports)]
pub(crate) use site_desc;

/// Everything the macro knows about a site at compile time.
#[derive(Debug, Clone, Copy)]
pub struct SiteDesc {
    /// Display name: the `name = "..."` argument or the function's name.
    pub name: &'static str,
    /// The function's own name.
    pub function: &'static str,
    /// Kernel or transfer.
    pub kind: SiteKind,
    /// The backend the signature names.
    pub backend: Backend,
    /// The module it is defined in (`module_path!()`).
    pub module_path: &'static str,
    /// The source file (`file!()`).
    pub file: &'static str,
    /// The line of the function (`line!()`).
    pub line: u32,
    /// A transfer's direction, when the attribute or the backend says it.
    pub direction: Option<Direction>,
    /// Per-site sampling threshold, overriding the global one.
    pub threshold_us: Option<u64>,
    /// Export every call of this site, whatever its duration.
    pub trace_all: bool,
    /// Record device memory used and the process's RSS before and after each call.
    pub track_memory: bool,
}

/// One annotated function: its description and the aggregates of all its calls.
#[derive(Debug)]
pub struct Site {
    /// What the attribute said about it.
    pub desc: SiteDesc,
    /// Its calls' aggregates and what a scope marks on it (`site/imp.rs`).
    #[cfg(feature = "enabled")]
    pub(crate) state: imp::SiteState,
    /// Why calls of a GPU site were timed on the host, when they were (first reason wins).
    host_reason: OnceLock<&'static str>,
    /// Made at run time for a selected application span (`span_scopes.rs`), not by an attribute.
    span: bool,
}

impl Site {
    /// A site with no calls yet (the attributes make one `static` per function).
    pub const fn new(desc: SiteDesc) -> Self {
        Site {
            #[cfg(feature = "enabled")]
            state: imp::SiteState::new(&desc),
            desc,
            host_reason: OnceLock::new(),
            span: false,
        }
    }

    /// A selected `tracing` span's site (`gpuspan::layer()`), not an annotated function's: its
    /// records say `gpuspan.kind = span`.
    pub fn is_span(&self) -> bool {
        self.span
    }

    /// `kernel` or `transfer`, or `span` for a selected span: the kind every output shows,
    /// computed here once (`gpuspan report` reads `span` from the capture's site).
    pub fn kind_label(&self) -> &'static str {
        if self.span {
            "span"
        } else {
            self.desc.kind.as_str()
        }
    }

    /// The annotated function, `module::function` (`code.function.name`); `None` for a
    /// selected span, which is no function (its name and target say where it was made).
    pub fn code_function(&self) -> Option<String> {
        (!self.span).then(|| self.qualified_function())
    }

    /// Why this site's calls were timed on the host: a fallback seen at run time, or a
    /// signature with no GPU resource in it.
    pub fn host_reason(&self) -> Option<&'static str> {
        self.host_reason.get().copied().or_else(|| {
            (self.desc.backend == Backend::Host && !self.span).then_some("no GPU resource in its signature")
        })
    }

    /// `module::function`, the name OpenTelemetry's `code.function.name` wants.
    pub fn qualified_function(&self) -> String {
        format!("{}::{}", self.desc.module_path, self.desc.function)
    }
}
