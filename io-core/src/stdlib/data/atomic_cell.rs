//! `AtomicCell`: a cell whose updates may run effects, one at a time (Cats
//! Effect std's `AtomicCell`).
//!
//! # Protocol
//!
//! Two parts: the value, behind a short lock of the sync shim (held for a
//! few instructions, never across a suspension), and a fiber [`Mutex`]
//! that every *writer* holds for the whole of its operation. An effectful
//! update (`eval_modify` and its family) takes the fiber mutex, reads a
//! clone of the value, runs its program, and stores the new value only if
//! the program succeeds; then it releases the mutex (whatever the outcome:
//! the mutex is a [`Resource`](crate::Resource)-style scope). So:
//!
//! * writers are serialised: no two effectful updates overlap, and a
//!   plain `set`/`update`/`modify` waits for the effectful update in
//!   progress instead of being overwritten by it;
//! * an update that fails, is canceled or panics leaves the value as it
//!   was (nothing was stored);
//! * `get` does not wait for the mutex: it reads the last value stored,
//!   never a half-done one (an update stores in one step at its end).
//!
//! Waiting for the mutex is cancelable and fair (first come, first
//! served, as the [`Semaphore`](crate::Semaphore) under [`Mutex`] is).
//!
//! Why a clone and not a move: the program gets the value by value, so if
//! the cell moved it out, a failed or canceled program would take the
//! value with it. Cats Effect's values are immutable, so its `evalModify`
//! has the same cost model.

use core::fmt;

use crate::engine::tracing::{Named, WithClosure, here};
use crate::io::IO;
use crate::stdlib::data::mutex::Mutex;
use crate::sync::{Arc, Mutex as Lock};

crate::engine::tracing::trace_ops! {
    Get = "AtomicCell::get",
    Set = "AtomicCell::set",
    Update = "AtomicCell::update",
    Modify = "AtomicCell::modify",
    EvalModify = "AtomicCell::eval_modify",
    EvalUpdate = "AtomicCell::eval_update",
    EvalGetAndUpdate = "AtomicCell::eval_get_and_update",
    EvalUpdateAndGet = "AtomicCell::eval_update_and_get",
}

/// A shared cell whose updates may run programs, one writer at a time.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{AtomicCell, wstp::Runtime};
///
/// let cell = AtomicCell::new(1u64);
/// let c = cell.clone();
/// // The update's program runs while no other writer can touch the cell.
/// let io: IO<u64, ()> = cell
///     .eval_update(|n| IO::cede().map(move |()| n * 10))
///     .product_r(c.get());
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(10));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AtomicCell<A> {
    value: Arc<Lock<A>>,
    writer: Mutex,
}

impl<A> Clone for AtomicCell<A> {
    fn clone(&self) -> Self {
        AtomicCell {
            value: self.value.clone(),
            writer: self.writer.clone(),
        }
    }
}

impl<A: fmt::Debug> fmt::Debug for AtomicCell<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtomicCell")
            .field("value", &*self.value.lock())
            .field("writers_waiting", &self.writer.waiting())
            .finish()
    }
}

impl<A: Send + 'static> AtomicCell<A> {
    /// A cell holding `initial`.
    pub fn new(initial: A) -> Self {
        AtomicCell {
            value: Arc::new(Lock::new(initial)),
            writer: Mutex::new(),
        }
    }

    /// Replaces the value (after any writer in progress).
    #[track_caller]
    pub fn set<E: Send + 'static>(&self, value: A) -> IO<(), E> {
        let cell = self.value.clone();
        self.writer
            .with_lock(IO::delay_at::<Named<Set>, _>(here(), move || {
                *cell.lock() = value;
            }))
    }

    /// Changes the value in place with `f` (after any writer in progress).
    #[track_caller]
    pub fn update<E, F>(&self, f: F) -> IO<(), E>
    where
        E: Send + 'static,
        F: FnOnce(&mut A) + Send + 'static,
    {
        let cell = self.value.clone();
        self.writer
            .with_lock(IO::delay_at::<WithClosure<Update, F>, _>(
                here(),
                move || f(&mut cell.lock()),
            ))
    }

    /// Changes the value in place with `f` and produces what `f` returns
    /// (after any writer in progress). `f` runs under the value's short
    /// lock: it must be quick and must not block; effects belong in
    /// [`eval_modify`](AtomicCell::eval_modify).
    #[track_caller]
    pub fn modify<B, E, F>(&self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut A) -> B + Send + 'static,
    {
        let cell = self.value.clone();
        self.writer
            .with_lock(IO::delay_at::<WithClosure<Modify, F>, _>(
                here(),
                move || f(&mut cell.lock()),
            ))
    }
}

impl<A: Clone + Send + 'static> AtomicCell<A> {
    /// The last value stored (a clone), without waiting for a writer in
    /// progress.
    #[track_caller]
    pub fn get<E: Send + 'static>(&self) -> IO<A, E> {
        let cell = self.value.clone();
        IO::delay_at::<Named<Get>, _>(here(), move || cell.lock().clone())
    }

    /// Runs the program `f` builds from the current value while holding
    /// the cell's writer lock; stores the new value it produces and
    /// produces the rest. If the program fails, is canceled or panics, the
    /// value stays as it was.
    #[track_caller]
    pub fn eval_modify<B, E, F>(&self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(A) -> IO<(A, B), E> + Send + 'static,
    {
        self.eval_at::<WithClosure<EvalModify, F>, B, E, F>(here(), f)
    }

    /// [`eval_modify`](AtomicCell::eval_modify) for a program that
    /// produces the new value only.
    #[track_caller]
    pub fn eval_update<E, F>(&self, f: F) -> IO<(), E>
    where
        E: Send + 'static,
        F: FnOnce(A) -> IO<A, E> + Send + 'static,
    {
        self.eval_at::<WithClosure<EvalUpdate, F>, (), E, _>(here(), move |a| {
            f(a).map_untraced(|new| (new, ()))
        })
    }

    /// [`eval_update`](AtomicCell::eval_update), producing the value from
    /// before.
    #[track_caller]
    pub fn eval_get_and_update<E, F>(&self, f: F) -> IO<A, E>
    where
        E: Send + 'static,
        F: FnOnce(A) -> IO<A, E> + Send + 'static,
    {
        self.eval_at::<WithClosure<EvalGetAndUpdate, F>, A, E, _>(here(), move |a| {
            let before = a.clone();
            f(a).map_untraced(move |new| (new, before))
        })
    }

    /// [`eval_update`](AtomicCell::eval_update), producing the new value.
    #[track_caller]
    pub fn eval_update_and_get<E, F>(&self, f: F) -> IO<A, E>
    where
        E: Send + 'static,
        F: FnOnce(A) -> IO<A, E> + Send + 'static,
    {
        self.eval_at::<WithClosure<EvalUpdateAndGet, F>, A, E, _>(here(), move |a| {
            f(a).map_untraced(|new| (new.clone(), new))
        })
    }

    fn eval_at<M, B, E, F>(&self, site: Option<crate::engine::tracing::Site>, f: F) -> IO<B, E>
    where
        M: crate::engine::tracing::OpMeta,
        B: Send + 'static,
        E: Send + 'static,
        F: FnOnce(A) -> IO<(A, B), E> + Send + 'static,
    {
        let cell = self.value.clone();
        let body = IO::defer_at::<M, _>(site, move || {
            let current = cell.lock().clone();
            f(current).map_untraced(move |(new, b)| {
                *cell.lock() = new;
                b
            })
        });
        self.writer.with_lock(body)
    }
}
