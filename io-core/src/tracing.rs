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
//! fiber's [`spindle_trace::Ring`], made on the first event (or reused from a
//! fiber freed on the same thread).
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
//! * **Mode `cached`**: per traced node, a few loads and four stores into
//!   the ring (its sequence lock), no allocation.
//! * **Mode `full`** (the `tracing-full` feature): a backtrace captured per
//!   traced node where it is built; the feature also makes a site an owned
//!   value (an `Arc` in full mode) and adds a check wherever one is built,
//!   which is why it is separate.
//!
//! # Invariants
//!
//! * Nodes built by io-core for its own plumbing carry no site, so a trace
//!   shows only the user's call sites, never io-core's files.
//! * The ring has one writer, the thread running the fiber (`Core`); fiber
//!   dumps read it through its sequence lock from any thread.

pub use spindle_trace::{Op, Site, Trace, TracingMode};

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

/// A fiber's tracing state (in `Core`): whether it records now. The ring
/// itself is in the fiber's header ([`RingSlot`]), so that fiber dumps can
/// read it.
#[cfg(feature = "tracing")]
pub(crate) struct FiberTracing {
    /// Records events now (mode, or inside `traced()`).
    pub(crate) on: bool,
}

#[cfg(feature = "tracing")]
impl FiberTracing {
    pub(crate) fn new(on: bool) -> Self {
        FiberTracing { on }
    }

    /// Records `op` at `site` (the caller checked `on`); the first event
    /// makes the ring and publishes it in `slot` (the fiber's header).
    #[inline]
    pub(crate) fn record(
        &mut self,
        op: &'static Op,
        site: &Site,
        capacity: impl FnOnce() -> usize,
        slot: &RingSlot,
    ) {
        let owned = slot.own(capacity);
        let _index = owned.ring.push(op, site.location());
        #[cfg(feature = "tracing-full")]
        if site.has_backtrace() {
            owned.keep_site(_index, site);
        }
    }

    /// The fiber's trace now, as the fiber itself sees it (with full mode's
    /// backtraces).
    pub(crate) fn snapshot(&self, slot: &RingSlot) -> Trace {
        // SAFETY: called by the fiber (on the thread running it), the only
        // one that touches the sites.
        slot.get_owned()
            .map_or_else(Trace::empty, |owned| unsafe { owned.snapshot() })
    }
}

/// A fiber's ring and, in full mode, the sites (with backtraces) of the
/// events in it, which only the fiber touches: a dump on another thread
/// reads only the ring.
#[cfg(feature = "tracing")]
pub(crate) struct OwnedRing {
    pub(crate) ring: spindle_trace::Ring,
    #[cfg(feature = "tracing-full")]
    sites: core::cell::UnsafeCell<alloc::vec::Vec<Option<Site>>>,
}

#[cfg(feature = "tracing")]
impl OwnedRing {
    #[cfg(feature = "tracing-full")]
    #[cold]
    fn keep_site(&self, index: usize, site: &Site) {
        // SAFETY: only the fiber records (the thread running it).
        let sites = unsafe { &mut *self.sites.get() };
        if sites.is_empty() {
            sites.resize_with(self.ring.capacity(), || None);
        }
        sites[index] = Some(site.clone());
    }

    /// # Safety
    /// * Called by the fiber itself (the thread running it).
    unsafe fn snapshot(&self) -> Trace {
        #[cfg(feature = "tracing-full")]
        // SAFETY: forwarded precondition.
        let sites: &[Option<Site>] = unsafe { &*self.sites.get() };
        #[cfg(not(feature = "tracing-full"))]
        let sites: &[Option<Site>] = &[];
        self.ring.snapshot_with_sites(sites)
    }
}

/// The fiber header's pointer to its ring: null until the fiber records
/// its first event; read by fiber dumps on any thread.
#[cfg(feature = "tracing")]
pub(crate) struct RingSlot {
    ring: crate::sync::AtomicPtr<OwnedRing>,
}

// SAFETY: the ring is atomics only; the sites (`UnsafeCell`) are touched
// only by the thread running the fiber (see `OwnedRing`), and `Site`s are
// `Send + Sync`.
#[cfg(feature = "tracing")]
unsafe impl Sync for OwnedRing {}

