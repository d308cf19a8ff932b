//! spindle-net's I/O capability on tokio's own I/O driver, through
//! `tokio::io::unix::AsyncFd`: the sockets of [`crate::net`] made by this
//! executor's fibers are watched by the same driver as the application's
//! tokio sockets, and no poller of Spindle's runs.
//!
//! # The pieces
//!
//! * [`TokioIo`], the [`IoDriver`]: a value with no state, one `static`
//!   for every executor. The task module runs each fiber inside
//!   `with_driver(&DRIVER, ...)` ([`run_fiber`]); a fiber runs only inside a
//!   poll of its tokio task, which tokio runs in the context of the
//!   executor's runtime, so the runtime of the calling context *is* the
//!   executor's. Keeping nothing per executor is what keeps the run free:
//!   a driver stored in the executor's shared state would have to outlive
//!   the fiber's run, but the fiber may hold the last reference to that
//!   state and free it as it ends inside the run, so a reference to it
//!   could not be lent safely without a reference count per poll.
//! * [`TokioSocket`], the [`Registration`]: an `AsyncFd<OwnedFd>` with
//!   interest in both directions, made in that context, which owns the
//!   descriptor, and a small counter ([`TokioSocket::observed`], below).
//!
//! # The promises of `spindle_net::driver`, kept
//!
//! | promise | how |
//! |---|---|
//! | no lost readiness | tokio keeps a readiness word per socket (bits set by events until cleared); a wait awaits the direction's bit, clears it and returns, and the operation tries its call again; an event after the clear sets the bit again; the counter covers the clears of *other* operations (below) |
//! | cancellation leaves nothing behind | the wait is a future that io-core drops on cancel; dropping tokio's readiness future takes its waiter off the socket's list |
//! | ownership | `AsyncFd` owns the `OwnedFd`; dropping it deregisters the descriptor from tokio's driver and only then closes it |
//! | errors, not hangs | on a runtime that is shut down (an owned runtime dropped with its executor) tokio's readiness future fails, and that error is the wait's; on a runtime built without I/O (`enable_io`), registering is an error, not tokio's panic |
//! | resumption | tokio wakes the waker from the thread that saw the event; io-core's waker hands the fiber to `schedule_fiber`, a task on the executor's runtime |
//!
//! An attached current-thread runtime runs nothing while nothing drives it
//! (outside its `block_on`): a wait on one of its sockets by a fiber of
//! another executor then waits until it is driven again, as a tokio
//! socket would. The runtimes this executor owns are always driven.
//!
//! # Why clearing cannot lose readiness
//!
//! An operation takes a snapshot ([`Registration::readiness`]), tries its
//! non-blocking call, and waits on `WouldBlock`. The wait awaits tokio's
//! readiness for the direction and then *clears* it before returning, so
//! that the next wait does not end at once on readiness that the retried
//! call has used up. For the operation itself this loses nothing: the
//! clear is made with the tick tokio read when the wait ended (tokio
//! clears nothing if an event came since), and the retry runs after the
//! clear, so it sees what every cleared event reported; an event after the
//! clear sets the bit again and ends the next wait at once.
//!
//! Another operation in the same direction (two fibers accepting on one
//! listener, two receiving on one UDP socket) is another matter. If B's
//! call found nothing, then an event came and A's wait cleared it, B would
//! wait for an event that has come and gone, and the second connection of
//! a burst could sit in the backlog with every acceptor asleep. tokio
//! itself avoids this by clearing with the tick read *before* its call,
//! which `AsyncFd` does not expose. This driver keeps its own snapshot
//! instead: [`TokioSocket::observed`] counts, per direction, the waits
//! that ended and are about to clear (a clear that includes tokio's error
//! bit counts in both directions, since both directions wait for errors).
//! [`Registration::readiness`] is that count. Each time a wait's tokio
//! future is pending (its waiter is then on tokio's list), the wait checks
//! the count: if a clear began since its snapshot, it ends at once (a
//! spurious wake-up: the call is tried again). Why that is enough: a clear
//! that erased an event after B's snapshot was counted after that event,
//! so after B's snapshot. If the clear wrote tokio's readiness word before
//! B's future read it (to decide to register its waiter), B sees the
//! count: the count is raised before the clear, tokio's clear is a
//! release and B's read an acquire, so the raise happens before B's check.
//! If B read the word before the clear, either the event had set the bit
//! by then (B's future was ready at once) or it came later and woke B's
//! waiter (tokio's wake-up and the registration take the same lock), and a
//! woken waiter is ready whatever is cleared afterwards. The counter is
//! `SeqCst`, which the argument does not need but costs nothing here.
//!
//! The tests `two_fibers_*_burst` of `tests-integration/tests/net_tcp.rs`
//! and `net_udp.rs` (stamped on every executor) hang within a few hundred
//! rounds without this check.
//!
//! # Credits
//!
//! tokio's `AsyncFd` and its `ScheduledIo` (the readiness word with a
//! tick, cleared only by the tick that was read, and waiters that an event
//! wakes once) do the work; the snapshot counter follows the tick-based
//! clear of tokio's own `async_io`. No code is copied.

