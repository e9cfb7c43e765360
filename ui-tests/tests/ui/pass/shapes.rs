use gpuspan::{gpu_kernel, gpu_transfer};

#[gpu_kernel(name = "saxpy", threshold_us = 50, trace_all, level = "debug", fields(n, scaled = n * 2))]
fn saxpy(n: u32) -> u32 {
    n
}

#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(data: &[f32]) -> usize {
    data.len()
}

#[gpu_transfer(direction = gpu_to_cpu, bytes = n * 4, skip(other))]
fn download(n: usize, other: &[u8]) -> Result<Vec<u8>, String> {
    let v = vec![0; n];
    if other.is_empty() {
        return Err("empty".into());
    }
    Ok(v)
}

struct S(u32);

impl S {
    #[gpu_kernel]
    fn get(&mut self) -> &mut u32 {
        &mut self.0
    }

    #[gpu_kernel]
    async fn later(&self) -> u32 {
        self.0
    }
}

#[gpu_kernel(track_memory, name = "tracked")]
fn tracked(n: usize) -> Vec<u8> {
    vec![0; n]
}

#[gpu_kernel]
fn generic<T: Clone>(t: &T) -> impl Clone + use<T> {
    t.clone()
}

fn main() {
    assert_eq!(saxpy(2), 2);
    assert_eq!(upload(&[1.0]), 1);
    assert!(download(1, &[]).is_err());
    let mut s = S(1);
    *s.get() += 1;
    let _ = s.later();
    let _ = generic(&1u8);
    assert_eq!(tracked(3).len(), 3);
}
