//! Reading frames, telling a file cut short (readable up to its last complete frame) from one
//! that is damaged or not a capture at all (an error, never a panic).

use crate::{
    Aggregate, Device, DeviceLink, DeviceSamples, End, Frame, Header, MemoryAccount, Record, Site, Span, Thread, MAGIC,
    MAX_FRAME, OLDEST_VERSION, VERSION,
};
use std::fmt;
use std::io::{self, Read};
use std::path::Path;

/// Why a capture cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("cannot read it: {0}")]
    Io(#[from] io::Error),
    #[error("it is empty: the process wrote nothing (it ended before gpuspan's first write)")]
    Empty,
    #[error("it is not a gpuspan capture (it does not start with the capture signature)")]
    NotACapture,
    #[error("it is a gpuspan capture of format version {found}, which this build does not read (it reads versions {OLDEST_VERSION} to {known}); use the gpuspan that wrote it")]
    UnknownVersion { found: u16, known: u16 },
    #[error("it ends before its header was complete: the process was stopped as it started")]
    NoHeader,
    #[error("it is damaged at byte {offset}: {why}")]
    Corrupt { offset: u64, why: String },
}

/// A capture that ended before its writer finished it: everything up to `offset` was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Bytes of complete frames, header included.
    pub offset: u64,
    /// Complete frames read, header included.
    pub frames: u64,
    pub records: u64,
    /// The last frame was cut (not merely the end marker missing).
    pub cut_frame: bool,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.cut_frame { "its last frame is cut short" } else { "it has no end marker" };
        write!(
            f,
            "the capture is incomplete ({how}: the process was killed or is still running); read {} records up to byte {}",
            self.records, self.offset
        )
    }
}

/// Frames one at a time, in file order; memory is one frame's.
#[derive(Debug)]
pub struct Reader<R: Read> {
    inp: R,
    header: Header,
    /// The file's format version.
    version: u16,
    offset: u64,
    frames: u64,
    records: u64,
    payload: Vec<u8>,
    ended: bool,
    truncation: Option<Truncation>,
}

