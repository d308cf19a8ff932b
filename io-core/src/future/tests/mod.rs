//! Unit tests of futures as steps of an `IO` and fibers as futures: the
//! interop on a minimal executor (`interop.rs`, also under Miri) and the
//! loom models of the wake cell and the join future (`loom.rs`).

#[cfg(not(loom))]
mod interop;
#[cfg(loom)]
mod loom;
