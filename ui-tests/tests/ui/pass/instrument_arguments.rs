//! Every argument `#[tracing::instrument]` takes compiles with tracing's meaning, with
//! instrumentation on and off, and warning-free both ways (issue 26).
#![deny(warnings)]
use gpuspan::gpu_kernel;
use std::future::Future;
use std::pin::Pin;
use tracing::field::Empty;

const NAME: &str = "named_by_a_constant";
const TARGET: &str = "my_target";
const KEY: &str = "key_from_a_constant";

#[derive(Debug)]
struct S(u32);

impl S {
    #[gpu_kernel(skip(self))]
    fn skip_self(&self, n: u32) -> u32 {
        self.0 + n
    }

    #[gpu_kernel]
    fn self_recorded(&self) -> u32 {
        self.0
    }

    #[gpu_kernel(skip_all)]
    async fn skip_all_async(&self, n: u32) -> u32 {
        self.0 + n
    }
}

#[gpu_kernel(ret, err(Debug))]
fn ret_and_err(fail: bool) -> Result<u32, String> {
    if fail {
        return Err("failed".into());
    }
    Ok(1)
}

#[gpu_kernel(ret(Display), level = "debug")]
fn ret_display() -> u32 {
    2
}

#[gpu_kernel(err(Display, level = "warn"))]
fn err_display() -> Result<(), String> {
    Ok(())
}

#[gpu_kernel(name = NAME, target = TARGET)]
fn constants() {}

#[gpu_kernel("bare_string_name", target = "kernels")]
fn bare_name() {}

#[gpu_kernel(parent = None, follows_from = [tracing::Span::current().id()])]
fn parent_and_causes() {}

// An import used only inside `fields(..)` does not warn with instrumentation off.
#[gpu_kernel(fields(f = Empty, %n, shown = %n, dbg = ?n, {KEY} = 1, later))]
fn sigils_and_keys(n: u32) {}

#[gpu_kernel(level = tracing::Level::WARN)]
fn returns_impl_future(n: u32) -> impl Future<Output = u32> {
    async move { n + 1 }
}

#[gpu_kernel]
fn returns_boxed_future(n: u32) -> Pin<Box<dyn Future<Output = u32> + Send>> {
    Box::pin(async move { n + 2 })
}

fn main() {
    assert_eq!(S(1).skip_self(1), 2);
    assert_eq!(S(1).self_recorded(), 1);
    drop(S(1).skip_all_async(1));
    assert!(ret_and_err(true).is_err());
    assert_eq!(ret_display(), 2);
    assert!(err_display().is_ok());
    constants();
    bare_name();
    parent_and_causes();
    sigils_and_keys(3);
    drop(returns_impl_future(1));
    drop(returns_boxed_future(1));
}
