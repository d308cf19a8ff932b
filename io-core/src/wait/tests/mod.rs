//! Unit tests of the wait layer: the waiter list's representation
//! (`list.rs`, also under Miri) and the loom models of the join cell
//! (`loom.rs`, run with `RUSTFLAGS="--cfg loom"`). The waits of fibers on
//! executors are tested through the data types, in `tests-integration`.

#[cfg(not(loom))]
mod list;
#[cfg(loom)]
mod loom;