/// Reads until `buf` is full or the input ends; how much was read.
fn fill(inp: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match inp.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What reading one frame found. Not boxed: it is returned once per frame and taken apart at
/// once, so its size costs a copy, not memory.
#[allow(clippy::large_enum_variant)]
enum Next {
    Frame(Frame),
    /// The input ended exactly at a frame boundary.
    Eof,
    /// The input ended inside a frame.
    Cut,
}

impl<R: Read> Reader<R> {
    /// Checks the signature and version and reads the header.
    pub fn new(mut inp: R) -> Result<Reader<R>, ReadError> {
        let mut start = [0u8; 10];
        let n = fill(&mut inp, &mut start)?;
        if n == 0 {
            return Err(ReadError::Empty);
        }
        if n < MAGIC.len() || start[..MAGIC.len()] != MAGIC {
            return Err(ReadError::NotACapture);
        }
        if n < start.len() {
            return Err(ReadError::NoHeader);
        }
        let version = u16::from_le_bytes([start[8], start[9]]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(ReadError::UnknownVersion { found: version, known: VERSION });
        }
        let mut r = Reader {
            inp,
            header: Header::new("", 0),
            version,
            offset: start.len() as u64,
            frames: 0,
            records: 0,
            payload: Vec::new(),
            ended: false,
            truncation: None,
        };
        match r.read_frame()? {
            Next::Frame(Frame::Header(h)) => r.header = h,
            Next::Frame(_) => {
                return Err(ReadError::Corrupt {
                    offset: start.len() as u64,
                    why: "the first frame is not the header".into(),
                })
            }
            Next::Eof | Next::Cut => return Err(ReadError::NoHeader),
        }
        Ok(r)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The file's format version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Set once [`Reader::next_frame`] has returned `None` on a capture that was not finished.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    fn corrupt(&self, why: impl Into<String>) -> ReadError {
        ReadError::Corrupt { offset: self.offset, why: why.into() }
    }

    fn read_frame(&mut self) -> Result<Next, ReadError> {
        let mut head = [0u8; 8];
        match fill(&mut self.inp, &mut head)? {
            0 => return Ok(Next::Eof),
            8 => {}
            _ => return Ok(Next::Cut),
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME {
            return Err(self.corrupt(format!("a frame claims {len} bytes, more than any frame can have")));
        }
        // Read what is there, up to the length claimed: memory follows the bytes the file
        // holds, not what a damaged or crafted length says.
        self.payload.clear();
        (&mut self.inp).take(u64::from(len)).read_to_end(&mut self.payload)?;
        if self.payload.len() < len as usize {
            return Ok(Next::Cut);
        }
        if crc32fast::hash(&self.payload) != crc {
            return Err(self.corrupt("a frame's checksum does not match its contents"));
        }
        // Version 2's frames are version 3's first variants, and version 3's records read as
        // version 4's (a bracket's `bool` is its enum's first two variants): one decoder.
        let decoded = if self.version == 1 {
            postcard::from_bytes::<crate::v1::Frame1>(&self.payload).map(Frame::from)
        } else {
            postcard::from_bytes::<Frame>(&self.payload)
        };
        let frame = decoded.map_err(|e| self.corrupt(format!("a frame does not decode ({e})")))?;
        self.offset += 8 + u64::from(len);
        self.frames += 1;
        Ok(Next::Frame(frame))
    }

    /// The next frame after the header; `None` at the end (see [`Reader::truncation`]).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ReadError> {
        if self.truncation.is_some() {
            return Ok(None);
        }
        let cut = match self.read_frame()? {
            Next::Frame(Frame::Header(_)) => return Err(self.corrupt("a second header")),
            Next::Frame(f) if self.ended => {
                let _ = f;
                return Err(self.corrupt("frames after the end marker"));
            }
            Next::Frame(f) => {
                match &f {
                    Frame::Record(_) => self.records += 1,
                    Frame::End(_) => self.ended = true,
                    _ => {}
                }
                return Ok(Some(f));
            }
            Next::Eof if self.ended => return Ok(None),
            Next::Eof => false,
            Next::Cut => true,
        };
        self.truncation =
            Some(Truncation { offset: self.offset, frames: self.frames, records: self.records, cut_frame: cut });
        Ok(None)
    }
}

/// A whole capture in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub header: Header,
    pub sites: Vec<Site>,
    pub threads: Vec<Thread>,
    pub devices: Vec<Device>,
    pub records: Vec<Record>,
    /// The application spans that enclose records.
    pub spans: Vec<Span>,
    /// Device monitor readings, in the order written (each device's in time order).
    pub samples: Vec<DeviceSamples>,
    /// The devices' link peaks, where a device monitor knew them (version 3).
    pub links: Vec<DeviceLink>,
    pub aggregates: Vec<Aggregate>,
    /// Sites still running at shutdown, none of whose calls had finished (version 5).
    pub running: Vec<u32>,
    /// The memory accounts of instrumented wgpu devices, one per device (version 9).
    pub memory: Vec<MemoryAccount>,
    /// `None` when the writer did not finish (then `truncation` says how far it got).
    pub end: Option<End>,
    pub truncation: Option<Truncation>,
}

impl Capture {
    /// A capture with this header and nothing else (the frames are pushed).
    pub fn new(header: Header) -> Capture {
        Capture {
            header,
            sites: Vec::new(),
            threads: Vec::new(),
            devices: Vec::new(),
            records: Vec::new(),
            spans: Vec::new(),
            samples: Vec::new(),
            links: Vec::new(),
            aggregates: Vec::new(),
            running: Vec::new(),
            memory: Vec::new(),
            end: None,
            truncation: None,
        }
    }

    /// Reads every frame.
    pub fn from_reader(inp: impl Read) -> Result<Capture, ReadError> {
        let mut r = Reader::new(inp)?;
        let mut c = Capture::new(r.header().clone());
        while let Some(f) = r.next_frame()? {
            c.push(f);
        }
        c.truncation = r.truncation().cloned();
        Ok(c)
    }

    /// Reads the file at `path` (buffered).
    pub fn open(path: impl AsRef<Path>) -> Result<Capture, ReadError> {
        let f = std::fs::File::open(path)?;
        Capture::from_reader(io::BufReader::with_capacity(1 << 20, f))
    }

