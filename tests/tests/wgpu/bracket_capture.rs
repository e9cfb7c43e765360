//! The capture file says where each queue bracket ended (format 4), and the `gpuspan` command
//! shows it: a program on lavapipe writes a capture with a bracket that ended with its last
//! submission and one that ended at exit; the report, its JSON and its CSV read it back, both
//! as upper bounds without a bandwidth. One test in this file: it writes the process's capture.
#![cfg(feature = "wgpu-suite")]

use gpuspan::gpu_transfer;
use gpuspan_capture::{Bracket, Capture};
use gpuspan_cli::report::{CsvTable, Units};
use gpuspan_tests::gpu::Gpu;
use gpuspan_tests::wgpu;
use rusty_fork::rusty_fork_test;

/// An upload whose submission the macro sees: its bracket ends with it.
#[gpu_transfer(name = "upload_seen", direction = cpu_to_gpu, trace_all)]
fn upload_seen(gpu: &Gpu, queue: &wgpu::Queue, data: &[u8]) {
    queue.write_buffer(&gpu.buffer, 0, data);
    queue.submit([]);
}

/// The same with the submission in a callee: its bracket ends at exit.
#[gpu_transfer(name = "upload_in_callee", direction = cpu_to_gpu, trace_all)]
fn upload_in_callee(gpu: &Gpu, queue: &wgpu::Queue, data: &[u8]) {
    queue.write_buffer(&gpu.buffer, 0, data);
    submit_nothing(queue);
}

fn submit_nothing(queue: &wgpu::Queue) {
    queue.submit([]);
}

rusty_fork_test! {
    #[test]
    fn the_capture_and_the_report_say_where_each_bracket_ended() {
        let Some(gpu) = Gpu::for_test(1 << 14, 1) else { return };
        let dir = std::env::temp_dir().join(format!("gpuspan-brackets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("brackets.gpuspan");
        let guard = gpuspan::Config::from_env().no_trace_file().summary(false).trace_all(true).capture(&path).init();
        gpuspan::wgpu::register(&gpu.adapter, &gpu.device, &gpu.queue);
        let data = vec![3u8; gpu.buffer.size() as usize];
        for _ in 0..3 {
            upload_seen(&gpu, &gpu.queue, &data);
            upload_in_callee(&gpu, &gpu.queue, &data);
        }
        gpu.wait();
        assert!(gpuspan::flush());
        drop(guard);

        let bytes = std::fs::read(&path).expect("the capture");
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), gpuspan_capture::VERSION);
        let c = Capture::open(&path).expect("the capture reads");
        let ends = |name: &str| -> Vec<Bracket> {
            let site = c.sites.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("site {name}")).id;
            c.records.iter().filter(|r| r.site == site).map(|r| r.gpu.as_ref().expect("GPU timing").bracket).collect()
        };
        assert_eq!(ends("upload_seen"), [Bracket::LastSubmit; 3]);
        assert_eq!(ends("upload_in_callee"), [Bracket::Exit; 3]);

        let (report, _) = gpuspan_cli::report::stream(&path, false).expect("the report reads it");
        let row = |name: &str| report.sites.iter().find(|s| s.site == name).unwrap_or_else(|| panic!("row {name}"));
        for (name, end, label) in
            [("upload_seen", "last_submit", "bracket to last submit"), ("upload_in_callee", "exit", "bracket to exit")]
        {
            let s = row(name);
            assert!(s.bracketed && s.bracket_ends == [end], "{s:?}");
            assert!(s.bytes > 0 && s.bandwidth_bytes_per_s.is_none(), "bytes, but no bandwidth: {s:?}");
            let table = report.sites_table(Units { raw: false }).to_text();
            let line = table.lines().find(|l| l.starts_with(&format!("{name} "))).expect("a table line");
            assert!(line.contains(label) && line.contains("≤ "), "{line}");
            assert!(!line.contains("/s"), "a bracket gets no bandwidth: {line}");
            let csv = report.table(CsvTable::Sites).to_csv();
            let line = csv.lines().find(|l| l.starts_with(&format!("{name},"))).expect("a CSV line");
            assert!(line.contains(label), "{line}");
        }
        let json = serde_json::to_value(&report).expect("the report serializes");
        let sites = json["sites"].as_array().expect("sites");
        let ends_of = |name: &str| sites.iter().find(|s| s["site"] == name).map(|s| s["bracket_ends"].clone());
        assert_eq!(ends_of("upload_seen"), Some(serde_json::json!(["last_submit"])));
        assert_eq!(ends_of("upload_in_callee"), Some(serde_json::json!(["exit"])));
        assert!(report
            .findings
            .iter()
            .any(|f| f.kind == "upper_bound" && f.message.contains("upload_in_callee") && f.message.contains("exit")));
        // GPUSPAN_TEST_KEEP=path keeps the capture (cli/tests/fixtures/lavapipe_brackets.gpuspan came
        // from here).
        if let Some(keep) = std::env::var_os("GPUSPAN_TEST_KEEP") {
            std::fs::copy(&path, keep).expect("the capture is kept");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
