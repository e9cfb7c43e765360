//! The live feed's messages: what a running program with `GPUSPAN_LIVE=1` answers on its socket
//! and what `gpuspan top` reads. Defined here, beside the capture format, for the same reason:
//! one definition for the runtime that writes them and the command that reads them.
//!
//! # Protocol
//!
//! A Unix stream socket `<program>-<pid>.live.sock` in the user's private gpuspan directory
//! (`$XDG_RUNTIME_DIR/gpuspan/`, else `gpuspan-<uid>/` in the temporary directory). The client
//! writes one request per line; the program answers each with one line of JSON:
//!
//! | request | answer |
//! |---|---|
//! | `snapshot` | a [`Snapshot`] |
//! | `capture <seconds>` | a [`CaptureStart`] line, then the capture itself (below), or `{"error": "..."}` |
//! | anything else | `{"error": "..."}` |
//!
//! Lines are UTF-8, ended by `\n`. The answer to a request comes before the answer to the next
//! one. The program closes a connection whose requests are longer than [`MAX_REQUEST`] bytes,
//! or that leaves its answers unread (see docs/live.md).
//!
//! Versioning: [`Snapshot::protocol`] is [`PROTOCOL`]; a field added later is optional (missing
//! reads as its default), so a newer program still answers an older `gpuspan top`. A request
//! added later is announced the same way: [`Snapshot::capture`] says which version of the
//! `capture` request a program answers ([`CAPTURE_VERSION`]; missing: none, the program answers
//! it as an unknown request). [`PROTOCOL`] changes only for a change an older client could not
//! read, which an older `gpuspan top` then refuses by name.
//!
//! # On-demand capture
//!
//! `capture <seconds>` (at most [`MAX_CAPTURE_S`]) opens a capture window: the program records
//! every call (trace-all) from now for that long. It answers one [`CaptureStart`] line, then the
//! connection carries a capture in the `gpuspan-capture` format, byte for byte what a capture
//! file holds (header, sites, records as they come, then the window's aggregates and the end
//! frame), and the program closes it after the end frame. Requests sent after `capture` are
//! not read. One window at a time per program: a second `capture` while one is open is answered
//! `{"error": ...}` and the connection stays usable. A client that closes its connection ends
//! its window; records the client does not take in time are dropped, never waited for, and
//! counted in the end frame's losses.

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks.
pub const PROTOCOL: u32 = 1;

/// The longest request line the program reads, in bytes.
pub const MAX_REQUEST: usize = 4096;

/// The socket file's name ends so.
pub const SOCKET_SUFFIX: &str = ".live.sock";

/// The request for a [`Snapshot`].
pub const SNAPSHOT_REQUEST: &str = "snapshot";

/// The request that opens a capture window: `capture <seconds>`.
pub const CAPTURE_REQUEST: &str = "capture";

/// The version of the `capture` request this crate speaks.
pub const CAPTURE_VERSION: u32 = 1;

/// The longest capture window a program opens, in seconds (a day).
pub const MAX_CAPTURE_S: f64 = 86_400.0;

/// The first answer to `capture <seconds>`: the window is open, and the capture's bytes follow.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CaptureStart {
    /// [`CAPTURE_VERSION`] of the program that answered.
    pub capture: u32,
    pub program: String,
    pub pid: u32,
    /// When the window opened: Unix-epoch ns on the program's host clock (the capture's
    /// header says it too).
    pub start_ns: u64,
    /// The window's length, in seconds, as the program took it.
    pub window_s: f64,
}

/// Parses a `capture <seconds>` request: `None` when the line is not one, `Some(Err(why))` when
/// its length is not a number of seconds above 0 and at most [`MAX_CAPTURE_S`].
pub fn parse_capture(request: &str) -> Option<Result<f64, String>> {
    let rest = request.strip_prefix(CAPTURE_REQUEST)?;
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    let arg = rest.trim();
    Some(match arg.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= MAX_CAPTURE_S => Ok(s),
        _ => Err(format!(
            "`capture <seconds>` wants a number of seconds above 0 and at most {MAX_CAPTURE_S}, not {arg:?}"
        )),
    })
}

