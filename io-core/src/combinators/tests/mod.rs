//! Unit tests of the combinators' outcome table (`outcomes.rs`): its
//! counts and conditions (`table.rs`), and the loom models of its
//! protocol, two children recording while the parent registers its wait
//! (`loom.rs`, run with `RUSTFLAGS="--cfg loom"`). The combinators'
//! behaviour on executors is tested in `tests-integration`.

#[cfg(loom)]
mod loom;
#[cfg(not(loom))]
mod table;
