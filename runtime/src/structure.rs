//! Structural checks of the crate's layout, on its sources (read at run time, so the same in
//! every feature set): the backends' seam (docs/architecture.md, "Adding a backend"), the
//! collector's layering ("Who knows whom"), the one reader of each `GPUSPAN_*` variable
//! (decision 70) and CUDA timing's one static.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A source file's code: comments dropped, and without its unit tests (each item under a
/// `test` cfg, nested ones too, up to where its braces close or, with none, its `;`).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut kept, mut skipping, mut depth, mut opened) = (Vec::new(), false, 0i32, false);
    for line in text.lines() {
        if !skipping {
            let t = line.trim();
            if t == "#[cfg(test)]" || t.starts_with("#[cfg(all(test,") {
                (skipping, depth, opened) = (true, 0, false);
            } else {
                kept.push(line.split("//").next().unwrap_or(""));
            }
            continue;
        }
        let (opens, closes) = (line.matches('{').count() as i32, line.matches('}').count() as i32);
        opened |= opens > 0;
        depth += opens - closes;
        skipping = if opened { depth > 0 } else { !line.trim_end().ends_with(';') };
    }
    kept.join("\n")
}

/// The code of every file under `dir`, by path relative to runtime/src.
fn sources(dir: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under src").to_string_lossy().replace('\\', "/");
                out.insert(rel, code(&path));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &src(), &mut out);
    out
}

/// The core files a backend plugs into: none names a backend's feature or module
/// (`imp/backends.rs` is the one place that does).
#[test]
fn the_core_names_no_backend() {
    let names = [
        "feature = \"cuda\"",
        "feature = \"_wgpu\"",
        "feature = \"nvtx\"",
        "crate::cuda",
        "crate::wgpu",
        "backends::nvtx",
    ];
    let core = [
        "imp/scope.rs",
        "imp/scope/host_span.rs",
        "imp/call.rs",
        "imp/pipeline.rs",
        "imp/aggregate.rs",
        "record/mod.rs",
        "export/summary.rs",
    ];
    let mut found = Vec::new();
    for file in core {
        for (i, line) in code(&src().join(file)).lines().enumerate() {
            if let Some(name) = names.iter().find(|n| line.contains(*n)) {
                found.push(format!("{file}:{}: {name}", i + 1));
            }
        }
    }
    assert!(found.is_empty(), "the core names a backend: {found:?}");
}

/// The span layer opens and tags its scopes through the seam, not through a backend's
/// module (and `init.rs` starts span backends through the seam too, `span_selected`).
#[test]
fn the_span_layer_reaches_backends_through_the_seam() {
    let names = ["crate::cuda", "crate::wgpu", "GpuScope::"];
    let mut found = Vec::new();
    for file in ["span_scopes.rs", "span_scopes/imp/selected.rs"] {
        for (i, line) in code(&src().join(file)).lines().enumerate() {
            if let Some(name) = names.iter().find(|n| line.contains(*n)) {
                found.push(format!("{file}:{}: {name}", i + 1));
            }
        }
    }
    assert!(found.is_empty(), "the span layer names a backend: {found:?}");
}

/// Every `static` item of a file's code (outside thread-locals).
fn statics(code: &str) -> Vec<String> {
    let (mut out, mut in_thread_local) = (Vec::new(), false);
    for line in code.lines() {
        let t = line.trim_start();
        if t.starts_with("thread_local!") {
            in_thread_local = true;
        } else if in_thread_local {
            in_thread_local = t != "}";
        } else {
            let item = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub(super) ")).unwrap_or(t);
            let item = item.strip_prefix("pub ").unwrap_or(item);
            if let Some(name) = item.strip_prefix("static ").and_then(|r| r.split(':').next()) {
                out.push(name.trim().to_owned());
            }
        }
    }
    out
}

/// CUDA timing's state is owned by one struct in one static (`cuda::CUDA`); the only other
/// statics are gpuspan's own sites for unattributed work and work during several spans,
/// sites like every annotated function's. The sources are read whichever features this build
/// has (a `tests.rs` is a test module's).
#[test]
fn cuda_timing_is_held_in_one_static() {
    let mut found: Vec<String> = sources(&src().join("cuda"))
        .iter()
        .filter(|(file, _)| !file.ends_with("tests.rs"))
        .flat_map(|(_, code)| statics(code))
        .collect();
    found.sort();
    assert_eq!(found, ["CUDA", "DURING_SEVERAL", "UNATTRIBUTED"]);
}

