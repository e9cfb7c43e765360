//! Starts one `multi_gpu` process per GPU, as torchrun would, and merges their captures into
//! one Perfetto timeline with `gpuspan merge`.
//!
//! ```text
//! multi_gpu_launch [-n WORLD_SIZE] [--out DIR] [--program PATH] [--timeout SECONDS] [--cupti-dump]
//! ```
//!
//! Each rank gets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, a `CUDA_VISIBLE_DEVICES`
//! that lists its own GPU first and the others after it (rank 1 of 2: `1,0`), so that it
//! computes on its GPU and copies to the next rank's; a `TRACEPARENT`, so that every rank's spans
//! join one trace: built with `otlp` and with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the context of
//! the launcher's own span `multi_gpu_launch`, which it exports (a child of its own
//! `TRACEPARENT`, when it has one); otherwise its own `TRACEPARENT`, or one made when it has none; `GPUSPAN_CAPTURE` and
//! `GPUSPAN_TRACE_FILE` in the output folder; `MULTI_GPU_NCCL_ID`, the file through which rank 0
//! hands NCCL's id to the others; and `NCCL_NVLS_ENABLE=0`, `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`,
//! `NVSHMEM_DISABLE_NVLS=1` (NVLink multicast stays off on shared hosts).
//!
//! Libraries: cudarc loads NCCL by the names `libnccl.so`, `libnccl.so.<CUDA major>`, … — not
//! `libnccl.so.2`, the only name in Python's `nvidia-nccl-cu13` wheel. So the launcher finds that
//! file (`MULTI_GPU_NCCL_LIB`, else `python3 -c 'import nvidia.nccl'`), links it as
//! `<out>/lib/libnccl.so` and puts `<out>/lib` first on the ranks' `LD_LIBRARY_PATH`, with
//! CUDA's library directory (`/usr/local/cuda/targets/x86_64-linux/lib`, for CUPTI, NVRTC and
//! cuBLAS) when it exists. Without NCCL the ranks skip the all-reduce and say so.
//!
//! World size: `-n`, else `WORLD_SIZE`, else the GPUs the NVIDIA driver lists
//! (`/proc/driver/nvidia/gpus`), at least 1. The program is `multi_gpu` next to this one unless
//! `--program` says otherwise; `gpuspan` (the CLI) likewise, or `GPUSPAN_CLI`. Each rank's stderr
//! (gpuspan's summary) goes to `<out>/rank<r>.stderr` and is printed after all have ended; their
//! stdout is this one's. Ranks still running after the timeout (default 600 s) are killed.
//! With `--cupti-dump` each rank also writes its raw CUPTI traffic to `<out>/rank<r>.cupti.dump`
//! (`GPUSPAN_CUPTI_DUMP`: the fixtures the replay tests read). With several ranks it then prints
//! `gpuspan ranks` of their captures (each rank's compute and collective time, the straggler).
//! Exits 0 when every rank, the merge and the comparison succeeded.

use std::ffi::OsString;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const NO_MULTICAST: [(&str, &str); 3] =
    [("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")];

/// CUDA's library directory on the lent GPU machines (and in NVIDIA's CUDA images).
const CUDA_LIB: &str = "/usr/local/cuda/targets/x86_64-linux/lib";

struct Options {
    world: Option<usize>,
    out: Option<PathBuf>,
    program: Option<PathBuf>,
    timeout: Duration,
    cupti_dump: bool,
}

fn usage() -> &'static str {
    "usage: multi_gpu_launch [-n WORLD_SIZE] [--out DIR] [--program PATH] [--timeout SECONDS] [--cupti-dump]"
}

fn parse_args(mut args: impl Iterator<Item = OsString>) -> Result<Options, String> {
    let mut o = Options { world: None, out: None, program: None, timeout: Duration::from_secs(600), cupti_dump: false };
    while let Some(a) = args.next() {
        let a = a.to_string_lossy().into_owned();
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value; {}", usage()));
        match a.as_str() {
            "-n" | "--world-size" => {
                let v = value()?.to_string_lossy().into_owned();
                o.world = Some(v.parse().ok().filter(|&n| n > 0).ok_or(format!("{a} {v}: not a world size ≥ 1"))?);
            }
            "--out" => o.out = Some(value()?.into()),
            "--program" => o.program = Some(value()?.into()),
            "--timeout" => {
                let v = value()?.to_string_lossy().into_owned();
                o.timeout = Duration::from_secs(v.parse().map_err(|_| format!("--timeout {v}: not whole seconds"))?);
            }
            "--cupti-dump" => o.cupti_dump = true,
            "-h" | "--help" => return Err(usage().to_owned()),
            _ => return Err(format!("unknown argument {a:?}; {}", usage())),
        }
    }
    Ok(o)
}

