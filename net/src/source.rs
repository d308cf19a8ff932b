//! A registered socket ([`Source`]) and the helpers every socket type is
//! written with: [`retry`] (a non-blocking call, and a readiness wait on
//! `WouldBlock`), [`retry_exclusive`] (the same holding the socket's write
//! turn, for stream writes), [`immediate`] (a call that never waits) and
//! [`Source::register`].

use std::io;
use std::mem::ManuallyDrop;
use std::ops::{ControlFlow, Deref};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::driver::{self, Direction, Readiness, Registration};
use crate::write_lock::{LockOwner, Retake, Turn, WriteLock};

/// A socket registered with a driver: a typed view of the descriptor that
/// the [`Registration`] owns, or a virtual socket of a simulated network.
///
/// The driver owns the descriptor (so that it stops watching it before it
/// closes it, see [`driver`]); `io` is a std socket built on the same
/// descriptor for its methods, and is never dropped, so it never closes
/// it. Dropping the source drops the registration, which closes it.
///
/// A virtual socket ([`driver::virt`]) has no descriptor: `io` holds a
/// reference to it (`owned`), dropped with the source, and the
/// registration is the socket itself.
///
/// Every handle of the socket (clones of a stream, its halves, the `IO`
/// values built from them) shares one `Arc<Source>`: the socket closes
/// when the last of them is dropped. The write lock keeps concurrent
/// writes whole ([`retry_exclusive`]).
pub struct Source<T> {
    io: ManuallyDrop<T>,
    registration: Arc<dyn Registration>,
    writer: WriteLock,
    /// Whether `io` is dropped with the source: a virtual socket's
    /// reference, not a view of a descriptor the registration owns.
    owned: bool,
}

impl<T> Drop for Source<T> {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `io` is dropped only here, once (this is the
            // source's drop), and not used afterwards; `owned` says it is
            // not a view of a descriptor owned by the registration (which
            // must never be closed through the view).
            unsafe { ManuallyDrop::drop(&mut self.io) }
        }
    }
}

impl<T> LockOwner for Arc<Source<T>> {
    fn write_lock(&self) -> &WriteLock {
        &self.writer
    }
}

impl<T> Deref for Source<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.io
    }
}

impl<T> Source<T>
where
    T: Into<OwnedFd> + FromRawFd,
{
    /// Registers `io` (already non-blocking) with the driver of the thread
    /// this runs on (an `Unsupported` error outside every driver; the
    /// socket is closed on error).
    pub(crate) fn register(io: T) -> io::Result<Arc<Source<T>>> {
        Source::register_as(io, |io| io)
    }
}

impl<T> Source<T> {
    /// A virtual socket (`io` holds a reference to it) whose registration
    /// is `registration` (the socket itself).
    pub(crate) fn virtual_socket(io: T, registration: Arc<dyn Registration>) -> Arc<Source<T>> {
        Arc::new(Source {
            io: ManuallyDrop::new(io),
            registration,
            writer: WriteLock::default(),
            owned: true,
        })
    }

    /// [`Source::register`] of a system socket `io` viewed as `T` (the
    /// system variant of a socket type that may also be virtual).
    pub(crate) fn register_as<F>(io: F, view: impl FnOnce(F) -> T) -> io::Result<Arc<Source<T>>>
    where
        F: Into<OwnedFd> + FromRawFd,
    {
        let socket: OwnedFd = io.into();
        let raw = socket.as_raw_fd();
        let registration = driver::register_current(socket)?;
        // SAFETY: `registration` now owns the descriptor `raw` and keeps it
        // open for as long as it lives; this source holds it for as long as
        // it holds the view, and the view is in a `ManuallyDrop` that is
        // never dropped, so it never closes the descriptor (nor does
        // anything else: `register` consumed the only other owner).
        let io = ManuallyDrop::new(view(unsafe { F::from_raw_fd(raw) }));
        Ok(Arc::new(Source {
            io,
            registration,
            writer: WriteLock::default(),
            owned: false,
        }))
    }
}

