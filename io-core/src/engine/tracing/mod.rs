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
//!   BENCHMARKS.md, "Tracing overhead", has the measured cost.
//! * **Mode `full`** (the `tracing-full` feature): a backtrace captured per
//!   traced node where it is built; the feature also makes a site an owned
//!   value (an `Arc` in full mode) and adds a check wherever one is built,
//!   which is why it is separate.
//!
//! # Files
//!
//! `mod.rs` (this file): call sites, operation names, `Mark` nodes,
//! [`Traced`] and `IO::trace`, and the traces that travel with an error
//! from a child fiber to the parent that raises it again (`ChildTraces`,
//! kept next to the error in flight by the run-loop: `fiber/run_state.rs`),
//! in every build. What a fiber holds and does
//! to trace is in `fiber_on.rs` (the ring slot its header keeps for dumps,
//! its recording flag, its activity byte in the ring, the spare rings of a
//! thread) or,
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

use alloc::vec::Vec;

// A fiber's flags, its ring slot and its activity byte: two whole
// files with one API (embassy's way of swapping code by `cfg`), so the
// fiber's code (`fiber/`) holds and calls them without a `cfg` of its own.
// Off, every type is a zero-sized stand-in and every call does nothing.
#[cfg_attr(feature = "tracing", path = "fiber_on.rs")]
#[cfg_attr(not(feature = "tracing"), path = "fiber_off.rs")]
mod fiber;
#[cfg(feature = "tracing")]
pub(crate) use fiber::Run;

/// A fiber's flags (in `Core`), one bit each in one byte: whether it
/// records now (never without the `tracing` feature), whether its executor
/// was told that it lives on after a run
/// ([`Executor::fiber_listed`](crate::Executor::fiber_listed)), and whether
/// its outcome goes to a completion callback kept in its join state; and
/// two bits of the run-loop's (a cancellation to observe at an IO block's
/// next await: `fiber/run_loop.rs`, `block_step!`; whether the fiber is in
/// a deadline region: `fiber/region.rs`). The
/// ring itself is in the fiber's header ([`RingSlot`]), so that fiber
/// dumps can read it.
pub(crate) struct FiberFlags(u8);

impl FiberFlags {
    const ON: u8 = 1;
    const LISTED: u8 = 2;
    const CALLBACK: u8 = 4;
    const CANCEL_AT_BLOCK: u8 = 8;
    const IN_REGION: u8 = 16;
    const OBSERVED: u8 = 32;

    /// A new fiber's flags: records from its start if `on` (and tracing is
    /// compiled in); its outcome goes to a completion callback if
    /// `callback`; not listed.
    pub(crate) fn new(on: bool, callback: bool) -> Self {
        let on = cfg!(feature = "tracing") && on;
        FiberFlags(if on { Self::ON } else { 0 } | if callback { Self::CALLBACK } else { 0 })
    }

    /// Whether the fiber's outcome goes to a completion callback kept in
    /// its join state (set when the fiber is made, never changed).
    #[inline(always)]
    pub(crate) fn has_callback(&self) -> bool {
        self.0 & Self::CALLBACK != 0
    }

