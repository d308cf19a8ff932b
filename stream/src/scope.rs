//! Scopes: where a stream's resources are registered and released.
//!
//! # Protocol
//!
//! A running stream has a tree of scopes. The root is opened by the
//! program that runs the stream ([`Compile`](crate::Compile)) and closed
//! by it however the run ends (a value, an error, a cancellation, a
//! panic). A stage that acquires something (`bracket`, `resource`,
//! `on_finalize`) opens a child scope of the scope it is pulled in,
//! registers the release there, and closes that child when its part of the
//! stream ends: so a resource is released as soon as the stream that
//! acquired it is done (fs2's rule: `bracket(r) ++ s` releases `r` before
//! `s` starts). A stage that may stop pulling before its input ends
//! (`take`, `take_while`, `zip`, ...) pulls that input in a child scope of
//! its own, and closes it when it stops: whatever the input acquired and
//! did not release yet is released then, not at the end of the program.
//!
//! A scope's entries (finalizers and child scopes) are kept in the order
//! they were made. Closing a scope takes them all at once (the scope is
//! then closed: a later registration is refused and its finalizer runs at
//! once), and runs them in reverse order, each exactly once, masked (a
//! cancellation waits until every finalizer ran): a child scope's entries
//! run when the child's turn comes. A finalizer that fails does not stop
//! the others; the first error is the close's error. A closed child
//! removes itself from its parent, so a long stream that acquires and
//! releases many resources keeps a parent's list short.
//!
//! The design follows fs2's scopes (a tree, closed children first, the
//! first failure kept), written for Spindle's `IO`; no code is copied.
//!
//! # Invariants
//!
//! * Every registered finalizer runs exactly once: at its scope's close,
//!   or at once when registered into a closed scope.
//! * The lock of a scope is held only to push, remove or take entries;
//!   never while a finalizer is built or runs.
//! * A child holds its parent weakly, and a parent holds its open children
//!   strongly: no reference cycle outlives a close.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use spindle_core::{ExitCase, IO};

use crate::sync::{Arc, Mutex, Weak, downgrade, upgrade};

/// A release: called once with how its stream ended.
pub(crate) type Finalizer<E> = Box<dyn FnOnce(ExitCase) -> IO<(), E> + Send>;

enum Entry<E> {
    Finalizer(Finalizer<E>),
    Child(Scope<E>),
}

enum State<E> {
    Open(Vec<Entry<E>>),
    Closed,
}

struct Inner<E> {
    parent: Option<Weak<Inner<E>>>,
    state: Mutex<State<E>>,
}

/// A node of a running stream's scope tree (a cheap handle).
pub(crate) struct Scope<E> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for Scope<E> {
    fn clone(&self) -> Self {
        Scope {
            inner: self.inner.clone(),
        }
    }
}