/// Fails unless this thread runs inside a driver: checked before a socket
/// is bound or connected, so that none is made for nothing.
pub(crate) fn check_driver() -> io::Result<()> {
    if driver::has_current() {
        Ok(())
    } else {
        Err(driver::no_driver())
    }
}

/// Tries `attempt` until it does not return `WouldBlock`, waiting for
/// `direction` between tries (the [`driver`] protocol: a readiness
/// snapshot before each try). The state travels through the tries (a
/// buffer, an offset) and comes back with the error. Built with io-core's
/// untraced nodes: a trace shows the operation, never this loop.
pub(crate) fn retry<T, S, A, F>(
    source: &Arc<Source<T>>,
    direction: Direction,
    state: S,
    mut attempt: F,
) -> IO<A, io::Error>
where
    T: Send + Sync + 'static,
    S: Send + 'static,
    A: Send + 'static,
    F: FnMut(&T, S) -> Result<A, (S, io::Error)> + Send + 'static,
{
    retry_reads(source, direction, state, move |socket, state| {
        attempt(socket, state).map(|a| (a, false))
    })
}

/// [`retry`] for a stream's reads: `attempt` also says whether it drained
/// the socket (a short read), which the driver records
/// ([`Registration::drained`]) so that the next read waits for readiness
/// instead of making a call that fails with `WouldBlock`. A try is skipped
/// (the fiber waits at once) when the driver knows the socket is not ready
/// ([`Registration::may_be_ready`]).
pub(crate) fn retry_reads<T, S, A, F>(
    source: &Arc<Source<T>>,
    direction: Direction,
    state: S,
    mut attempt: F,
) -> IO<A, io::Error>
where
    T: Send + Sync + 'static,
    S: Send + 'static,
    A: Send + 'static,
    F: FnMut(&T, S) -> Result<(A, bool), (S, io::Error)> + Send + 'static,
{
    let source = source.clone();
    // The flag: this try comes right after a cede, and is made whatever
    // the driver knows ([`Registration::cedes_before_try`]).
    IO::tail_rec_untraced((state, false), move |(state, ceded)| {
        let seen = source.registration.readiness();
        if !ceded && !source.registration.may_be_ready(direction, seen) {
            if source.registration.cedes_before_try() {
                return IO::<(), io::Error>::cede_untraced()
                    .map_untraced(move |()| ControlFlow::Continue((state, true)));
            }
            return source
                .registration
                .clone()
                .wait(direction, seen)
                .map_untraced(move |()| ControlFlow::Continue((state, false)));
        }
        match attempt(&source.io, state) {
            Ok((a, drained)) => {
                if drained {
                    source.registration.drained(direction, seen);
                }
                IO::pure(ControlFlow::Break(a))
            }
            Err((state, e)) => match e.kind() {
                io::ErrorKind::WouldBlock => source
                    .registration
                    .clone()
                    .wait(direction, seen)
                    .map_untraced(move |()| ControlFlow::Continue((state, false))),
                io::ErrorKind::Interrupted => IO::pure(ControlFlow::Continue((state, false))),
                _ => IO::raise_error_untraced(e),
            },
        }
    })
}

/// The tries of [`retry`] after the snapshot `seen` saw the socket not
/// ready: waits for readiness first.
fn wait_then_retry<T, S, A, F>(
    source: Arc<Source<T>>,
    direction: Direction,
    seen: Readiness,
    state: S,
    attempt: F,
) -> IO<A, io::Error>
where
    T: Send + Sync + 'static,
    S: Send + 'static,
    A: Send + 'static,
    F: FnMut(&T, S) -> Result<A, (S, io::Error)> + Send + 'static,
{
    source
        .registration
        .clone()
        .wait(direction, seen)
        .flat_map_untraced(move |()| retry(&source, direction, state, attempt))
}

