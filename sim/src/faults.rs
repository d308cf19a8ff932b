//! What a program calls from inside a simulation: fault points
//! ([`io_fault`]), the mark of fibers that may be canceled
//! ([`cancelable`]), invariants ([`invariant`], [`Finalizers`]); and the
//! record of the faults a run injected ([`Fault`]).
//!
//! Outside a simulation every helper does nothing (`io_fault` is `Ok`,
//! `cancelable` runs its program, `invariant` checks nothing), so the same
//! program runs unchanged in production.
//!
//! The helpers find the running simulation through a thread-local set by
//! the simulator for the duration of a run (the simulation runs on the
//! thread that called it).

use core::cell::RefCell;
use core::fmt;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_core::{FiberId, IO, Trace};

use crate::CancelScope;
use crate::executor::SimHandle;

thread_local! {
    static CURRENT: RefCell<Option<SimHandle>> = const { RefCell::new(None) };
}

/// Makes `handle` the running simulation of this thread until dropped
/// (the previous one, if any, comes back).
pub(crate) struct Current(Option<SimHandle>);

impl Current {
    pub(crate) fn enter(handle: SimHandle) -> Current {
        Current(CURRENT.with(|c| c.replace(Some(handle))))
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        let previous = self.0.take();
        let ours = CURRENT.with(|c| c.replace(previous));
        drop(ours);
    }
}

pub(crate) fn with_current<R>(f: impl FnOnce(&SimHandle) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

/// Whether the calling code runs inside a simulation (in one of its
/// fibers, or in the closure that builds its program).
pub fn is_simulated() -> bool {
    with_current(|_| ()).is_some()
}

/// A fault the simulator injected, numbered in the order of the run
/// (suppressed ones keep their numbers: see [`ReplayKey`](crate::ReplayKey)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// `fiber` was canceled when it suspended, after step `step`.
    Canceled {
        /// The fault's number in the run.
        number: u32,
        /// The fiber canceled.
        fiber: FiberId,
        /// The step after which it was canceled.
        step: u64,
    },
    /// An [`io_fault`] point returned an error, in `fiber` (or in the
    /// `IO::blocking` work of `fiber`) during step `step`.
    IoError {
        /// The fault's number in the run.
        number: u32,
        /// The fiber that was running.
        fiber: FiberId,
        /// The step.
        step: u64,
    },
    /// Blocking I/O work of `fiber` failed with an injected error instead
    /// of running, at step `step`
    /// ([`SimBuilder::blocking_errors`](crate::SimBuilder::blocking_errors)).
    BlockingError {
        /// The fault's number in the run.
        number: u32,
        /// The fiber whose work it was.
        fiber: FiberId,
        /// The step.
        step: u64,
    },
    /// Virtual time jumped forward by `by` before step `step`.
    ClockJump {
        /// The fault's number in the run.
        number: u32,
        /// How far.
        by: Duration,
        /// The step it came before.
        step: u64,
    },
    /// A random partition between hosts `a` and `b` started at virtual
    /// time `at`, for `length` ([`NetConfig::partitions`](crate::NetConfig::partitions)).
    Partition {
        /// The fault's number in the run.
        number: u32,
        /// One host's name.
        a: String,
        /// The other host's name.
        b: String,
        /// When it started (virtual time).
        at: Duration,
        /// How long it lasts.
        length: Duration,
    },
    /// Host `host` crashed at virtual time `at`, when a packet reached it,
    /// to restart `restart_after` later ([`NetConfig::crashes`](crate::NetConfig::crashes)).
    Crash {
        /// The fault's number in the run.
        number: u32,
        /// The host's name.
        host: String,
        /// When it crashed (virtual time).
        at: Duration,
        /// How long it stays down.
        restart_after: Duration,
    },
    /// A disk operation of host `host` failed with an injected error
    /// ([`DiskConfig::errors`](crate::DiskConfig::errors)), in `fiber`.
    DiskError {
        /// The fault's number in the run.
        number: u32,
        /// The host's name.
        host: String,
        /// The operation (`open`, `read`, `write`, `sync`, `rename`, ...).
        operation: &'static str,
        /// The path it was on.
        path: std::path::PathBuf,
        /// The fiber that was running.
        fiber: FiberId,
    },
}

