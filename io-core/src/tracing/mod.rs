//! Fiber tracing in the run-loop: where call sites are kept in programs,
//! and how a fiber records them.
//!
//! # Data path
//!
//! Every public constructor and combinator is `#[track_caller]`, so it
//! knows the user's call site ([`Site::caller`]) without walking the stack.
//! The site is stored in the node the call builds, where there is room:
//!
//! * in the pooled block of a node with a source (`flat_map`, `map`,
//!   `handle_error_with`, `attempt`, `guarantee_case`, ...): one more word;
//! * next to the closure of a leaf (`delay`, `defer`, `from_callback`,
//!   `uncancelable`, `start`, `blocking`): the closure is stored as
//!   `Sited<F>`;
//! * in the payload word of a leaf that has none (`cede`, `never`,
//!   `canceled`), and next to the duration of `sleep`.
//!
//! The operation's name and the closure's type name are not stored at all:
//! they are a `static` [`Op`] reached from the closure's vtable (made per
//! operation and closure type, see `OpMeta`) or from the node's kind.
//! Operations made of several nodes (`bracket`, `race`, `Deferred::get`,
//! ...) build their nodes untraced (site `None`) and put one `Mark` node in
//! front, which records the operation by its public name.
//!
//! Operations made of several nodes (`bracket`, `race`, ...) that have no
//! leaf of their own to carry the site use the `Mark` node instead; data
//! types record on their first node (`Deferred::get` is an `async` named
//! `Deferred::get`).
//!
//! A running fiber records an event when it evaluates a node that has a
//! site, if its tracing flag is on: the executor's mode is `cached` or
//! `full`, or the fiber is inside `io.traced()`. The event goes into the
//! ring of the run ([`spindle_trace::Ring`]), found once per run of the
//! fiber, not per event: its own ring, or, for a fiber that has none yet,
//! its thread's *scratch* ring. When the run ends (`fiber_on.rs`'s `Run`),
//! a fiber that recorded and lives on (it waits or yields) adopts the
//! scratch ring as its own; a fiber that ended gives it back to the thread.
//! Most short fibers end within their first run, so they never get a ring
//! of their own, and executors list a fiber for dumps only when it first
//! outlives a run (`Executor::fiber_listed`): spawning thousands of short
//! fibers allocates and registers nothing for tracing.
//!
//! # What it costs
//!
//! * **Compiled out** (no `tracing` feature): nothing exists; nodes and
//!   fibers have no site or ring field, the run-loop no branch.
//! * **Mode `none`**: building a node stores one more word (the site); the
//!   run-loop is instantiated twice, and a fiber that does not trace runs
//!   the instantiation without any tracing code (it switches loops when a
//!   traced scope begins or ends). A leaf whose closure is exactly one word
//!   would need an allocation to keep its site; in a process where nothing
//!   traces (a mode-`none` configuration built first), it is built without
//!   one (`spindle_trace::call_sites_for`).
//! * **Mode `cached`**: per traced node, the site and operation loaded
//!   from the node, and three relaxed stores into the ring (operation,
//!   location, count): about 15 instructions on x86-64, no fence, no
//!   allocation. Per run of the fiber, the ring's run count is bracketed
//!   (two stores and a release fence) so that dumps can tell a consistent
//!   copy from one read while the fiber ran. A leaf whose closure is one
//!   word keeps its site in a pooled block (the node has no room for it).
//!   BENCHMARKS.md, "Issue 19", has the measured cost event by event.
//! * **Mode `full`** (the `tracing-full` feature): a backtrace captured per
//!   traced node where it is built; the feature also makes a site an owned
//!   value (an `Arc` in full mode) and adds a check wherever one is built,
//!   which is why it is separate.
//!
//! # Files
//!
//! `mod.rs` (this file): call sites, operation names, `Mark` nodes,
//! [`Traced`] and `IO::trace`, in every build. What a fiber holds and does
//! to trace is in `fiber_on.rs` (the ring slot its header keeps for dumps,
//! its recording flag, its activity byte, the spare rings of a thread) or,
//! without the `tracing` feature, `fiber_off.rs`: the same API, zero-sized
//! types and empty `#[inline(always)]` functions. The file is chosen once,
//! at the module declaration (embassy's style), so the fiber's code holds
//! and calls these without a `cfg` of its own; what is left of `cfg` in
//! `fiber/` is where a node's site only exists with the feature (the
//! run-loop's `record!`), and the choice of the run-loop's instantiation.
//!
//! # Invariants
//!
//! * Nodes built by io-core for its own plumbing carry no site, so a trace
//!   shows only the user's call sites, never io-core's files.
//! * The ring has one writer, the thread running the fiber (`Core`); fiber
//!   dumps read it from any thread without stopping the fiber, consistent
//!   for a fiber between runs and marked in motion otherwise (`ring.rs`).
//! * A scratch ring is owned by one run at a time (taken out of its
//!   thread-local slot for the run), never published in a header: a dump
//!   never reads it, so it can be reused or freed at any time. A fiber in
//!   its first run shows no trace in a dump.

