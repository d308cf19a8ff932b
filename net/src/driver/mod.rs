//! The I/O capability of the executor contract: what an executor provides
//! so that the sockets of this crate run on it. **For executor authors**;
//! applications use the socket types.
//!
//! Here be dragons, a little: nothing here is `unsafe` to call, but an
//! executor that breaks the promises below makes sockets hang.
//!
//! # The capability
//!
//! | item | made by | called by | from which thread |
//! |---|---|---|---|
//! | [`IoDriver::register`] | the executor | a socket constructor (`bind`, `connect`, `accept`) | a thread running one of the executor's fibers, inside [`with_driver`] |
//! | [`Registration::readiness`] | the executor | a socket operation, before each non-blocking call | any |
//! | [`Registration::wait`] | the executor | a socket operation whose call returned `WouldBlock` | any (the `IO` it returns runs on the calling fiber) |
//! | dropping the [`Registration`] | | the socket, when it and every `IO` built from it are gone | any |
//! | [`with_driver`] | this crate | the executor, around the code that runs its fibers | the executor's own threads |
//! | [`with_current`] | this crate | socket constructors | any |
//!
//! An executor with non-blocking I/O makes an [`IoDriver`] and runs its
//! fibers inside [`with_driver`] (exec-wstp: each worker, for its whole
//! life; exec-batching and exec-single: each `block_on`; exec-tokio: each
//! poll of a fiber's task). A socket is made by a fiber: its constructor
//! finds the driver of the thread it runs on with [`with_current`] and
//! hands it the socket, which the driver then owns; outside every driver
//! the constructor fails with an `io::Error` of kind `Unsupported` (never a
//! panic). Every later operation on the socket goes through its
//! [`Registration`], whichever fiber or thread runs it.
//!
//! # One operation
//!
//! A socket operation (`read`, `accept`, `send_to`, ...) is a loop:
//!
//! 1. take a [`Readiness`] snapshot ([`Registration::readiness`]);
//! 2. try the non-blocking system call; done unless it returns
//!    `WouldBlock` (`Interrupted` is tried again at once);
//! 3. run [`Registration::wait`] with the snapshot and the direction, which
//!    ends when the socket may have become ready for that direction
//!    *since the snapshot*; go to 1.
//!
//! # Promises a driver makes
//!
//! * **No lost readiness.** `wait(direction, seen)` ends once the socket
//!   is ready for `direction` after the snapshot `seen` was taken: also
//!   when that happened between the snapshot and the call. (A driver with
//!   no snapshots may end the wait at once whenever it cannot tell; the
//!   operation then tries again: a spurious wake-up, never a lost one.)
//! * **Cancellation leaves nothing behind.** Canceling the fiber while it
//!   waits (a `timeout`, a lost `race`) removes its interest; the socket is
//!   as if the operation had never started.
//! * **Ownership.** [`IoDriver::register`] takes the descriptor: the
//!   driver removes it from its poller *before* it closes it, when the
//!   [`Registration`] is dropped, so a descriptor number is never closed
//!   while a poller still watches it (and so never confused with the next
//!   socket to get that number).
//! * **Errors, not hangs.** A wait on a driver that is shut down (its
//!   executor was dropped), or that nothing polls at the time (an
//!   exec-batching loop between two `block_on`s), fails with an
//!   `io::Error` that says so.
//! * **Resumption.** The fiber is resumed through its callback (the
//!   executor's `schedule_fiber`), from the thread that saw the readiness:
//!   on exec-wstp the worker whose poller reported it (locality).
//!
//! The [`Reactor`] of this module keeps these promises on mio for the
//! executors that poll for themselves; exec-tokio keeps them with tokio's
//! `AsyncFd`.

use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::Arc;

use spindle_core::IO;

pub mod reactor;
pub mod virt;

pub use reactor::{EVENTS_CAPACITY, ParkState, Poller, Reactor};
pub use virt::{
    VirtualDatagram, VirtualDisk, VirtualFile, VirtualListener, VirtualMetadata, VirtualNetwork,
    VirtualOpenOptions, VirtualStream,
};

