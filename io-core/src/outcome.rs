//! How a fiber ended ([`Outcome`]), and its three ways of not producing a
//! value as an error ([`Failure`], what [`Outcome::into_result`] gives).

use alloc::string::{String, ToString};
use core::fmt;

/// How a fiber ended: the result of running an `IO` to completion.
///
/// Cats Effect's `Outcome` has three cases; Spindle adds [`Outcome::Panicked`]
/// because a Rust panic is not a value of the program's error type: it cannot
/// be handled by `handle_error_with`, but it is contained (with `std`), ends
/// only its own fiber and is reported here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<A, E> {
    /// The program produced a value.
    Succeeded(A),
    /// The program failed with an error of its error type.
    Errored(E),
    /// The fiber was canceled before it could finish.
    Canceled,
    /// A closure of the program panicked; the fiber ended there.
    Panicked(PanicMessage),
}

impl<A, E> Outcome<A, E> {
    /// Whether the fiber produced a value.
    pub fn is_succeeded(&self) -> bool {
        matches!(self, Outcome::Succeeded(_))
    }

    /// Whether the fiber failed with an error value.
    pub fn is_errored(&self) -> bool {
        matches!(self, Outcome::Errored(_))
    }

    /// Whether the fiber was canceled.
    pub fn is_canceled(&self) -> bool {
        matches!(self, Outcome::Canceled)
    }

    /// Whether the fiber ended with a panic.
    pub fn is_panicked(&self) -> bool {
        matches!(self, Outcome::Panicked(_))
    }

    /// The value, if the fiber succeeded (the same as
    /// [`ok`](Outcome::ok)).
    pub fn succeeded(self) -> Option<A> {
        match self {
            Outcome::Succeeded(a) => Some(a),
            _ => None,
        }
    }

    /// The error, if the fiber failed with one (the same as
    /// [`error`](Outcome::error)).
    pub fn errored(self) -> Option<E> {
        match self {
            Outcome::Errored(e) => Some(e),
            _ => None,
        }
    }

    /// The value, if the fiber succeeded (as [`Result::ok`]).
    pub fn ok(self) -> Option<A> {
        self.succeeded()
    }

    /// The error, if the fiber failed with one (as [`Result::err`]; a
    /// cancellation or a panic is `None`).
    pub fn error(self) -> Option<E> {
        self.errored()
    }

    /// The outcome as a `Result`: the value, or the [`Failure`] (an error,
    /// a cancellation or a panic), so that `?` takes it apart.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{error::Failure, wstp::Runtime};
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let rt = Runtime::new()?;
    ///     let answer = rt.block_on(IO::<u32, String>::pure(42))?.into_result()?;
    ///     assert_eq!(answer, 42);
    ///     let failed = rt.block_on(IO::<u32, String>::raise_error("no".into()))?.into_result();
    ///     assert_eq!(failed, Err(Failure::Errored("no".to_string())));
    ///     let canceled = rt.block_on(IO::<(), String>::canceled().map_to(1u32))?.into_result();
    ///     assert_eq!(canceled.unwrap_err().to_string(), "the fiber was canceled");
    ///     Ok(())
    /// }
    /// ```
    pub fn into_result(self) -> Result<A, Failure<E>> {
        match self {
            Outcome::Succeeded(a) => Ok(a),
            Outcome::Errored(e) => Err(Failure::Errored(e)),
            Outcome::Canceled => Err(Failure::Canceled),
            Outcome::Panicked(p) => Err(Failure::Panicked(p)),
        }
    }

    /// The outcome with its value and error borrowed (as
    /// [`Result::as_ref`]), to inspect it without moving it (a panic's
    /// message is cloned).
    pub fn as_ref(&self) -> Outcome<&A, &E> {
        match self {
            Outcome::Succeeded(a) => Outcome::Succeeded(a),
            Outcome::Errored(e) => Outcome::Errored(e),
            Outcome::Canceled => Outcome::Canceled,
            Outcome::Panicked(p) => Outcome::Panicked(p.clone()),
        }
    }

