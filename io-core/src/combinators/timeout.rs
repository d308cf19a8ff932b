//! Time limits and timing: [`IO::timeout`], [`IO::timeout_option`],
//! [`IO::timeout_to`], [`IO::timeout_and_forget`] and [`IO::timed`]; the
//! error [`TimeoutError`].
//!
//! `timeout` raises the deadline as an error of the program's type, which
//! takes it through `From<TimeoutError>`; `timeout_option` needs nothing of
//! the error type (the deadline is `None` in the value), and `timeout_to`
//! runs a fallback of your choice.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::{error::TimeoutError, wstp::Runtime};
//! use std::time::Duration;
//!
//! #[derive(Debug, PartialEq)]
//! enum AppError { Timeout }
//! impl From<TimeoutError> for AppError {
//!     fn from(_: TimeoutError) -> Self { AppError::Timeout }
//! }
//!
//! let rt = Runtime::new()?;
//! let late: IO<u32, AppError> = IO::never();
//! assert_eq!(rt.block_on(late.timeout(Duration::from_millis(1)))?.errored(), Some(AppError::Timeout));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Protocol
//!
//! `timeout`, `timeout_option` and `timeout_to` run the body on the
//! caller's own fiber, in a *deadline region* (a `Region` node; the
//! run-loop's side is `fiber/region.rs`): the body runs above a frame that
//! marks the region's end; its outcome, whatever it is, pops the frame and
//! is the result. The deadline acts as a cancellation of the region alone,
//! observed where the run-loop observes cancellation and at the mask depth
//! the region was entered at: the body's finalizers run (once, masked,
//! with `Outcome::Canceled`), the stack unwinds to the region's frame, and
//! the fallback runs there. The timer exists only while the body waits
//! (it is a second completer of the wait, removed when the fiber resumes):
//! a body that ends without waiting costs a clock read and a frame, no
//! timer and no fiber.
//!
//! * The body completes (before the deadline, or after it in a masked
//!   part that ignores it): its outcome is the result (a value, an error,
//!   a panic).
//! * The deadline passes while the body runs unmasked, or when its mask
//!   ends: the region unwinds, then the fallback runs.
//! * The body cancels itself (`IO::canceled`): the region unwinds, and the
//!   fallback runs at the deadline (the race is then the timer's, as in
//!   Cats Effect).
//! * The caller's fiber is canceled: the fiber unwinds (the body's
//!   finalizers run), as any fiber does.
//!
//! On targets narrower than 64 bits (firmware), `timeout`, `timeout_option`
//! and `timeout_to` run the body on a child fiber instead, as
//! `timeout_and_forget` does, and wait for it to end at the deadline: the
//! region's run-loop steps cost about 3 KB of flash (thumbv7m), more than
//! the firmware's budget had room for.
//!
//! `timeout_and_forget` runs the body on one child fiber instead, the only
//! child of an outcome table (`outcomes.rs`: how the child records its
//! outcome, how the parent waits, why no wake-up is lost), since its body
//! may go on in the background after the deadline. The parent waits,
//! unmasked, until the child has ended or the executor's monotonic clock
//! reaches the deadline, whichever comes first: the wait is one
//! `from_callback_until` node (an `AsyncUntil`), whose timer the executor
//! arms on the wait and removes when it ends. The child's outcome wins if
//! it has one; at the deadline the parent requests the child's
//! cancellation and raises the timeout at once, without waiting. (If the
//! child canceled itself, the parent waits until the deadline.)
//!
//! Compared with the race of two fibers that Cats Effect derives `timeout`
//! from (`GenTemporal`), a region starts no fiber and needs no `Deferred`,
//! no fiber handles and no sleeping fiber to cancel; like tokio's
//! `timeout`, it pays for a timer only when the body does not finish at
//! once. No code is copied from either.

use core::fmt;
#[cfg(target_pointer_width = "64")]
use core::marker::PhantomData;
use core::time::Duration;

