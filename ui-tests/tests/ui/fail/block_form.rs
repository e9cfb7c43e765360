fn main() {
    let _ = gpuspan::kernel!({ 1 });
    let _ = gpuspan::kernel!("step");
    let _ = gpuspan::kernel!("step", { 1 }, trace_all);
    let _ = gpuspan::kernel!("step", bogus = 1, { 1 });
    let _ = gpuspan::transfer!("upload", { 1 });
}
