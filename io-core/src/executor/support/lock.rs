//! The short lock of the support types: state any thread (or, without
//! `std`, any interrupt handler) may touch for a few instructions.
//!
//! * With `std`: a `std` mutex (blocking, never spinning while contended
//!   for long). A panic while it is held cannot leave the data half-updated
//!   (pushes, reads), so poisoning is ignored.
//! * Without `std`: a `critical-section` (never a spin lock: an interrupt
//!   handler that schedules a fiber while the loop holds a spin lock would
//!   spin forever). The final binary provides the implementation.
//!
//! User code never runs under this lock, and nothing is dropped under it.

#[cfg(feature = "std")]
pub(crate) struct Lock<T>(std::sync::Mutex<T>);

#[cfg(feature = "std")]
impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock(std::sync::Mutex::new(value))
    }

    /// Runs `f` with the value locked.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(not(feature = "std"))]
pub(crate) struct Lock<T>(critical_section::Mutex<core::cell::RefCell<T>>);

#[cfg(not(feature = "std"))]
impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock(critical_section::Mutex::new(core::cell::RefCell::new(
            value,
        )))
    }

    /// Runs `f` with the value borrowed inside a critical section; `f`
    /// never takes this lock again (the support types do not nest it).
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        critical_section::with(|cs| f(&mut self.0.borrow_ref_mut(cs)))
    }
}