use std::future::{Future, poll_fn};
use std::io;
use std::os::fd::OwnedFd;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;
use spindle_net::driver::{self, Direction, IoDriver, Readiness, Registration};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::sync::{AtomicU64, Ordering};

/// The I/O capability of every exec-tokio executor (see the module doc:
/// it has no state, the runtime is the one whose task runs the fiber).
pub(crate) static DRIVER: TokioIo = TokioIo;

/// Runs `run` (a fiber's run inside its task's poll) with [`DRIVER`] as
/// the thread's driver: sockets its fiber makes register with tokio.
#[inline]
pub(crate) fn run_fiber<R>(run: impl FnOnce() -> R) -> R {
    driver::with_driver(&DRIVER, run)
}

/// spindle-net's [`IoDriver`] on tokio's I/O driver (module doc).
#[derive(Debug)]
pub(crate) struct TokioIo;

impl IoDriver for TokioIo {
    fn register(&self, socket: OwnedFd) -> io::Result<Arc<dyn Registration>> {
        // The runtime `AsyncFd` registers with is the one of this thread's
        // context: inside a fiber, the executor's (tokio polls the fiber's
        // task in its runtime's context). Outside any context `AsyncFd`
        // would panic; that is an error here.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "spindle-exec-tokio: no tokio runtime in this thread's context to register \
                 the socket with",
            ));
        }
        // tokio offers no query for whether a runtime has I/O enabled, and
        // `AsyncFd` panics without it: the panic is caught and becomes the
        // error (the panic hook still prints tokio's message). On a panic
        // the socket is dropped, closed, while unwinding.
        let interest = Interest::READABLE | Interest::WRITABLE;
        // `with_interest` is deprecated from tokio 1.51.6/1.53.3 on in
        // favour of the `unsafe` `register_with_interest`, because it
        // accepts any `T: AsRawFd`, whose descriptor it cannot know stays
        // open and the same. Here `T` is `OwnedFd`: the `AsyncFd` owns it,
        // so the descriptor stays open, and is the same, for exactly the
        // `AsyncFd`'s life; that is the safety condition of
        // `register_with_interest`. The safe constructor is kept because
        // the workspace asks for tokio 1.44, which has no other.
        #[allow(deprecated)]
        let registered = panic::catch_unwind(AssertUnwindSafe(move || {
            AsyncFd::with_interest(socket, interest)
        }));
        match registered {
            Ok(Ok(fd)) => Ok(Arc::new(TokioSocket {
                fd,
                observed: AtomicU64::new(0),
            })),
            Ok(Err(e)) => Err(e),
            Err(_panic) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "spindle-exec-tokio: the tokio runtime was built without I/O (enable it with \
                 `enable_io` or `enable_all` on tokio's runtime builder)",
            )),
        }
    }
}