    /// Maps the success value.
    pub fn map<B>(self, f: impl FnOnce(A) -> B) -> Outcome<B, E> {
        match self {
            Outcome::Succeeded(a) => Outcome::Succeeded(f(a)),
            Outcome::Errored(e) => Outcome::Errored(e),
            Outcome::Canceled => Outcome::Canceled,
            Outcome::Panicked(p) => Outcome::Panicked(p),
        }
    }

    /// Maps the error value.
    pub fn map_err<E2>(self, f: impl FnOnce(E) -> E2) -> Outcome<A, E2> {
        match self {
            Outcome::Succeeded(a) => Outcome::Succeeded(a),
            Outcome::Errored(e) => Outcome::Errored(f(e)),
            Outcome::Canceled => Outcome::Canceled,
            Outcome::Panicked(p) => Outcome::Panicked(p),
        }
    }
}

impl<A: fmt::Debug, E: fmt::Debug> fmt::Display for Outcome<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Succeeded(a) => write!(f, "succeeded with {a:?}"),
            Outcome::Errored(e) => write!(f, "errored with {e:?}"),
            Outcome::Canceled => f.write_str("canceled"),
            Outcome::Panicked(p) => write!(f, "panicked: {p}"),
        }
    }
}

impl<A, E> From<Result<A, Failure<E>>> for Outcome<A, E> {
    /// The outcome a `Result` of [`Outcome::into_result`] came from.
    fn from(result: Result<A, Failure<E>>) -> Self {
        match result {
            Ok(a) => Outcome::Succeeded(a),
            Err(failure) => failure.into_outcome(),
        }
    }
}

impl<A, E> From<Outcome<A, E>> for Result<A, Failure<E>> {
    /// [`Outcome::into_result`].
    fn from(outcome: Outcome<A, E>) -> Self {
        outcome.into_result()
    }
}

/// How a fiber ended without a value: the `Err` of
/// [`Outcome::into_result`]. An error of the program's own type, a
/// cancellation, or a panic (with its message and trace).
///
/// It is a [`core::error::Error`] when `E` can be displayed, so that `?`
/// turns it into a `Box<dyn Error>`; an `E` converts into it (`?` on a
/// program's own error in code whose error is a `Failure<E>`); with `std`,
/// a `Failure` of an error that converts into [`std::io::Error`] converts
/// into one too (a cancellation or a panic as an error of kind
/// [`Other`](std::io::ErrorKind::Other) whose source is the `Failure`).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{error::Failure, single::SingleThreaded};
///
/// // In an IO block whose error type is `Failure<String>`: `?` takes both
/// // a program's own error and a joined fiber's failure.
/// let program: IO<u32, Failure<String>> = IO::block(async {
///     let base = IO::<u32, String>::pure(40).await?;
///     let child = IO::<u32, String>::pure(2).start().value().await;
///     let extra = child.join().value().await.into_result()?;
///     Ok(base + extra)
/// });
/// assert_eq!(SingleThreaded::new()?.block_on(program)?, Outcome::Succeeded(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// The program failed with an error of its error type.
    Errored(E),
    /// The fiber was canceled before it could finish.
    Canceled,
    /// A closure of the program panicked; the fiber ended there.
    Panicked(PanicMessage),
}

impl<E> Failure<E> {
    /// Whether the program failed with an error value.
    pub fn is_errored(&self) -> bool {
        matches!(self, Failure::Errored(_))
    }

    /// Whether the fiber was canceled.
    pub fn is_canceled(&self) -> bool {
        matches!(self, Failure::Canceled)
    }

    /// Whether the fiber ended with a panic.
    pub fn is_panicked(&self) -> bool {
        matches!(self, Failure::Panicked(_))
    }

    /// The error, if the program failed with one (a cancellation or a
    /// panic is `None`).
    pub fn error(self) -> Option<E> {
        match self {
            Failure::Errored(e) => Some(e),
            _ => None,
        }
    }

