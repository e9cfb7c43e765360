extern crate gpuspan as renamed;

#[renamed::gpu_kernel(crate = renamed)]
fn saxpy(n: u32) -> u32 {
    n
}

fn main() {
    assert_eq!(saxpy(3), 3);
}