/// Everything the program knows now: its sites over the last seconds, its devices, what was lost.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// [`PROTOCOL`] of the program that answered.
    pub protocol: u32,
    /// The program's file name, without directory.
    pub program: String,
    pub pid: u32,
    /// The version of the gpuspan runtime in the program.
    pub writer: String,
    /// When the snapshot was taken: Unix-epoch ns on the program's host clock.
    pub time_ns: u64,
    /// When the live feed started, on the same clock.
    pub started_ns: u64,
    /// The length of the window the per-site rates and quantiles cover, in seconds: the
    /// configured window, or less while the program is younger than it.
    pub window_s: f64,
    /// gpuspan is switched off at run time (`GPUSPAN=off`): nothing is counted.
    pub off: bool,
    /// Every site that has been called, in the program's order (file, line).
    pub sites: Vec<Site>,
    /// The devices the program's monitor samples (empty without one).
    pub devices: Vec<Device>,
    /// Why `devices` is empty, when the program can tell.
    pub devices_note: Option<String>,
    /// Measurements lost since the start, by cause.
    pub losses: Vec<Loss>,
    /// What gpuspan said once (fallbacks, missing features).
    pub notes: Vec<String>,
    /// The feed's own counts.
    pub feed: Feed,
    /// The version of the `capture` request the program answers ([`CAPTURE_VERSION`]); `None`
    /// from a program older than on-demand capture.
    pub capture: Option<u32>,
    /// The capture window open now, if any.
    pub capture_window: Option<CaptureWindow>,
}

/// A capture window that is open.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CaptureWindow {
    /// When it opened and when it closes: Unix-epoch ns.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Records sent to the client so far, and dropped (the client did not take them in time).
    pub records: u64,
    pub dropped: u64,
}

/// One annotated function: its calls since the start, and over the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Site {
    /// The display name.
    pub name: String,
    /// `module::function`.
    pub function: String,
    /// `kernel` or `transfer`.
    pub kind: String,
    /// `wgpu`, `cuda` or `host`.
    pub backend: String,
    pub file: String,
    pub line: u32,
    /// A transfer's direction (`cpu_to_gpu`, `gpu_to_cpu`, `gpu_to_gpu`).
    pub direction: Option<String>,
    /// Calls finished since the start.
    pub calls: u64,
    /// Calls that returned `Err` or panicked, since the start.
    pub errors: u64,
    /// Where the durations came from (`gpu_timestamp`, `cupti`, `cuda_event`, `host`).
    pub sources: Vec<String>,
    /// Some durations were brackets around the submissions: upper bounds.
    pub bracketed: bool,
    /// Why the site's calls were timed on the host, when they were.
    pub host_reason: Option<String>,
    /// The calls of the last [`Snapshot::window_s`] seconds.
    pub window: Window,
}

/// A site's calls over the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Window {
    pub calls: u64,
    pub errors: u64,
    pub calls_per_s: f64,
    /// The summed durations (GPU time where a GPU source timed the calls, else host time).
    pub time_ns: u64,
    /// GPU time ÷ the window's length: how much of the wall time the GPU spent on this site's
    /// work (over 1 with overlapping work or several devices). `None` where some calls were
    /// timed on the host: host time is not GPU time.
    pub gpu_busy: Option<f64>,
    /// This site's part of the GPU time of every GPU-timed site in the window. `None` as
    /// `gpu_busy`.
    pub gpu_share: Option<f64>,
    /// The median call of the window (from the histogram: within 1/16).
    pub p50_ns: Option<u64>,
    /// The 99th percentile call of the window.
    pub p99_ns: Option<u64>,
    /// Bytes moved (transfers).
    pub bytes: u64,
    pub bytes_per_s: f64,
    /// Bytes ÷ the summed durations: the transfers' own speed, not averaged over idle time.
    pub bandwidth_bytes_per_s: Option<f64>,
}

/// One GPU as the program's device monitor sees it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Device {
    /// The monitor's index (NVML: PCI bus order).
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub memory_total_bytes: u64,
    /// The most the device and slot allow.
    pub pcie_max_generation: Option<u32>,
    pub pcie_max_width: Option<u32>,
    /// The newest reading.
    pub latest: Option<DeviceSample>,
    /// Mean GPU utilization per second over the last 60 s, oldest first (seconds without a
    /// reading are left out; `time_ns` says which second each is).
    pub utilization_history: Vec<UtilizationPoint>,
}

/// One reading of one GPU. A field is `None` where the device does not report it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceSample {
    /// Unix-epoch ns on the program's host clock.
    pub time_ns: u64,
    /// Percent of the sample period in which a kernel ran.
    pub gpu_utilization_pct: Option<u32>,
    /// Percent of the sample period in which device memory was read or written.
    pub memory_utilization_pct: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    /// The enforced power limit.
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// Bytes per second the GPU sent over PCIe (to the host).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Bytes per second the GPU received over PCIe (from the host).
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// The generation and width the link runs at now.
    pub pcie_generation: Option<u32>,
    pub pcie_width: Option<u32>,
    /// The clock throttle reasons set, by name (`none` is an empty list); `None`: not read.
    pub throttle_reasons: Option<Vec<String>>,
}