pub use spindle_trace::{Op, Site, Trace, TracingMode};

// A fiber's tracing state, its ring slot and its activity byte: two whole
// files with one API (embassy's way of swapping code by `cfg`), so the
// fiber's code (`fiber/`) holds and calls them without a `cfg` of its own.
// Off, every type is a zero-sized stand-in and every call does nothing.
#[cfg_attr(feature = "tracing", path = "fiber_on.rs")]
#[cfg_attr(not(feature = "tracing"), path = "fiber_off.rs")]
mod fiber;
#[cfg(feature = "tracing")]
pub(crate) use fiber::Run;
pub(crate) use fiber::{Activity, FiberTracing, OwnedRing, RingSlot, fiber_traces};

/// The operation a closure's vtable names (see the module doc).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) trait OpMeta {
    /// The operation, a `static`.
    const OP: &'static Op;
}

/// The operation of io-core's own closures: never recorded (their nodes
/// have no site).
pub(crate) struct Internal;
impl OpMeta for Internal {
    const OP: &'static Op = &Op::new("<internal>");
}

/// An operation with a fixed name.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) trait OpName {
    const NAME: &'static str;
}

/// An operation named `M::NAME` that runs the user's closure `F`: the trace
/// shows `F`'s type name.
pub(crate) struct WithClosure<M, F>(core::marker::PhantomData<(M, F)>);
impl<M: OpName, F> OpMeta for WithClosure<M, F> {
    const OP: &'static Op = &Op::with_closure(M::NAME, core::any::type_name::<F>);
}

/// An operation named `M::NAME` without a user closure to show.
pub(crate) struct Named<M>(core::marker::PhantomData<M>);
impl<M: OpName> OpMeta for Named<M> {
    const OP: &'static Op = &Op::new(M::NAME);
}

/// Declares operation names for traces: a marker type per operation, for
/// [`Named`] and [`WithClosure`] (`delay`, `Deferred::get`, ...).
macro_rules! trace_ops {
    ($($ty:ident = $name:literal),* $(,)?) => {
        $(
            pub(crate) struct $ty;
            impl $crate::tracing::OpName for $ty {
                const NAME: &'static str = $name;
            }
        )*
    };
}
pub(crate) use trace_ops;

/// Operation names (marker types for [`OpMeta`]).
#[allow(missing_docs, dead_code)]
pub(crate) mod names {
    super::trace_ops! {
        Delay = "delay",
        Defer = "defer",
        Async = "from_callback",
        Blocking = "blocking",
        FlatMap = "flat_map",
        Map = "map",
        ProductR = "product_r",
        ProductL = "product_l",
        FlatTap = "flat_tap",
        MapTo = "map_to",
        Void = "void",
        Attempt = "attempt",
        HandleError = "handle_error",
        HandleErrorWith = "handle_error_with",
        Redeem = "redeem",
        RedeemWith = "redeem_with",
        OnError = "on_error",
        MapError = "map_err",
        Rethrow = "rethrow",
        Flatten = "flatten",
        TailRec = "tail_rec",
        Uncancelable = "uncancelable",
        OnCancel = "on_cancel",
        GuaranteeCase = "guarantee_case",
        Guarantee = "guarantee",
        Start = "start",
        Sleep = "sleep",
        Cede = "cede",
        Never = "never",
        Canceled = "canceled",
    }
}

/// `cede`, `never`, `canceled` and `sleep` have no closure: their
/// operations are these statics.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static CEDE: Op = Op::new("cede");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static NEVER: Op = Op::new("never");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static CANCELED: Op = Op::new("canceled");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static SLEEP: Op = Op::new("sleep");

/// The site of a traced call: `Some` with the caller's site when tracing is
/// compiled in.
#[cfg(feature = "tracing")]
#[track_caller]
#[inline(always)]
pub(crate) fn here() -> Option<Site> {
    Some(Site::caller())
}

/// Without the `tracing` feature there are no sites.
#[cfg(not(feature = "tracing"))]
#[track_caller]
#[inline(always)]
pub(crate) fn here() -> Option<Site> {
    None
}