impl Fault {
    /// The fault's number in its run.
    pub fn number(&self) -> u32 {
        match self {
            Fault::Canceled { number, .. }
            | Fault::IoError { number, .. }
            | Fault::BlockingError { number, .. }
            | Fault::ClockJump { number, .. }
            | Fault::Partition { number, .. }
            | Fault::Crash { number, .. }
            | Fault::DiskError { number, .. } => *number,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Canceled {
                number,
                fiber,
                step,
            } => write!(
                f,
                "fault {number}: fiber {fiber} canceled at its suspension after step {step}"
            ),
            Fault::IoError {
                number,
                fiber,
                step,
            } => write!(
                f,
                "fault {number}: injected I/O error in fiber {fiber} at step {step}"
            ),
            Fault::BlockingError {
                number,
                fiber,
                step,
            } => write!(
                f,
                "fault {number}: blocking I/O work of fiber {fiber} failed (injected) at step {step}"
            ),
            Fault::ClockJump { number, by, step } => {
                write!(f, "fault {number}: clock jumped {by:?} before step {step}")
            }
            Fault::Partition {
                number,
                a,
                b,
                at,
                length,
            } => write!(
                f,
                "fault {number}: network partition {a} | {b} at {at:?} for {length:?}"
            ),
            Fault::Crash {
                number,
                host,
                at,
                restart_after,
            } => write!(
                f,
                "fault {number}: host {host} crashed at {at:?} (restarts {restart_after:?} later)"
            ),
            Fault::DiskError {
                number,
                host,
                operation,
                path,
                fiber,
            } => write!(
                f,
                "fault {number}: injected disk error in {operation} {} on host {host} (fiber {fiber})",
                path.display()
            ),
        }
    }
}

/// The error an [`io_fault`] point returns when the simulator injects one.
/// Converts into `std::io::Error` (kind `Other`), so that `?` works in an
/// `IO::try_blocking` thunk whose error is `io::Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectedFault;

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("I/O error injected by spindle-sim")
    }
}

impl std::error::Error for InjectedFault {}

impl From<InjectedFault> for std::io::Error {
    fn from(fault: InjectedFault) -> std::io::Error {
        std::io::Error::other(fault)
    }
}

/// A point where the simulator may inject an I/O error: `Err` with the
/// probability set by [`SimBuilder::io_errors`](crate::SimBuilder::io_errors),
/// `Ok` otherwise and always outside a simulation. Put it where real I/O
/// can fail, typically first in an `IO::try_blocking` thunk:
///
/// ```
/// use spindle_effect::prelude::*;
///
/// fn read_config() -> IO<String, std::io::Error> {
///     IO::try_blocking(|| {
///         spindle_sim::io_fault()?;
///         Ok(String::from("port = 8080")) // std::fs::read_to_string(...) in real code
///     })
/// }
/// # let _ = read_config();
/// ```
pub fn io_fault() -> Result<(), InjectedFault> {
    let injected = with_current(|handle| {
        let mut state = handle.shared.state();
        let state = &mut *state;
        if state.io_error_threshold == 0 || !state.rng.chance(state.io_error_threshold) {
            return false;
        }
        let (number, inject) = state.faults.decide();
        if inject {
            state.faults.injected.push(Fault::IoError {
                number,
                fiber: FiberId::nth(u64::from(state.running)),
                step: state.step,
            });
        }
        inject
    });
    if injected == Some(true) {
        Err(InjectedFault)
    } else {
        Ok(())
    }
}

/// Runs `io`, marking the fiber that runs it as one the simulator may
/// cancel at its suspension points
/// ([`SimBuilder::cancel_at_suspension`](crate::SimBuilder::cancel_at_suspension),
/// scope [`CancelScope::Marked`]). Outside a simulation, `io` itself.
///
/// Mark the fibers your program expects to be canceled (a worker, a
/// connection handler), typically where they start:
/// `cancelable(handle_connection(conn)).start()`.
pub fn cancelable<A: Send + 'static, E: Send + 'static>(io: IO<A, E>) -> IO<A, E> {
    IO::delay(|| {
        with_current(|handle| {
            let mut state = handle.shared.state();
            let id = state.running as usize;
            if id == 0 {
                return;
            }
            if state.cancelable.len() <= id {
                state.cancelable.resize(id + 1, false);
            }
            state.cancelable[id] = true;
        });
    })
    .product_r(io)
}

