//! Unit tests of the run-loop and the suspension protocol on a minimal
//! executor. They exercise every `unsafe` path of io-core (erased storage,
//! raw callback handles, the drop trampoline) and run under Miri in CI, so
//! sizes shrink under `cfg(miri)`.

#[cfg(loom)]
mod loom;

#[cfg(not(loom))]
mod id;
#[cfg(not(loom))]
pub(crate) mod run;
#[cfg(not(loom))]
mod state;
