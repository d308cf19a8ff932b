//! Unit tests of the data types that need io-core's internals: the loom
//! models of their lock-free and lock-based protocols (`loom.rs`, run with
//! `RUSTFLAGS="--cfg loom"`). Behaviour on executors is tested in
//! `tests-integration`.

#[cfg(loom)]
mod loom;