#[cfg(feature = "tracing")]
impl RingSlot {
    pub(crate) fn new() -> Self {
        RingSlot {
            ring: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Makes the ring (or takes a spare one of this thread) and publishes
    /// it (Release: a dump that sees the pointer sees an initialised ring).
    #[cold]
    fn install(&self, capacity: usize) -> core::ptr::NonNull<OwnedRing> {
        let owned = spare_rings::take(capacity).unwrap_or_else(|| {
            alloc::boxed::Box::new(OwnedRing {
                ring: spindle_trace::Ring::new(capacity),
                #[cfg(feature = "tracing-full")]
                sites: core::cell::UnsafeCell::new(alloc::vec::Vec::new()),
            })
        });
        let ptr = alloc::boxed::Box::into_raw(owned);
        self.ring.store(ptr, crate::sync::Ordering::Release);
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { core::ptr::NonNull::new_unchecked(ptr) }
    }

    /// The ring, made on first use: for the fiber itself (the only
    /// writer).
    #[inline(always)]
    fn own(&self, capacity: impl FnOnce() -> usize) -> &OwnedRing {
        let ring = self.ring.load(crate::sync::Ordering::Relaxed);
        if ring.is_null() {
            // SAFETY: `install` returns a live ring owned by `self`.
            unsafe { self.install(capacity()).as_ref() }
        } else {
            // SAFETY: only the fiber installs the ring (this thread); it
            // lives until `self` is dropped.
            unsafe { &*ring }
        }
    }

    fn get_owned(&self) -> Option<&OwnedRing> {
        let ring = self.ring.load(crate::sync::Ordering::Acquire);
        // SAFETY: a non-null pointer is a published, live ring, freed only
        // when the header is dropped (not while `&self` lives).
        unsafe { ring.as_ref() }
    }

    /// The ring, if made (the caller keeps the fiber alive; a dump on
    /// another thread reads it through its sequence lock).
    pub(crate) fn get(&self) -> Option<&spindle_trace::Ring> {
        self.get_owned().map(|owned| &owned.ring)
    }
}

#[cfg(feature = "tracing")]
impl Drop for RingSlot {
    fn drop(&mut self) {
        let ring = self.ring.load(crate::sync::Ordering::Acquire);
        if !ring.is_null() {
            // SAFETY: made by `Box::into_raw` in `install`, taken once here;
            // the fiber is being freed, so no dump can read it any more.
            spare_rings::give(unsafe { alloc::boxed::Box::from_raw(ring) });
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

/// Rings of freed fibers, kept per thread for the next fibers (a program
/// that starts fibers by the thousand reuses a few rings instead of
/// allocating one per fiber), as `pool::stacks` keeps stack buffers.
#[cfg(feature = "tracing")]
mod spare_rings {
    use super::OwnedRing;
    use alloc::boxed::Box;

    #[cfg(all(feature = "std", not(loom)))]
    const MAX_KEPT: usize = 64;

    // Boxes, not values: a ring is handed out as a fiber's published ring
    // pointer, so it keeps its allocation from fiber to fiber.
    #[cfg(all(feature = "std", not(loom)))]
    std::thread_local! {
        #[allow(clippy::vec_box)]
        static SPARE: core::cell::RefCell<alloc::vec::Vec<Box<OwnedRing>>> =
            const { core::cell::RefCell::new(alloc::vec::Vec::new()) };
    }

    /// A spare ring of `capacity` events, emptied.
    #[cfg_attr(not(all(feature = "std", not(loom))), allow(unused_variables))]
    pub(super) fn take(capacity: usize) -> Option<Box<OwnedRing>> {
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut owned = SPARE
                .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
                .ok()
                .flatten()?;
            if owned.ring.capacity() != capacity {
                return None;
            }
            owned.ring.reset();
            #[cfg(feature = "tracing-full")]
            owned.sites.get_mut().clear();
            Some(owned)
        }
        #[cfg(not(all(feature = "std", not(loom))))]
        None
    }

    /// Keeps a freed fiber's ring for the next fiber of this thread (or
    /// frees it).
    pub(super) fn give(owned: Box<OwnedRing>) {
        #[cfg(all(feature = "std", not(loom)))]
        {
            let mut slot = Some(owned);
            let _ = SPARE.try_with(|spare| {
                if let Ok(mut spare) = spare.try_borrow_mut()
                    && spare.len() < MAX_KEPT
                {
                    spare.extend(slot.take());
                }
            });
            drop(slot);
        }
        #[cfg(not(all(feature = "std", not(loom))))]
        drop(owned);
    }
}
