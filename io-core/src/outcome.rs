//! How a fiber ended.

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

    /// The value, if the fiber succeeded.
    pub fn succeeded(self) -> Option<A> {
        match self {
            Outcome::Succeeded(a) => Some(a),
            _ => None,
        }
    }

    /// The error, if the fiber failed with one.
    pub fn errored(self) -> Option<E> {
        match self {
            Outcome::Errored(e) => Some(e),
            _ => None,
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
