//! Writes or reads a large synthetic capture, for docs/benchmarks.md:
//!
//! ```sh
//! cargo run --release -p gpuspan-cli --example synthetic -- write big.gpuspan 10000000
//! cargo run --release -p gpuspan-cli --example synthetic -- read big.gpuspan
//! cargo run --release -p gpuspan-cli --example synthetic -- write-cuda cuda.gpuspan 1000000
//! cargo run --release -p gpuspan-cli --example synthetic -- timelines cuda.gpuspan
//! ```
//!
//! `timelines` writes the capture's timeline in both formats into memory, three times each,
//! alternating, and prints each one's size and write time (the capture read once, before).
//!
//! The records look like the demo's (wgpu: GPU interval and busy time, no activities; a transfer
//! in four with bytes), from two threads on one device, with durations that vary. `write-cuda`
//! makes them CUDA's instead: CUPTI-timed, each kernel call with two kernels the GPU reported
//! (six names) and each transfer with a copy, as `gpuspan export` benchmarks want.

use gpuspan_capture::*;
use std::io::{BufReader, BufWriter};
use std::time::Instant;

fn write(path: &str, n: u64, cuda: bool) -> std::io::Result<()> {
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut header = Header::new("synthetic", 1);
    header.start_ns = 1_700_000_000_000_000_000;
    header.trace_all = true;
    let mut w = Writer::new(file, &header)?;
    let names = ["saxpy", "square", "relax", "upload"];
    for (i, name) in names.iter().enumerate() {
        let kind = if i == 3 { SiteKind::Transfer } else { SiteKind::Kernel };
        let mut s = Site::new(i as u32, name, kind);
        s.backend = if cuda { Backend::Cuda } else { Backend::Wgpu };
        w.write(&Frame::Site(s))?;
    }
    for t in 1..=2 {
        w.write(&Frame::Thread(Thread { index: t, name: format!("worker {t}") }))?;
    }
    w.write(&Frame::Device(Device { key: 0, id: 0, name: "synthetic GPU".into() }))?;
    let mut t = header.start_ns;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let site = (i % 4) as u32;
        let d = 20_000 + x % 60_000;
        let mut r = Record::new(site, i + 1, 1 + (i % 2) as u32, Interval::new(t, t + 5_000));
        let source = if cuda { TimingSource::Cupti } else { TimingSource::GpuTimestamp };
        let mut g = Gpu::new(Interval::new(t + 6_000, t + 6_000 + d), source);
        g.device = Some(0);
        g.clock_error_ns = 800;
        r.gpu = Some(g);
        if site == 3 {
            r.bytes = Some(4 << 20);
        }
        if cuda {
            const KERNELS: [&str; 6] = ["gemm", "softmax", "layernorm", "gelu", "dropout", "reduce"];
            let at = |k: u64| Interval::new(t + 6_000 + k * d / 2, t + 6_000 + (k + 1) * d / 2);
            if site == 3 {
                r.activities.push(Activity {
                    name: "memcpy HtoD".into(),
                    interval: at(0),
                    kind: ActivityKind::Copy {
                        bytes: 4 << 20,
                        direction: Some(Direction::CpuToGpu),
                        src: MemoryKind::Pinned,
                        dst: MemoryKind::Device,
                    },
                    stream: Some(7),
                    device: Some(0),
                });
            } else {
                for k in 0..2 {
                    r.activities.push(Activity {
                        name: KERNELS[((i + k) % 6) as usize].into(),
                        interval: at(k),
                        kind: ActivityKind::Kernel(KernelGeometry {
                            grid: [128, 1, 1],
                            block: [256, 1, 1],
                            registers_per_thread: 32,
                            static_shared_bytes: 0,
                            dynamic_shared_bytes: 4096,
                        }),
                        stream: Some(7),
                        device: Some(0),
                    });
                }
            }
        }
        w.write(&Frame::Record(r))?;
        t += d + 10_000;
    }
    w.write(&Frame::End(End { end_ns: t, records: n, losses: Vec::new(), notes: Vec::new() }))?;
    w.flush()
}

fn read(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut r = Reader::new(BufReader::with_capacity(1 << 20, std::fs::File::open(path)?))?;
    let (mut records, mut busy) = (0u64, 0u64);
    while let Some(f) = r.next_frame()? {
        if let Frame::Record(rec) = f {
            records += 1;
            busy += rec.gpu.map_or(0, |g| g.busy_ns);
        }
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "{records} records ({} bytes, {} ns busy) streamed in {s:.2} s: {:.2} M records/s",
        r.offset(),
        busy,
        records as f64 / s / 1e6
    );
    Ok(())
}

/// The timeline of the capture at `path` as Chrome JSON and as Perfetto protobuf: size and
/// write time of each, three alternating rounds.
fn timelines(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    use gpuspan_cli::perfetto::{write_as, Format};
    let c = Capture::open(path)?;
    println!("{} records", c.records.len());
    for round in 1..=3 {
        for format in [Format::Json, Format::Perfetto] {
            let mut out = Vec::new();
            let t = Instant::now();
            write_as(format, &[(path, &c)], &mut out)?;
            let took = t.elapsed();
            println!("round {round} {format:?}: {} bytes in {:.3} s", out.len(), took.as_secs_f64());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write") if args.len() == 4 => Ok(write(&args[2], args[3].parse()?, false)?),
        Some("write-cuda") if args.len() == 4 => Ok(write(&args[2], args[3].parse()?, true)?),
        Some("read") if args.len() == 3 => read(&args[2]),
        Some("timelines") if args.len() == 3 => timelines(&args[2]),
        _ => Err(
            "usage: synthetic write OUT N | synthetic write-cuda OUT N | synthetic read IN | synthetic timelines IN"
                .into(),
        ),
    }
}