use crate::combinators::embed::embed;
use crate::combinators::monad_cancel::Poll;
use crate::combinators::outcomes::{
    AllEnded, Outcomes, Table, cancel_and_wait, interruptibly, spawn, start, wait_until,
};
#[cfg(target_pointer_width = "64")]
use crate::engine::erased::{Adapter, ErasedFn};
#[cfg(target_pointer_width = "64")]
use crate::engine::node::{Expired, Node};
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::RawFiberRef;
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::Arc;

/// A program timed out (`IO::timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutError {
    /// The time limit that passed.
    pub after: Duration,
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timed out after {:?}", self.after)
    }
}

impl core::error::Error for TimeoutError {}

/// A timeout as an I/O error, so that [`IO::timeout`] works on programs
/// whose error type is [`std::io::Error`] (which no other crate may give
/// this conversion: the orphan rule). The error has kind
/// [`ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut), and the
/// [`TimeoutError`] as its message and [source](std::error::Error::source)
/// (get it back with [`std::io::Error::downcast`] or `get_ref`).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{error::TimeoutError, wstp::Runtime};
/// use std::io::ErrorKind;
/// use std::time::Duration;
///
/// let read: IO<Vec<u8>, std::io::Error> = IO::never();
/// let rt = Runtime::new()?;
/// let e = rt.block_on(read.timeout(Duration::from_millis(1)))?.errored().unwrap();
/// assert_eq!(e.kind(), ErrorKind::TimedOut);
/// assert_eq!(e.to_string(), "timed out after 1ms");
/// assert!(e.get_ref().is_some_and(|inner| inner.is::<TimeoutError>()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "std")]
impl From<TimeoutError> for std::io::Error {
    fn from(e: TimeoutError) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

// The operations as traces name them (one event each, at the user's call
// site; the nodes they are made of are untraced).
static TIMEOUT: Op = Op::new("timeout");
static TIMEOUT_TO: Op = Op::new("timeout_to");
static TIMEOUT_OPTION: Op = Op::new("timeout_option");
static TIMEOUT_AND_FORGET: Op = Op::new("timeout_and_forget");
static TIMED: Op = Op::new("timed");

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Fails with [`TimeoutError`] if `self` has not completed after
    /// `duration`; `self` is then canceled, and the timeout waits until it
    /// has ended (its finalizers have run).
    ///
    /// As in Cats Effect 3.6, the outcome of `self` always wins when there
    /// is one: a result or an error that `self` produces after the deadline
    /// (its cancellation was not honoured: an `uncancelable` body) is the
    /// result, not the timeout; the timeout is raised only when `self` was
    /// canceled. If `self` cancels itself before the deadline, the timeout
    /// is raised at the deadline (the race is then the timer's). For a
    /// deadline that does not wait for `self` to end, see
    /// [`timeout_and_forget`](IO::timeout_and_forget).
    ///
    /// `self` runs on the caller's fiber (a deadline region, see the
    /// module doc; on 64-bit targets): no fiber is started, and the
    /// deadline's timer is armed only while `self` waits, so a body that
    /// finishes at once costs no timer. A masked part of `self` finishes before the deadline takes
    /// effect; the caller's own cancellation still cancels the caller.
    ///
    /// The error type takes the timeout through `From<TimeoutError>`:
    /// write it for your own error type; with `std`, io-core provides it for
    /// `std::io::Error` (kind `TimedOut`).
    #[track_caller]
    pub fn timeout(self, duration: Duration) -> IO<A, E>
    where
        E: From<TimeoutError>,
    {
        self.timeout_to_untraced(
            duration,
            IO::raise_error_untraced(E::from(TimeoutError { after: duration })),
        )
        .traced_as(&TIMEOUT)
    }