/// The file of module path `a::b` (`a/b.rs` or `a/b/mod.rs`, under the crate root's `imp/`
/// for the modules lib.rs re-exports from there), if there is one.
fn file_of(module: &str) -> Option<PathBuf> {
    let rel = module.replace("::", "/");
    [src(), src().join("imp")]
        .into_iter()
        .flat_map(|dir| [dir.join(format!("{rel}.rs")), dir.join(&rel).join("mod.rs")])
        .find(|p| p.exists())
}

/// Every file the collector names (its parts' types, what it calls) does not reach the
/// process's collector: the hub names only what is below it, so the parts read bottom-up
/// (decision 66). The one exception left is named with its reason.
#[test]
fn what_the_collector_names_does_not_reach_the_collector() {
    let known: [&str; 0] = [];
    let collector = code(&src().join("imp/collector.rs"));
    let mut parts: Vec<String> = Vec::new();
    for piece in collector.split("crate::").skip(1) {
        let path: String = piece.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        // The longest module prefix that is a file: where the part's type is defined or
        // re-exported.
        let Some(module) = (1..=segments.len()).rev().map(|n| segments[..n].join("::")).find(|m| file_of(m).is_some())
        else {
            continue;
        };
        if module != "collector" && !parts.contains(&module) {
            parts.push(module);
        }
    }
    assert!(parts.len() >= 15, "the collector's parts were not found: {parts:?}");
    let reaching: Vec<&String> = parts
        .iter()
        .filter(|m| !known.contains(&m.as_str()))
        .filter(|m| code(&file_of(m).unwrap()).contains("crate::collector"))
        .collect();
    assert!(reaching.is_empty(), "parts whose file reaches the collector (a circle through the hub): {reaching:?}");
}

/// Each reader of `imp/env.rs` (a function that names a `GPUSPAN_*` variable) and the
/// variables it names.
fn readers(env: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for piece in env.split("fn ").skip(1) {
        let name: String = piece.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let vars: Vec<String> = piece
            .split("\"GPUSPAN")
            .skip(1)
            .map(|v| {
                format!("GPUSPAN{}", v.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect::<String>())
            })
            .collect();
        if !vars.is_empty() {
            out.push((name, vars));
        }
    }
    out
}

/// Each `GPUSPAN_*` variable is read in one place (decision 70): no file but `imp/env.rs`
/// reads the environment for one, each is named by one reader there, each reader is called
/// from one file, and the readers of the settings `Config` holds are called from `Config` only
/// (config/imp.rs), so that `init()`, or the first use without it, resolves them once
/// (settings.rs).
#[test]
fn each_gpuspan_variable_is_read_in_one_place() {
    let sources = sources(&src());
    let env = &sources["imp/env.rs"];
    for (file, code) in &sources {
        if file == "imp/env.rs" {
            continue;
        }
        for line in code.lines() {
            let reads = ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("].iter().any(|r| line.contains(r));
            assert!(!(reads && line.contains("GPUSPAN")), "{file} reads a GPUSPAN_* variable itself: {line}");
        }
    }
    let readers = readers(env);
    assert!(readers.len() >= 18, "the readers were not found: {readers:?}");
    let mut named: BTreeMap<&str, &str> = BTreeMap::new();
    for (reader, vars) in &readers {
        for var in vars {
            if let Some(other) = named.insert(var, reader) {
                assert_eq!(other, reader, "{var} is named by two readers, {other} and {reader}");
            }
        }
        let callers: Vec<&String> = sources
            .iter()
            .filter(|(file, code)| *file != "imp/env.rs" && code.contains(&format!("env::{reader}(")))
            .map(|(file, _)| file)
            .collect();
        assert_eq!(callers.len(), 1, "the reader of {vars:?} ({reader}) is called from {callers:?}, not one file");
    }
    for reader in
        ["summary", "trace_file", "trace_format", "capture", "threshold_us", "trace_all", "on_signal", "live", "spans"]
    {
        let callers: Vec<&String> = sources
            .iter()
            .filter(|(file, code)| *file != "imp/env.rs" && code.contains(&format!("env::{reader}(")))
            .map(|(file, _)| file)
            .collect();
        assert_eq!(callers, ["config/imp.rs"], "the setting read by env::{reader} is read outside `Config`");
    }
}
