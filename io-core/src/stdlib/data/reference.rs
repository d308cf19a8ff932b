//! `Ref`: a shared, atomically updated cell (Cats Effect's `Ref`).
//!
//! Every operation runs its function under a short lock of the sync shim,
//! so an `update` or `modify` is atomic with respect to every other
//! operation on the same `Ref`. The functions get `&mut A`, so nothing is
//! moved out and back, and a panicking function leaves a valid value. They
//! must be short and must not block (they run with the lock held); effects
//! belong in the program built from `modify`'s result.

use core::fmt;

use crate::engine::tracing::{Named, OpMeta, Site, WithClosure, here};
use crate::io::IO;
use crate::sync::{Arc, Mutex};

/// A shared cell for fibers, updated atomically.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Ref, wstp::Runtime};
///
/// let counter = Ref::new(0u64);
/// let c = counter.clone();
/// let io: IO<u64, ()> = IO::replicate(10, move || c.update(|n| *n += 1))
///     .product_r(counter.get());
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(10));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Ref<A> {
    cell: Arc<Mutex<A>>,
}

impl<A> Clone for Ref<A> {
    fn clone(&self) -> Self {
        Ref {
            cell: self.cell.clone(),
        }
    }
}

impl<A: fmt::Debug> fmt::Debug for Ref<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Ref").field(&*self.cell.lock()).finish()
    }
}

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Set = "Ref::set",
    Update = "Ref::update",
    Modify = "Ref::modify",
    Get = "Ref::get",
    GetAndUpdate = "Ref::get_and_update",
    UpdateAndGet = "Ref::update_and_get",
    GetAndSet = "Ref::get_and_set",
}

impl<A: Send + 'static> Ref<A> {
    /// A cell holding `initial`.
    pub fn new(initial: A) -> Self {
        Ref {
            cell: Arc::new(Mutex::new(initial)),
        }
    }

    /// Runs `f` on the value under the lock, as one step recorded as the
    /// operation `M` at `site`.
    fn modify_at<M, B, E, F>(&self, site: Option<Site>, f: F) -> IO<B, E>
    where
        M: OpMeta,
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut A) -> B + Send + 'static,
    {
        let cell = self.cell.clone();
        IO::delay_at::<M, _>(site, move || f(&mut *cell.lock()))
    }

    /// Replaces the value.
    #[track_caller]
    pub fn set<E: Send + 'static>(&self, value: A) -> IO<(), E> {
        self.modify_at::<Named<Set>, _, _, _>(here(), move |a| *a = value)
    }

    /// Changes the value in place with `f`, atomically.
    #[track_caller]
    pub fn update<E, F>(&self, f: F) -> IO<(), E>
    where
        E: Send + 'static,
        F: FnOnce(&mut A) + Send + 'static,
    {
        self.modify_at::<WithClosure<Update, F>, _, _, _>(here(), f)
    }

    /// Changes the value in place with `f` and produces what `f` returns,
    /// atomically (Cats Effect's `modify`, with `&mut A` in place of
    /// `A => (A, B)`: no move out and back, and a panic in `f` leaves a valid
    /// value behind).
    #[track_caller]
    pub fn modify<B, E, F>(&self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut A) -> B + Send + 'static,
    {
        self.modify_at::<WithClosure<Modify, F>, _, _, _>(here(), f)
    }

    /// Replaces the value and produces the old one.
    #[track_caller]
    pub fn get_and_set<E: Send + 'static>(&self, value: A) -> IO<A, E> {
        self.modify_at::<Named<GetAndSet>, _, _, _>(here(), move |a| core::mem::replace(a, value))
    }
}

impl<A: Clone + Send + 'static> Ref<A> {
    /// The current value (a clone).
    #[track_caller]
    pub fn get<E: Send + 'static>(&self) -> IO<A, E> {
        self.modify_at::<Named<Get>, _, _, _>(here(), |a| a.clone())
    }

    /// Applies `f` and produces the value from before, atomically.
    #[track_caller]
    pub fn get_and_update<E, F>(&self, f: F) -> IO<A, E>
    where
        E: Send + 'static,
        F: FnOnce(&mut A) + Send + 'static,
    {
        self.modify_at::<WithClosure<GetAndUpdate, F>, _, _, _>(here(), move |a| {
            let before = a.clone();
            f(a);
            before
        })
    }

    /// Applies `f` and produces the value from after, atomically.
    #[track_caller]
    pub fn update_and_get<E, F>(&self, f: F) -> IO<A, E>
    where
        E: Send + 'static,
        F: FnOnce(&mut A) + Send + 'static,
    {
        self.modify_at::<WithClosure<UpdateAndGet, F>, _, _, _>(here(), move |a| {
            f(a);
            a.clone()
        })
    }
}
