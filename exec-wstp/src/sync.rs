//! The sync shim: the atomics, locks and condition variables of the
//! scheduling protocol come from here, so that the same code runs under
//! [loom] for model checking
//! (`RUSTFLAGS="--cfg loom" cargo test -p spindle-exec-wstp --lib --release -- loom`).
//!
//! Normal builds use `std`'s types; `--cfg loom` builds use loom's, which
//! explore every interleaving the memory model allows. Locks here never
//! poison the protocol: a panic while holding one (which the protocol code
//! never does; user code never runs under these locks) leaves the data
//! consistent, so `lock` takes the guard either way.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, MutexGuard};

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::{Arc, Condvar, MutexGuard};

/// A mutex whose `lock` ignores poisoning (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(not(loom))] std::sync::Mutex<T>,
    #[cfg(loom)] loom::sync::Mutex<T>,
);

impl<T> Mutex<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return Mutex(std::sync::Mutex::new(value));
        #[cfg(loom)]
        return Mutex(loom::sync::Mutex::new(value));
    }

    /// Locks, blocking while another thread holds the lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Locks if no other thread holds the lock (never fails spuriously).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(not(loom))]
        use std::sync::TryLockError;
        #[cfg(loom)]
        use loom::sync::TryLockError;
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

/// Waits on `condvar` (poisoning ignored, as for [`Mutex::lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `condvar` for at most `timeout`.
#[cfg(not(loom))]
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// Loom has no clock: a timed wait is a wait that may also end at any time
/// (loom explores the wake-up as a spurious one).
#[cfg(loom)]
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    _timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    wait(condvar, guard)
}
