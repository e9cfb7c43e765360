//! With gpuspan's `enabled` feature off, an annotated function compiles to exactly the machine
//! code of the same function without the attribute, and no gpuspan runtime is linked in.
//!
//! Meaningful in release builds (`cargo test -p gpuspan-off-check --release`, as scripts/test
//! runs it); a debug build is still checked but says so.

use object::{Object, ObjectSection, ObjectSymbol};

/// The bytes of every defined function symbol in this test binary, by name.
fn functions() -> std::collections::HashMap<String, Vec<u8>> {
    let path = std::env::current_exe().expect("test binary path");
    let data = std::fs::read(&path).expect("read test binary");
    let file = object::File::parse(&*data).expect("parse test binary");
    let mut out = std::collections::HashMap::new();
    for sym in file.symbols() {
        let (Ok(name), Some(index)) = (sym.name(), sym.section_index()) else { continue };
        if sym.kind() != object::SymbolKind::Text || sym.size() == 0 {
            continue;
        }
        let section = file.section_by_index(index).expect("section");
        let Some(bytes) = section.data_range(sym.address(), sym.size()).ok().flatten() else { continue };
        out.insert(name.trim_start_matches('_').to_owned(), bytes.to_vec());
    }
    out
}

#[test]
fn annotated_functions_compile_to_the_plain_machine_code() {
    // Keep the functions linked in.
    let keep: [*const (); 9] = [
        gpuspan_off_check::gpuspan_off_annotated_kernel as *const (),
        gpuspan_off_check::gpuspan_off_plain_kernel as *const (),
        gpuspan_off_check::gpuspan_off_annotated_transfer as *const (),
        gpuspan_off_check::gpuspan_off_plain_transfer as *const (),
        gpuspan_off_check::gpuspan_off_annotated_early as *const (),
        gpuspan_off_check::gpuspan_off_plain_early as *const (),
        gpuspan_off_check::gpuspan_off_annotated_tracing as *const (),
        gpuspan_off_check::gpuspan_off_plain_tracing as *const (),
        gpuspan_off_check::gpuspan_off_plain_control as *const (),
    ];
    std::hint::black_box(keep);
    if cfg!(debug_assertions) {
        eprintln!("note: debug build; scripts/test runs this in release, where it proves zero cost");
    }
    let f = functions();
    let get = |name: &str| f.get(name).unwrap_or_else(|| panic!("symbol {name} not found in the test binary"));
    for shape in ["kernel", "transfer", "early", "tracing"] {
        let annotated = get(&format!("gpuspan_off_annotated_{shape}"));
        let plain = get(&format!("gpuspan_off_plain_{shape}"));
        assert!(!plain.is_empty());
        assert_eq!(annotated, plain, "`{shape}`: machine code differs with gpuspan off");
        eprintln!("{shape}: {} bytes, identical", plain.len());
    }
    assert_ne!(
        get("gpuspan_off_plain_control"),
        get("gpuspan_off_plain_kernel"),
        "the comparison can tell bodies apart"
    );
}

#[test]
fn no_gpuspan_runtime_is_linked_in() {
    let f = functions();
    let runtime: Vec<&String> = f
        .keys()
        .filter(|n| n.contains("GPUSPAN_SITE") || n.contains("gpuspan5scope") || n.contains("inventory"))
        .collect();
    assert!(runtime.is_empty(), "runtime symbols present with the feature off: {runtime:?}");
}
