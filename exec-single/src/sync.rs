//! The sync shim: every atomic and `UnsafeCell` of exec-single comes from
//! here, as in io-core's `sync` module (tokio's `loom` module, crossbeam's
//! `primitive`).
//!
//! * Normal builds use `portable-atomic` (targets without compare-and-swap,
//!   such as thumbv6m, get it through `critical-section`, implemented by
//!   the final binary) and `portable-atomic-util`'s `Arc`.
//! * `--cfg loom` builds (io-core's model checks build this crate as a
//!   dev-dependency) take the atomics and the cell from loom. The loop has
//!   no loom models of its own: it is one thread, and what crosses threads
//!   (the remote queue, the main fiber's slot, the fiber registry) lives in
//!   io-core's `executor::support`. `Arc` stays portable-atomic-util's
//!   under loom too (the handle's identity is its address, `Arc::as_ptr`).

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use portable_atomic::{AtomicUsize, Ordering};
pub(crate) use portable_atomic_util::Arc;

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};

/// The loop's cell: `core::cell::UnsafeCell`, reached through loom's
/// access API (`with_mut`, from [`WithMut`]) so that the same code builds
/// with loom's cell under `--cfg loom`.
#[cfg(not(loom))]
pub(crate) use core::cell::UnsafeCell;

/// loom's `UnsafeCell::with_mut` for `core::cell::UnsafeCell`.
#[cfg(not(loom))]
pub(crate) trait WithMut<T> {
    /// Runs `f` with a raw pointer to the value; the caller's `unsafe`
    /// dereference carries the exclusivity argument.
    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R;
}

#[cfg(not(loom))]
impl<T> WithMut<T> for UnsafeCell<T> {
    #[inline(always)]
    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
