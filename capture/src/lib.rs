//! The gpuspan capture file, defined once for the runtime that writes it and the `gpuspan` CLI
//! that reads it; and, in [`live`], the messages of the live feed that `gpuspan top` reads.
//!
//! # Layout
//!
//! ```text
//! "GPUSPCAP"  8 bytes, the magic
//! version     u16, little-endian (this crate writes and reads VERSION)
//! frame*      u32 LE payload length, u32 LE CRC-32 of the payload, payload
//! ```
//!
//! Each payload is one [`Frame`] in postcard's wire format. The first frame is the [`Header`];
//! then [`Site`], [`Thread`] and [`Device`] frames appear before the first [`Record`] that names
//! them; at a clean end come one [`Aggregate`] per site (every call, sampled or not) and the
//! [`End`] frame (losses, notes). [`Span`] frames (the application spans enclosing records)
//! come before the first record made in them; [`DeviceSamples`] frames (a monitor's readings)
//! as the writer gets them; a [`DeviceLink`] frame (the device's link peaks) after its device's
//! frame, usually before the first record naming that device, but later where the monitor
//! learnt of the device late; a [`MemoryAccount`] frame (an instrumented wgpu device's memory)
//! per such device at a clean end, before the [`End`]. The writer appends frames as records arrive, so a process
//! killed mid-run leaves a file whose complete frames are all readable: a missing `End` or a
//! frame cut short reads as [`Truncation`], never as an error. A frame whose CRC does not match,
//! a payload that does not decode, or a length beyond [`MAX_FRAME`] is corruption.
//!
//! Versioning: postcard encodes fields by position, so any change to these types is a new
//! [`VERSION`]; a reader reads every version up to its own (version 1 lacks spans and samples,
//! version 2 link frames, version 3 where a bracket ended, version 4 the sites still running at
//! shutdown, version 5 the `span` site kind: a variant added last, so older files decode
//! unchanged; version 7 the `gpu_passes` timing source, added last the same way; version 8 the
//! `Attribution` frame after a record: how its work was attributed and the spans entered at its
//! launch, a variant added last; version 9 the `Memory` frame: an instrumented wgpu device's
//! memory account, written at the end, a variant added last) and refuses later ones with one
//! clear error.
//!
//! ```
//! use gpuspan_capture::*;
//! let mut file = Vec::new();
//! let mut w = Writer::new(&mut file, &Header::new("demo", 42)).unwrap();
//! w.write(&Frame::Site(Site::new(0, "saxpy", SiteKind::Kernel))).unwrap();
//! let mut r = Record::new(0, 1, 1, Interval::new(100, 300));
//! r.gpu = Some(Gpu::new(Interval::new(150, 250), TimingSource::GpuTimestamp));
//! w.write(&Frame::Record(r)).unwrap();
//! w.write(&Frame::End(End::default())).unwrap();
//! let c = Capture::from_reader(&file[..]).unwrap();
//! assert_eq!(c.records.len(), 1);
//! assert_eq!(c.records[0].duration_ns(), 100);
//! assert!(c.truncation.is_none());
//! ```

//! Without the default feature `file`, only the record's vocabulary ([`TimingSource`],
//! [`SiteKind`], [`Interval`]...) is compiled, with no dependency: what the runtime's
//! uninstrumented build names.

#[cfg(feature = "file")]
pub mod analysis;
pub mod lanes;
#[cfg(feature = "file")]
pub mod live;
#[cfg(feature = "perfetto")]
pub mod perfetto;
#[cfg(feature = "file")]
mod read;
#[cfg(feature = "file")]
mod types;
#[cfg(feature = "file")]
mod v1;
mod vocab;
#[cfg(feature = "file")]
mod write;

#[cfg(feature = "file")]
pub use read::{Capture, ReadError, Reader, Truncation};
#[cfg(feature = "file")]
pub use types::*;
pub use vocab::*;
#[cfg(feature = "file")]
pub use write::Writer;

/// The first eight bytes of every capture.
pub const MAGIC: [u8; 8] = *b"GPUSPCAP";

/// The format version this crate writes and reads.
pub const VERSION: u16 = 9;

/// The oldest format version this crate reads.
pub const OLDEST_VERSION: u16 = 1;

/// The largest payload a frame may declare. Larger than any real frame (a record with
/// thousands of activities is a few hundred KiB); a length above it is read as corruption rather
/// than as a file cut short, so a flipped bit in a length field is never mistaken for truncation.
pub const MAX_FRAME: u32 = 64 << 20;
