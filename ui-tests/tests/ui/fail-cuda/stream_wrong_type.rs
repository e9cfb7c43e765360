// `stream = ...` names something that is no CUDA stream: one error at the expression, saying
// what it needs (with the `cuda` backend; without it there is no stream type to check).
struct Launcher {
    threads: u32,
}

#[gpuspan::gpu_kernel(stream = launcher)]
fn launch(launcher: &Launcher) -> u32 {
    launcher.threads
}

fn main() {
    let _ = launch(&Launcher { threads: 4 });
}
