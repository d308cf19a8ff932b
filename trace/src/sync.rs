//! The atomics the ring uses, from loom under `--cfg loom` (model checking)
//! and from `core` otherwise.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering, fence};