/// The mean utilization of one second.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UtilizationPoint {
    /// The start of the second, Unix-epoch ns.
    pub time_ns: u64,
    pub gpu_utilization_pct: f64,
}

/// Measurements lost for one cause.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Loss {
    pub what: String,
    pub count: u64,
}

/// The live feed's own counts since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Feed {
    /// Connections open now (this one included).
    pub clients: u32,
    /// Connections accepted since the start.
    pub accepted: u64,
    /// Connections closed because their answers went unread (a stalled client).
    pub dropped_stalled: u64,
    /// Connections refused because the peer was another user.
    pub refused_other_user: u64,
    /// Connections refused because too many were open.
    pub refused_busy: u64,
    /// Connections closed for a malformed request (too long, not UTF-8).
    pub dropped_malformed: u64,
    /// Connections closed for holding a place without asking (none at first, or none lately).
    pub dropped_idle: u64,
    /// Accepts that failed (out of descriptors, say); accepting rests a while after each.
    pub accept_failed: u64,
    /// Capture windows opened since the start.
    pub captures: u64,
    /// `capture` requests refused because a window was open.
    pub captures_refused: u64,
    /// Capture windows ended early because their client left (or stopped reading).
    pub captures_abandoned: u64,
}

/// An answer that is not a snapshot: the request was not understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: String,
}

/// Whether a file name is a live feed's socket, and if so the pid it names:
/// `<program>-<pid>.live.sock`.
pub fn socket_pid(file_name: &str) -> Option<u32> {
    let stem = file_name.strip_suffix(SOCKET_SUFFIX)?;
    let (_, pid) = stem.rsplit_once('-')?;
    pid.parse().ok()
}

/// The socket's file name for a program and pid: the program's name with anything but ASCII
/// letters, digits, `.`, `_` and `-` replaced by `_`, cut to at most `max_program` bytes (a Unix
/// socket's path is limited to about 108 bytes).
pub fn socket_name(program: &str, pid: u32, max_program: usize) -> String {
    let clean: String = program
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .take(max_program.max(1))
        .collect();
    let clean = if clean.is_empty() { "program".to_owned() } else { clean };
    format!("{clean}-{pid}{SOCKET_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_pid() {
        assert_eq!(socket_name("live_demo", 42, 64), "live_demo-42.live.sock");
        assert_eq!(socket_pid("live_demo-42.live.sock"), Some(42));
        assert_eq!(socket_pid(&socket_name("my-app v2/ü", 7, 64)), Some(7));
        assert_eq!(socket_name("my-app v2/ü", 7, 64), "my-app_v2__-7.live.sock");
        assert_eq!(socket_name("averyverylongname", 7, 5), "avery-7.live.sock");
        assert_eq!(socket_name("", 1, 5), "program-1.live.sock");
        assert_eq!(socket_pid("x-12.trace.json"), None);
        assert_eq!(socket_pid("nopid.live.sock"), None);
    }

    #[test]
    fn capture_requests_carry_their_seconds() {
        assert_eq!(parse_capture("capture 2.5"), Some(Ok(2.5)));
        assert_eq!(parse_capture("capture   30"), Some(Ok(30.0)));
        assert_eq!(parse_capture("snapshot"), None);
        assert_eq!(parse_capture("captured 3"), None);
        for bad in ["capture", "capture 0", "capture -1", "capture NaN", "capture 1e9", "capture x"] {
            assert!(matches!(parse_capture(bad), Some(Err(_))), "{bad}");
        }
    }

    /// A client of protocol 1 from before capture (its `Snapshot` had no `capture` fields) reads
    /// a newer program's snapshot: the version it checks is unchanged, the new fields are extra.
    #[test]
    fn an_older_client_reads_a_snapshot_with_the_capture_fields() {
        #[derive(Deserialize)]
        struct Old {
            protocol: u32,
            pid: u32,
            feed: OldFeed,
        }
        #[derive(Deserialize)]
        struct OldFeed {
            accepted: u64,
        }
        let new = Snapshot {
            protocol: PROTOCOL,
            pid: 7,
            capture: Some(CAPTURE_VERSION),
            capture_window: Some(CaptureWindow { start_ns: 1, end_ns: 2, records: 3, dropped: 0 }),
            feed: Feed { accepted: 4, captures: 1, ..Feed::default() },
            ..Snapshot::default()
        };
        let old: Old = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!((old.protocol, old.pid, old.feed.accepted), (1, 7, 4));
        // And a newer client reads an older program's snapshot: no capture request there.
        let older: Snapshot = serde_json::from_str(r#"{"protocol":1,"pid":7,"feed":{"accepted":4}}"#).unwrap();
        assert_eq!((older.capture, older.capture_window, older.feed.captures), (None, None, 0));
    }
}
