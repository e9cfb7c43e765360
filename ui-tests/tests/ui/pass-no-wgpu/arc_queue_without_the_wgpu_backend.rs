// A program whose own `Queue` and `Device` types are passed in `Arc`s, in a build whose gpuspan
// has no `wgpu` feature: they compile with gpuspan on or off (the `enabled` build once failed
// on a by-value `Arc<Queue>` with E0308, expected `&_`).

use std::sync::Arc;

struct Queue;
struct Device;

impl Queue {
    fn submit(&self, n: u32) -> u32 {
        n
    }
}

#[gpuspan::gpu_kernel]
fn by_arc(queue: Arc<Queue>, n: u32) -> u32 {
    queue.submit(n)
}

#[gpuspan::gpu_kernel]
fn by_ref_arc(device: &Arc<Device>, queue: &Arc<Queue>, n: u32) -> u32 {
    let _ = device;
    queue.submit(n)
}

#[gpuspan::gpu_kernel]
fn device_arc(device: Arc<Device>) {
    let _ = device;
}

fn main() {
    assert_eq!(by_arc(Arc::new(Queue), 2), 2);
    assert_eq!(by_ref_arc(&Arc::new(Device), &Arc::new(Queue), 3), 3);
    device_arc(Arc::new(Device));
}
