//! Concurrent data types for fibers (`no_std`): [`Deferred`](deferred::Deferred),
//! [`Ref`](reference::Ref), [`Semaphore`](semaphore::Semaphore),
//! [`Queue`](queue::Queue), [`Mutex`](mutex::Mutex),
//! [`CountDownLatch`](latch::CountDownLatch), [`CyclicBarrier`](barrier::CyclicBarrier),
//! [`AtomicCell`](atomic_cell::AtomicCell), [`MapRef`](map_ref::MapRef),
//! [`Resource`](resource::Resource) and [`Signal`](signal::Signal) (a
//! value an interrupt handler hands to a fiber; its lock is a critical
//! section, see its module doc).
//!
//! Each type keeps its state behind a short lock of the sync shim (held for
//! a few instructions, never across a suspension); a fiber that must wait
//! registers a waiter and suspends with `IO::from_callback`, whose cancellation
//! finalizer removes the waiter again. That finalizer references the
//! structure weakly: the waiter list holds the
//! fiber, so a strong reference back would make a cycle that keeps a fiber
//! nobody can wake, and its executor, forever; with it weak, dropping the
//! last handle of a structure frees the fibers waiting on it. A wait that
//! is granted something it must pass on (a semaphore's permit) is handed a
//! strong reference with it (`wait/list.rs`, "Holding what one waits on";
//! `wait/cell.rs`, "Waits nobody can end", also says where this cannot
//! be known). Credits: the shapes follow Cats
//! Effect's `std` and `kernel` data types; no code is copied.

pub(crate) mod atomic_cell;
pub(crate) mod barrier;
pub(crate) mod deferred;
pub(crate) mod latch;
pub(crate) mod map_ref;
pub(crate) mod mutex;
pub(crate) mod permits;
pub(crate) mod queue;
pub(crate) mod reference;
pub(crate) mod semaphore;
pub(crate) mod signal;

#[cfg(test)]
mod tests;
