//! The sync shim: every atomic, `Arc` and lock of exec-batching comes from
//! here (one shim per crate, as io-core's `sync` and exec-wstp's `sync`).
//!
//! The loop is one thread that owns its queues; what crosses threads is a
//! few mutexes (timers, the reactor's table), counters, the poller's
//! notify and io-core's `executor::support` (remote queue, main fiber,
//! fiber registry, blocking pool). The crate has no loom models of its own
//! (see the crate documentation), so this shim has only its `std` side,
//! under `--cfg loom` too.
//!
//! Locks here never poison: a panic while holding one (no user code runs
//! under them) leaves the data consistent, so [`lock`] takes the guard
//! either way.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex of the loop, also after a panic elsewhere poisoned it
/// (the data it guards stays consistent: no user code runs under it).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
