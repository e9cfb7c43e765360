use gpuspan::gpu_kernel;

struct Config;

#[gpu_kernel(fields(config = Config))]
fn saxpy() {}

fn main() {}
