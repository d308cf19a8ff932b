//! Unit tests of the data types that need io-core's internals: `Signal`'s
//! protocol alone, with probes for waiters (`signal.rs`, also under Miri),
//! the wake-ups of `Queue` and `Semaphore` that come back to their waker
//! or are dropped by a canceled fiber, on the run-loop's minimal executor
//! (`waking.rs`, for Miri: the wake-ups' `unsafe`), and the loom models of the data types' lock-free and lock-based
//! protocols (`loom.rs`, run with `RUSTFLAGS="--cfg loom"`). Behaviour on
//! executors is tested in `tests-integration`.

#[cfg(loom)]
mod loom;
#[cfg(not(loom))]
mod signal;
#[cfg(not(loom))]
mod waking;
