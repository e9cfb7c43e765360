//! How a call ended, told from the value leaving it (the instrumented expansion's probe).

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

/// Wraps a reference to the value being probed.
#[derive(Debug)]
pub struct Probe<'a, T: ?Sized>(pub &'a T);

/// Chosen for `Result` and `Option` (method found on `Probe<T>` itself).
pub trait ProbeExit {
    fn gpuspan_exit(&self) -> Exit;
}

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

/// Chosen for every other type (method found only after auto-referencing).
pub trait ProbeOther {
    fn gpuspan_exit(&self) -> Exit;
}

impl<T: ?Sized> ProbeOther for &Probe<'_, T> {
    #[inline(always)]
    fn gpuspan_exit(&self) -> Exit {
        Exit::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
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
}
