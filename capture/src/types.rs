//! What a capture holds. Times are Unix-epoch nanoseconds on the writing process's host clock
//! (gpuspan's monotonic clock anchored on the wall clock at start), so captures of several
//! processes on one machine, or of machines with synchronised clocks, share one time axis.

use crate::{ActivityKind, Attributed, Backend, Direction, Interval, SiteKind, TimingSource};
use serde::{Deserialize, Serialize};

/// One unit of a capture file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Frame {
    Header(Header),
    Site(Site),
    Thread(Thread),
    Device(Device),
    Record(Record),
    Aggregate(Aggregate),
    End(End),
    /// An application `tracing` span that encloses recorded calls (version 2).
    Span(Span),
    /// A device monitor's readings (version 2).
    Samples(DeviceSamples),
    /// A device's links at their peak, as a device monitor knows them (version 3).
    Link(DeviceLink),
    /// The sites still running at shutdown (version 5), written before [`End`].
    Running(Running),
    /// How the GPU work of the [`Record`] just before it was found to be its own, or which
    /// spans were entered when work nobody owned was launched (version 8): written only for
    /// records where that was a question (CUPTI's activities, an instrumented device's passes).
    Attribution(Attribution),
    /// An instrumented wgpu device's memory account (version 9), written at the end: the
    /// last one written for a device is its account.
    Memory(MemoryAccount),
}

/// The frame after a record that says how it was attributed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    /// `None`: nobody's (the `unattributed` site).
    pub how: Option<Attributed>,
    /// The spans entered at its launch: the unrelated selected ones of a `during several spans`
    /// record (`gpuspan.during_spans`), or the unselected one entered when unowned work was
    /// launched (`gpuspan.open_span`).
    pub spans: Option<String>,
}

/// Sites a call of which was still running when the writer finished and none of which had
/// finished (an annotated `main` whose `init()` guard drops inside it): called, not "never
/// reached", and with no time counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub sites: Vec<u32>,
}

/// Who wrote the capture and how it sampled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The program's file name, without directory.
    pub program: String,
    pub pid: u32,
    /// The host's name, where the OS tells it.
    pub hostname: Option<String>,
    /// The version of the gpuspan runtime that wrote it.
    pub writer: String,
    /// When the capture started.
    pub start_ns: u64,
    /// Calls whose measured duration was below this (µs) were aggregated but not recorded,
    /// unless `trace_all` (globally or per site) said otherwise.
    pub threshold_us: u64,
    pub trace_all: bool,
}

impl Header {
    /// A header with no host name, start at 0, threshold 0 and `trace_all` on: what a test
    /// or a synthetic capture wants.
    pub fn new(program: &str, pid: u32) -> Header {
        Header {
            program: program.to_owned(),
            pid,
            hostname: None,
            writer: String::new(),
            start_ns: 0,
            threshold_us: 0,
            trace_all: true,
        }
    }
}

/// One annotated function. `id` is what records name it by, local to the capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub id: u32,
    pub name: String,
    pub function: String,
    pub module_path: String,
    pub file: String,
    pub line: u32,
    pub kind: SiteKind,
    pub backend: Backend,
    pub direction: Option<Direction>,
    pub threshold_us: Option<u64>,
    pub trace_all: bool,
}

impl Site {
    /// A host-backend site with its name as function name and no source location.
    pub fn new(id: u32, name: &str, kind: SiteKind) -> Site {
        Site {
            id,
            name: name.to_owned(),
            function: name.to_owned(),
            module_path: String::new(),
            file: String::new(),
            line: 0,
            kind,
            backend: Backend::Host,
            direction: None,
            threshold_us: None,
            trace_all: false,
        }
    }
}

/// A thread that made annotated calls: gpuspan's small index and the thread's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub index: u32,
    pub name: String,
}

/// A device records ran on. `key` is what records name it by (two backends may both call
/// their first device 0); `id` is the backend's own number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub key: u32,
    pub id: u32,
    pub name: String,
}

/// GPU-side timing of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// First GPU work's start to last one's end, on the host clock.
    pub interval: Interval,
    /// Time the GPU spent on the call's work (≤ the interval's length).
    pub busy_ns: u64,
    pub source: TimingSource,
    /// Bound on the error of mapping the GPU clock onto the host clock.
    pub clock_error_ns: u64,
    /// Whether timestamps around the call's submissions measured it (an upper bound), and
    /// where that bracket ended.
    pub bracket: Bracket,
    /// A [`Device::key`].
    pub device: Option<u32>,
}

