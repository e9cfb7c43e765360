//! Two wgpu majors in one process (features `wgpu-29` and `wgpu-30`).

mod wgpu_majors;