/// [`retry`] holding the socket's write turn for the whole operation, so
/// that writes from clones of one stream never interleave (see
/// `write_lock.rs`). The turn is taken and given back in the same step
/// when the lock is free and the first try completes (no node more than
/// [`retry`]); otherwise it is held by the continuation that ends the
/// operation, and given back when that continuation runs or is dropped (an
/// error, a cancellation).
pub(crate) fn retry_exclusive<T, S, A, F>(
    source: &Arc<Source<T>>,
    direction: Direction,
    state: S,
    mut attempt: F,
) -> IO<A, io::Error>
where
    T: Send + Sync + 'static,
    S: Send + 'static,
    A: Send + 'static,
    F: FnMut(&T, S) -> Result<A, (S, io::Error)> + Send + 'static,
{
    let source = source.clone();
    IO::defer_untraced(move || {
        if !source.writer.try_lock() {
            // Another write holds the turn: wait for it.
            return wait_for_turn(Turn::waiting(source)).flat_map_untraced(move |turn| {
                retry(turn.owner(), direction, state, attempt).map_untraced(move |a| {
                    drop(turn);
                    a
                })
            });
        }
        // Holding the turn: try at once.
        let seen = source.registration.readiness();
        let (state, seen) = if source.registration.may_be_ready(direction, seen) {
            match attempt(&source.io, state) {
                Ok(a) => {
                    source.writer.unlock();
                    return IO::pure(a);
                }
                Err((state, e)) => match e.kind() {
                    io::ErrorKind::WouldBlock => (state, Some(seen)),
                    io::ErrorKind::Interrupted => (state, None),
                    _ => {
                        source.writer.unlock();
                        return IO::raise_error_untraced(e);
                    }
                },
            }
        } else {
            (state, Some(seen))
        };
        let turn = Turn::held(source);
        let source = turn.owner().clone();
        let rest = match seen {
            Some(seen) => wait_then_retry(source, direction, seen, state, attempt),
            None => retry(&source, direction, state, attempt),
        };
        rest.map_untraced(move |a| {
            drop(turn);
            a
        })
    })
}

/// Waits until `turn` holds its socket's write lock: lists it, and, woken,
/// takes the lock, or lists it again if a writer that ran first holds it
/// (`write_lock.rs`). The turn travels in the continuation, so a
/// cancellation at any point gives back what it has (module doc there).
fn wait_for_turn<T>(turn: Turn<Arc<Source<T>>>) -> IO<Turn<Arc<Source<T>>>, io::Error>
where
    T: Send + Sync + 'static,
{
    let state = turn.state().clone();
    let owner = turn.owner().clone();
    IO::from_callback_untraced(move |wake| {
        owner.writer.enqueue(&state, wake);
        None
    })
    .flat_map_untraced(move |()| match turn.owner().writer.retake(turn.state()) {
        Retake::Taken => IO::pure(turn),
        Retake::Held => wait_for_turn(turn),
        Retake::TornDown => IO::raise_error_untraced(io::Error::other(
            "the socket's executor shut down while a write waited for its turn",
        )),
    })
}

/// A program of a call that never waits.
pub(crate) fn immediate<A, F>(call: F) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce() -> io::Result<A> + Send + 'static,
{
    IO::defer_untraced(move || match call() {
        Ok(a) => IO::pure(a),
        Err(e) => IO::raise_error_untraced(e),
    })
}

/// A program of a call on `source` that never waits.
pub(crate) fn on<T, A, F>(source: &Arc<Source<T>>, call: F) -> IO<A, io::Error>
where
    T: Send + Sync + 'static,
    A: Send + 'static,
    F: FnOnce(&T) -> io::Result<A> + Send + 'static,
{
    let source = source.clone();
    immediate(move || call(&source))
}