    /// Whether the fiber records now (mode, or inside `traced()`); a
    /// constant `false` without the `tracing` feature.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        cfg!(feature = "tracing") && self.0 & Self::ON != 0
    }

    /// Switches recording (a traced scope begins or ends); does nothing
    /// without the `tracing` feature.
    #[inline(always)]
    pub(crate) fn set_on(&mut self, on: bool) {
        if cfg!(feature = "tracing") {
            self.0 = (self.0 & !Self::ON) | if on { Self::ON } else { 0 };
        }
    }

    /// Whether a cancellation that became observable at the end of a mask
    /// waits for the IO block its result went to (`fiber/run_loop.rs`).
    #[inline(always)]
    pub(crate) fn cancel_at_block(&self) -> bool {
        self.0 & Self::CANCEL_AT_BLOCK != 0
    }

    /// Sets or clears [`cancel_at_block`](FiberFlags::cancel_at_block).
    #[inline(always)]
    pub(crate) fn set_cancel_at_block(&mut self, at_block: bool) {
        self.0 =
            (self.0 & !Self::CANCEL_AT_BLOCK) | if at_block { Self::CANCEL_AT_BLOCK } else { 0 };
    }

    /// Whether the fiber runs inside a deadline region (`IO::timeout`;
    /// `fiber/region.rs`): the run-loop's region checks run only then. A
    /// constant `false` on targets narrower than 64 bits, where `timeout`
    /// runs its body on a child fiber (flash), so that the checks compile
    /// out there.
    #[inline(always)]
    pub(crate) fn in_region(&self) -> bool {
        cfg!(target_pointer_width = "64") && self.0 & Self::IN_REGION != 0
    }

    /// Sets or clears [`in_region`](FiberFlags::in_region).
    #[inline(always)]
    pub(crate) fn set_in_region(&mut self, in_region: bool) {
        self.0 = (self.0 & !Self::IN_REGION) | if in_region { Self::IN_REGION } else { 0 };
    }

    /// Whether the fiber's runs are reported to the fiber observer
    /// (`observe.rs`); a constant `false` without the `observe` feature.
    #[cfg_attr(not(feature = "observe"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn is_observed(&self) -> bool {
        cfg!(feature = "observe") && self.0 & Self::OBSERVED != 0
    }

    /// Makes the fiber observed (for good).
    #[cfg_attr(not(feature = "observe"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn set_observed(&mut self) {
        self.0 |= Self::OBSERVED;
    }

    /// Whether the executor was told that the fiber lives on after a run.
    #[inline(always)]
    pub(crate) fn is_listed(&self) -> bool {
        self.0 & Self::LISTED != 0
    }

    /// Records that the executor was told.
    #[inline(always)]
    pub(crate) fn set_listed(&mut self) {
        self.0 |= Self::LISTED;
    }

    /// The fiber's trace now, as the fiber itself sees it: `run`'s ring
    /// while a run records, its own ring otherwise (empty without the
    /// `tracing` feature).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn snapshot(&self, run: Option<&OwnedRing>, slot: &RingSlot) -> Trace {
        fiber::snapshot(run, slot)
    }
}
pub(crate) use fiber::{Activity, OwnedRing, RingSlot, fiber_traces};

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
            impl $crate::engine::tracing::OpName for $ty {
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

/// `cede`, `never`, `canceled`, `sleep` and `await` have no closure: their
/// operations are these statics.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static CEDE: Op = Op::new("cede");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static NEVER: Op = Op::new("never");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static CANCELED: Op = Op::new("canceled");
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static SLEEP: Op = Op::new("sleep");
/// An `.await` in an IO block, at its line (`future/block.rs`).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static AWAIT: Op = Op::new("await");

/// `IO::raise_error`, at its caller's line (`engine/node`: a sited error).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) static RAISE_ERROR: Op = Op::new("raise_error");

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
    /// `IO::trace_errors()`' handler: produce the fiber's trace and the
    /// traces of the child fibers the error it received came from (the
    /// source is `unit`; see [`ChildTraces`]).
    FailureSnapshot,
    /// An error raised again in the fiber that joined the child it came
    /// from: the source is the pure pair of the error and the
    /// [`ChildTraces`] (made by [`ChildTraces::raise`]); the run-loop keeps
    /// the traces as the cause of the error in flight and goes on with the
    /// error.
    Cause,
}

#[cfg(feature = "tracing")]
static TRACED: Op = Op::new("traced");
#[cfg(feature = "tracing")]
static TRACE: Op = Op::new("trace");
#[cfg(feature = "tracing")]
static RAISE: Op = Op::new("raise_error");

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
    pub(crate) fn failure_snapshot() -> Self {
        MarkK {
            op: &TRACE,
            kind: MarkKind::FailureSnapshot,
        }
    }
    pub(crate) fn cause() -> Self {
        MarkK {
            op: &RAISE,
            kind: MarkKind::Cause,
        }
    }
}

