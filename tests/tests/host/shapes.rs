//! Every function shape the attributes must support, each checked for what it records.

use gpuspan::{gpu_kernel, gpu_transfer};
use gpuspan_testing::{Capture, Record};
use rusty_fork::rusty_fork_test;

/// The calls of `name` that `f` makes on this thread (a capture sees only its own thread's
/// calls, so these tests run in parallel).
fn captured(name: &str, f: impl FnOnce()) -> Vec<Record> {
    let capture = Capture::start();
    f();
    capture.of(name)
}

#[gpu_kernel]
fn free_fn(x: u32) -> u32 {
    x * 2
}

rusty_fork_test! {
    #[test]
    fn free_function_records_one_host_timed_call() {
        let r = captured("free_fn", || assert_eq!(free_fn(21), 42));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].source(), gpuspan::TimingSource::Host);
        assert!(!r[0].error);
        assert!(r[0].host.end_ns >= r[0].host.start_ns);
    }
}

struct Model {
    weights: Vec<f32>,
}

trait Infer {
    fn infer(&self, x: f32) -> f32;
}

impl Model {
    #[gpu_kernel(name = "model.scale")]
    fn scale(&mut self, k: f32) -> &mut Vec<f32> {
        for w in &mut self.weights {
            *w *= k;
        }
        &mut self.weights
    }

    #[gpu_kernel]
    fn total(&self) -> f32 {
        self.weights.iter().sum()
    }

    #[gpu_kernel]
    fn into_weights(self) -> Vec<f32> {
        self.weights
    }
}

impl Infer for Model {
    #[gpu_kernel(name = "model.infer")]
    fn infer(&self, x: f32) -> f32 {
        self.total() * x
    }
}

rusty_fork_test! {
    #[test]
    fn methods_with_every_receiver_and_trait_impls() {
        let r = captured("model.scale", || {
            let mut m = Model { weights: vec![1.0, 2.0] };
            m.scale(2.0).push(0.0); // returns a borrow of `&mut self`
            assert_eq!(m.total(), 6.0);
            assert_eq!(m.infer(2.0), 12.0);
            assert_eq!(m.into_weights().len(), 3);
        });
        assert_eq!(r.len(), 1);
        for name in ["total", "model.infer", "into_weights"] {
            assert!(!captured(name, || {
                let m = Model { weights: vec![1.0] };
                m.infer(1.0);
                m.into_weights();
            })
            .is_empty());
        }
    }
}

// Bounds in both places on purpose: the attribute must keep each where it stands.
#[allow(clippy::multiple_bound_locations)]
#[gpu_kernel]
fn generic<T: Copy + Into<f64>, const N: usize>(xs: [T; N]) -> f64
where
    T: std::fmt::Debug,
{
    xs.iter().map(|x| (*x).into()).sum()
}

#[gpu_kernel]
fn returns_impl_trait(n: u32) -> impl Iterator<Item = u32> {
    (0..n).map(|i| i * i)
}

rusty_fork_test! {
    #[test]
    fn generics_where_clauses_and_impl_trait() {
        let r = captured("generic", || {
            assert_eq!(generic([1u8, 2, 3]), 6.0);
            assert_eq!(generic([1.5f32]), 1.5);
        });
        assert_eq!(r.len(), 2, "one site shared by every instantiation");
        let r = captured("returns_impl_trait", || assert_eq!(returns_impl_trait(4).sum::<u32>(), 14));
        assert_eq!(r.len(), 1);
    }
}

#[derive(Debug)]
struct Oops;

fn fallible(ok: bool) -> Result<u32, Oops> {
    if ok {
        Ok(1)
    } else {
        Err(Oops)
    }
}

#[gpu_kernel]
fn question_mark(ok: bool) -> Result<u32, Oops> {
    let v = fallible(ok)?;
    Ok(v + 1)
}

#[gpu_kernel]
fn early_return(n: i32) -> Result<i32, String> {
    if n < 0 {
        return Err(format!("negative: {n}"));
    }
    if n == 0 {
        return Ok(0);
    }
    Ok(n * 2)
}

