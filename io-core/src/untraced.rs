//! Plumbing for executor and integration authors: **not for applications**.
//!
//! Here be dragons. An application builds programs with [`IO`]'s public
//! constructors and combinators, and every one of them records a trace
//! event at its caller's site (when fiber tracing is on). A crate that
//! builds *operations of its own* out of several `IO` steps — a socket API
//! whose `read` is a readiness wait, a retry loop and a system call — wants
//! its users' traces to show one event, `TcpStream::read` at the user's
//! call site, not the dozen internal steps it is made of. This module gives
//! such crates (Spindle's executors and I/O layers, and third-party ones)
//! the untraced twins of the constructors they need, and
//! [`Untraced::traced_as`] to mark the whole operation once under its own
//! name.
//!
//! Nothing here is covered by the API's stability promise: the twins follow
//! io-core's internals and may change with them.
//!
//! The twins are methods of the sealed extension trait [`Untraced`]; bring
//! it into scope and call them as if they were `IO`'s own:
//!
//! ```
//! use spindle_effect::IO;
//! use spindle_effect::integration::untraced::{Op, Untraced as _};
//!
//! static READ_CONFIG: Op = Op::new("Config::read");
//!
//! /// One trace event, `Config::read` at the caller's site, however many
//! /// steps the operation takes inside.
//! #[track_caller]
//! fn read_config() -> IO<u32, String> {
//!     IO::delay_untraced(|| 41)
//!         .map_untraced(|x| x + 1)
//!         .traced_as(&READ_CONFIG)
//! }
//! # let _ = read_config();
//! ```

use core::ops::ControlFlow;

use crate::io::IO;
use crate::{Callback, FiberHandle};

/// An operation's name for traces (for [`Untraced::traced_as`]).
pub use spindle_trace::Op;

mod sealed {
    pub trait Sealed {}
    impl<A, E> Sealed for crate::IO<A, E> {}
    impl<A, E> Sealed for crate::FiberHandle<A, E> {}
    impl Sealed for crate::Poll {}
}

/// The untraced twins of `IO`'s constructors and combinators: they build
/// the same nodes, with no call site and no trace event. Sealed; see the
/// [module documentation](self).
pub trait Untraced<A, E>: sealed::Sealed + Sized {
    /// [`IO::raise_error`] without a trace event (an operation's own
    /// failure, under the operation's one event).
    fn raise_error_untraced(error: E) -> IO<A, E>;

    /// [`IO::delay`] without a trace event.
    fn delay_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> A + Send + 'static;

    /// [`IO::defer`] without a trace event.
    fn defer_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> IO<A, E> + Send + 'static;

    /// [`IO::from_callback`] without a trace event.
    fn from_callback_untraced<F>(register: F) -> IO<A, E>
    where
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>> + Send + 'static;

    /// [`IO::tail_rec`] without a trace event.
    fn tail_rec_untraced<S, F>(initial: S, step: F) -> IO<A, E>
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<ControlFlow<A, S>, E> + Send + 'static;

    /// [`IO::try_blocking`] without a trace event (a system call under
    /// its operation's one event: a file system crate's `read`).
    fn try_blocking_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> Result<A, E> + Send + 'static;

    /// [`IO::from_try_future_with`] without a trace event (an I/O layer's
    /// readiness wait on a `Future`, as exec-tokio's).
    fn from_try_future_with_untraced<F, Fut>(make: F) -> IO<A, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: core::future::Future<Output = Result<A, E>> + Send + 'static;

    /// [`IO::cede`] without a trace event (an operation that lets the
    /// other fibers run before its next step).
    fn cede_untraced() -> IO<(), E>;

    /// [`IO::uncancelable`] without a trace event (an operation's masked
    /// step; apply its [`Poll`](crate::Poll) with
    /// [`UntracedPoll::apply_untraced`]).
    fn uncancelable_untraced<F>(body: F) -> IO<A, E>
    where
        F: FnOnce(crate::Poll) -> IO<A, E> + Send + 'static;

    /// [`IO::start`] without a trace event (an operation's own fiber, as a
    /// file's writer behind its caller).
    fn start_untraced<E2: Send + 'static>(self) -> IO<FiberHandle<A, E>, E2>;