impl Gpu {
    /// Busy for the whole interval, no clock error, no bracket, no device.
    pub fn new(interval: Interval, source: TimingSource) -> Gpu {
        Gpu {
            interval,
            busy_ns: interval.duration_ns(),
            source,
            clock_error_ns: 0,
            bracket: Bracket::None,
            device: None,
        }
    }

    /// Measured by a queue bracket: its times are upper bounds.
    pub fn bracketed(&self) -> bool {
        self.bracket != Bracket::None
    }
}

/// How a queue bracket measured a call, if one did (format 4). Versions up to 3 wrote a `bool`
/// here, which postcard encodes as the byte 0 or 1, as it does this enum's first two variants:
/// they read as [`Bracket::None`] and [`Bracket::Unstated`] without a conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Bracket {
    /// Timed by queries or records of its own work, not a bracket.
    None,
    /// A bracket whose end the capture does not say (written by format 3 or older).
    Unstated,
    /// Ended with the call's last submission on the queue.
    LastSubmit,
    /// Ended at the function's exit (no submission of the call was seen): it also holds the
    /// host's work after the last submission.
    Exit,
}

impl Bracket {
    /// The value of `gpu.timing.bracket_end`, for a bracket.
    pub fn end(self) -> Option<&'static str> {
        match self {
            Bracket::None => None,
            Bracket::Unstated => Some("unstated"),
            Bracket::LastSubmit => Some("last_submit"),
            Bracket::Exit => Some("exit"),
        }
    }
}

/// One kernel, copy or memset inside a call (CUDA through CUPTI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    pub name: String,
    pub interval: Interval,
    pub kind: ActivityKind,
    pub stream: Option<u64>,
    /// A [`Device::key`].
    pub device: Option<u32>,
}

/// Memory in use at one moment (`track_memory` sites).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Memory {
    pub process_rss_bytes: Option<u64>,
    pub device_used_bytes: Option<u64>,
}

/// One sampled call of an annotated function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// A [`Site::id`].
    pub site: u32,
    /// Unique in the process; the CUPTI external correlation id.
    pub scope_id: u64,
    /// A [`Thread::index`].
    pub thread: u32,
    /// The call on the host: entering the function to leaving it.
    pub host: Interval,
    pub error: bool,
    pub bytes: Option<u64>,
    pub gpu: Option<Gpu>,
    /// How far the GPU interval was moved forward because the clock mapping put it before the
    /// call began (0: not moved).
    pub clock_corrected_ns: u64,
    pub activities: Vec<Activity>,
    /// Before and after the call.
    pub memory: Option<[Memory; 2]>,
    /// The innermost application `tracing` span the call was made in (a [`Span::id`]): the
    /// chain of enclosing spans, across threads and awaits (version 2).
    pub span: Option<u64>,
    /// From the [`Frame::Attribution`] after it (version 8); not part of the record's frame.
    #[serde(skip)]
    pub attributed: Option<Attributed>,
    /// The spans entered at its launch, from the same frame ([`Attribution::spans`]).
    #[serde(skip)]
    pub spans_at_launch: Option<String>,
}

impl Record {
    /// A host-timed call with nothing else known.
    pub fn new(site: u32, scope_id: u64, thread: u32, host: Interval) -> Record {
        Record {
            site,
            scope_id,
            thread,
            host,
            error: false,
            bytes: None,
            gpu: None,
            clock_corrected_ns: 0,
            activities: Vec::new(),
            memory: None,
            span: None,
            attributed: None,
            spans_at_launch: None,
        }
    }

    /// The duration the call is judged by: GPU busy time where a GPU source exists, else the
    /// host's (as the runtime's summary does).
    pub fn duration_ns(&self) -> u64 {
        self.gpu.as_ref().map_or_else(|| self.host.duration_ns(), |g| g.busy_ns)
    }

    pub fn source(&self) -> TimingSource {
        self.gpu.as_ref().map_or(TimingSource::Host, |g| g.source)
    }
}