    /// Adds one frame read from a file (a header is ignored: a capture has one).
    pub fn push(&mut self, frame: Frame) {
        match frame {
            Frame::Header(_) => {}
            Frame::Site(s) => self.sites.push(s),
            Frame::Thread(t) => self.threads.push(t),
            Frame::Device(d) => self.devices.push(d),
            Frame::Record(r) => self.records.push(r),
            Frame::Aggregate(a) => self.aggregates.push(a),
            Frame::End(e) => self.end = Some(e),
            Frame::Span(s) => self.spans.push(s),
            Frame::Samples(s) => self.samples.push(s),
            Frame::Link(l) => self.links.push(l),
            Frame::Running(r) => self.running.extend(r.sites),
            // The last account written for a device is its account.
            Frame::Memory(m) => match self.memory.iter_mut().find(|x| x.device == m.device) {
                Some(old) => *old = m,
                None => self.memory.push(m),
            },
            Frame::Attribution(a) => {
                if let Some(r) = self.records.last_mut() {
                    r.attributed = a.how;
                    r.spans_at_launch = a.spans;
                }
            }
        }
    }

    pub fn site(&self, id: u32) -> Option<&Site> {
        self.sites.iter().find(|s| s.id == id)
    }

    pub fn thread_name(&self, index: u32) -> Option<&str> {
        self.threads.iter().find(|t| t.index == index).map(|t| t.name.as_str())
    }

    pub fn device(&self, key: u32) -> Option<&Device> {
        self.devices.iter().find(|d| d.key == key)
    }

    /// The device's link peaks, if the capture holds them (the last written wins).
    pub fn link(&self, key: u32) -> Option<&crate::LinkPeak> {
        self.links.iter().rev().find(|l| l.device == key).map(|l| &l.peak)
    }

