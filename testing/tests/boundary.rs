//! The boundary of decision 72, read from the sources: the runtime has no `testing` feature and
//! no item gated on one, and this crate reaches the runtime's hidden items only through
//! `gpuspan::__testing` (not `__private`, the expansion's).

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_runtime_has_no_testing_feature() {
    let manifest = std::fs::read_to_string(workspace().join("runtime/Cargo.toml")).expect("runtime/Cargo.toml");
    let features = manifest.split("[features]").nth(1).expect("a [features] table");
    let features = features.split("\n[").next().unwrap_or_default();
    let named: Vec<&str> = features
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
        .filter(|k| !k.starts_with('#'))
        .collect();
    assert!(named.contains(&"enabled"), "the table was read: {named:?}");
    assert!(!named.contains(&"testing"), "runtime/Cargo.toml declares a `testing` feature: {named:?}");

    let mut files = Vec::new();
    rust_files(&workspace().join("runtime/src"), &mut files);
    assert!(files.len() > 50, "runtime/src was read: {} files", files.len());
    let gated: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("a source file");
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("feature = \"testing\""))
                .map(|(i, _)| format!("{}:{}", f.display(), i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(gated.is_empty(), "items gated on a `testing` feature: {gated:?}");
}

#[test]
fn this_crate_reaches_the_runtime_through_one_hidden_module() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file");
        for (i, _) in text.match_indices("gpuspan::__") {
            assert!(
                text[i..].starts_with("gpuspan::__testing"),
                "{}: a hidden item outside `__testing`: {}",
                f.display(),
                text[i..].lines().next().unwrap_or_default()
            );
        }
        assert!(text.contains("gpuspan::__testing"), "{} names no `__testing` item", f.display());
    }
}