    /// Maps the error value.
    pub fn map<E2>(self, f: impl FnOnce(E) -> E2) -> Failure<E2> {
        match self {
            Failure::Errored(e) => Failure::Errored(f(e)),
            Failure::Canceled => Failure::Canceled,
            Failure::Panicked(p) => Failure::Panicked(p),
        }
    }

    /// The outcome this failure is the `Err` of.
    pub fn into_outcome<A>(self) -> Outcome<A, E> {
        match self {
            Failure::Errored(e) => Outcome::Errored(e),
            Failure::Canceled => Outcome::Canceled,
            Failure::Panicked(p) => Outcome::Panicked(p),
        }
    }
}

impl<E> From<E> for Failure<E> {
    /// An error of the program's type, as a failure.
    fn from(error: E) -> Self {
        Failure::Errored(error)
    }
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    /// The error's own message; `the fiber was canceled`; `the fiber
    /// panicked: {message}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Errored(e) => e.fmt(f),
            Failure::Canceled => f.write_str("the fiber was canceled"),
            Failure::Panicked(p) => write!(f, "the fiber panicked: {p}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for Failure<E> {}

/// A failure as an I/O error, so that `?` takes the failure of a program
/// whose error type is [`std::io::Error`] (or converts into one) in code
/// that returns `std::io::Error`: the error itself, or for a cancellation
/// or a panic an error of kind [`Other`](std::io::ErrorKind::Other) whose
/// source is a `Failure<Infallible>` (`Canceled` or `Panicked`).
#[cfg(feature = "std")]
impl<E: Into<std::io::Error>> From<Failure<E>> for std::io::Error {
    fn from(failure: Failure<E>) -> Self {
        match failure {
            Failure::Errored(e) => e.into(),
            Failure::Canceled => {
                std::io::Error::other(Failure::<core::convert::Infallible>::Canceled)
            }
            Failure::Panicked(p) => {
                std::io::Error::other(Failure::<core::convert::Infallible>::Panicked(p))
            }
        }
    }
}

/// The message of a panic that ended a fiber, and the fiber's trace at the
/// point of the panic (when it traced).
///
/// Equality compares messages only.
#[derive(Debug, Clone)]
pub struct PanicMessage {
    /// One word, so that every outcome (and every join state holding one)
    /// stays small; panics are rare, the extra indirection is not.
    inner: alloc::boxed::Box<PanicInner>,
}

#[derive(Debug, Clone)]
struct PanicInner {
    message: alloc::boxed::Box<str>,
    /// `None` when the fiber did not trace.
    trace: Option<crate::engine::tracing::Trace>,
}

impl PartialEq for PanicMessage {
    fn eq(&self, other: &PanicMessage) -> bool {
        self.inner.message == other.inner.message
    }
}

impl Eq for PanicMessage {}

impl PanicMessage {
    /// Wraps a message.
    pub fn new(message: impl Into<String>) -> Self {
        PanicMessage {
            inner: alloc::boxed::Box::new(PanicInner {
                message: message.into().into_boxed_str(),
                trace: None,
            }),
        }
    }

    /// Reads the message out of a panic payload (`&str` or `String`, as
    /// `panic!` makes them; anything else reads as a placeholder).
    pub fn from_payload(payload: &(dyn core::any::Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            String::from("Box<dyn Any> (a panic payload that is not a string)")
        };
        PanicMessage::new(message)
    }

    /// The panic message.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// The trace of the fiber at the point of the panic: its last events,
    /// in the order they happened (`None` if the fiber did not trace: mode
    /// `none`, or tracing compiled out).
    pub fn trace(&self) -> Option<&crate::engine::tracing::Trace> {
        self.inner.trace.as_ref()
    }

    /// Attaches the fiber's trace (when the fiber ends with this panic).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn with_trace(mut self, trace: crate::engine::tracing::Trace) -> Self {
        if !trace.is_empty() {
            self.inner.trace = Some(trace);
        }
        self
    }
}

impl fmt::Display for PanicMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.message)
    }
}
