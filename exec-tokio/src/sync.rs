//! The sync shim: every atomic, lock and condition variable of this crate
//! comes from here, as in the other executor crates (tokio's `loom`
//! module, crossbeam-utils' `primitive`).
//!
//! exec-tokio hand-writes almost no lock-free protocol: the scheduling,
//! parking, timer and I/O machinery is tokio's (model-checked with loom in
//! tokio's own CI). What is left here is a shutdown flag read before each
//! fiber run, independent counters for metrics, and a mutex-and-condvar
//! wait for shutdown, none of which orders anything else; and the
//! per-socket counter of `io.rs`, whose argument is about its order with
//! tokio's own readiness word (`SeqCst` on both sides, in the `io` module
//! doc), which a loom model of this crate could not see. So the crate is
//! not built under `--cfg loom`. Should a protocol of its own appear, its
//! types come from here and gain loom variants as in
//! `exec-wstp/src/sync.rs`.
//!
//! Locks here never poison: no code of this crate panics while holding
//! one, and user code never runs under them, so `lock` takes the guard
//! either way.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Condvar, MutexGuard};

/// A mutex whose `lock` ignores poisoning (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    /// Locks, blocking while another thread holds the lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Waits on `condvar` (poisoning ignored, as for [`Mutex::lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