/// The site of io-core's own nodes: none.
pub(crate) const NO_SITE: Option<Site> = None;

/// What a `Mark` node records (see the module doc), in the block of its
/// source; padded to the common block layout.
#[cfg(feature = "tracing")]
pub(crate) struct MarkK {
    pub(crate) op: &'static Op,
    pub(crate) kind: MarkKind,
}

/// What a `Mark` node does besides recording its operation.
#[cfg(feature = "tracing")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkKind {
    /// Only record.
    Record,
    /// `io.traced()`: switch tracing on for the source.
    Scope,
    /// `IO::trace()`: produce the fiber's trace (the source is `unit`).
    Snapshot,
}

#[cfg(feature = "tracing")]
static TRACED: Op = Op::new("traced");
#[cfg(feature = "tracing")]
static TRACE: Op = Op::new("trace");

#[cfg(feature = "tracing")]
impl MarkK {
    pub(crate) fn record(op: &'static Op) -> Self {
        MarkK {
            op,
            kind: MarkKind::Record,
        }
    }
    pub(crate) fn scope() -> Self {
        MarkK {
            op: &TRACED,
            kind: MarkKind::Scope,
        }
    }
    pub(crate) fn snapshot() -> Self {
        MarkK {
            op: &TRACE,
            kind: MarkKind::Snapshot,
        }
    }
}

/// An error together with the trace of its fiber at the point where the
/// error was raised: Spindle's version of Cats Effect's enhanced exceptions
/// (an `E` cannot carry the trace itself, so it travels next to it). Made
/// by [`IO::trace_errors`](crate::IO::trace_errors).
///
/// `Display` prints the error, then the trace under it.
#[derive(Debug, Clone)]
pub struct Traced<E> {
    /// The error.
    pub error: E,
    /// The fiber's last events when the error was raised, oldest first
    /// (empty when the fiber did not trace).
    pub trace: Trace,
}

impl<E> Traced<E> {
    /// The error, without its trace.
    pub fn into_error(self) -> E {
        self.error
    }
}

impl<E: core::fmt::Display> core::fmt::Display for Traced<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.error)?;
        if !self.trace.is_empty() {
            write!(f, "\n{}", self.trace)?;
        }
        Ok(())
    }
}

impl<E: core::error::Error + 'static> core::error::Error for Traced<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<A: Send + 'static, E: Send + 'static> crate::IO<A, E> {
    /// Attaches the fiber's trace to an error of `self`: the result fails
    /// with [`Traced`], whose trace is the fiber's last events at the point
    /// where the error was raised (an error travelling to its handler
    /// records nothing on the way, so the trace ends where it was raised).
    /// Success is unchanged. Not itself a trace event.
    ///
    /// ```
    /// use spindle_core::{IO, Outcome};
    /// use spindle_exec_single::SingleThreaded;
    ///
    /// let program: IO<u32, String> = IO::delay(|| 1)
    ///     .flat_map(|_| IO::raise_error("no such user".to_string()));
    /// let Outcome::Errored(failure) = SingleThreaded::new()?.block_on(program.trace_errors())? else {
    ///     panic!("the program fails")
    /// };
    /// assert_eq!(failure.error, "no such user");
    /// if cfg!(feature = "tracing") {
    ///     assert_eq!(failure.trace.op_names(), ["flat_map", "delay"]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trace_errors(self) -> crate::IO<A, Traced<E>> {
        let k = |result: crate::node::Res| -> crate::node::Node {
            match result {
                Ok(value) => crate::node::Node::pure(value),
                Err(error) => crate::IO::<Trace, Traced<E>>::trace()
                    .flat_map_untraced(move |trace| {
                        // SAFETY: the error of `self`, an `IO<A, E>`, is an `E`.
                        let error = unsafe { error.take::<E>() };
                        crate::IO::<A, Traced<E>>::raise_error(Traced { error, trace })
                    })
                    .into_node(),
            }
        };
        crate::IO::from_node(crate::node::Node::fold_with(
            self.into_node(),
            crate::erased::ErasedFn::new::<RawFoldWith, _>(k),
            NO_SITE,
        ))
    }
}

/// Calls a closure on an erased result (for [`IO::trace_errors`]).
///
/// [`IO::trace_errors`]: crate::IO::trace_errors
struct RawFoldWith;
impl<F: FnOnce(crate::node::Res) -> crate::node::Node>
    crate::erased::Adapter<crate::node::Res, crate::node::Node, F> for RawFoldWith
{
    unsafe fn call(f: F, input: crate::node::Res) -> crate::node::Node {
        f(input)
    }
}
