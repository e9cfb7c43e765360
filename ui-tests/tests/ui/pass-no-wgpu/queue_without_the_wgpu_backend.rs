// A program that names its queue (`queue = ...`) in a build whose gpuspan has no `wgpu` feature:
// sync and async functions, the queue in a struct field, an early return and `?`. They compile
// with gpuspan on or off (the `enabled` build without `wgpu` once failed here with E0282).

struct Queue;

impl Queue {
    fn submit(&self, work: Option<u32>) -> u32 {
        work.unwrap_or(0)
    }
}

struct Uploader {
    queue: Queue,
}

impl Uploader {
    #[gpuspan::gpu_transfer(queue = self.queue, direction = cpu_to_gpu)]
    fn upload(&self, data: &[u8]) -> Result<u32, String> {
        if data.is_empty() {
            return Err("nothing to upload".to_owned());
        }
        Ok(self.queue.submit(Some(data.len() as u32)))
    }

    #[gpuspan::gpu_kernel(queue = self.queue)]
    async fn step(&self, n: u32) -> Result<u32, String> {
        let done = self.queue.submit(Some(n));
        let checked: u32 = done.checked_add(1).ok_or("overflow")?;
        Ok(checked)
    }
}

fn main() {
    let u = Uploader { queue: Queue };
    assert_eq!(u.upload(&[1, 2, 3]), Ok(3));
    let _future = u.step(1);
}
