//! `gpuspan timeline` and `gpuspan merge`: the timeline of one or several captures, as Chrome
//! Trace Event JSON or Perfetto's native protobuf trace. The tracks, slices, flows and counters,
//! and both formats' writers, are `gpuspan_capture::perfetto`'s (its feature `perfetto`), which
//! the runtime's own timeline shares; here is the command's choice of format.

pub use gpuspan_capture::perfetto::{emit, native, Flow, Sink, Slice, GPU_TID};
use gpuspan_capture::Capture;
use std::io::{self, Write};

/// The output formats of a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Chrome Trace Event JSON.
    Json,
    /// Perfetto's native protobuf trace (`TracePacket`s; open it in ui.perfetto.dev or its
    /// trace processor).
    Perfetto,
}

impl From<Format> for gpuspan_capture::perfetto::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Json => gpuspan_capture::perfetto::Format::Json,
            Format::Perfetto => gpuspan_capture::perfetto::Format::Perfetto,
        }
    }
}

/// Writes the captures as one Chrome JSON trace, capture `i` as process `i + 1`, labelled
/// `labels[i]`.
pub fn write(captures: &[(&str, &Capture)], out: impl Write) -> io::Result<()> {
    gpuspan_capture::perfetto::write(captures, out)
}

/// Writes the captures as one trace in `format`, capture `i` as process `i + 1`, labelled
/// `labels[i]`.
pub fn write_as(format: Format, captures: &[(&str, &Capture)], out: impl Write) -> io::Result<()> {
    gpuspan_capture::perfetto::write_as(format.into(), captures, out)
}