    /// `Some` of the value of `self`, or `None` if it has not completed
    /// after `duration`; `self` is then canceled, and awaited (its
    /// finalizers have run), as in [`timeout`](IO::timeout), whose rules
    /// this follows.
    ///
    /// The deadline is in the value, so this fits any error type: no
    /// `From<TimeoutError>` is needed, and an error of `self` is still
    /// the program's error.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    /// use std::time::Duration;
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct MyError;
    ///
    /// let rt = Runtime::new()?;
    /// let late: IO<u32, MyError> = IO::never();
    /// assert_eq!(rt.block_on(late.timeout_option(Duration::from_millis(1)))?.ok(), Some(None));
    /// let quick: IO<u32, MyError> = IO::pure(7);
    /// assert_eq!(rt.block_on(quick.timeout_option(Duration::from_secs(60)))?.ok(), Some(Some(7)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn timeout_option(self, duration: Duration) -> IO<Option<A>, E> {
        self.map_untraced(Some)
            .timeout_to_untraced(duration, IO::pure(None))
            .traced_as(&TIMEOUT_OPTION)
    }

    /// Runs `fallback` if `self` has not completed after `duration`; `self`
    /// is then canceled and awaited, and `fallback` runs only if it was
    /// canceled (see [`timeout`](IO::timeout) for the rules).
    #[track_caller]
    pub fn timeout_to(self, duration: Duration, fallback: IO<A, E>) -> IO<A, E> {
        self.timeout_to_untraced(duration, fallback)
            .traced_as(&TIMEOUT_TO)
    }

    /// Fails with [`TimeoutError`] as soon as `duration` has passed if
    /// `self` has not completed by then; `self`'s cancellation is
    /// *requested* but not awaited (Cats Effect's `timeoutAndForget`): the
    /// error is raised at the deadline even if `self` is uncancelable, and
    /// `self` finishes (or finalizes) in the background.
    ///
    /// This gives up back-pressure: a body that ignores cancellation keeps
    /// running, holding what it holds, after the caller has moved on. Prefer
    /// [`timeout`](IO::timeout) unless the deadline matters more.
    #[track_caller]
    pub fn timeout_and_forget(self, duration: Duration) -> IO<A, E>
    where
        E: From<TimeoutError>,
    {
        let error = move || IO::raise_error_untraced(E::from(TimeoutError { after: duration }));
        on_a_child(self, duration, Late::Forget, error).traced_as(&TIMEOUT_AND_FORGET)
    }

    /// [`IO::timeout_to`] for io-core's own nodes (no trace event).
    fn timeout_to_untraced(self, duration: Duration, fallback: IO<A, E>) -> IO<A, E> {
        #[cfg(target_pointer_width = "64")]
        return region(self, duration, move || fallback);
        // Narrower targets keep the body on a child fiber: the region's
        // run-loop steps cost about 3 KB of flash (thumbv7m), more than
        // the firmware's budget has room for.
        #[cfg(not(target_pointer_width = "64"))]
        return on_a_child(self, duration, Late::Await, move || fallback);
    }

    /// Measures how long `self` takes on the executor's monotonic clock.
    #[track_caller]
    pub fn timed(self) -> IO<(Duration, A), E> {
        IO::<Duration, E>::monotonic()
            .flat_map_untraced(move |start| {
                self.flat_map_untraced(move |a| {
                    IO::<Duration, E>::monotonic()
                        .map_untraced(move |end| (end.saturating_sub(start), a))
                })
            })
            .traced_as(&TIMED)
    }
}

/// What the caller of [`on_a_child`] does when the deadline comes first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Late {
    /// Wait until the child has ended; its outcome wins if it has one
    /// (`timeout` on targets narrower than 64 bits).
    #[cfg_attr(target_pointer_width = "64", allow(dead_code))]
    Await,
    /// Only request its cancellation; the fallback runs at once
    /// (`timeout_and_forget`).
    Forget,
}