/// Whether a non-blocking `connect` reported that it goes on in the
/// background (the stable `io::ErrorKind` has no name for it yet).
pub(crate) fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    //! The typed view of a registered socket, also under Miri (its
    //! `unsafe` is the view's construction): Unix socket pairs on a reactor
    //! made by the test itself.

    use super::*;
    use crate::driver::{Reactor, with_driver};
    use std::fs::File;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// A connected Unix socket pair, non-blocking from the start
    /// (`SOCK_NONBLOCK`: Miri runs no `ioctl` on sockets), viewed as files
    /// (`read`/`write`, which Miri runs on socket pairs; `recv` it does
    /// not). The view type is any `Into<OwnedFd> + FromRawFd`.
    fn pair() -> (File, File) {
        let mut fds = [0; 2];
        let kind = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: `fds` is a valid array of two descriptors for the call
        // to fill; the return value is checked before they are used.
        let made = unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) };
        assert_eq!(made, 0, "socketpair: {}", io::Error::last_os_error());
        // SAFETY: `socketpair` succeeded, so both are open descriptors
        // that nothing else owns; each is taken by exactly one `OwnedFd`.
        let (ours, peer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        (File::from(ours), File::from(peer))
    }

    #[test]
    fn a_registered_socket_reads_through_its_view_and_closes_when_dropped() {
        let (reactor, mut poller) = Reactor::new().unwrap();
        let (ours, mut peer) = pair();
        let source = with_driver(&reactor, || Source::register(ours)).unwrap();
        assert_eq!(reactor.sources(), 1);
        peer.write_all(b"ping").unwrap();
        // The reactor sees the socket readable (a look, no waiter).
        poller.poll(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 8];
        let n = (&*source.io).read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        drop(source);
        assert_eq!(reactor.sources(), 0, "deregistered when dropped");
        // The descriptor is closed: the peer reads end of stream.
        assert_eq!(peer.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn after_a_drained_read_each_reactor_kind_waits_cedes_first_or_tries_until_an_event_comes() {
        // (reactor, after the drain: may the read try at once, does it cede first)
        type Make = fn() -> io::Result<(Reactor, crate::driver::Poller)>;
        let kinds: [(Make, bool, bool); 3] = [
            (Reactor::new, false, false),
            (Reactor::ceding, false, true),
            (Reactor::trying_calls, true, false),
        ];
        for (make, tries, cedes) in kinds {
            let (reactor, mut poller) = make().unwrap();
            let (ours, mut peer) = pair();
            let source = with_driver(&reactor, || Source::register(ours)).unwrap();
            let registration = &source.registration;
            // A socket starts ready: the first read tries its call.
            let seen = registration.readiness();
            assert!(registration.may_be_ready(Direction::Read, seen));
            registration.drained(Direction::Read, seen);
            let after = registration.readiness();
            assert_eq!(registration.may_be_ready(Direction::Read, after), tries);
            assert_eq!(registration.cedes_before_try(), cedes);
            // An event makes the next read try at once, whatever the kind.
            peer.write_all(b"ping").unwrap();
            poller.poll(Some(Duration::from_secs(5))).unwrap();
            assert!(registration.may_be_ready(Direction::Read, registration.readiness()));
        }
    }

    /// A stand-in for a virtual socket: its registration, counted.
    struct Counted;

    impl Registration for Counted {
        fn readiness(&self) -> Readiness {
            Readiness::UNKNOWN
        }

        fn wait(self: Arc<Self>, _: Direction, _: Readiness) -> IO<(), io::Error> {
            IO::unit()
        }
    }

    #[test]
    fn a_virtual_socket_is_dropped_with_its_source_once_and_its_registration_with_it() {
        let socket = Arc::new(Counted);
        let registration: Arc<dyn Registration> = socket.clone();
        // The view holds one reference, the registration another.
        let source = Source::virtual_socket(socket.clone(), registration);
        assert_eq!(Arc::strong_count(&socket), 3);
        let second = source.clone();
        drop(source);
        assert_eq!(Arc::strong_count(&socket), 3, "alive while a handle is");
        drop(second);
        assert_eq!(
            Arc::strong_count(&socket),
            1,
            "both references dropped, once"
        );
    }

    #[test]
    fn registering_outside_a_driver_closes_the_socket_and_fails() {
        let (ours, mut peer) = pair();
        let error = Source::register(ours).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        // The socket was closed: end of stream, not `WouldBlock`.
        assert_eq!(peer.read(&mut [0u8; 8]).unwrap(), 0);
    }
}
