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
}

/// A lock that is only ever tried, never waited for (the pool's poller,
/// `park.rs`): a flag taken with a compare-and-swap (`SeqCst`, never failing
/// spuriously) and released with a `SeqCst` store, over the value.
///
/// Ours rather than the mutex's `try_lock`, so that loom models it: loom's
/// `Mutex::try_lock` blocks a thread that tries it while another holds the
/// lock, which would report a false deadlock while the holder sleeps in
/// the poller.
pub(crate) struct TryLock<T> {
    locked: AtomicBool,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and at most one guard
// exists at a time (the flag's compare-and-swap hands it out, its drop
// takes it back), so the value moves between threads, one at a time, like
// a `Mutex`'s: `T: Send` is enough.
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    /// Wraps `value`, unlocked.
    pub(crate) fn new(value: T) -> Self {
        TryLock {
            locked: AtomicBool::new(false),
            value: std::cell::UnsafeCell::new(value),
        }
    }

    /// The value, if no other thread holds the lock.
    pub(crate) fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()?;
        Some(TryLockGuard { lock: self })
    }
}

/// The held [`TryLock`]; dropping it unlocks.
pub(crate) struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> std::ops::Deref for TryLockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (module doc of `TryLock`): no
        // other reference to the value exists while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for TryLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // made through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::SeqCst);
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