/// What the table keeps: the child's outcome, once it has ended, and its
/// failure traces.
type Slot<A, E> = Option<(Outcome<A, E>, ChildTraces)>;

/// The body `io` under a deadline `duration` from now, in a deadline
/// region of the caller's fiber (`fiber/region.rs`); `fallback()` when the
/// deadline ends it (see the module doc). 64-bit targets.
#[cfg(target_pointer_width = "64")]
fn region<A, E, F>(io: IO<A, E>, duration: Duration, fallback: F) -> IO<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnOnce() -> IO<A, E> + Send + 'static,
{
    let fallback = move |expired: Expired| match expired.canceled_until {
        None => fallback(),
        // The body canceled itself: the deadline decides, at the deadline.
        Some(deadline) => IO::<(), E>::from_callback_until_untraced(deadline, |_| None)
            .flat_map_untraced(move |()| fallback()),
    };
    IO::from_node(Node::region(
        io.into_node(),
        duration,
        ErasedFn::new::<RegionFallback<A, E>, _>(fallback),
    ))
}

/// The adapter of a region's fallback: a closure of the [`Expired`] that
/// the run-loop gives it, which erases nothing.
#[cfg(target_pointer_width = "64")]
struct RegionFallback<A, E>(PhantomData<fn() -> (A, E)>);

#[cfg(target_pointer_width = "64")]
impl<A, E, F: FnOnce(Expired) -> IO<A, E>> Adapter<Expired, Node, F> for RegionFallback<A, E> {
    #[inline]
    unsafe fn call(f: F, expired: Expired) -> Node {
        f(expired).into_node()
    }
}

/// The body `io` under a deadline `duration` from now, on a child fiber
/// (`timeout_and_forget`, whose body may go on after the deadline, in the
/// background; and `timeout` on targets narrower than 64 bits); `fallback()`
/// when the deadline ends it, as `late` says.
fn on_a_child<A, E, F>(io: IO<A, E>, duration: Duration, late: Late, fallback: F) -> IO<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnOnce() -> IO<A, E> + Send + 'static,
{
    IO::<Duration, E>::monotonic().flat_map_untraced(move |now| {
        let deadline = now.saturating_add(duration);
        start(
            || Table::new(1, None),
            move |spawner, table| {
                spawn(
                    table,
                    spawner,
                    io,
                    |slot: &mut Slot<A, E>, outcome, traces, _| {
                        *slot = Some((outcome, traces));
                    },
                )
            },
            move |poll, table, child| {
                let wait = wait_until(table.clone(), AllEnded, deadline);
                interruptibly(poll, &table, &child, wait).flat_map_untraced(move |()| {
                    decide(poll, table, child, deadline, late, fallback)
                })
            },
        )
    })
}

/// After the wait: the child's outcome, or the deadline's verdict.
fn decide<A, E, F>(
    poll: Poll,
    table: Arc<Outcomes<Slot<A, E>, E>>,
    child: RawFiberRef,
    deadline: Duration,
    late: Late,
    fallback: F,
) -> IO<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnOnce() -> IO<A, E> + Send + 'static,
{
    match table.slots(Option::take) {
        // It canceled itself before the deadline: the timer decides.
        Some((Outcome::Canceled, _)) => poll
            .apply_untraced(IO::from_callback_until_untraced(deadline, |_| None))
            .flat_map_untraced(move |()| fallback()),
        Some((outcome, traces)) => embed(poll, outcome, traces),
        None if late == Late::Forget => {
            child.request_cancel();
            fallback()
        }
        None => cancel_and_wait(table.clone(), child).flat_map_untraced(move |()| {
            match table.slots(Option::take) {
                // Canceled, as asked: the deadline's verdict.
                Some((Outcome::Canceled, _)) | None => fallback(),
                // It ended otherwise (it did not honour the cancellation,
                // or finished meanwhile): that stands.
                Some((outcome, traces)) => embed(poll, outcome, traces),
            }
        }),
    }
}
