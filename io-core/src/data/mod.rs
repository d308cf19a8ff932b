//! Concurrent data types for fibers (`no_std`): [`Deferred`](deferred::Deferred),
//! [`Ref`](ref_::Ref), [`Semaphore`](semaphore::Semaphore),
//! [`Queue`](queue::Queue), [`Mutex`](mutex::Mutex),
//! [`CountDownLatch`](latch::CountDownLatch) and [`Resource`](resource::Resource).
//!
//! Each type keeps its state behind a short lock of the sync shim (held for
//! a few instructions, never across a suspension); a fiber that must wait
//! registers a waiter and suspends with `IO::from_callback`, whose cancellation
//! finalizer removes the waiter again. Credits: the shapes follow Cats
//! Effect's `std` and `kernel` data types; no code is copied.

pub(crate) use crate::tracing::trace_ops;

pub mod deferred;
pub mod latch;
pub mod mutex;
pub mod queue;
pub mod ref_;
pub mod resource;
pub mod semaphore;
pub(crate) mod waiters;

#[cfg(all(test, loom))]
mod tests_loom;