/// An error together with the trace of its fiber at the point where the
/// error was raised: Spindle's version of Cats Effect's enhanced exceptions
/// (an `E` cannot carry the trace itself, so it travels next to it). Made
/// by [`IO::trace_errors`](crate::IO::trace_errors).
///
/// An error that a child fiber raised and its parent raised again (`race`,
/// `both`, `par_traverse` and their variants, `timeout`,
/// `FiberHandle::join_with_never`) also keeps the child's trace, and, if
/// the child had it from a grandchild, the grandchild's:
/// [`child_traces`](Traced::child_traces), innermost first.
///
/// `Display` prints the error, then the traces under it, each most recent
/// event first: the child fibers' first (innermost first, so the failing
/// call site is the first line under the error), then this fiber's.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let child: IO<u32, String> = IO::delay(|| 1)
///     .flat_map(|_| IO::raise_error("no such user".to_string()));
/// let parent = IO::delay(|| 2).flat_map(move |_| child.start()).flat_map(|f| f.join_with_never());
/// let Outcome::Errored(failure) = Runtime::new()?.block_on(parent.trace_errors())? else {
///     panic!("the program fails")
/// };
/// assert_eq!(failure.error, "no such user");
/// if cfg!(feature = "tracing") {
///     // The child's trace ends where the error was raised.
///     assert_eq!(failure.origin().op_names(), ["flat_map", "delay", "raise_error"]);
///     assert_eq!(failure.child_traces.len(), 1);
///     let text = failure.to_string();
///     assert!(text.starts_with("no such user\ntrace of a child fiber (3 events, most recent first):"), "{text}");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Traced<E> {
    /// The error.
    pub error: E,
    /// This fiber's last events when the error reached `trace_errors`
    /// (where it was raised, or where it was raised again after a child
    /// fiber failed with it), in the order they happened ([`Trace`]'s
    /// renderings show them most recent first); empty when the fiber did
    /// not trace.
    pub trace: Trace,
    /// The traces of the child fibers the error came from, innermost first:
    /// the trace of the fiber that raised it, at that point, then the trace
    /// of the fiber that joined that one and raised it again, and so on up
    /// to a child of this fiber. Empty when the error was raised in this
    /// fiber (or when the child fibers did not trace).
    pub child_traces: Vec<Trace>,
}

impl<E> Traced<E> {
    /// The error, without its traces.
    pub fn into_error(self) -> E {
        self.error
    }

    /// The trace of the fiber that raised the error: the innermost of
    /// [`child_traces`](Traced::child_traces), or this fiber's own
    /// [`trace`](Traced::trace) when the error was raised here.
    pub fn origin(&self) -> &Trace {
        self.child_traces.first().unwrap_or(&self.trace)
    }

    /// Every trace with its depth below this fiber (0 for this fiber's own
    /// [`trace`](Traced::trace), 1 for a child's, ...), in the order they
    /// are printed: innermost first, this fiber's last.
    pub fn fibers(&self) -> impl Iterator<Item = (usize, &Trace)> {
        let n = self.child_traces.len();
        self.child_traces
            .iter()
            .enumerate()
            .map(move |(i, trace)| (n - i, trace))
            .chain(core::iter::once((0, &self.trace)))
    }
}

/// The title of a trace `depth` fibers below the one that prints it (see
/// [`Traced`]'s `Display`).
fn fiber_title(depth: usize) -> alloc::borrow::Cow<'static, str> {
    match depth {
        0 => "trace".into(),
        1 => "trace of a child fiber".into(),
        2 => "trace of a grandchild fiber".into(),
        n => alloc::format!("trace of a fiber {n} levels down").into(),
    }
}

