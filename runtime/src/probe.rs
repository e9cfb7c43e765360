//! How the generated code learns whether a value leaving the function is an error, without
//! knowing its type: autoref specialisation picks [`ProbeExit`] for `Result` and `Option`, and
//! the blanket [`ProbeOther`] for everything else (including generic types). With `enabled`
//! off only [`ByteCount`] is compiled: the off expansion names it (never calls it) so that a
//! `bytes = ..` of the wrong type is the same error in both modes.

#[cfg(feature = "enabled")]
/// What a value leaving a function (by `return`, `?` or the tail) says about the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `Ok(_)` / `Some(_)`: with `?`, the function goes on.
    Continue,
    /// `Err(_)`: the call failed; with `?`, the function returns.
    Error,
    /// `None`: with `?`, the function returns, but that is not a failure.
    Early,
    /// Any other type: nothing to learn from it.
    Unknown,
}

#[cfg(feature = "enabled")]
/// Wraps a reference to the value being probed.
#[derive(Debug)]
pub struct Probe<'a, T: ?Sized>(pub &'a T);

#[cfg(feature = "enabled")]
/// Chosen for `Result` and `Option` (method found on `Probe<T>` itself).
pub trait ProbeExit {
    fn gpuspan_exit(&self) -> Exit;
}

#[cfg(feature = "enabled")]
impl<T, E> ProbeExit for Probe<'_, Result<T, E>> {
    #[inline(always)]
    fn gpuspan_exit(&self) -> Exit {
        if self.0.is_err() {
            Exit::Error
        } else {
            Exit::Continue
        }
    }
}

#[cfg(feature = "enabled")]
impl<T> ProbeExit for Probe<'_, Option<T>> {
    #[inline(always)]
    fn gpuspan_exit(&self) -> Exit {
        if self.0.is_none() {
            Exit::Early
        } else {
            Exit::Continue
        }
    }
}

#[cfg(feature = "enabled")]
/// Chosen for every other type (method found only after auto-referencing).
pub trait ProbeOther {
    fn gpuspan_exit(&self) -> Exit;
}

#[cfg(feature = "enabled")]
impl<T: ?Sized> ProbeOther for &Probe<'_, T> {
    #[inline(always)]
    fn gpuspan_exit(&self) -> Exit {
        Exit::Unknown
    }
}

// Here rather than in `__private` (which only re-exports `byte_count`): errors name a trait by
// its path, and a user should read `gpuspan::probe::ByteCount`, not a `__private` one.
/// The integer types `bytes = <expr>` accepts. A trait of its own (rather than
/// `TryInto<u64>`) so that a float or other type gets one message that says what `bytes`
/// needs, at the expression, instead of `From<f64>` bounds of `u64`.
#[diagnostic::on_unimplemented(
    message = "`bytes = ...` must be an integer, not `{Self}`",
    label = "the number of bytes moved, of any integer type",
    note = "negative counts are taken as 0; convert other types explicitly, e.g. `bytes = (mb * 1e6) as u64`"
)]
pub trait ByteCount: Copy {
    fn to_byte_count(self) -> u64;
}

macro_rules! byte_count_for {
    ($($t:ty),*) => {$(
        impl ByteCount for $t {
            #[inline]
            fn to_byte_count(self) -> u64 {
                match u64::try_from(self) {
                    Ok(v) => v,
                    Err(_) if self < <$t>::default() => negative_byte_count(),
                    Err(_) => u64::MAX,
                }
            }
        }
    )*};
}
byte_count_for!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

/// A transfer's size from whatever integer type the user's expression has; negative sizes
/// count as 0 and sizes past `u64` saturate. Compiled in both modes: with `enabled` off the
/// expansion names it in dead code, so a wrong type is the same error at the same bound.
#[inline]
pub fn byte_count<T: ByteCount>(n: T) -> u64 {
    n.to_byte_count()
}

/// `fields(k = %v)`: `v` as the span records it, which needs `Display` (both modes, as
/// [`byte_count`]). Given `&&v`, so that an unsized `v` (`%*s` of a `str`) works; the result has
/// `Display` whatever `v` is, so a value without it is one error, here.
#[inline(always)]
pub fn display_field<T: std::fmt::Display>(v: &T) -> &dyn std::fmt::Display {
    v
}

/// `fields(k = ?v)`: `v` as the span records it, which needs `Debug` (both modes).
#[inline(always)]
pub fn debug_field<T: std::fmt::Debug>(v: &T) -> &dyn std::fmt::Debug {
    v
}

/// A `bytes = ..` expression came out negative: the call counts 0 bytes (and so gets no
/// bandwidth), and the summary says so once rather than keep it silent.
#[cfg(feature = "enabled")]
#[cold]
#[inline(never)]
fn negative_byte_count() -> u64 {
    crate::diagnostics::note_once(
        "a `bytes = ..` expression was negative: those calls count 0 bytes and get no bandwidth",
    );
    0
}

/// Off, no call is ever made (the off expansion only names `byte_count` in dead code).
#[cfg(not(feature = "enabled"))]
fn negative_byte_count() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "enabled")]
    // The borrows are the point: the generated code borrows, and must pick the right impl.
    #[allow(clippy::needless_borrow)]
    fn results_options_and_others_are_told_apart() {
        let ok: Result<u8, ()> = Ok(1);
        let err: Result<u8, ()> = Err(());
        assert_eq!((&Probe(&ok)).gpuspan_exit(), Exit::Continue);
        assert_eq!((&Probe(&err)).gpuspan_exit(), Exit::Error);
        assert_eq!((&Probe(&Some(1))).gpuspan_exit(), Exit::Continue);
        assert_eq!((&Probe(&None::<u8>)).gpuspan_exit(), Exit::Early);
        assert_eq!((&Probe(&5u32)).gpuspan_exit(), Exit::Unknown);
        fn generic<T>(t: T) -> Exit {
            (&Probe(&t)).gpuspan_exit()
        }
        assert_eq!(generic(err), Exit::Unknown, "generic types cannot be inspected");
    }

    #[test]
    fn byte_counts_take_any_integer_and_clamp_to_u64() {
        assert_eq!(4096u16.to_byte_count(), 4096);
        assert_eq!((-5i32).to_byte_count(), 0, "negative counts are 0");
        #[cfg(feature = "enabled")]
        assert!(
            crate::diagnostics::notes().iter().any(|n| n.contains("`bytes = ..` expression was negative")),
            "and said once: {:?}",
            crate::diagnostics::notes()
        );
        assert_eq!(u128::MAX.to_byte_count(), u64::MAX, "past u64 saturates");
        assert_eq!(usize::MAX.to_byte_count(), usize::MAX as u64);
    }
}