/// Every call of one site, sampled or not, as the runtime aggregated them at the end.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Aggregate {
    /// A [`Site::id`].
    pub site: u32,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    /// Quantiles from the runtime's histogram (within 6.25 %).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub host_total_ns: u64,
    pub bytes: u64,
    pub sources: Vec<TimingSource>,
    pub bracketed: bool,
}

/// Something the runtime lost, by cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loss {
    pub what: String,
    pub count: u64,
}

/// The last frame of a capture that ended normally.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct End {
    pub end_ns: u64,
    /// Records the writer wrote: a reader that saw fewer read a damaged file.
    pub records: u64,
    pub losses: Vec<Loss>,
    /// What the runtime said once during the run (fallbacks, missing libraries).
    pub notes: Vec<String>,
}

/// One instance of an application `tracing` span (a request, a batch) that enclosed recorded
/// calls, written before the first record made in it. gpuspan's own spans are never in a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Unique in the capture (not `tracing`'s id, which is reused once a span closes): two
    /// requests with the same name stay apart.
    pub id: u64,
    /// The enclosing application span, written before this one.
    pub parent: Option<u64>,
    pub name: String,
}

/// Readings of one device by a monitor (NVML), in time order. `None`: the device does not report
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSamples {
    /// A [`Device::key`].
    pub device: u32,
    pub samples: Vec<DeviceSample>,
}

/// One reading of a device.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceSample {
    pub time_ns: u64,
    /// Percent of the last sample period in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the device sent over PCIe (to the host).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the device received over PCIe (from the host).
    pub pcie_rx_bytes_per_s: Option<f64>,
    pub temperature_c: Option<u32>,
}

/// A device's links at their most, written once per device by a writer whose device monitor
/// knows them (version 3): what transfer bandwidth is measured against ("link efficiency").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceLink {
    /// A [`Device::key`].
    pub device: u32,
    pub peak: LinkPeak,
}

/// The peak of a device's links in one direction. `None`: the monitor does not know it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkPeak {
    /// The highest PCIe generation the device and its slot allow.
    pub pcie_generation: Option<u32>,
    /// The most PCIe lanes the device and its slot allow.
    pub pcie_width: Option<u32>,
    /// Bytes per second the PCIe link carries in one direction at that generation and width
    /// (line code subtracted, packet overhead not: large copies reach 80–90 % of it).
    pub pcie_bytes_per_s: Option<f64>,
    /// Bytes per second the device's active NVLinks carry together in one direction.
    pub nvlink_bytes_per_s: Option<f64>,
}

/// The buffers and textures made through an instrumented wgpu device (`gpuspan::wgpu::instrument`),
/// counted by their **logical** sizes (what the program asked for, not the driver's allocations),
/// as the runtime's summary states them (version 9).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryAccount {
    /// A [`Device::key`].
    pub device: u32,
    /// The most bytes live at once, and when that was first reached (Unix-epoch ns; 0: never).
    pub peak_bytes: u64,
    pub peak_ns: u64,
    /// What held the most at the peak, largest first (the runtime keeps the first few).
    pub peak_by_label: Vec<Held>,
    /// The same by owner: the innermost annotated call, else the innermost `tracing` span
    /// entered on the creating thread, else `(no scope)`.
    pub peak_by_owner: Vec<Held>,
    /// Live when the account was written (the end of the run): bytes, objects, and by whom.
    pub live_bytes: u64,
    pub live_objects: u64,
    pub live_by_label: Vec<Held>,
    pub live_by_owner: Vec<Held>,
    /// Textures of a format wgpu gives no size for (planar video formats): not counted.
    pub not_sized: u64,
    /// Live bytes after each change, in time order: the timeline's counter track.
    pub samples: Vec<MemorySample>,
    /// Changes after the runtime's bound on samples: counted in the figures above, not drawn.
    pub samples_dropped: u64,
}

impl MemoryAccount {
    /// The name of the counter track drawing [`MemoryAccount::samples`] of the device whose
    /// backend number is `device_id` ([`Device::id`]): one name for every timeline.
    pub fn track_name(device_id: u32) -> String {
        format!("GPU memory, logical bytes (wgpu device {device_id})")
    }
}

/// Bytes held by one label or owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub name: String,
    pub bytes: u64,
}

/// Live bytes after one change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySample {
    pub time_ns: u64,
    pub bytes: u64,
}
