//! Proof that gpuspan costs nothing with its `enabled` feature off.
//!
//! This crate depends on gpuspan without features and must be built alone
//! (`cargo test -p gpuspan-off-check --release`), so that feature unification with the other
//! workspace members cannot turn instrumentation on. Each annotated function below has a plain
//! twin with the same body; `tests/machine_code.rs` checks that their machine code is identical
//! byte for byte. The bodies avoid calls and panics, whose relative addresses would differ
//! between two copies at different places even when the code is the same.

pub mod api;

use gpuspan::{gpu_kernel, gpu_transfer};

macro_rules! twins {
    ($annotated:ident, $plain:ident, #[$($attr:tt)*], fn($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[no_mangle]
        #[inline(never)]
        #[$($attr)*]
        pub extern "C" fn $annotated($($arg: $ty),*) -> $ret $body

        #[no_mangle]
        #[inline(never)]
        pub extern "C" fn $plain($($arg: $ty),*) -> $ret $body
    };
}

twins!(gpuspan_off_annotated_kernel, gpuspan_off_plain_kernel, #[gpu_kernel(name = "k", threshold_us = 5, trace_all)], fn(n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ 1442695040888963407);
    }
    x
});

twins!(gpuspan_off_annotated_transfer, gpuspan_off_plain_transfer, #[gpu_transfer(direction = cpu_to_gpu, bytes = len * 4)], fn(ptr: *const u32, len: usize) -> u32 {
    let mut acc = 0u32;
    let mut p = ptr;
    let end = ptr.wrapping_add(len);
    while p != end {
        // SAFETY: the caller passes a valid pointer and length.
        acc = acc.wrapping_add(unsafe { p.read() });
        p = p.wrapping_add(1);
    }
    acc
});

// An early exit and a branch, to cover the control flow the macro rewrites when enabled.
twins!(gpuspan_off_annotated_early, gpuspan_off_plain_early, #[gpu_kernel], fn(x: i64) -> i64 {
    if x < 0 {
        return -x;
    }
    x.wrapping_mul(3)
});

// `#[tracing::instrument]`'s arguments: the field values and the constant name are named in the
// off arm's `if false` block (so that what only they use does not warn) and the parameters are
// borrowed; none of it may leave machine code.
const TRACING_NAME: &str = "tracing_args";
const FIELD_KEY: &str = "from_a_constant";

twins!(gpuspan_off_annotated_tracing, gpuspan_off_plain_tracing, #[gpu_kernel(name = TRACING_NAME, target = "t", skip(seed), ret, fields(doubled = n.wrapping_mul(2), shown = %n, {FIELD_KEY} = 1, later))], fn(n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = x.wrapping_add(i ^ 0x9e37_79b9);
    }
    x
});

// The negative control: a different body must be told apart by the same comparison.
#[no_mangle]
#[inline(never)]
pub extern "C" fn gpuspan_off_plain_control(n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_sub(i);
    }
    x
}
