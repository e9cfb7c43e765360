//! How the generated code learns whether a value leaving the function is an error, without
//! knowing its type: autoref specialisation picks [`ProbeExit`] for `Result` and `Option`, and
//! the blanket [`ProbeOther`] for everything else (including generic types). With `enabled`
//! off only [`ByteCount`] is compiled: the off expansion names it (never calls it) so that a
//! `bytes = ..` of the wrong type is the same error in both modes.

// The exit probe: only the instrumented expansion asks how a call ended.
#[cfg(feature = "enabled")]
mod imp;
#[cfg(feature = "enabled")]
pub use imp::{Exit, Probe, ProbeExit, ProbeOther};

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
/// bandwidth), and the summary says so once rather than keep it silent. Off, no call is ever
/// made (the off expansion only names `byte_count` in dead code).
#[cold]
#[inline(never)]
fn negative_byte_count() -> u64 {
    crate::diagnostics::note_once(
        "a `bytes = ..` expression was negative: those calls count 0 bytes and get no bandwidth",
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

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