/// The GPUs the NVIDIA driver lists on this host (0 without a driver).
fn gpus_on_host() -> usize {
    std::fs::read_dir("/proc/driver/nvidia/gpus").map_or(0, |d| d.filter_map(Result::ok).count())
}

/// What each rank's `CUDA_VISIBLE_DEVICES` is made of: the launcher's own list when it has one,
/// else the host's GPUs by index (`CUDA_DEVICE_ORDER=PCI_BUS_ID` makes those nvidia-smi's), else
/// (no GPU here) one index per rank, so that the variables are well formed all the same.
fn device_pool(world: usize, host_gpus: usize, inherited: Option<&str>) -> Result<Vec<String>, String> {
    let pool: Vec<String> = match inherited.map(str::trim).filter(|v| !v.is_empty()) {
        Some(list) => list.split(',').map(|s| s.trim().to_owned()).collect(),
        None => (0..if host_gpus == 0 { world } else { host_gpus }).map(|i| i.to_string()).collect(),
    };
    if pool.len() < world {
        return Err(format!(
            "{world} ranks but {} GPU(s) ({}): one rank per GPU (NCCL refuses two ranks on one GPU)",
            pool.len(),
            pool.join(",")
        ));
    }
    // The job's GPUs: the first `world`, so that the next rank's GPU is each rank's second.
    Ok(pool.into_iter().take(world).collect())
}

/// Rank `rank`'s `CUDA_VISIBLE_DEVICES`: its own GPU first, then the others in order after it.
fn visible_for(rank: usize, pool: &[String]) -> String {
    let n = pool.len();
    (0..n).map(|i| pool[(rank + i) % n].as_str()).collect::<Vec<_>>().join(",")
}

/// A W3C traceparent with a fresh random trace id and span id, sampled. `RandomState` is
/// seeded from the operating system's randomness.
fn new_traceparent() -> String {
    let s = std::collections::hash_map::RandomState::new();
    let (a, b, c) = (s.hash_one(1u8), s.hash_one(2u8), s.hash_one(3u8));
    format!("00-{a:016x}{b:016x}-{:016x}-01", c | 1)
}