/// One in the read half of [`TokioSocket::observed`].
const READ_ONE: u64 = 1;
/// One in the write half of [`TokioSocket::observed`].
const WRITE_ONE: u64 = 1 << 32;

/// The half of an `observed` word that counts for `direction`.
#[inline]
fn half(word: u64, direction: Direction) -> u32 {
    match direction {
        Direction::Read => word as u32,
        Direction::Write => (word >> 32) as u32,
    }
}

/// A socket on tokio's driver: spindle-net's [`Registration`].
pub(crate) struct TokioSocket {
    /// The descriptor, owned, and its registration with tokio's driver.
    fd: AsyncFd<OwnedFd>,
    /// How many waits have ended and cleared (or are about to clear)
    /// tokio's readiness, per direction: reads in the low 32 bits, writes
    /// in the high 32 (both wrap; a carry from the low half into the high
    /// one is one spurious wake-up of a writer). The snapshot of
    /// [`Registration::readiness`]; see the module doc.
    observed: AtomicU64,
}

impl TokioSocket {
    /// Whether a wait in `direction` has cleared readiness since `seen`.
    #[inline]
    fn cleared_since(&self, direction: Direction, seen: Readiness) -> bool {
        let now = self.observed.load(Ordering::SeqCst);
        half(now, direction) != half(seen.raw(), direction)
    }

    /// Ends when the socket may be ready for `direction` after the
    /// snapshot `seen` (module doc), or fails when tokio cannot wait (its
    /// runtime is shut down).
    async fn ready_since(&self, direction: Direction, seen: Readiness) -> io::Result<()> {
        // Both directions wake up on errors, as with spindle-net's reactor:
        // the next call in either direction reports a socket error. (An
        // ICMP error on a connected UDP socket makes it neither readable
        // nor writable: without the error interest, a receive would miss
        // it.)
        let interest = match direction {
            Direction::Read => Interest::READABLE | Interest::ERROR,
            Direction::Write => Interest::WRITABLE | Interest::ERROR,
        };
        let mut ready = pin!(self.fd.ready(interest));
        let ended = poll_fn(|cx| match ready.as_mut().poll(cx) {
            Poll::Ready(result) => Poll::Ready(Some(result)),
            // Checked after tokio registered the waiter (module doc).
            Poll::Pending if self.cleared_since(direction, seen) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await;
        let Some(result) = ended else {
            // Another operation cleared readiness since the snapshot: try
            // the call again (dropping tokio's future removed the waiter).
            return Ok(());
        };
        let mut guard = result?;
        let count = match direction {
            Direction::Read => READ_ONE,
            Direction::Write => WRITE_ONE,
        };
        // A clear of tokio's error bit counts in both directions.
        let count = if guard.ready().is_error() {
            READ_ONE | WRITE_ONE
        } else {
            count
        };
        // Counted before the clear: an operation whose snapshot is older
        // than this and that starts waiting after the clear sees the count
        // (module doc).
        self.observed.fetch_add(count, Ordering::SeqCst);
        // Clearing before the operation tries its call again cannot lose
        // readiness: tokio clears only if no event came since this wait
        // ended (the tick it read then), the retry comes after the clear
        // and so sees what the cleared events reported, and an event after
        // the clear sets tokio's readiness again, which ends the next wait
        // at once. Without the clear, every later wait would end at once
        // on readiness already used up.
        guard.clear_ready();
        Ok(())
    }
}

impl Registration for TokioSocket {
    fn readiness(&self) -> Readiness {
        Readiness::from_raw(self.observed.load(Ordering::SeqCst))
    }

    fn wait(self: Arc<Self>, direction: Direction, seen: Readiness) -> IO<(), io::Error> {
        IO::from_try_future_with_untraced(
            move || async move { self.ready_since(direction, seen).await },
        )
    }
}
