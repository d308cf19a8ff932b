//! The sync shim: the atomics of the parking protocol come from here, so
//! that its loom model (`driver/reactor.rs`) runs the same code under
//! `--cfg loom` (one shim per crate, as io-core's and exec-wstp's).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// Locks a mutex of this crate, also after a panic elsewhere poisoned it
/// (no user code runs under these locks: the data stays consistent).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
