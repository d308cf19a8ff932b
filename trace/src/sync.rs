//! The sync shim: every atomic and `Arc` of the trace crate comes from
//! here (as in io-core's `sync.rs`, tokio's `src/loom/`), so that the ring
//! runs under loom (`--cfg loom`: model checking) and on `core` otherwise.
//!
//! Two kinds of atomics, on purpose:
//!
//! * the ring's ([`AtomicPtr`], [`AtomicUsize`], [`AtomicU8`], [`fence`]): loom's under
//!   `--cfg loom`, so the sequence-lock protocol of `ring.rs` is
//!   model-checked;
//! * process-wide flags in `static`s ([`StaticAtomicBool`]: whether call
//!   sites are kept, whether full capture is on): always `core`'s, since
//!   loom's atomics cannot be built in a `const` context, and those flags
//!   are independent relaxed switches with no protocol to check. (Their
//!   loads and stores are plain on every target, thumbv6m included, so
//!   they need no portable-atomic.)
//!
//! `Arc` (full mode's captured sites, `full` feature) is std's: full mode needs std, and its
//! sites are process-global values, never part of a loom model.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering, fence};

/// An atomic flag for a `static` (see the module doc).
pub(crate) use core::sync::atomic::AtomicBool as StaticAtomicBool;
/// The orderings of [`StaticAtomicBool`] (`core`'s, also under loom).
pub(crate) use core::sync::atomic::Ordering as StaticOrdering;

/// The reference count of full mode's captured sites.
#[cfg(feature = "full")]
pub(crate) use std::sync::Arc;
