//! The sinks only the instrumented build has: the capture file, the timeline file (Chrome JSON
//! or Perfetto) and the live feed, with the file handling they share.

mod capture_encoder;
pub(crate) mod capture_file;
pub(crate) mod file;
// A Unix socket: elsewhere `Config::live` says once that there is no live feed.
#[cfg(unix)]
pub(crate) mod live;
mod perfetto;
pub(crate) mod timeline;