    /// [`IO::map`] without a trace event.
    fn map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> B + Send + 'static;

    /// [`IO::flat_map`] without a trace event.
    fn flat_map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static;

    /// Marks `self` as one operation named `op`, recorded at the caller's
    /// site: the one trace event of an operation whose steps are built
    /// untraced.
    #[track_caller]
    fn traced_as(self, op: &'static Op) -> IO<A, E>;
}

impl<A: Send + 'static, E: Send + 'static> Untraced<A, E> for IO<A, E> {
    #[inline]
    fn raise_error_untraced(error: E) -> IO<A, E> {
        IO::raise_error_untraced(error)
    }

    #[inline]
    fn delay_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> A + Send + 'static,
    {
        IO::delay_untraced(thunk)
    }

    #[inline]
    fn defer_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> IO<A, E> + Send + 'static,
    {
        IO::defer_untraced(thunk)
    }

    #[inline]
    fn from_callback_untraced<F>(register: F) -> IO<A, E>
    where
        F: FnOnce(Callback<A, E>) -> Option<IO<(), E>> + Send + 'static,
    {
        IO::from_callback_untraced(register)
    }

    #[inline]
    fn tail_rec_untraced<S, F>(initial: S, step: F) -> IO<A, E>
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<ControlFlow<A, S>, E> + Send + 'static,
    {
        IO::tail_rec_untraced(initial, step)
    }

    #[inline]
    fn try_blocking_untraced<F>(thunk: F) -> IO<A, E>
    where
        F: FnOnce() -> Result<A, E> + Send + 'static,
    {
        IO::try_blocking_untraced(thunk)
    }

    #[inline]
    fn from_try_future_with_untraced<F, Fut>(make: F) -> IO<A, E>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: core::future::Future<Output = Result<A, E>> + Send + 'static,
    {
        IO::from_try_future_with_untraced(make)
    }

    #[inline]
    fn cede_untraced() -> IO<(), E> {
        IO::from_node(crate::engine::node::Node::cede(
            crate::engine::tracing::NO_SITE,
        ))
    }

    #[inline]
    fn uncancelable_untraced<F>(body: F) -> IO<A, E>
    where
        F: FnOnce(crate::Poll) -> IO<A, E> + Send + 'static,
    {
        IO::uncancelable_untraced(body)
    }

    #[inline]
    fn start_untraced<E2: Send + 'static>(self) -> IO<FiberHandle<A, E>, E2> {
        IO::start_untraced(self)
    }

    #[inline]
    fn map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> B + Send + 'static,
    {
        IO::map_untraced(self, f)
    }

    #[inline]
    fn flat_map_untraced<B, F>(self, f: F) -> IO<B, E>
    where
        B: Send + 'static,
        F: FnOnce(A) -> IO<B, E> + Send + 'static,
    {
        IO::flat_map_untraced(self, f)
    }

    #[inline]
    #[track_caller]
    fn traced_as(self, op: &'static Op) -> IO<A, E> {
        IO::traced_as(self, op)
    }
}

/// Applying an uncancelable region's [`Poll`](crate::Poll) without a trace
/// event.
pub trait UntracedPoll: sealed::Sealed {
    /// [`Poll::apply`](crate::Poll::apply) without a trace event: `io`
    /// cancelable again inside the region this poll belongs to.
    fn apply_untraced<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E>;
}

impl UntracedPoll for crate::Poll {
    #[inline]
    fn apply_untraced<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> IO<A, E> {
        crate::Poll::apply_untraced(self, io)
    }
}

/// Joining a fiber without a trace event.
pub trait UntracedJoin: sealed::Sealed {
    /// [`FiberHandle::join_void`] without a trace event: waits until the
    /// fiber has completed, without reading its outcome.
    fn join_void_untraced<E2: Send + 'static>(&self) -> IO<(), E2>;
}

impl<A: Send + 'static, E: Send + 'static> UntracedJoin for FiberHandle<A, E> {
    #[inline]
    fn join_void_untraced<E2: Send + 'static>(&self) -> IO<(), E2> {
        FiberHandle::join_void_untraced(self)
    }
}