impl<E: Send + 'static> Scope<E> {
    /// A scope without a parent, open.
    pub(crate) fn root() -> Self {
        Scope {
            inner: Arc::new(Inner {
                parent: None,
                state: Mutex::new(State::Open(Vec::new())),
            }),
        }
    }

    /// A child of this scope: open if this one is, closed if this one is
    /// closed already (what is registered there is then released at once).
    pub(crate) fn open_child(&self) -> Scope<E> {
        let mut state = self.inner.state.lock();
        let open = matches!(*state, State::Open(_));
        let child = Scope {
            inner: Arc::new(Inner {
                parent: Some(downgrade(&self.inner)),
                state: Mutex::new(if open {
                    State::Open(Vec::new())
                } else {
                    State::Closed
                }),
            }),
        };
        if let State::Open(entries) = &mut *state {
            entries.push(Entry::Child(child.clone()));
        }
        child
    }

    /// Registers `finalizer`; if the scope is closed, gives it back (the
    /// caller runs it at once).
    pub(crate) fn register(&self, finalizer: Finalizer<E>) -> Result<(), Finalizer<E>> {
        match &mut *self.inner.state.lock() {
            State::Open(entries) => {
                entries.push(Entry::Finalizer(finalizer));
                Ok(())
            }
            State::Closed => Err(finalizer),
        }
    }

    /// The program that closes this scope: when it runs, takes the entries
    /// and runs them in reverse order, masked; fails with the first error
    /// of a finalizer after all ran. Closing a closed scope does nothing.
    pub(crate) fn close(&self, exit: ExitCase) -> IO<(), E> {
        let scope = self.clone();
        IO::uncancelable(move |_| {
            IO::defer(move || match scope.take_entries() {
                Some(entries) => run_entries(entries, exit),
                None => IO::unit(),
            })
        })
    }

    /// Closes the scope and takes its entries (`None` if it was closed
    /// already), removing it from its parent.
    fn take_entries(&self) -> Option<Vec<Entry<E>>> {
        let entries = match core::mem::replace(&mut *self.inner.state.lock(), State::Closed) {
            State::Open(entries) => entries,
            State::Closed => return None,
        };
        self.detach();
        Some(entries)
    }

    /// Removes this (closed) scope from its parent's entries.
    fn detach(&self) {
        let Some(parent) = self.inner.parent.as_ref().and_then(upgrade) else {
            return;
        };
        if let State::Open(entries) = &mut *parent.state.lock() {
            // Children are usually closed in reverse order of opening: look
            // from the end.
            if let Some(at) = entries.iter().rposition(
                |entry| matches!(entry, Entry::Child(child) if Arc::ptr_eq(&child.inner, &self.inner)),
            ) {
                entries.remove(at);
            }
        }
    }
}

/// Runs `entries` last first, each once; the first error is raised after
/// all ran.
fn run_entries<E: Send + 'static>(entries: Vec<Entry<E>>, exit: ExitCase) -> IO<(), E> {
    IO::tail_rec(
        (entries, None::<E>),
        move |(mut entries, first): (Vec<Entry<E>>, Option<E>)| match entries.pop() {
            None => IO::pure(ControlFlow::Break(first)),
            Some(entry) => {
                let run = match entry {
                    Entry::Finalizer(finalizer) => IO::defer(move || finalizer(exit)),
                    Entry::Child(child) => child.close(exit),
                };
                run.attempt().map(move |result| {
                    let first = first.or(result.err());
                    ControlFlow::Continue((entries, first))
                })
            }
        },
    )
    .flat_map(|first| match first {
        Some(error) => IO::raise_error(error),
        None => IO::unit(),
    })
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    /// Calls every finalizer among `entries` (and its children's), last
    /// first, as a close runs them.
    fn call_all(entries: Vec<Entry<()>>) {
        for entry in entries.into_iter().rev() {
            match entry {
                Entry::Finalizer(finalizer) => drop(finalizer(ExitCase::Succeeded)),
                Entry::Child(child) => {
                    if let Some(entries) = child.take_entries() {
                        call_all(entries);
                    }
                }
            }
        }
    }

    /// A finalizer registered in a child scope while another thread
    /// closes the parent runs exactly once: taken by the close, or given
    /// back to the registrar (the scope had closed).
    #[test]
    fn loom_a_finalizer_registered_during_a_close_runs_exactly_once() {
        loom::model(|| {
            let root = Scope::<()>::root();
            let ran = Arc::new(AtomicUsize::new(0));
            let (scope, counter) = (root.clone(), ran.clone());
            let registrar = loom::thread::spawn(move || {
                let child = scope.open_child();
                let finalizer: Finalizer<()> = Box::new(move |_| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    IO::unit()
                });
                if let Err(finalizer) = child.register(finalizer) {
                    drop(finalizer(ExitCase::Canceled));
                }
                child
            });
            if let Some(entries) = root.take_entries() {
                call_all(entries);
            }
            let child = registrar.join().unwrap();
            // A child made after the close is closed from the start; one
            // made before was closed with the root. Either way nothing is
            // left to run, and the finalizer ran once.
            assert!(child.take_entries().is_none_or(|left| left.is_empty()));
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        });
    }
}