    /// Writes this capture as a file (finished or not, as it was read).
    pub fn write_to(&self, out: impl io::Write) -> io::Result<()> {
        let mut w = crate::Writer::new(out, &self.header)?;
        for s in &self.sites {
            w.write(&Frame::Site(s.clone()))?;
        }
        for t in &self.threads {
            w.write(&Frame::Thread(t.clone()))?;
        }
        for d in &self.devices {
            w.write(&Frame::Device(d.clone()))?;
        }
        for l in &self.links {
            w.write(&Frame::Link(*l))?;
        }
        for s in &self.spans {
            w.write(&Frame::Span(s.clone()))?;
        }
        for r in &self.records {
            w.write(&Frame::Record(r.clone()))?;
            if r.attributed.is_some() || r.spans_at_launch.is_some() {
                let (how, spans) = (r.attributed, r.spans_at_launch.clone());
                w.write(&Frame::Attribution(crate::Attribution { how, spans }))?;
            }
        }
        for s in &self.samples {
            w.write(&Frame::Samples(s.clone()))?;
        }
        for a in &self.aggregates {
            w.write(&Frame::Aggregate(a.clone()))?;
        }
        if !self.running.is_empty() {
            w.write(&Frame::Running(crate::Running { sites: self.running.clone() }))?;
        }
        for m in &self.memory {
            w.write(&Frame::Memory(m.clone()))?;
        }
        if let Some(e) = &self.end {
            w.write(&Frame::End(e.clone()))?;
        }
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    fn sample() -> Vec<u8> {
        let mut c = Capture::new(Header::new("t", 1));
        c.sites = vec![Site::new(0, "k", SiteKind::Kernel)];
        c.threads = vec![Thread { index: 1, name: "main".into() }];
        c.devices = vec![Device { key: 0, id: 0, name: "llvmpipe".into() }];
        c.spans = vec![Span { id: 1, parent: None, name: "request".into() }];
        c.samples = vec![DeviceSamples {
            device: 0,
            samples: vec![DeviceSample { time_ns: 3, power_w: Some(87.5), ..Default::default() }],
        }];
        c.links = vec![DeviceLink {
            device: 0,
            peak: LinkPeak {
                pcie_generation: Some(5),
                pcie_width: Some(16),
                pcie_bytes_per_s: Some(63.015e9),
                nvlink_bytes_per_s: None,
            },
        }];
        c.aggregates = vec![Aggregate { site: 0, calls: 5, ..Default::default() }];
        c.memory = vec![memory_account()];
        c.end = Some(End { end_ns: 9, records: 5, losses: vec![], notes: vec!["n".into()] });
        for i in 0..5 {
            let mut r = Record::new(0, i, 1, Interval::new(i * 10, i * 10 + 5));
            r.gpu = Some(Gpu::new(Interval::new(i * 10 + 1, i * 10 + 4), TimingSource::GpuTimestamp));
            r.span = (i % 2 == 0).then_some(1);
            // Version 8: how each was attributed, in the frame after it (none for the first).
            use Attributed::*;
            r.attributed = [None, Some(Thread), Some(Time), Some(ThreadAndTime), Some(Ambiguous)][i as usize];
            r.spans_at_launch = match i {
                0 => Some("forward_pass".into()), // unowned, launched while it was entered
                4 => Some("forward_pass ×2, train_step".into()),
                _ => None,
            };
            r.activities.push(Activity {
                name: "k".into(),
                interval: Interval::new(i * 10 + 1, i * 10 + 4),
                kind: ActivityKind::Copy {
                    bytes: 7,
                    direction: Some(Direction::CpuToGpu),
                    src: MemoryKind::Pageable,
                    dst: MemoryKind::Device,
                },
                stream: Some(3),
                device: Some(0),
            });
            c.records.push(r);
        }
        let mut out = Vec::new();
        c.write_to(&mut out).unwrap();
        let back = Capture::from_reader(&out[..]).unwrap();
        assert_eq!(back, c, "a capture reads back as written");
        out
    }

    /// An instrumented wgpu device's account (version 9): two objects, one dropped.
    fn memory_account() -> MemoryAccount {
        let held = |name: &str, bytes| Held { name: name.into(), bytes };
        MemoryAccount {
            device: 0,
            peak_bytes: 12,
            peak_ns: 5,
            peak_by_label: vec![held("scratch", 8), held("weights", 4)],
            peak_by_owner: vec![held("step", 8), held("load", 4)],
            live_bytes: 4,
            live_objects: 1,
            live_by_label: vec![held("weights", 4)],
            live_by_owner: vec![held("load", 4)],
            not_sized: 1,
            samples: vec![MemorySample { time_ns: 3, bytes: 4 }, MemorySample { time_ns: 5, bytes: 12 }],
            samples_dropped: 2,
        }
    }

    #[test]
    fn every_prefix_reads_or_fails_with_a_message_never_a_panic() {
        let full = sample();
        let whole = Capture::from_reader(&full[..]).unwrap();
        assert!(whole.truncation.is_none());
        let mut last_records = 0;
        for cut in 0..full.len() {
            match Capture::from_reader(&full[..cut]) {
                Ok(c) => {
                    let t = c.truncation.expect("a prefix is incomplete");
                    assert_eq!(t.records as usize, c.records.len());
                    assert!(c.records.len() >= last_records, "more bytes never read fewer records");
                    last_records = c.records.len();
                    let n = c.records.len();
                    // The last record's attribution frame may be the one cut off.
                    let mut last = c.records.last().cloned();
                    if let (Some(l), Some(w)) = (last.as_mut(), whole.records.get(n.wrapping_sub(1))) {
                        l.attributed = l.attributed.or(w.attributed);
                        l.spans_at_launch = l.spans_at_launch.take().or_else(|| w.spans_at_launch.clone());
                    }
                    assert_eq!(c.records[..n.saturating_sub(1)], whole.records[..n.saturating_sub(1)]);
                    assert_eq!(last.as_ref(), n.checked_sub(1).map(|i| &whole.records[i]));
                }
                Err(ReadError::Empty) => assert_eq!(cut, 0),
                Err(ReadError::NotACapture) => assert!(cut < 8),
                Err(ReadError::NoHeader) => assert!(cut < 60),
                Err(e) => panic!("a prefix of {cut} bytes: {e}"),
            }
        }
        assert_eq!(last_records, 5);
    }

    #[test]
    fn a_flipped_byte_is_corruption_or_still_a_valid_read() {
        let full = sample();
        for i in 10..full.len() {
            let mut bad = full.clone();
            bad[i] ^= 0x40;
            // A length field may now point past the end (read as cut short) or the CRC fails.
            match Capture::from_reader(&bad[..]) {
                Err(ReadError::Corrupt { .. }) => {}
                // The header's own length field, made to point past the end.
                Err(ReadError::NoHeader) => assert!((10..14).contains(&i), "byte {i}"),
                Ok(c) => assert!(c.truncation.is_some(), "byte {i}: a damaged length reads as cut short"),
                Err(e) => panic!("byte {i}: {e}"),
            }
        }
    }

    #[test]
    fn foreign_files_and_other_versions_are_refused_clearly() {
        assert!(matches!(Capture::from_reader(&b"{\"traceEvents\":[]}"[..]), Err(ReadError::NotACapture)));
        let mut v10 = sample();
        v10[8] = 10;
        let e = Capture::from_reader(&v10[..]).unwrap_err();
        assert!(matches!(e, ReadError::UnknownVersion { found: 10, known: VERSION }));
        assert!(e.to_string().contains("version 10"), "{e}");
        let mut trailing = sample();
        trailing.extend_from_slice(&sample()[10..]);
        assert!(matches!(Capture::from_reader(&trailing[..]), Err(ReadError::Corrupt { .. })));
    }

    #[test]
    fn a_version_1_capture_still_reads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/tests/fixtures/h100_cuda_saxpy.gpuspan");
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 1, "the fixture was written in version 1");
        let r = Reader::new(&bytes[..]).unwrap();
        assert_eq!(r.version(), 1);
        let c = Capture::from_reader(&bytes[..]).unwrap();
        assert!(c.truncation.is_none() && c.end.is_some());
        assert_eq!(c.records.len() as u64, c.end.as_ref().unwrap().records);
        assert!(c.records.iter().all(|r| r.span.is_none()) && c.spans.is_empty() && c.samples.is_empty());
        assert!(c.records.iter().any(|r| !r.activities.is_empty()), "activities decode in the old layout");
        assert!(c.links.is_empty() && c.link(0).is_none(), "version 1 holds no link peaks");
    }

    #[test]
    fn a_version_2_capture_still_reads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/tests/fixtures/h100_multi_gpu_nvml.gpuspan");
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 2, "the fixture was written in version 2");
        assert_eq!(Reader::new(&bytes[..]).unwrap().version(), 2);
        let c = Capture::from_reader(&bytes[..]).unwrap();
        assert!(c.truncation.is_none() && c.end.is_some());
        assert_eq!(c.records.len() as u64, c.end.as_ref().unwrap().records);
        assert!(!c.samples.is_empty(), "its monitor readings decode");
        assert!(c.links.is_empty() && c.link(0).is_none(), "version 2 holds no link peaks");
    }

    /// Version 3 wrote `bracketed: bool` where version 4 writes a [`Bracket`]: the same bytes
    /// for "no bracket" and "a bracket", so a version-3 record decodes unchanged.
    #[test]
    fn a_version_3_bracket_flag_reads_as_a_bracket_of_unstated_end() {
        #[derive(serde::Serialize)]
        struct GpuV3 {
            interval: Interval,
            busy_ns: u64,
            source: TimingSource,
            clock_error_ns: u64,
            bracketed: bool,
            device: Option<u32>,
        }
        for (bracketed, expected) in [(false, Bracket::None), (true, Bracket::Unstated)] {
            let old = GpuV3 {
                interval: Interval::new(10, 90),
                busy_ns: 80,
                source: TimingSource::GpuTimestamp,
                clock_error_ns: 7,
                bracketed,
                device: Some(2),
            };
            let gpu: Gpu = postcard::from_bytes(&postcard::to_allocvec(&old).unwrap()).unwrap();
            assert_eq!((gpu.bracket, gpu.busy_ns, gpu.clock_error_ns, gpu.device), (expected, 80, 7, Some(2)));
        }
        for b in [Bracket::LastSubmit, Bracket::Exit] {
            let gpu = Gpu { bracket: b, ..Gpu::new(Interval::new(1, 2), TimingSource::GpuTimestamp) };
            assert_eq!(postcard::from_bytes::<Gpu>(&postcard::to_allocvec(&gpu).unwrap()).unwrap(), gpu);
        }
    }

    /// Format 6 added the `span` site kind as the enum's last variant: a version-5 file (same
    /// bytes, older version) still reads, and a span site reads back as one.
    #[test]
    fn a_span_site_reads_back_and_a_version_5_capture_still_reads() {
        let mut c = Capture::from_reader(&sample()[..]).unwrap();
        c.sites.push(Site::new(1, "frame", SiteKind::Span));
        let mut bytes = Vec::new();
        c.write_to(&mut bytes).unwrap();
        let back = Capture::from_reader(&bytes[..]).unwrap();
        assert_eq!(back.site(1).map(|s| s.kind), Some(SiteKind::Span));
        assert_eq!(SiteKind::Span.as_str(), "span");
        let mut v5 = sample();
        v5[8..10].copy_from_slice(&5u16.to_le_bytes());
        let old = Capture::from_reader(&v5[..]).unwrap();
        assert_eq!(old.site(0).map(|s| s.kind), Some(SiteKind::Kernel));
        assert_eq!(old.records.len(), 5);
    }

    /// Format 7 added the `gpu_passes` timing source as the enum's last variant: it reads back,
    /// and a version-6 file (same bytes, older version) still reads.
    #[test]
    fn a_pass_timed_record_reads_back_and_a_version_6_capture_still_reads() {
        let mut c = Capture::from_reader(&sample()[..]).unwrap();
        c.records[0].gpu = Some(Gpu::new(Interval::new(1, 2), TimingSource::GpuPasses));
        let mut bytes = Vec::new();
        c.write_to(&mut bytes).unwrap();
        let back = Capture::from_reader(&bytes[..]).unwrap();
        assert_eq!(back.records[0].gpu.as_ref().map(|g| g.source), Some(TimingSource::GpuPasses));
        assert_eq!(TimingSource::GpuPasses.as_str(), "gpu_passes");
        let mut v6 = sample();
        v6[8..10].copy_from_slice(&6u16.to_le_bytes());
        let old = Capture::from_reader(&v6[..]).unwrap();
        assert_eq!(old.records.len(), 5);
    }

    /// Format 9 added the `Memory` frame as the enum's last variant: it reads back, the last
    /// account of a device wins, and a version-8 file (no such frame) still reads.
    #[test]
    fn a_memory_account_reads_back_and_a_version_8_capture_still_reads() {
        let mut c = Capture::from_reader(&sample()[..]).unwrap();
        assert_eq!(c.memory, [memory_account()]);
        let later = MemoryAccount { live_bytes: 0, live_objects: 0, ..memory_account() };
        c.push(Frame::Memory(later.clone()));
        c.push(Frame::Memory(MemoryAccount { device: 1, ..later.clone() }));
        assert_eq!(c.memory.len(), 2, "one account per device");
        assert_eq!(c.memory[0], later, "the last written wins");
        assert_eq!(MemoryAccount::track_name(3), "GPU memory, logical bytes (wgpu device 3)");
        c.memory.clear();
        let mut v8 = Vec::new();
        c.write_to(&mut v8).unwrap();
        v8[8..10].copy_from_slice(&8u16.to_le_bytes());
        let old = Capture::from_reader(&v8[..]).unwrap();
        assert!(old.memory.is_empty() && old.end.is_some());
        assert_eq!(old.records.len(), 5);
    }

    #[test]
    fn link_peaks_read_back_and_the_last_written_wins() {
        let bytes = sample();
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), VERSION);
        let mut c = Capture::from_reader(&bytes[..]).unwrap();
        assert_eq!(c.link(0).and_then(|l| l.pcie_bytes_per_s), Some(63.015e9));
        assert_eq!(c.link(1), None);
        c.push(Frame::Link(DeviceLink { device: 0, peak: LinkPeak::default() }));
        assert_eq!(c.link(0), Some(&LinkPeak::default()));
    }
}
