//! [`AsyncFd`]: any descriptor that supports readiness (a pipe, a
//! character device, a Linux `pidfd`, a socket made elsewhere) registered
//! with the running executor's I/O driver, so that a fiber waits for it
//! without blocking a thread.
//!
//! The socket types of this crate are built the same way; `AsyncFd` is
//! the same capability for descriptors this crate does not wrap (the
//! child-process pipes and signal pipes of `spindle-os` are built on it).
//! A call made through [`AsyncFd::read_with`] or
//! [`AsyncFd::write_with`] is tried at once; if it fails with
//! `WouldBlock`, the fiber waits until the driver reports the descriptor
//! ready in that direction, then tries again (the crate's "One operation"
//! protocol). Regular files are always "ready" to epoll and cannot be
//! registered (the system refuses them with `EPERM`): use the blocking
//! pool for them (`spindle-os`'s `fs`).
//!
//! Design credit: tokio's `AsyncFd` (a registered descriptor and
//! readiness-guarded calls); no code is copied.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::driver::Direction;
use crate::source::{Source, retry, retry_exclusive};

mod ops {
    use spindle_core::untraced::Op;

    pub(super) static NEW: Op = Op::new("AsyncFd::new");
    pub(super) static READ_WITH: Op = Op::new("AsyncFd::read_with");
    pub(super) static WRITE_WITH: Op = Op::new("AsyncFd::write_with");
}

/// A descriptor owned by `T` (a `std::fs::File` over a pipe, an
/// `OwnedFd`, ...) registered with the I/O driver of the executor that
/// made it. A cheap handle: clones share the registration, and the
/// descriptor is closed (after the driver stops watching it) when the
/// last clone is dropped, exactly once.
pub struct AsyncFd<T> {
    source: Arc<Source<T>>,
}

impl<T> Clone for AsyncFd<T> {
    fn clone(&self) -> Self {
        AsyncFd {
            source: self.source.clone(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("io", &**self.source)
            .finish()
    }
}

impl<T> AsyncFd<T>
where
    T: AsFd + Into<OwnedFd> + FromRawFd + Send + Sync + 'static,
{
    /// Makes `io`'s descriptor non-blocking and registers it with the
    /// driver of the executor running this program (an error of kind
    /// `Unsupported` outside every executor with I/O; the system's error
    /// for a descriptor that cannot be watched, such as a regular file).
    /// On error the descriptor is closed.
    #[track_caller]
    pub fn new(io: T) -> IO<AsyncFd<T>, io::Error> {
        AsyncFd::new_untraced(io).traced_as(&ops::NEW)
    }

    fn new_untraced(io: T) -> IO<AsyncFd<T>, io::Error> {
        IO::defer_untraced(move || match AsyncFd::register_here(io) {
            Ok(fd) => IO::pure(fd),
            Err(e) => IO::raise_error_untraced(e),
        })
    }

    /// [`new`](AsyncFd::new) as a plain call, for a library that registers
    /// descriptors inside a step of its own program (an `IO::defer`): it
    /// registers with the driver of the executor running on this thread,
    /// which is the running fiber's inside a step (an error of kind
    /// `Unsupported` on a thread that runs no executor with I/O). On error
    /// the descriptor is closed.
    pub fn register_here(io: T) -> io::Result<AsyncFd<T>> {
        rustix::io::ioctl_fionbio(&io, true)?;
        Ok(AsyncFd {
            source: Source::register(io)?,
        })
    }

    /// The owner of the descriptor, for calls that never wait (its
    /// metadata, a socket option). Reads and writes go through
    /// [`read_with`](AsyncFd::read_with) and
    /// [`write_with`](AsyncFd::write_with).
    pub fn get_ref(&self) -> &T {
        &self.source
    }

    /// Runs `call` until it does not fail with `WouldBlock`, waiting for
    /// the descriptor to be readable between tries: `call` is a
    /// non-blocking read (or anything that waits for readability, such as
    /// reaping a child through its `pidfd`). `Interrupted` is tried again;
    /// any other error is the program's. Canceled while it waits, it
    /// leaves no interest behind.
    #[track_caller]
    pub fn read_with<A, F>(&self, call: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnMut(&T) -> io::Result<A> + Send + 'static,
    {
        self.read_with_untraced(call).traced_as(&ops::READ_WITH)
    }

    /// [`read_with`](AsyncFd::read_with) without a trace event, for
    /// libraries that trace their operation under its own name.
    pub fn read_with_untraced<A, F>(&self, mut call: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnMut(&T) -> io::Result<A> + Send + 'static,
    {
        retry(&self.source, Direction::Read, (), move |io, ()| {
            call(io).map_err(|e| ((), e))
        })
    }

    /// Runs `call` until it does not fail with `WouldBlock`, waiting for
    /// the descriptor to be writable between tries, holding the
    /// descriptor's write turn from the first try to the last (writes
    /// through clones never interleave, as a socket's).
    #[track_caller]
    pub fn write_with<A, F>(&self, call: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnMut(&T) -> io::Result<A> + Send + 'static,
    {
        self.write_with_untraced(call).traced_as(&ops::WRITE_WITH)
    }

    /// [`write_with`](AsyncFd::write_with) without a trace event.
    pub fn write_with_untraced<A, F>(&self, mut call: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnMut(&T) -> io::Result<A> + Send + 'static,
    {
        retry_exclusive(&self.source, Direction::Write, (), move |io, ()| {
            call(io).map_err(|e| ((), e))
        })
    }
}
