//! `Mutex`: mutual exclusion for fibers (Cats Effect's `Mutex`).
//!
//! A binary [`Semaphore`]: `lock` is a [`Resource`] that holds the single
//! permit for its scope; waiting for it is cancelable and gives nothing
//! away when canceled; the permit is released exactly once, whatever the
//! outcome of the scope (error, cancellation, panic). A fiber waiting for
//! the lock holds the mutex weakly, and is handed a strong reference when
//! it is woken (`semaphore.rs`, "Waiters nobody can wake"): fibers waiting
//! for a mutex that nobody else can reach (no handle, and no holder) are
//! freed with it.
//!
//! The lock is taken by the first fiber that runs while it is free: an
//! unlock wakes the fiber that waits longest, which takes the lock when it
//! runs unless a fiber that ran first took it (then it waits again). A
//! waiter canceled before it runs passes its wake-up on, so a mutex whose
//! waiters time out faster than they run keeps serving the fibers that do
//! run (`permits.rs` says why handing the lock to the woken waiter,
//! Spindle's earlier design, froze there).

use core::fmt;

use crate::engine::tracing::{Named, here};
use crate::io::IO;
use crate::stdlib::data::semaphore::Semaphore;
use crate::stdlib::resource::Resource;

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Lock = "Mutex::lock",
    WithLock = "Mutex::with_lock",
}

/// Mutual exclusion between fibers.
///
/// A fiber waiting for the lock does not keep the mutex alive: once no
/// handle and no holder is left, the mutex is dropped and the fibers
/// waiting for it are freed, their finalizers not run.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Mutex, wstp::Runtime};
///
/// let mutex = Mutex::new();
/// let io: IO<u32, ()> = mutex.lock().use_with(|_| IO::pure(1));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Mutex {
    permit: Semaphore,
}

impl fmt::Debug for Mutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex")
            .field("locked", &(self.permit.available() == 0))
            .field("waiting", &self.permit.waiting())
            .finish()
    }
}

impl Default for Mutex {
    fn default() -> Self {
        Mutex::new()
    }
}

impl Mutex {
    /// An unlocked mutex.
    pub fn new() -> Self {
        Mutex {
            permit: Semaphore::new(1).expect("1 permit is valid"),
        }
    }

    /// The lock as a resource: held for the scope of `use_with`.
    #[track_caller]
    pub fn lock<E: Send + 'static>(&self) -> Resource<(), E> {
        Resource::lock_at(here(), self.permit.clone())
    }

    /// How many fibers wait for the lock (for diagnostics and tests).
    pub fn waiting(&self) -> usize {
        self.permit.waiting()
    }

    /// Runs `io` holding the lock.
    #[track_caller]
    pub fn with_lock<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        self.permit
            .with_permit_at::<Named<WithLock>, A, E>(here(), io)
    }
}
