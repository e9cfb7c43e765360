// One bad entry inside `fields(..)` or `skip(..)` hides none of the attribute's other errors:
// each is reported at its token.
use gpuspan::gpu_kernel;

#[gpu_kernel(nmae = "a", fields(%s), levl = "info")]
fn issue_example() {}

#[gpu_kernel(fields(a = , b = 1, c.), skip(1, x, 2), levl = "info")]
fn several_in_lists(x: u32) -> u32 {
    x
}

fn main() {}
