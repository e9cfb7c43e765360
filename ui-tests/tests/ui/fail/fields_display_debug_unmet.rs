use gpuspan::gpu_kernel;

struct Config;

#[gpu_kernel(fields(shown = %Config))]
fn shown() {}

#[gpu_kernel(fields(debugged = ?Config))]
fn debugged() {}

fn main() {}