impl crate::executor::State {
    /// Whether fiber `id` may be canceled by the fault.
    pub(crate) fn may_cancel(&self, id: u32, main: u32) -> bool {
        match self.cancel_scope {
            CancelScope::AllButMain => id != main,
            CancelScope::Marked => self.cancelable.get(id as usize).copied().unwrap_or(false),
        }
    }
}

/// A program that checks `holds` when it runs: if it is `false`, the
/// simulation fails with [`FailureKind::Invariant`](crate::FailureKind::Invariant)
/// named `name`, with the trace of the fiber that checked it, and the run
/// stops after the current step. Outside a simulation it checks nothing
/// (`holds` is not called).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::Ref;
///
/// let balance = Ref::new(100i64);
/// let b = balance.clone();
/// let check: IO<(), ()> = balance
///     .get()
///     .flat_map(|v| spindle_sim::invariant("balance is never negative", move || v >= 0));
/// # let _ = (check, b);
/// ```
#[track_caller]
pub fn invariant<E, F>(name: impl Into<String>, holds: F) -> IO<(), E>
where
    E: Send + 'static,
    F: FnOnce() -> bool + Send + 'static,
{
    let name = name.into();
    IO::defer(move || {
        if !is_simulated() {
            return IO::unit();
        }
        IO::<Trace, E>::trace().map(move |trace| {
            if !holds() {
                with_current(|handle| {
                    handle.shared.state().violations.push((name, Some(trace)));
                });
            }
        })
    })
}

/// Counts resources acquired and the finalizers that released them, to
/// check that every finalizer ran exactly once, also under cancellation
/// and errors. Get one from [`Run::finalizers`](crate::Run::finalizers),
/// which checks it when the run ends; a second release of the same
/// resource fails the run at once.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_sim::Finalizers;
///
/// fn with_connection(fin: Finalizers) -> IO<u32, ()> {
///     let f = fin.clone();
///     IO::bracket(
///         fin.acquired("connection"),
///         |_token| IO::pure(7),
///         move |token| f.released(token),
///     )
/// }
/// # let _ = with_connection(Finalizers::new());
/// ```
#[derive(Clone, Default)]
pub struct Finalizers {
    inner: Arc<Mutex<FinalizerBook>>,
}

#[derive(Default)]
struct FinalizerBook {
    next: u64,
    /// Open resources: token → name.
    open: BTreeMap<u64, &'static str>,
    /// Problems seen so far (double releases).
    problems: Vec<String>,
}

/// One acquired resource of a [`Finalizers`] book: hand it to
/// [`Finalizers::released`] in the finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token(u64);

impl fmt::Debug for Finalizers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let book = self.book();
        f.debug_struct("Finalizers")
            .field("open", &book.open.len())
            .finish_non_exhaustive()
    }
}

impl Finalizers {
    /// An empty book.
    pub fn new() -> Finalizers {
        Finalizers::default()
    }

    fn book(&self) -> std::sync::MutexGuard<'_, FinalizerBook> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A program that records a resource `name` as acquired (put it in
    /// the acquisition of a `bracket`, or just before it).
    pub fn acquired<E: Send + 'static>(&self, name: &'static str) -> IO<Token, E> {
        let inner = self.clone();
        IO::delay(move || {
            let mut book = inner.book();
            let token = book.next;
            book.next += 1;
            book.open.insert(token, name);
            Token(token)
        })
    }

    /// A program that records the resource of `token` as released (put
    /// it in the finalizer). Releasing one twice fails the simulation.
    pub fn released<E: Send + 'static>(&self, token: Token) -> IO<(), E> {
        let inner = self.clone();
        IO::delay(move || {
            let mut book = inner.book();
            if book.open.remove(&token.0).is_none() {
                let problem = format!("resource #{} released twice", token.0);
                book.problems.push(problem.clone());
                drop(book);
                with_current(|handle| handle.shared.state().violations.push((problem, None)));
            }
        })
    }

    /// Resources acquired and not released yet.
    pub fn open(&self) -> usize {
        self.book().open.len()
    }

    /// `Ok` if every resource acquired was released exactly once;
    /// otherwise what was wrong.
    pub fn check(&self) -> Result<(), String> {
        let book = self.book();
        let mut problems = book.problems.clone();
        for (token, name) in &book.open {
            problems.push(format!("{name} (resource #{token}) was never released"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}