impl<E: core::fmt::Display> core::fmt::Display for Traced<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.error)?;
        for (depth, trace) in self.fibers() {
            if !trace.is_empty() {
                write!(f, "\n{}", trace.titled(&fiber_title(depth)))?;
            }
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
    /// An error that came from a child fiber (raised again by `race`,
    /// `both`, `par_traverse`, `join_with_never`, ...) also brings the
    /// child's trace ([`Traced::child_traces`]), as long as no handler took
    /// it on the way (`map_err` and finalizers keep it; a handler that
    /// raises the error again raises it as a new error of this fiber).
    /// Success is unchanged. Not itself a trace event.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let program: IO<u32, String> = IO::delay(|| 1)
    ///     .flat_map(|_| IO::raise_error("no such user".to_string()));
    /// let Outcome::Errored(failure) = Runtime::new()?.block_on(program.trace_errors())? else {
    ///     panic!("the program fails")
    /// };
    /// assert_eq!(failure.error, "no such user");
    /// assert!(failure.child_traces.is_empty());
    /// if cfg!(feature = "tracing") {
    ///     assert_eq!(failure.trace.op_names(), ["flat_map", "delay", "raise_error"]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trace_errors(self) -> crate::IO<A, Traced<E>> {
        let source = self.into_node();
        // An error raised right here (a settled source) reaches the handler
        // without passing a frame, where the run-loop hands a handler the
        // cause of its error: it has none (see `failure_snapshot`).
        let from_frames = !source.is_settled();
        let k = move |result: crate::engine::node::Res| -> crate::engine::node::Node {
            match result {
                Ok(value) => crate::engine::node::Node::pure(value),
                Err(error) => {
                    crate::IO::<(Trace, Vec<Trace>), Traced<E>>::from_node(failure_snapshot(
                        from_frames,
                    ))
                    .flat_map_untraced(move |(trace, child_traces)| {
                        // SAFETY: the error of `self`, an `IO<A, E>`, is an `E`.
                        let error = unsafe { error.take::<E>() };
                        crate::IO::<A, Traced<E>>::raise_error_untraced(Traced {
                            error,
                            trace,
                            child_traces,
                        })
                    })
                    .into_node()
                }
            }
        };
        crate::IO::from_node(crate::engine::node::Node::fold_with(
            source,
            crate::engine::erased::ErasedFn::new::<RawFoldWith, _>(k),
            NO_SITE,
        ))
    }
}

/// The node that produces a `(Trace, Vec<Trace>)`: the fiber's trace and,
/// if the error that `trace_errors`' handler has just received reached it
/// through the fiber's frames (`from_frames`), the traces of the child
/// fibers it came from (the run-loop handed them to the handler in the
/// step before: `Core::before_unwind_error`); none otherwise.
#[cfg(feature = "tracing")]
fn failure_snapshot(from_frames: bool) -> crate::engine::node::Node {
    let unit = crate::engine::node::Node::pure(crate::engine::erased::Value::unit());
    if from_frames {
        crate::engine::node::Node::mark(unit, MarkK::failure_snapshot(), NO_SITE)
    } else {
        crate::IO::<Trace, ()>::from_node(crate::engine::node::Node::mark(
            unit,
            MarkK::snapshot(),
            NO_SITE,
        ))
        .map_untraced(|trace| (trace, Vec::<Trace>::new()))
        .into_node()
    }
}

/// Without tracing: two empty lists.
#[cfg(not(feature = "tracing"))]
fn failure_snapshot(_from_frames: bool) -> crate::engine::node::Node {
    crate::engine::node::Node::pure(crate::engine::erased::Value::new((
        Trace::empty(),
        Vec::<Trace>::new(),
    )))
}

