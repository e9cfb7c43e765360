//! A block's value where `rustc` flags braces around a single expression (an argument, an
//! array length is a const context and cannot hold a block): warning-free in both modes.
#![deny(warnings)]
use gpuspan::{kernel, transfer};

fn id(x: u32) -> u32 {
    x
}

fn first(v: &[u32]) -> Option<u32> {
    let x = id(kernel!("tail", { v.len() as u32 }));
    let y = id(transfer!("copy", direction = cpu_to_gpu, bytes = v.len(), { x + 1 }));
    let z = kernel!("early", {
        if v.is_empty() {
            return None;
        }
        v[0]
    });
    let w: u32 = kernel!("question", { v.first().copied()? });
    Some(x + y + z + w)
}

fn main() {
    let _ = first(&[1, 2]);
}
