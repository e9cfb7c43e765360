//! The crate's machinery only the instrumented build (`enabled`) has, behind one door in
//! `lib.rs`, which re-exports each module so that it is `crate::<name>` as before: the
//! collector (the one owner of the run's state) and its parts, the pipeline, the scope and the
//! backends' seam, the resolver thread. docs/architecture.md maps them.

pub(crate) mod aggregate;
pub(crate) mod backends;
pub(crate) mod call;
pub(crate) mod collector;
pub(crate) mod env;
pub(crate) mod future;
pub(crate) mod hooks;
pub(crate) mod parent;
pub(crate) mod pipeline;
#[cfg(any(feature = "_wgpu", feature = "cuda"))]
pub(crate) mod placement;
pub(crate) mod resolver;
pub(crate) mod ring;
pub(crate) mod running;
pub(crate) mod sampling;
pub(crate) mod scope;
pub(crate) mod settings;
pub(crate) mod signal;
pub(crate) mod sites;
pub(crate) mod spans;
pub(crate) mod submit_probe;
pub(crate) mod thread;
