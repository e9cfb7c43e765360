use gpuspan::kernel;

// A block's scope opens at run time: not in a const context, with measuring on or off.
const fn three() -> u32 {
    kernel!("three", { 3 })
}

fn main() {
    let _ = three();
}
