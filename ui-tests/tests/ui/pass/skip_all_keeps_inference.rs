//! `skip` and `skip_all` only say which parameters are recorded, as with `#[instrument]`:
//! the slice still sizes the transfer (no `bytes = ..` needed).
#![deny(warnings)]
use gpuspan::{gpu_kernel, gpu_transfer};

#[gpu_transfer(direction = cpu_to_gpu, skip_all)]
fn upload(data: &[u8]) -> usize {
    data.len()
}

#[gpu_transfer(direction = gpu_to_cpu, skip(data), fields(n = data.len()))]
fn download(data: &[u8]) -> usize {
    data.len()
}

/// Two slices: `untimed` says which one does not size the call.
#[gpu_transfer(direction = cpu_to_gpu, untimed(scratch))]
fn staged(data: &[u8], scratch: &mut [u8]) -> usize {
    scratch.len() + data.len()
}

#[gpu_kernel(skip_all, fields(n))]
fn scaled(n: u32) -> u32 {
    n * 2
}

fn main() {
    let mut scratch = [0u8; 2];
    let _ = upload(&[1, 2]) + download(&[3]) + staged(&[4], &mut scratch) + scaled(2) as usize;
}
