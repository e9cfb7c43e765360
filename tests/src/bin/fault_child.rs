//! The program the fault suite (`tests/tests/host/faults.rs`) runs in a child process, one case per
//! run: `fault_child <case> [n]`. Each case does what an instrumented program might, in the
//! hostile setting the suite arranges (closed stderr, a FIFO or a link at the trace path, a
//! signal, bad environment values), and prints what the suite checks on stdout.
//!
//! Also the measuring tool of docs/benchmarks.md: `fault_child timeline 200000` (peak RSS while
//! the timeline is written) and `fault_child threads 100000` (RSS after thread churn).

use std::io::Write;
use std::time::Duration;

#[gpuspan::gpu_kernel(trace_all)]
#[inline(never)]
fn step(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Sampled out (never exported): the thread-churn case measures the aggregates, not the timeline.
#[gpuspan::gpu_kernel(threshold_us = 1_000_000_000)]
#[inline(never)]
fn quick(x: u64) -> u64 {
    std::hint::black_box(x.rotate_left(7))
}

#[gpuspan::gpu_kernel(
    name = "a\u{1b}[31mred\u{1b}[0m name\nwith a newline, a tab\tand a bell\u{7}, then long enough to be cut off in the table: 0123456789 0123456789 0123456789 0123456789 0123456789 END",
    trace_all
)]
fn oddly_named() {}

/// `(VmRSS, VmHWM)` in KiB, from /proc (Linux).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct CallsOnDrop;

impl Drop for CallsOnDrop {
    fn drop(&mut self) {
        step(1);
        say("destructor call done");
    }
}

thread_local! {
    static CALLER: CallsOnDrop = const { CallsOnDrop };
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    match case.as_str() {
        // Annotated calls, then the guard's drop: summary, timeline, messages.
        "calls" => {
            let guard = gpuspan::init();
            say(&format!("trace file: {:?}", guard.trace_file()));
            for i in 0..n {
                step(i);
            }
            drop(guard);
            say("after the guard");
        }
        // `n` recorded calls, then "ready", then the end once stdin closes: the suite decides
        // when each of several processes sharing one capture path ends.
        "hold" => {
            let guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            say("ready");
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
            drop(guard);
            say("after the guard");
        }
        // The live feed with every descriptor taken: "ready", then at a line on stdin the
        // process opens files until none is left ("full"), then the end once stdin closes.
        "live-fds" => {
            let guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            say("ready");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            let mut held = Vec::new();
            while let Ok(f) = std::fs::File::open("/dev/null") {
                held.push(f);
            }
            say(&format!("full after {} files", held.len()));
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
            drop(held);
            drop(guard);
            say("after the guard");
        }
        // Peak memory while `n` sampled calls are written to the timeline.
        "timeline" => {
            let guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            let (before, _) = rss_kib();
            drop(guard);
            let (after, peak) = rss_kib();
            say(&format!("rss before writing: {before} KiB, after: {after} KiB, peak: {peak} KiB"));
        }
        // `n` short-lived threads, one annotated call each: memory must not grow with them.
        "threads" => {
            let _guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            // Warm up (thread stacks, allocator arenas, the first shard) before the baseline.
            for i in 0..1_000 {
                std::thread::spawn(move || quick(i)).join().unwrap_or(0);
            }
            let (before, _) = rss_kib();
            for i in 0..n {
                if std::thread::spawn(move || quick(i)).join().is_err() {
                    say("a thread panicked");
                }
            }
            let (after, _) = rss_kib();
            let calls = gpuspan::summary().site("quick").map_or(0, |s| s.calls);
            say(&format!("rss before: {before} KiB, after {n} threads: {after} KiB, calls counted: {calls}"));
        }
        // `n` short-lived threads, one recorded call each, timed: thread churn's cost with the
        // capture on (`GPUSPAN_CAPTURE`) against off (docs/benchmarks.md).
        "threads-recorded" => {
            let guard = gpuspan::Config::from_env().summary(false).no_trace_file().init();
            let (before, _) = rss_kib();
            let start = std::time::Instant::now();
            for i in 0..n {
                if std::thread::spawn(move || step(i)).join().is_err() {
                    say("a thread panicked");
                }
            }
            let elapsed = start.elapsed();
            let (after, _) = rss_kib();
            drop(guard);
            say(&format!(
                "{n} threads in {:.0} ms; rss before: {before} KiB, after: {after} KiB",
                elapsed.as_secs_f64() * 1e3
            ));
        }
        // Waits for a signal with a timeline to write (the suite sends SIGTERM).
        "wait" => {
            let _guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            say("ready");
            std::thread::sleep(Duration::from_secs(120));
            say("not killed");
        }
        // Under load when the suite sends SIGINT/SIGTERM: two threads keep making calls
        // (aggregated only) while main has made `n` recorded ones and waits.
        "busy" => {
            let _guard = gpuspan::init();
            for t in 0..2u64 {
                std::thread::spawn(move || {
                    let mut i = t;
                    loop {
                        i = quick(i);
                    }
                });
            }
            for i in 0..n {
                step(i);
            }
            say("ready");
            std::thread::sleep(Duration::from_secs(120));
            say("not killed");
        }
        // The program's own SIGINT/SIGTERM handling, through signal-hook's registry as
        // `tokio::signal` does, installed before or after `init`: the program decides the end,
        // here `n` more calls after the signal and a normal return.
        "own-handler-before" | "own-handler-after" => {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let register = |stop: &std::sync::Arc<std::sync::atomic::AtomicBool>| {
                for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                    signal_hook::flag::register(s, stop.clone()).expect("register");
                }
            };
            if case == "own-handler-before" {
                register(&stop);
            }
            let guard = gpuspan::init();
            if case == "own-handler-after" {
                register(&stop);
            }
            for i in 0..n {
                step(i);
            }
            say("ready");
            let start = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && start.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(10));
            }
            for i in 0..n {
                step(i);
            }
            drop(guard);
            say("ended by the program");
        }
        // `process::exit` with the guard alive: the exit hook writes the run.
        "exit-live" => {
            let _guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            std::process::exit(3);
        }
        // `process::exit` after an explicit shutdown: everything written, exit status kept.
        "exit" => {
            let _guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            gpuspan::shutdown();
            gpuspan::shutdown();
            std::process::exit(3);
        }
        // An explicit shutdown, then the guard's drop: the end happens once.
        "shutdown-then-drop" => {
            let guard = gpuspan::init();
            for i in 0..n {
                step(i);
            }
            gpuspan::shutdown();
            step(n);
            drop(guard);
            say("after the guard");
        }
        // Annotated calls from thread-local destructors, on a spawned thread and on main.
        "tls" => {
            let guard = gpuspan::Config::from_env().no_trace_file().init();
            std::thread::spawn(|| {
                CALLER.with(|_| ());
                step(0);
            })
            .join()
            .unwrap_or_else(|_| say("the thread panicked"));
            drop(guard);
            CALLER.with(|_| ());
            step(0);
            say("main ends");
        }
        // A site whose name has control characters and is longer than a table column.
        "names" => {
            let _guard = gpuspan::init();
            for _ in 0..n {
                oddly_named();
            }
        }
        other => {
            say(&format!("unknown case {other:?}"));
            std::process::exit(2);
        }
    }
}
