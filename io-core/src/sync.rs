//! The sync shim: every atomic, `Arc` and `UnsafeCell` of io-core comes from
//! here, so that the same code runs under [loom] for model checking
//! (`RUSTFLAGS="--cfg loom" cargo test -p spindle-core --lib loom`).
//!
//! * Normal builds use `portable-atomic` (so that targets without
//!   compare-and-swap, such as thumbv6m, get CAS through `critical-section`,
//!   implemented by the final binary) and `portable-atomic-util`'s `Arc`
//!   (`alloc::sync::Arc` does not exist on such targets).
//! * `--cfg loom` builds use loom's types, which explore every interleaving
//!   allowed by the memory model.
//!
//! [`UnsafeCell`] follows loom's closure-based API (`with`, `with_mut`), so
//! that loom can track every access to the cell.
//!
//! [loom]: https://docs.rs/loom

#[cfg(all(not(loom), feature = "tracing"))]
pub(crate) use portable_atomic::{AtomicPtr, AtomicU8};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use portable_atomic_util::{Arc, Weak};

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(all(loom, feature = "tracing"))]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU8};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A short-critical-section lock for the data types (`Deferred`, join
/// state, ...): `spin` without loom (no_std, no allocation, held only for a
/// few instructions, never across a suspension), loom's mutex under loom.
#[cfg(not(loom))]
pub(crate) struct Mutex<T>(spin::Mutex<T>);

#[cfg(not(loom))]
impl<T> Mutex<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        Mutex(spin::Mutex::new(value))
    }

    /// Locks, spinning while another thread holds the lock.
    #[inline]
    pub(crate) fn lock(&self) -> spin::MutexGuard<'_, T> {
        self.0.lock()
    }
}

/// Loom's mutex, with the same `lock` signature as the spin one.
#[cfg(loom)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    /// Locks.
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

/// `core::cell::UnsafeCell` with loom's access API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Gives `f` a shared pointer to the contents.
    #[allow(dead_code)]
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Gives `f` a mutable pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
