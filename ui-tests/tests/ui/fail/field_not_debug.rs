use gpuspan::gpu_kernel;

struct Config;

#[gpu_kernel(fields(config))]
fn saxpy(config: &Config) {}

fn main() {}