/// The job's root span, exported when the environment asks for OTLP export
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`; feature `otlp`): the ranks get its context as their
/// `TRACEPARENT`, so that the collector receives the span they hang under. Its own parent is
/// the launcher's `TRACEPARENT`, when it has one. Ended and sent when dropped, with the ranks
/// done.
#[cfg(feature = "otlp")]
struct JobSpan {
    // Fields drop in order: the span ends before the export shuts down, so it is sent.
    _span: tracing::span::EnteredSpan,
    _gpuspan: gpuspan::Guard,
}

#[cfg(feature = "otlp")]
impl JobSpan {
    fn open(world: usize, program: &Path) -> Option<JobSpan> {
        use tracing_subscriber::prelude::*;
        if !gpuspan::otlp::OtlpConfig::env_requests_export() {
            return None;
        }
        // Only the export: the launcher runs no annotated call to summarise or capture, and
        // samples no device (its ranks do). The ranks inherit GPUSPAN_MONITOR as it was.
        let monitor = std::env::var_os("GPUSPAN_MONITOR");
        std::env::set_var("GPUSPAN_MONITOR", "off");
        let guard = gpuspan::Config::from_env().summary(false).no_trace_file().no_capture().live(false).init();
        match monitor {
            Some(v) => std::env::set_var("GPUSPAN_MONITOR", v),
            None => std::env::remove_var("GPUSPAN_MONITOR"),
        }
        tracing_subscriber::registry().with(guard.otlp_layer()).try_init().ok()?;
        let span = tracing::info_span!("multi_gpu_launch", job.world_size = world as i64, program = %program.display());
        Some(JobSpan { _span: span.entered(), _gpuspan: guard })
    }

    /// The span's context (it is entered on this thread).
    fn traceparent(&self) -> Option<String> {
        gpuspan::otlp::traceparent()
    }
}

/// Built without OTLP export: no span of the launcher's own.
#[cfg(not(feature = "otlp"))]
struct JobSpan;

#[cfg(not(feature = "otlp"))]
impl JobSpan {
    fn open(_world: usize, _program: &Path) -> Option<JobSpan> {
        None
    }

    fn traceparent(&self) -> Option<String> {
        None
    }
}

/// The file of Python's NCCL wheel (`nvidia-nccl-cu13`), or the one `MULTI_GPU_NCCL_LIB` names.
fn find_nccl() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("MULTI_GPU_NCCL_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(format!("MULTI_GPU_NCCL_LIB={} is not a file", p.display())) };
    }
    // A namespace package has no __file__: its __path__ lists where it is.
    let script = "import nvidia.nccl as m\nfor p in m.__path__: print(p)";
    let out = Command::new("python3")
        .args(["-c", script])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("python3 not runnable ({e})"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    for dir in text.lines() {
        let lib = Path::new(dir.trim()).join("lib");
        if let Ok(entries) = std::fs::read_dir(&lib) {
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnccl.so")))
                .collect();
            found.sort();
            if let Some(p) = found.into_iter().next() {
                return Ok(p);
            }
        }
    }
    Err("Python's nvidia.nccl (pip install nvidia-nccl-cu13) not found; set MULTI_GPU_NCCL_LIB to libnccl.so.2".into())
}

/// `<out>/lib/libnccl.so` → `lib`: the name cudarc looks for.
fn link_nccl(out: &Path, lib: &Path) -> std::io::Result<PathBuf> {
    let dir = out.join("lib");
    std::fs::create_dir_all(&dir)?;
    let link = dir.join("libnccl.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(lib, &link)?;
    Ok(dir)
}

/// A sibling of this executable, else the bare name (found on `PATH`).
fn beside_me(name: &str) -> PathBuf {
    let sibling = std::env::current_exe().ok().and_then(|e| Some(e.parent()?.join(name)));
    sibling.filter(|p| p.is_file()).unwrap_or_else(|| PathBuf::from(name))
}

fn main() -> ExitCode {
    match launch() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("multi_gpu_launch: {e}");
            ExitCode::from(2)
        }
    }
}

fn launch() -> Result<bool, String> {
    let o = parse_args(std::env::args_os().skip(1))?;
    let host_gpus = gpus_on_host();
    let world = match o.world {
        Some(n) => n,
        None => match std::env::var("WORLD_SIZE") {
            Ok(v) => {
                v.trim().parse().ok().filter(|&n| n > 0).ok_or(format!("WORLD_SIZE={v:?}: not a world size ≥ 1"))?
            }
            Err(_) => host_gpus.max(1),
        },
    };
    let pool = device_pool(world, host_gpus, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())?;
    let out = o.out.unwrap_or_else(|| std::env::temp_dir().join(format!("gpuspan-multi-gpu-{}", std::process::id())));
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let out = out.canonicalize().map_err(|e| format!("{}: {e}", out.display()))?;
    let program = o.program.unwrap_or_else(|| beside_me("multi_gpu"));
    let job_span = JobSpan::open(world, &program);
    let traceparent = job_span
        .as_ref()
        .and_then(JobSpan::traceparent)
        .or_else(|| std::env::var("TRACEPARENT").ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(new_traceparent);
    let id_file = out.join("nccl.id");
    let _ = std::fs::remove_file(&id_file); // a stale id would send the ranks to a dead rank 0

    let mut lib_path: Vec<PathBuf> = Vec::new();
    let nccl = match find_nccl().and_then(|lib| link_nccl(&out, &lib).map(|d| (lib, d)).map_err(|e| e.to_string())) {
        Ok((lib, dir)) => {
            lib_path.push(dir);
            format!("NCCL {}", lib.display())
        }
        Err(e) => format!("no NCCL ({e})"),
    };
    if Path::new(CUDA_LIB).is_dir() {
        lib_path.push(CUDA_LIB.into());
    }
    lib_path.extend(
        std::env::var_os("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect::<Vec<_>>()).unwrap_or_default(),
    );
    let ld_library_path = std::env::join_paths(&lib_path).map_err(|e| e.to_string())?;

    println!(
        "multi_gpu_launch: {world} rank(s) of {}, TRACEPARENT={traceparent}, output in {}; {nccl}",
        program.display(),
        out.display()
    );
    let started = Instant::now();
    let mut ranks: Vec<(usize, Child, PathBuf)> = Vec::new();
    for rank in 0..world {
        let visible = visible_for(rank, &pool);
        let stderr_path = out.join(format!("rank{rank}.stderr"));
        let stderr = std::fs::File::create(&stderr_path).map_err(|e| format!("{}: {e}", stderr_path.display()))?;
        let mut cmd = Command::new(&program);
        cmd.env("RANK", rank.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("LOCAL_WORLD_SIZE", world.to_string())
            .env("CUDA_VISIBLE_DEVICES", &visible)
            .env("TRACEPARENT", &traceparent)
            .env("GPUSPAN_CAPTURE", out.join(format!("rank{rank}.gpuspan")))
            .env("GPUSPAN_TRACE_FILE", out.join(format!("rank{rank}.trace.json")))
            .env("MULTI_GPU_NCCL_ID", &id_file)
            .env("LD_LIBRARY_PATH", &ld_library_path)
            .stdin(Stdio::null())
            .stderr(stderr);
        if o.cupti_dump {
            cmd.env("GPUSPAN_CUPTI_DUMP", out.join(format!("rank{rank}.cupti.dump")));
        }
        if std::env::var_os("CUDA_DEVICE_ORDER").is_none() {
            cmd.env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        }
        for (k, v) in NO_MULTICAST {
            cmd.env(k, v);
        }
        match cmd.spawn() {
            Ok(child) => {
                println!("multi_gpu_launch: rank {rank}: pid {}, CUDA_VISIBLE_DEVICES={visible}", child.id());
                ranks.push((rank, child, stderr_path));
            }
            Err(e) => {
                for (_, c, _) in &mut ranks {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(format!("cannot start {}: {e}", program.display()));
            }
        }
    }

    // Wait for all, killing what is left at the timeout (a rank stuck in NCCL's init waits
    // forever for a peer that died).
    let mut status = vec![None; world];
    while status.iter().any(Option::is_none) {
        for (rank, child, _) in &mut ranks {
            if status[*rank].is_none() {
                if let Ok(Some(s)) = child.try_wait() {
                    status[*rank] = Some(s.code().map_or_else(|| format!("killed ({s})"), |c| c.to_string()));
                }
            }
        }
        if started.elapsed() > o.timeout {
            for (rank, child, _) in &mut ranks {
                if status[*rank].is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                    status[*rank] = Some(format!("killed after {} s", o.timeout.as_secs()));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut ok = true;
    for (rank, _, stderr_path) in &ranks {
        let text = std::fs::read_to_string(stderr_path).unwrap_or_default();
        let code = status[*rank].as_deref().unwrap_or("?");
        println!("--- rank {rank}: exit {code}, stderr ({}):", stderr_path.display());
        print!("{text}");
        ok &= code == "0";
    }

    let captures: Vec<PathBuf> = (0..world).map(|r| out.join(format!("rank{r}.gpuspan"))).collect();
    let missing: Vec<String> = captures.iter().filter(|p| !p.is_file()).map(|p| p.display().to_string()).collect();
    if !missing.is_empty() {
        println!("multi_gpu_launch: no capture from {}", missing.join(", "));
        ok = false;
    }
    let present: Vec<&PathBuf> = captures.iter().filter(|p| p.is_file()).collect();
    if present.is_empty() {
        return Ok(false);
    }
    let merged = out.join("merged.trace.json");
    let cli = std::env::var_os("GPUSPAN_CLI").map_or_else(|| beside_me("gpuspan"), PathBuf::from);
    let merge = Command::new(&cli).arg("merge").args(&present).arg("-o").arg(&merged).status();
    match merge {
        Ok(s) if s.success() => println!("multi_gpu_launch: merged timeline {}", merged.display()),
        Ok(s) => {
            println!("multi_gpu_launch: `{} merge` failed ({s})", cli.display());
            ok = false;
        }
        Err(e) => {
            println!(
                "multi_gpu_launch: cannot run {} ({e}): build it with `cargo build -p gpuspan-cli`",
                cli.display()
            );
            ok = false;
        }
    }
    // Which rank the others waited for: the ranks side by side.
    if present.len() > 1 {
        match Command::new(&cli).arg("ranks").args(&present).status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                println!("multi_gpu_launch: `{} ranks` failed ({s})", cli.display());
                ok = false;
            }
            Err(e) => println!("multi_gpu_launch: cannot run {} ranks ({e})", cli.display()),
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_sees_its_gpu_first_and_the_others_after() {
        let pool = device_pool(2, 2, None).unwrap();
        assert_eq!(visible_for(0, &pool), "0,1");
        assert_eq!(visible_for(1, &pool), "1,0");
        let pool = device_pool(2, 8, Some("4,6,7")).unwrap();
        assert_eq!((visible_for(0, &pool), visible_for(1, &pool)), ("4,6".to_owned(), "6,4".to_owned()));
        assert_eq!(device_pool(2, 8, None).unwrap(), ["0", "1"]);
        // No GPU here: one index per rank, so that the variables are well formed.
        assert_eq!(device_pool(3, 0, None).unwrap(), ["0", "1", "2"]);
        assert!(device_pool(2, 1, None).unwrap_err().contains("one rank per GPU"));
    }

    #[test]
    fn a_made_traceparent_is_w3c_and_new_each_time() {
        let t = new_traceparent();
        let parts: Vec<&str> = t.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [2, 32, 16, 2], "{t}");
        assert!(parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit())), "{t}");
        assert_ne!(parts[2], "0000000000000000", "a zero span id is invalid");
        assert_ne!(t, new_traceparent());
    }
}