/// Which readiness an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Readable: bytes or a datagram to read, a connection to accept, the
    /// end of the stream, or an error.
    Read,
    /// Writable: room to write, a background `connect` that finished, or
    /// an error.
    Write,
}

/// A snapshot of what a driver knows of a socket's readiness, taken
/// before a non-blocking call (see the [module documentation](self)).
/// Opaque: only the driver that made it reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness(pub(crate) u64);

impl Readiness {
    /// A snapshot that says nothing: for drivers without snapshots.
    pub const UNKNOWN: Readiness = Readiness(0);

    /// A snapshot with a driver's own meaning (see [`raw`](Readiness::raw)).
    pub const fn from_raw(word: u64) -> Readiness {
        Readiness(word)
    }

    /// The word given to [`from_raw`](Readiness::from_raw).
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// An executor's I/O capability: it adds sockets to what it polls.
///
/// See the [module documentation](self) for the contract.
pub trait IoDriver: Send + Sync {
    /// Takes `socket` (already non-blocking) and watches it for both
    /// directions from now on; the socket closes when the returned
    /// registration is dropped, after the driver stopped watching it. On
    /// error the socket is closed.
    fn register(&self, socket: OwnedFd) -> io::Result<Arc<dyn Registration>>;

    /// The simulated network whose virtual sockets the TCP and UDP types
    /// use instead of system sockets on this driver (see [`virt`]). The
    /// default, for every driver over a real poller: `None`.
    fn network(&self) -> Option<&dyn VirtualNetwork> {
        None
    }

    /// The simulated disk that spindle-os's file operations use instead
    /// of the system's files on this driver (see [`virt`]); an `Arc`, so
    /// that a blocking call can hold it. The default, for every driver
    /// over a real poller: `None`.
    fn disk(&self) -> Option<Arc<dyn VirtualDisk>> {
        None
    }
}

/// A socket an [`IoDriver`] watches. Dropping it stops watching and closes
/// the socket.
pub trait Registration: Send + Sync + 'static {
    /// The snapshot to take before a non-blocking call.
    fn readiness(&self) -> Readiness;

    /// A program that ends when the socket may be ready for `direction`
    /// after `seen` (see the promises in the [module documentation](self)),
    /// or fails when it cannot wait (the driver is shut down or not
    /// polled). Canceling it removes the interest.
    fn wait(self: Arc<Self>, direction: Direction, seen: Readiness) -> IO<(), io::Error>;

    /// Whether the snapshot `seen` leaves open that the socket is ready for
    /// `direction`: `false` only when the driver knows it is not (a call
    /// returned `WouldBlock`, or a read drained it, and nothing happened
    /// since), so that the operation waits without making a call that
    /// would fail. The default, for drivers without that knowledge: `true`.
    fn may_be_ready(&self, direction: Direction, seen: Readiness) -> bool {
        let _ = (direction, seen);
        true
    }

    /// When [`may_be_ready`](Registration::may_be_ready) says the socket is
    /// not ready: whether the operation cedes once and then makes its call
    /// anyway (a driver whose poller may be looked at late, while its
    /// owner runs fibers), instead of waiting for readiness at once. The
    /// default: `false`.
    fn cedes_before_try(&self) -> bool {
        false
    }

    /// A stream read returned fewer bytes than it asked for: the socket's
    /// receive buffer is drained, so the driver may record it as not ready
    /// for reading (unless something happened since `seen`), and the next
    /// read waits for readiness instead of failing with `WouldBlock` first
    /// (tokio's `PollEvented` does the same). The default does nothing.
    fn drained(&self, direction: Direction, seen: Readiness) {
        let _ = (direction, seen);
    }
}

thread_local! {
    /// The driver of the executor whose fibers this thread runs now.
    static CURRENT: Cell<Option<NonNull<dyn IoDriver>>> = const { Cell::new(None) };
}

/// Restores the previous driver of this thread (also when unwinding).
struct Restore(Option<NonNull<dyn IoDriver>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|current| current.set(self.0));
    }
}

