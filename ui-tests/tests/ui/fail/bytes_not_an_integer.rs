use gpuspan::gpu_transfer;

#[gpu_transfer(direction = cpu_to_gpu, bytes = megabytes * 1e6)]
fn upload(megabytes: f64) {}

fn main() {}