#[gpu_kernel]
fn tail_err(fail: bool) -> Result<(), Oops> {
    if fail {
        Err(Oops)
    } else {
        Ok(())
    }
}

#[gpu_kernel]
fn option_question(v: Option<u32>) -> Option<u32> {
    let x = v?;
    Some(x + 1)
}

rusty_fork_test! {
    #[test]
    fn results_mark_errors_through_question_mark_return_and_tail() {
        let r = captured("question_mark", || {
            assert!(question_mark(true).is_ok());
            assert!(question_mark(false).is_err());
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [false, true]);
        let r = captured("early_return", || {
            assert!(early_return(-1).is_err());
            assert_eq!(early_return(0), Ok(0));
            assert_eq!(early_return(2), Ok(4));
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [true, false, false]);
        let r = captured("tail_err", || {
            assert!(tail_err(true).is_err());
            assert!(tail_err(false).is_ok());
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [true, false]);
        let r = captured("option_question", || {
            assert_eq!(option_question(None), None);
            assert_eq!(option_question(Some(1)), Some(2));
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [false, false], "None is not an error");
    }
}

#[gpu_kernel]
fn closures_keep_their_own_returns(v: &[i32]) -> Result<Vec<i32>, Oops> {
    let doubled: Vec<i32> = v
        .iter()
        .map(|x| {
            if *x < 0 {
                return 0; // the closure's return, not the function's
            }
            x * 2
        })
        .collect();
    let parsed: Result<Vec<u32>, Oops> = (|| Ok(vec![fallible(true)?]))();
    parsed?;
    Ok(doubled)
}

rusty_fork_test! {
    #[test]
    fn returns_inside_closures_are_not_the_functions() {
        let r = captured("closures_keep_their_own_returns", || {
            assert_eq!(closures_keep_their_own_returns(&[1, -1]).unwrap(), vec![2, 0]);
        });
        assert_eq!(r.len(), 1);
        assert!(!r[0].error);
    }
}

/// # Safety
/// `p` must point to a valid `u32`.
#[gpu_kernel]
unsafe fn unsafe_fn(p: *const u32) -> u32 {
    // SAFETY: the caller promises `p` is valid.
    unsafe { *p }
}

rusty_fork_test! {
    #[test]
    fn unsafe_functions() {
        let r = captured("unsafe_fn", || {
            let x = 7u32;
            // SAFETY: `&x` is valid.
            assert_eq!(unsafe { unsafe_fn(&x) }, 7);
        });
        assert_eq!(r.len(), 1);
    }
}

#[gpu_kernel]
fn panics(yes: bool) -> u32 {
    if yes {
        panic!("boom");
    }
    1
}

rusty_fork_test! {
    #[test]
    fn a_panic_still_closes_the_scope_marked_as_error() {
        let r = captured("panics", || {
            let caught = std::panic::catch_unwind(|| panics(true));
            assert!(caught.is_err());
            assert_eq!(panics(false), 1);
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [true, false]);
    }
}

#[gpu_kernel]
async fn async_kernel(x: u32) -> Result<u32, Oops> {
    let y = std::future::ready(x).await;
    if y == 0 {
        return Err(Oops);
    }
    let z = fallible(y > 1)?;
    Ok(y + z)
}

struct Service;
impl Service {
    #[gpu_kernel(name = "service.run")]
    async fn run(&self, x: u32) -> u32 {
        std::future::ready(x + 1).await
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    fn raw() -> RawWaker {
        fn clone(_: *const ()) -> RawWaker {
            raw()
        }
        fn noop(_: *const ()) {}
        static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    // SAFETY: the vtable's functions do nothing and never touch the data pointer.
    let waker = unsafe { Waker::from_raw(raw()) };
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

rusty_fork_test! {
    #[test]
    fn async_functions_and_async_methods() {
        let r = captured("async_kernel", || {
            assert!(block_on(async_kernel(0)).is_err());
            assert!(block_on(async_kernel(1)).is_err());
            assert_eq!(block_on(async_kernel(2)).unwrap(), 3);
        });
        assert_eq!(r.iter().map(|r| r.error).collect::<Vec<_>>(), [true, true, false]);
        let r = captured("service.run", || assert_eq!(block_on(Service.run(1)), 2));
        assert_eq!(r.len(), 1);
    }
}

#[gpu_transfer(direction = cpu_to_gpu)]
fn upload(data: &[f32]) -> usize {
    data.len()
}

#[gpu_transfer(direction = gpu_to_cpu, bytes = out.len() * 2)]
fn download(out: &mut Vec<u16>, n: usize) {
    out.resize(n, 0);
}

rusty_fork_test! {
    #[test]
    fn transfer_bytes_come_from_the_slice_or_the_expression() {
        let r = captured("upload", || assert_eq!(upload(&[0.0; 1000]), 1000));
        assert_eq!(r[0].bytes, Some(4000));
        let r = captured("download", || {
            let mut v = vec![0u16; 8];
            download(&mut v, 16);
        });
        assert_eq!(r[0].bytes, Some(16), "evaluated on entry, before the body runs");
    }
}

/// Doc comments and other attributes stay on the function.
#[gpu_kernel]
#[inline(never)]
#[must_use]
fn attributed(x: u8) -> u8 {
    #![allow(clippy::identity_op)]
    x + 0
}

rusty_fork_test! {
    #[test]
    fn outer_and_inner_attributes_are_kept() {
        let r = captured("attributed", || assert_eq!(attributed(3), 3));
        assert_eq!(r.len(), 1);
    }
}

#[gpu_kernel]
fn nested_outer() -> u32 {
    nested_inner() + 1
}

#[gpu_kernel]
fn nested_inner() -> u32 {
    1
}

rusty_fork_test! {
    #[test]
    fn nested_calls_nest_in_time() {
        let capture = Capture::start();
        assert_eq!(nested_outer(), 2);
        let outer = &capture.of("nested_outer")[0];
        let inner = &capture.of("nested_inner")[0];
        assert!(outer.host.start_ns <= inner.host.start_ns && inner.host.end_ns <= outer.host.end_ns);
    }
}

#[gpu_kernel]
fn diverges() -> ! {
    panic!("never returns")
}

rusty_fork_test! {
    #[test]
    fn diverging_functions_compile_and_record() {
        let r = captured("diverges", || assert!(std::panic::catch_unwind(|| diverges()).is_err()));
        assert_eq!(r.len(), 1);
        assert!(r[0].error);
    }
}

#[gpu_kernel(trace_all)]
fn with_local_lifetimes<'a>(a: &'a str, _b: &str) -> &'a str {
    &a[1..]
}

rusty_fork_test! {
    #[test]
    fn explicit_lifetimes() {
        let r = captured("with_local_lifetimes", || assert_eq!(with_local_lifetimes("xyz", "q"), "yz"));
        assert_eq!(r.len(), 1);
    }
}

#[gpu_kernel(track_memory)]
fn grows(mib: usize) -> Vec<u8> {
    vec![1u8; mib << 20]
}

rusty_fork_test! {
    #[test]
    fn track_memory_records_the_growth_of_one_call() {
        let mut kept = Vec::new();
        let r = captured("grows", || kept.push(grows(64)));
        let (before, after) = r[0].memory.expect("track_memory sites carry memory marks");
        if cfg!(target_os = "linux") {
            let (b, a) = (before.process_rss_bytes.unwrap(), after.process_rss_bytes.unwrap());
            assert!(a >= b + (32 << 20), "RSS {b} -> {a} over a call that touched 64 MiB");
            let attrs = r[0].attributes();
            assert!(attrs.iter().any(|(k, _)| *k == "process.memory.rss_delta_bytes"));
        }
        let summary = gpuspan::summary().to_string();
        assert!(summary.contains("memory per call (track_memory)"), "{summary}");
        assert!(r.iter().all(|r| !r.error));
        drop(kept);
    }
}
