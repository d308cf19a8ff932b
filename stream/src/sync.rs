//! The stream crate's synchronisation primitives, in one place so that
//! loom can replace them (`--cfg loom`): a scope's state and a concurrent
//! stage's window are the shared mutable state of a stream, each behind a
//! short lock never held while user code runs (the one exception: the lock
//! that lets `par_eval_map`'s workers call its `FnMut` one at a time is
//! held while that closure builds an element's program).

#[cfg(not(loom))]
pub(crate) use portable_atomic_util::{Arc, Weak};

#[cfg(loom)]
pub(crate) use loom::sync::Arc;

/// A child scope's hold on its parent: weak (no cycle outlives a close);
/// under loom, whose `Arc` has no weak count, a strong one (a model's
/// scopes live only as long as the model).
#[cfg(loom)]
pub(crate) type Weak<T> = Arc<T>;

/// The parent hold of [`Weak`].
pub(crate) fn downgrade<T>(parent: &Arc<T>) -> Weak<T> {
    #[cfg(not(loom))]
    return Arc::downgrade(parent);
    #[cfg(loom)]
    return parent.clone();
}

/// The parent, if it is still alive.
pub(crate) fn upgrade<T>(parent: &Weak<T>) -> Option<Arc<T>> {
    #[cfg(not(loom))]
    return parent.upgrade();
    #[cfg(loom)]
    return Some(parent.clone());
}

/// A lock held only for a few instructions of a stage's state (a scope's
/// entries, a concurrent stage's window), never across user code or a
/// program. With std it parks (`parking_lot`): a waiter must not spin
/// through the preemption of a holder on a loaded machine (io-core's sync
/// shim has the measurement); without std (interrupts, cores, no threads
/// to park) it spins.
#[cfg(all(not(loom), feature = "std"))]
pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

#[cfg(all(not(loom), feature = "std"))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }
}

/// [`Mutex`] without std: a spinning lock.
#[cfg(all(not(loom), not(feature = "std")))]
pub(crate) struct Mutex<T>(spin::Mutex<T>);

#[cfg(all(not(loom), not(feature = "std")))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(spin::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> spin::MutexGuard<'_, T> {
        self.0.lock()
    }
}

#[cfg(loom)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().expect("a scope's lock is never poisoned")
    }
}