/// The failure traces of the child fibers an error came from, innermost
/// first: the trace of the fiber that raised it, then that of each fiber
/// that joined the previous one and raised the error again. What travels
/// with a child's error to the parent that raises it again (`race`, `both`,
/// `par_sequence`, `timeout`, `join_with_never`), and what the parent's
/// run-loop keeps next to the error in flight (`Cold::causes` in
/// `fiber/run_state.rs`) until [`IO::trace_errors`](crate::IO::trace_errors)
/// reads it into [`Traced::child_traces`], a handler takes the error, or the
/// fiber ends with it (then it is handed on with the fiber's own trace).
///
/// One word, `None` (no allocation) when nothing traced, so that the
/// completions of children that succeed pay one null check for it;
/// zero-sized, and every function a no-op, without the `tracing` feature.
#[cfg(feature = "tracing")]
#[derive(Default)]
pub(crate) struct ChildTraces(Option<alloc::boxed::Box<Traces>>);

/// The traces of [`ChildTraces`] (never empty), behind its one word.
#[cfg(feature = "tracing")]
struct Traces(Vec<Trace>);

/// Without the `tracing` feature: nothing.
#[cfg(not(feature = "tracing"))]
#[derive(Default)]
pub(crate) struct ChildTraces;

impl ChildTraces {
    /// No traces.
    #[inline(always)]
    pub(crate) fn none() -> Self {
        #[cfg(feature = "tracing")]
        return ChildTraces(None);
        #[cfg(not(feature = "tracing"))]
        ChildTraces
    }

    /// What a fiber that ended with `outcome` hands to the fiber that
    /// raises its error again: for an error, the traces the error came from
    /// (`children`) and then the fiber's own trace at the point of failure
    /// (`own`); nothing otherwise, or if none of them recorded an event.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    #[inline(always)]
    pub(crate) fn of_failure<A, E>(
        outcome: &crate::Outcome<A, E>,
        own: Trace,
        children: ChildTraces,
    ) -> Self {
        #[cfg(feature = "tracing")]
        if let crate::Outcome::Errored(_) = outcome {
            return ChildTraces::of_error(own, children);
        }
        ChildTraces::none()
    }

    /// [`ChildTraces::of_failure`] for an error.
    #[cfg(feature = "tracing")]
    #[inline(never)]
    fn of_error(own: Trace, children: ChildTraces) -> Self {
        if own.is_empty() && children.is_empty() {
            return ChildTraces::none();
        }
        let mut traces = children.into_vec();
        // An empty trace of its own is kept under its children's, so that
        // each trace keeps its depth.
        traces.push(own);
        ChildTraces(Some(alloc::boxed::Box::new(Traces(traces))))
    }

    /// Whether there is no trace.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        #[cfg(feature = "tracing")]
        {
            self.0.is_none()
        }
        #[cfg(not(feature = "tracing"))]
        true
    }

    /// The traces, innermost first.
    #[cfg(feature = "tracing")]
    pub(crate) fn into_vec(self) -> Vec<Trace> {
        self.0.map(|traces| traces.0).unwrap_or_default()
    }

    /// A program that fails with `error`, which came from the child fibers
    /// of these traces: the fiber that runs it keeps them as the cause of
    /// the error (a `Cause` mark); a plain `raise_error` when there are
    /// none.
    #[inline]
    pub(crate) fn raise<A: Send + 'static, E: Send + 'static>(self, error: E) -> crate::IO<A, E> {
        #[cfg(feature = "tracing")]
        if !self.is_empty() {
            let pair =
                crate::engine::erased::Value::new((crate::engine::erased::Value::new(error), self));
            return crate::IO::from_node(crate::engine::node::Node::mark(
                crate::engine::node::Node::pure(pair),
                MarkK::cause(),
                NO_SITE,
            ));
        }
        crate::IO::raise_error_untraced(error)
    }
}

/// Calls a closure on an erased result (for [`IO::trace_errors`]).
///
/// [`IO::trace_errors`]: crate::IO::trace_errors
struct RawFoldWith;
impl<F: FnOnce(crate::engine::node::Res) -> crate::engine::node::Node>
    crate::engine::erased::Adapter<crate::engine::node::Res, crate::engine::node::Node, F>
    for RawFoldWith
{
    unsafe fn call(f: F, input: crate::engine::node::Res) -> crate::engine::node::Node {
        f(input)
    }
}
