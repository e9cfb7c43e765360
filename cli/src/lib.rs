//! The `gpuspan` command's library: everything the binary does, callable from a test.
//!
//! ```no_run
//! // A GPU performance gate in `cargo test`: fail when a site got significantly slower.
//! let base = gpuspan_cli::load::open("base.gpuspan".as_ref(), false).unwrap();
//! let new = gpuspan_cli::load::open("new.gpuspan".as_ref(), false).unwrap();
//! let diff = gpuspan_cli::diff::compare(&base, &new, &gpuspan_cli::diff::Settings::default());
//! assert!(diff.slower_than(5.0).is_empty(), "{}", diff.to_text());
//! ```
//!
//! Reading is the `gpuspan-capture` crate's; this crate turns a [`Capture`](gpuspan_capture::Capture)
//! into answers: a report ([`report`]), a flamegraph ([`flame`]), a diff ([`diff`]) and a
//! Perfetto timeline of one or several captures ([`perfetto`]), and the ranks of one job side by
//! side ([`ranks`]); [`export`] writes a capture as SQL tables. [`live`] and [`top`] attach to
//! running programs instead: `gpuspan top`.

pub mod analysis;
pub mod diff;
pub mod export;
pub mod flame;
pub mod idle;
pub mod link;
#[cfg(unix)]
pub mod live;
pub mod load;
pub mod perfetto;
pub mod picture;
pub mod ranks;
pub mod report;
pub mod requests;
pub mod span_time;
pub mod stats;
pub mod steps;
pub mod table;
#[cfg(unix)]
pub mod top;
