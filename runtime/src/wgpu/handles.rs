//! Which wgpu values the generated code accepts as a recorder, queue or device: the objects
//! themselves, references to them, and (for queue and device) `Arc`s. The traits are defined
//! once; each major implements them for its own types (`major.rs`).

use super::api::Recorder;

/// A recorder, or a mutable reference to one.
///
/// The message is what a user sees for `encoder = <expr>` of the wrong type, at the expression:
/// it must name the user's mistake, not this trait.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a wgpu command encoder, compute pass or render pass",
    label = "`encoder = ...` needs a `wgpu::CommandEncoder`, `ComputePass` or `RenderPass`, or a `&mut` to one",
    note = "pass the recorder the timed commands go into, e.g. `encoder = *enc` or `encoder = self.encoder`"
)]
pub trait AsRecorder {
    /// The encoder or pass the queries are written into.
    type Recorder: Recorder;
    /// The recorder behind this value.
    fn as_recorder(&mut self) -> &mut Self::Recorder;
}

impl<T: AsRecorder + ?Sized> AsRecorder for &mut T {
    type Recorder = T::Recorder;
    fn as_recorder(&mut self) -> &mut T::Recorder {
        (**self).as_recorder()
    }
}

/// The recorder type is a parameter bound by equality, not a projection in the return type: a
/// value of the wrong type is then one unmet bound (one error), not a second one for
/// normalising `A::Recorder`.
pub fn as_recorder<A, R>(a: &mut A) -> &mut R
where
    A: AsRecorder<Recorder = R> + ?Sized,
{
    a.as_recorder()
}

/// Borrowing a wgpu handle out of the ways programs hold one.
///
/// The message is what a user sees for `queue = <expr>` / `device = <expr>` of the wrong type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `{T}`",
    label = "expected a `{T}`, a reference to one or an `Arc` of one"
)]
pub trait AsHandle<T> {
    /// The handle behind this value.
    fn as_handle(&self) -> &T;
}

impl<T, H: AsHandle<T> + ?Sized> AsHandle<T> for &H {
    fn as_handle(&self) -> &T {
        (**self).as_handle()
    }
}

impl<T, H: AsHandle<T> + ?Sized> AsHandle<T> for &mut H {
    fn as_handle(&self) -> &T {
        (**self).as_handle()
    }
}

/// Called by the generated code on `queue = <expr>` or a `&Queue` parameter: the queue's major
/// is the one `Q` is a handle of (`api::Queue`, the scope's bound, says when it is none).
pub fn as_queue<Q: AsHandle<T> + ?Sized, T: super::api::Queue>(q: &Q) -> &T {
    q.as_handle()
}

/// Called by the generated code on `device = <expr>` or a `&Device` parameter.
pub fn as_device<D: AsHandle<T> + ?Sized, T: super::api::Device>(d: &D) -> &T {
    d.as_handle()
}

/// Where `range` starts in a buffer of `size` bytes and how long it is, as
/// `copy_buffer_to_buffer` takes it (`read_buffer`, on and off).
pub(crate) fn byte_range(range: impl std::ops::RangeBounds<u64>, size: u64) -> (u64, u64) {
    use std::ops::Bound;
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e + 1,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => size,
    };
    (start, end.saturating_sub(start))
}
