//! [`Resource::par_zip`]: two resources acquired concurrently (Cats
//! Effect's `Resource.both`, which `parTupled` of resources uses).
//!
//! # Protocol
//!
//! The allocation runs in the masked region of `use_with` (or `allocated`)
//! with that region's poll. It starts each side's allocation on a child
//! fiber (`both`), each inside an `uncancelable` region of its own (so a
//! `make_full` acquisition still polls there), and each child stores its
//! [`Allocated`] in a shared [`Parts`] slot *in the same masked region* as
//! its acquisition: once acquired, a part is in the slot before anything
//! can cancel the child. The parent waits for `both`, polled:
//!
//! * both acquired: the parts are taken from the slot and combined; the
//!   release of the pair releases both **concurrently** (as Cats Effect
//!   does), each masked on its own fiber, and waits for both; an error of
//!   the left release is the result, an error of the right one replaces a
//!   success or is suppressed (as a finalizer's error is);
//! * an acquisition failed (or panicked): `both` cancels the other side and
//!   waits for it (its acquisition completes, being masked, unless it polls);
//!   the parts in the slot are released (concurrently, with the failure's
//!   exit case) and the failure is the result;
//! * the user is canceled while acquiring: `both` cancels both sides and
//!   waits; the parts in the slot are released with `ExitCase::Canceled`.
//!
//! Nothing acquired is lost: a part is either in the slot (released by the
//! failure path or moved into the pair) or was never acquired.

use alloc::boxed::Box;

use super::{Allocated, ExitCase, Resource};
use crate::combinators::monad_cancel::Poll;
use crate::engine::tracing::{Named, here};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::{Arc, Mutex};

crate::engine::tracing::trace_ops! {
    ParZip = "Resource::par_zip",
}

/// The parts acquired so far.
struct Parts<A, B, E> {
    left: Option<Allocated<A, E>>,
    right: Option<Allocated<B, E>>,
}

impl<A: Send + 'static, E: Send + 'static> Resource<A, E> {
    /// Both resources, acquired concurrently (Cats Effect's
    /// `Resource.both`): each acquisition runs masked on a fiber of its
    /// own, and the pair's release releases both concurrently and waits for
    /// both. If one acquisition fails (or panics), the other is canceled
    /// (it completes if it is masked) and whatever was acquired is released
    /// before the failure is the result; if the user is canceled while
    /// acquiring, both parts that were acquired are released.
    ///
    /// Compare [`both`](Resource::both): sequential, `self` first, released
    /// in reverse order.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Resource, wstp::Runtime};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let slow = |name: &'static str, log: Arc<Mutex<Vec<String>>>| {
    ///     let l = log.clone();
    ///     Resource::make(
    ///         IO::<(), ()>::sleep(Duration::from_millis(300)).map_to(name),
    ///         move |name| IO::delay(move || l.lock().unwrap().push(format!("close {name}"))),
    ///     )
    /// };
    /// let pair = slow("a", log.clone()).par_zip(slow("b", log.clone()));
    /// let io = pair.use_with(|(a, b)| IO::pure(format!("{a}{b}"))).timed();
    /// let (took, ab) = Runtime::new()?.block_on(io)?.succeeded().unwrap();
    /// assert_eq!(ab, "ab");
    /// // Both 300 ms acquisitions at once: well under the 600 ms of one
    /// // after the other.
    /// assert!(took < Duration::from_millis(550), "acquired concurrently: {took:?}");
    /// assert_eq!(log.lock().unwrap().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn par_zip<B: Send + 'static>(self, other: Resource<B, E>) -> Resource<(A, B), E> {
        Resource::from_fn_at::<Named<ParZip>, _>(here(), move |poll| par_zip(poll, self, other))
    }
}

/// The allocation of `left.par_zip(right)` (see the module doc).
fn par_zip<A, B, E>(
    poll: Poll,
    left: Resource<A, E>,
    right: Resource<B, E>,
) -> IO<Allocated<(A, B), E>, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
{
    let parts = Arc::new(Mutex::new(Parts::<A, B, E> {
        left: None,
        right: None,
    }));
    let (into_left, into_right) = (parts.clone(), parts.clone());
    let allocate_left = left.into_allocate();
    let acquire_left = IO::uncancelable_untraced(move |inner| {
        allocate_left(inner).map_untraced(move |allocated| {
            into_left.lock().left = Some(allocated);
        })
    });
    let allocate_right = right.into_allocate();
    let acquire_right = IO::uncancelable_untraced(move |inner| {
        allocate_right(inner).map_untraced(move |allocated| {
            into_right.lock().right = Some(allocated);
        })
    });
    let on_failure = parts.clone();
    poll.apply_untraced(acquire_left.both_untraced(acquire_right))
        .guarantee_case_untraced(move |outcome| {
            if outcome.is_succeeded() {
                return IO::unit();
            }
            let (left, right) = {
                let mut parts = on_failure.lock();
                (parts.left.take(), parts.right.take())
            };
            release_parts(left, right, ExitCase::of(outcome))
        })
        .map_untraced(move |((), ())| {
            let (left, right) = {
                let mut parts = parts.lock();
                (parts.left.take(), parts.right.take())
            };
            match (left, right) {
                (Some(left), Some(right)) => {
                    let Allocated {
                        value: a,
                        release: release_a,
                    } = left;
                    let Allocated {
                        value: b,
                        release: release_b,
                    } = right;
                    Allocated {
                        value: (a, b),
                        release: Box::new(move |(a, b), exit| {
                            release_both(move || release_a(a, exit), move || release_b(b, exit))
                        }),
                    }
                }
                _ => unreachable!("io-core: par_zip: both sides stored their parts"),
            }
        })
}

/// Releases the parts that were acquired (concurrently, if both were).
fn release_parts<A, B, E>(
    left: Option<Allocated<A, E>>,
    right: Option<Allocated<B, E>>,
    exit: ExitCase,
) -> IO<(), E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
{
    match (left, right) {
        (Some(left), Some(right)) => release_both(
            move || left.release_case_untraced(exit),
            move || right.release_case_untraced(exit),
        ),
        (Some(left), None) => left.release_case_untraced(exit),
        (None, Some(right)) => right.release_case_untraced(exit),
        (None, None) => IO::unit(),
    }
}

/// Runs two releases concurrently, each masked on a fiber of its own, and
/// waits for both; the left one's failure is the result, the right one's
/// replaces a success (or is suppressed, behind the left one's).
fn release_both<E, L, R>(left: L, right: R) -> IO<(), E>
where
    E: Send + 'static,
    L: FnOnce() -> IO<(), E> + Send + 'static,
    R: FnOnce() -> IO<(), E> + Send + 'static,
{
    let left = IO::uncancelable_untraced(move |_| left());
    let right = IO::uncancelable_untraced(move |_| right());
    left.both_outcome_untraced(right).flat_map_untraced(
        |(left, right): (Outcome<(), E>, Outcome<(), E>)| {
            // A masked release cannot be canceled from outside; one that
            // canceled itself has nothing to report.
            left.embed_untraced(IO::unit())
                .guarantee_untraced(right.embed_untraced(IO::unit()))
        },
    )
}