/// Runs `f` with `driver` as this thread's driver: sockets made by fibers
/// that `f` runs are registered with it. Nests (the previous driver is
/// restored when `f` returns or unwinds).
pub fn with_driver<R>(driver: &(dyn IoDriver + 'static), f: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|current| current.replace(Some(NonNull::from(driver))));
    let _restore = Restore(previous);
    f()
}

/// Runs `f` with this thread's driver, if it runs inside [`with_driver`].
pub fn with_current<R>(f: impl FnOnce(Option<&dyn IoDriver>) -> R) -> R {
    let current = CURRENT.try_with(Cell::get).ok().flatten();
    // SAFETY: `CURRENT` holds a pointer only inside `with_driver`, which
    // borrows the driver for its whole call and restores the previous
    // value before it returns (`Restore` also runs when unwinding); the
    // pointer was made from that borrow. `f` runs inside that call (this
    // thread is inside `with_driver` now), so the driver is alive and only
    // shared references to it exist.
    let driver = current.map(|pointer| unsafe { pointer.as_ref() });
    f(driver)
}

/// The error of a socket constructor run outside every driver.
pub(crate) fn no_driver() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "spindle-net: sockets are made by fibers of an executor with I/O (exec-wstp, \
         exec-batching, exec-tokio, exec-single with std); this ran outside one",
    )
}

/// Registers `socket` with this thread's driver.
pub(crate) fn register_current(socket: OwnedFd) -> io::Result<Arc<dyn Registration>> {
    with_current(|driver| match driver {
        Some(driver) => driver.register(socket),
        None => Err(no_driver()),
    })
}

/// Runs `f` with this thread's simulated network: `Ok(None)` on a driver
/// without one, the "no driver" error outside every driver.
pub(crate) fn with_network<R>(f: impl FnOnce(Option<&dyn VirtualNetwork>) -> R) -> io::Result<R> {
    with_current(|driver| match driver {
        Some(driver) => Ok(f(driver.network())),
        None => Err(no_driver()),
    })
}

/// Whether this thread runs inside a driver (checked before a socket is
/// made, so that none is bound or connected for nothing).
pub(crate) fn has_current() -> bool {
    with_current(|driver| driver.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver that refuses every socket (these tests make none). Not
    /// zero-sized, so that two of them have two addresses.
    struct Refusing(#[allow(dead_code)] u8);

    impl IoDriver for Refusing {
        fn register(&self, socket: OwnedFd) -> io::Result<Arc<dyn Registration>> {
            drop(socket);
            Err(io::Error::other("refused"))
        }
    }

    /// The address of this thread's driver.
    fn current() -> Option<usize> {
        with_current(|driver| driver.map(|d| d as *const dyn IoDriver as *const () as usize))
    }

    fn address(driver: &Refusing) -> Option<usize> {
        Some(driver as *const Refusing as usize)
    }

    #[test]
    fn no_driver_is_current_outside_with_driver() {
        assert!(!has_current());
        assert_eq!(current(), None);
    }

    #[test]
    fn with_driver_nests_and_restores_the_outer_driver() {
        let (outer, inner) = (Refusing(1), Refusing(2));
        let (outer, inner) = (Box::new(outer), Box::new(inner));
        with_driver(&*outer, || {
            assert_eq!(current(), address(&outer));
            with_driver(&*inner, || assert_eq!(current(), address(&inner)));
            assert_eq!(current(), address(&outer));
        });
        assert_eq!(current(), None);
    }

    #[test]
    fn with_driver_restores_the_previous_driver_when_unwinding() {
        let outer = Box::new(Refusing(0));
        with_driver(&*outer, || {
            let inner = Box::new(Refusing(0));
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with_driver(&*inner, || panic!("in the inner driver"))
            }));
            assert!(unwound.is_err());
            assert_eq!(current(), address(&outer));
        });
        assert_eq!(current(), None);
    }

    #[test]
    fn the_error_outside_a_driver_is_unsupported_and_says_so() {
        let error = no_driver();
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        assert!(error.to_string().contains("outside"), "{error}");
    }
}
