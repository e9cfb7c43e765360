//! The argument spellings `#[tracing::instrument]` users type are accepted, and a parameter used
//! only by the attribute's arguments does not warn as unused, with instrumentation on or off.
#![deny(warnings)]
use gpuspan::{gpu_kernel, gpu_transfer};

#[gpu_kernel(level = Level::INFO)]
fn level_path() {}

#[gpu_kernel(level = tracing::Level::DEBUG)]
fn level_full_path() {}

#[gpu_kernel(level = "WARN")]
fn level_string_any_case() {}

#[gpu_kernel(level = error)]
fn level_ident() {}

#[gpu_kernel(level = 1)]
fn level_number() {}

#[gpu_kernel(err)]
fn with_err(fail: bool) -> Result<(), String> {
    if fail {
        Err("failed".into())
    } else {
        Ok(())
    }
}

// `skip_all` keeps every parameter out of inference; `fields` still records what it names.
#[gpu_transfer(direction = cpu_to_gpu, skip_all, bytes = 16, fields(id))]
fn skip_all_then_fields(id: u32, data: &[u8], more: &[u8]) -> usize {
    data.len() + more.len()
}

// Used only by the attribute: in `fields`, in a field's expression, in `bytes`.
#[gpu_kernel(fields(n, doubled = m * 2))]
fn only_in_fields(n: u32, m: u32) {}

#[gpu_transfer(direction = gpu_to_cpu, bytes = count * 4)]
fn only_in_bytes(count: usize) {}

#[gpu_kernel(fields(n))]
async fn async_only_in_fields(n: u32) {}

fn main() {
    level_path();
    level_full_path();
    level_string_any_case();
    level_ident();
    level_number();
    assert!(with_err(true).is_err());
    assert_eq!(skip_all_then_fields(1, &[1], &[2, 3]), 3);
    only_in_fields(1, 2);
    only_in_bytes(3);
    drop(async_only_in_fields(4));
}
