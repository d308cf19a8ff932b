//! Unit tests of the data types that need io-core's internals: `Signal`'s
//! protocol alone, with probes for waiters (`signal.rs`, also under Miri),
//! and the loom models of the data types' lock-free and lock-based
//! protocols (`loom.rs`, run with `RUSTFLAGS="--cfg loom"`). Behaviour on
//! executors is tested in `tests-integration`.

#[cfg(loom)]
mod loom;
#[cfg(not(loom))]
mod signal;
