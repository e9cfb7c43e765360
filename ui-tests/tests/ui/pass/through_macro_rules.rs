//! Annotated functions written out by a `macro_rules!` macro (as off-check's `twins!` and many
//! libraries do): the body comes from the macro's caller, the attribute from the macro, and the
//! scope's own names must resolve across that hygiene boundary, for each shape of expansion.
#![deny(warnings)]
use gpuspan::{gpu_kernel, gpu_transfer};
use std::future::Future;

macro_rules! annotated {
    (#[$($attr:tt)*] fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[$($attr)*]
        pub fn $name($($arg: $ty),*) -> $ret $body
    };
    (#[$($attr:tt)*] async fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[$($attr)*]
        pub async fn $name($($arg: $ty),*) -> $ret $body
    };
}

annotated!(#[gpu_kernel(name = "k", trace_all)] fn plain(n: u64) -> u64 {
    n.wrapping_mul(3)
});

annotated!(#[gpu_transfer(direction = cpu_to_gpu, bytes = len * 4)] fn copy(len: usize) -> usize {
    len
});

annotated!(#[gpu_kernel] fn fallible(n: u32) -> Result<u32, String> {
    if n == 0 {
        return Err("zero".to_owned());
    }
    let m: u32 = "7".parse::<u32>().map_err(|e| e.to_string())?;
    Ok(n + m)
});

annotated!(#[gpu_kernel] fn opaque(n: u32) -> impl Fn() -> u32 {
    move || n
});

annotated!(#[gpu_kernel] async fn awaited(n: u32) -> u32 {
    n + 1
});

annotated!(#[gpu_kernel] fn returns_future(n: u32) -> impl Future<Output = u32> {
    async move { n + 2 }
});

fn main() {
    let _ = (plain(1), copy(2), fallible(3), opaque(4)());
    let _ = (awaited(5), returns_future(6));
}
