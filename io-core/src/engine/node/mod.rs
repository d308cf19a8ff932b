//! The untyped program nodes that the run-loop interprets, the continuation
//! frames it keeps on its explicit stack, and the drop trampoline that keeps
//! dropping a deep program off the native stack.
//!
//! # Encoding
//!
//! `IO<A, E>` (in `io.rs`) is a typed handle over one [`Node`]. A node is two
//! words: a payload word and a *vtable word* that holds the node's [`Tag`]
//! and, for the kinds that have one, a vtable pointer. Two words travel in
//! registers, so a continuation returns the next node without a round trip
//! through memory. [`Node::into_kind`] decodes a node into the [`Kind`] enum
//! the run-loop matches on; after inlining, that is a switch on the tag.
//!
//! The vtable word has two encodings, chosen by the target's pointer width:
//!
//! * 64-bit targets: vtables are 64-byte aligned (`engine/erased.rs`) and
//!   the six low bits hold the tag; a kind without a vtable (a `Bind`,
//!   whose word is its block) stores the tag alone. Decoding is one mask.
//! * Narrower targets (*compact*): vtables are 16-byte aligned, which saves
//!   8 of a 32-bit vtable's 24 bytes of padding (on a microcontroller, flash
//!   is what is scarce). Four low bits cannot name every kind, but a node
//!   has only 15 kinds with a vtable, and a frame 13: those store their tag
//!   (a frame's counted from [`Tag::FlatMap`]) in the low bits; every other
//!   kind stores the code `BARE` (15) there and its tag above it (its word
//!   is no pointer). Decoding is a mask, a compare and a shift; a test for
//!   one kind (`Node::is`) stays one mask and compare.
//!
//! The tags are numbered so that both encodings hold (the three groups of
//! [`Tag`]); the layout asserts below check it. Hosts keep the first
//! encoding because a step's decoding is on the run-loop's hottest path:
//! the compact one cost 3 to 9% more instructions on the small benchmark
//! workloads (callgrind, `benches/examples/prof.rs`).
//!
//! ## Room for more kinds
//!
//! 40 tags are in use. On 64-bit targets there are 64 (six bits): 24 more
//! kinds, of any group, cost nothing but a number; the assert on
//! `LAST_TAG` says when they run out. (Five bits, with 32-byte vtables,
//! were full; freeing a tag by merging two kinds measured 7 to 8% slower
//! binds, and a second-level tag, the compact decoding, 3 to 9%. Aligning
//! vtables to 64 bytes costs read-only data, not instructions.) In the
//! compact encoding a kind is added by its group:
//!
//! * without a vtable (its word is a `Bind` block, a site or nothing): any
//!   number (the tag is stored above the `BARE` code);
//! * a node kind with a vtable: none is free (15 of 15 used, the last by
//!   `Local`); a new one keeps its payload in a `Bind` block (below);
//! * a frame kind with a vtable: 2 codes are free (13 of 15 used).
//!
//! A kind that would need a vtable once those are taken keeps its payload
//! in a `Bind` block instead (one pooled block, as `map` does), and is
//! bare. `every_tag_survives_the_vtable_word_of_a_node_and_of_a_frame`
//! checks both encodings (the compact one under Miri on a 32-bit target).
//!
//! Leaves carry their payload in the word ([`Value`], [`ErasedFn`]: no
//! allocation for word-sized payloads). A node that has a *source* program
//! (`flat_map`, `map`, `handle_error_with`, ...) stores the source together
//! with its continuation in one pooled block, a [`Bind`] (`engine/blocks.rs`): one
//! block per combinator, never one per value or closure.
//!
//! When the run-loop meets a `Bind`, it pushes the continuation as a
//! [`Frame`] (two words, tagged the same way) and evaluates the source; a
//! result then pops frames. Success pops error-handler frames without
//! calling anything; an error drops `map` and `flat_map` frames until the
//! nearest handler.
//!
//! # Dropping deep programs
//!
//! A left-nested chain (`io.flat_map(f).flat_map(g)...`) is a linked list of
//! `Bind` blocks, and a right-nested chain built ahead of time is a list of
//! closures that capture programs. Dropping either with the compiler's drop
//! glue would recurse once per level. [`Bind`]'s `Drop` and `IO`'s `Drop`
//! instead hand nodes to [`drop_node`], a trampoline: the outermost drop on a
//! thread runs a loop over a work list, and every nested drop that happens
//! meanwhile (also through closures' captures) only pushes onto that list.
//!
//! # Files
//!
//! * `mod.rs` (this file): [`Tag`], [`Node`] and its decoded [`Kind`], the
//!   constructors, and the drop trampoline's driver ([`drop_node`]).
//! * `bind.rs`: [`Bind`], a source and its continuation in one pooled
//!   block, and its owning pointer [`BindBox`]; the compile-time layout
//!   asserts that let every `Bind<K>` share one block size.
//! * `frame.rs`: [`Frame`], the two-word continuation on a fiber's stack,
//!   and its decoded [`FrameKind`].
//! * `drop_std.rs` / `drop_bare.rs`: the trampoline's work list, a
//!   thread-local with `std`, one global list behind a critical section
//!   without. Whole files swapped by `cfg` (embassy's style for platform
//!   code), each exporting the same `drop_deferred`: the choice is made
//!   once, at the module declaration, and neither file has a `cfg` inside.

mod bind;
mod block;
mod cont;
mod frame;
mod region;
#[cfg_attr(feature = "std", path = "drop_std.rs")]
#[cfg_attr(not(feature = "std"), path = "drop_bare.rs")]
mod trampoline;

pub(crate) use bind::{AnyK, Bind, BindBox};
pub(crate) use block::{BlockVTable, Resume, Slot, Stepped};
pub(crate) use cont::{AcquireK, OnBody, OnError, OnOutcome, OnResult, OnSuccess};
pub(crate) use frame::{Frame, FrameKind};
pub(crate) use region::{
    EndedRegion, Expired, Fallback, PendingRegion, RegionData, RegionSpec, RegionTop,
};

use core::mem::ManuallyDrop;
use core::ptr;
use core::time::Duration;

use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::{EMPTY_WORD, ErasedFn, FnVTable, Value, ValueVTable, Word};
use crate::engine::tracing::Site;
use crate::fiber::RawCallback;
use crate::outcome::{Outcome, PanicMessage};

/// The result of a step: a value or an error, both erased.
pub(crate) type Res = Result<Value, Value>;

/// The kind of a node or frame, kept in its vtable word (see [`Node::tag`]).
///
/// Numbered in three groups, which the encoding relies on: the node kinds
/// that keep a vtable (0 to 14), the frame kinds that keep one (15 to 27;
/// as nodes, the first six and the two finalizers are bare: their word is
/// a `Bind` block), and the kinds that never keep one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub(crate) enum Tag {
    // Nodes with a vtable.
    Pure = 0,
    Error,
    Delay,
    Defer,
    Async,
    Sleep,
    AsyncUntil,
    Panicked,
    Uncancelable,
    Start,
    Blocking,
    /// An IO block's (or a future's) next step (`future/block.rs`).
    Block,
    /// An error raised at a call site the trace records (`IO::raise_error`
    /// with tracing): the error and the site in one value.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    RaiseError,
    /// A body under a deadline, on the fiber's own stack (`region.rs`;
    /// made on 64-bit targets only).
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    Region,
    /// A closure run with the fiber's local values (`IOLocal`; made on
    /// 64-bit targets only).
    Local,
    // Frames with a vtable.
    FlatMap,
    Map,
    HandleErrorWith,
    MapError,
    Fold,
    FoldWith,
    OnCancel,
    GuaranteeCase,
    /// A light finalizer that gives back what an `Acquire` node took (a
    /// lock's permit): run as a result passes, on success, error or
    /// cancellation, without a program or a masked step of its own.
    Release,
    RestoreOk,
    RestoreErr,
    /// An IO block waiting for the result of a program it awaits.
    ResumeBlock,
    /// The end of a deadline region (`region.rs`).
    RegionEnd,
    // Never with a vtable.
    Cede,
    Never,
    /// Both clocks: the word says which (see [`Node::monotonic`]).
    Clock,
    Poll,
    Canceled,
    Unwind,
    /// Acquire something (a lock's permit), then run the source holding
    /// it, under a `Release` frame (`Node::acquire`).
    Acquire,
    // Frame-only tags.
    Unmask,
    Remask,
    ResumeUnwind,
    // Tracing: a node that records an operation (or opens a traced scope,
    // or reads the trace), and the frame that closes a traced scope.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Mark,
    TraceScope,
}

/// Whether vtable words use the compact encoding (module doc, "Encoding"):
/// on targets narrower than 64 bits, where flash is scarce.
const COMPACT: bool = cfg!(not(target_pointer_width = "64"));
/// The low bits of a vtable word that hold a tag next to a vtable pointer:
/// vtables are 32-byte aligned, or 16-byte in the compact encoding
/// (`engine/erased.rs`).
const LOW_BITS: usize = if COMPACT { 0b1111 } else { 0b11_1111 };
/// The compact encoding's low bits of a *bare* vtable word (no vtable):
/// the tag is in the bits above them. No vtable kind is stored with this
/// code.
const BARE: usize = 0b1111;
/// The first frame kind with a vtable: in the compact encoding, frames
/// store their tag minus this, so that their thirteen vtable kinds fit the low
/// bits as the nodes' fifteen do.
const FRAME_VTABLE_FIRST: usize = if COMPACT { Tag::FlatMap as usize } else { 0 };
const LAST_TAG: Tag = Tag::TraceScope;
const _: () = assert!(
    COMPACT || LAST_TAG as usize <= LOW_BITS,
    "io-core: more node and frame kinds than the vtable word's low bits hold \
     (module doc, \"Room for more kinds\")"
);
const _: () = assert!(
    !COMPACT || (Tag::Local as usize) < BARE,
    "io-core: more node kinds with a vtable than the compact encoding's codes \
     (module doc, \"Room for more kinds\")"
);
const _: () = assert!(
    !COMPACT || (Tag::RegionEnd as usize) - FRAME_VTABLE_FIRST < BARE,
    "io-core: more frame kinds with a vtable than the compact encoding's codes \
     (module doc, \"Room for more kinds\")"
);
const _: () = assert!(core::mem::align_of::<ValueVTable>() > LOW_BITS);
const _: () = assert!(core::mem::align_of::<FnVTable<Value, Value>>() > LOW_BITS);

impl Tag {
    /// # Safety
    /// * `bits` is the discriminant of a `Tag`.
    #[inline(always)]
    unsafe fn from_bits(bits: usize) -> Tag {
        debug_assert!(bits <= LAST_TAG as usize);
        // SAFETY: forwarded precondition; `Tag` is `repr(usize)`.
        unsafe { core::mem::transmute::<usize, Tag>(bits) }
    }
}

/// The payload of an `AsyncUntil` node (one pooled block: four words).
pub(crate) struct AsyncUntilSpec {
    deadline: Duration,
    register: ErasedFn<RawCallback, Option<Node>>,
}

/// One node of a program: a payload word and a tagged vtable pointer.
pub(crate) struct Node {
    word: Word,
    vtable: *const (),
}

// SAFETY: every payload a node holds is `Send` (values and closures are made
// only from `Send` types; blocks hold nodes and closures).
unsafe impl Send for Node {}

/// A node decoded for matching.
pub(crate) enum Kind {
    /// A value.
    Pure(Value),
    /// A typed error.
    Error(Value),
    /// A suspended thunk producing a value.
    Delay(ErasedFn<(), Value>),
    /// A suspended thunk producing a program.
    Defer(ErasedFn<(), Node>),
    /// `source.flat_map(k)`.
    FlatMap(BindBox<OnSuccess<Node>>),
    /// `source.map(k)`.
    Map(BindBox<OnSuccess<Value>>),
    /// `source.handle_error_with(k)`.
    HandleErrorWith(BindBox<OnError<Node>>),
    /// `source.map_err(k)`.
    MapError(BindBox<OnError<Value>>),
    /// `source` then `k` on its result, success or error (attempt, redeem).
    Fold(BindBox<OnResult<Res>>),
    /// `source` then the program `k` returns for its result (redeem_with).
    FoldWith(BindBox<OnResult<Node>>),
    /// Suspend until the callback given to the registration is called; the
    /// registration may return a finalizer for cancellation.
    Async(ErasedFn<RawCallback, Option<Node>>),
    /// Run a thunk where it may block (`Executor::spawn_blocking`), then
    /// resume with its value; never interrupted by cancellation.
    Blocking(ErasedFn<(), Value>),
    /// Like `Async` with a unit result, and a timer armed on the same
    /// suspension: it ends when the callback is called or when the
    /// executor's monotonic clock reaches the deadline, whichever comes
    /// first (the other does nothing then).
    AsyncUntil(Duration, ErasedFn<RawCallback, Option<Node>>),
    /// Give the executor the chance to run something else.
    Cede(Option<Site>),
    /// Suspend forever.
    Never(Option<Site>),
    /// Suspend for a duration, through the executor's timers.
    Sleep(Duration, Option<Site>),
    /// Read the executor's monotonic clock.
    Monotonic,
    /// Read the executor's wall clock.
    RealTime,
    /// A closure panicked: unwind the fiber's stack and end it (internal;
    /// only made with `std`, where panics are caught).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    Panicked(PanicMessage),
    /// `uncancelable(body)`: mask cancellation, run what `body` builds from
    /// the region's `Poll` (the fiber's number and the new mask depth).
    Uncancelable(ErasedFn<Poll, Node>),
    /// `poll(source)`: unmask `source` if the poll belongs to the running
    /// fiber and to its innermost uncancelable region (its depth is the
    /// current one).
    Poll(BindBox<PollK>),
    /// Request the fiber's own cancellation.
    Canceled(Option<Site>),
    /// `source.on_cancel(finalizer)`.
    OnCancel(BindBox<ErasedFn<(), Node>>),
    /// `source.guarantee_case(finalizer)`.
    GuaranteeCase(BindBox<OnOutcome>),
    /// `source` run holding what `k` acquires (`Node::acquire`).
    Acquire(BindBox<OnBody>),
    /// Start child fibers (any number) on the running fiber's executor;
    /// the closure returns what the program receives (handles).
    Start(ErasedFn<crate::fiber::Spawner, Value>),
    /// Read or set the running fiber's local values (`IOLocal`): a
    /// `delay` given the fiber's locals. 64-bit targets only (narrower
    /// ones, where flash is scarce, run `IOLocal`'s closures as `Start`
    /// nodes: `combinators/local.rs`).
    #[cfg(target_pointer_width = "64")]
    Local(ErasedFn<crate::fiber::FiberLocals, Value>),
    /// Internal: finalize the fiber (cancellation or panic), popping frames
    /// and running finalizers.
    Unwind,
    /// Run a body under a deadline, on this fiber (`region.rs`; 64-bit
    /// targets only).
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    Region(PendingRegion),
    /// Poll an IO block (or a future a fiber drives) for its next step.
    Block(Resume),
    /// Record `raise_error` at the site, then fail with the error (both in
    /// one stored pair, split by the run-loop).
    #[cfg(feature = "tracing")]
    RaiseError(crate::engine::erased::RaisedError),
    /// Record an operation made of several nodes, open a traced scope, or
    /// read the trace (`engine/tracing/mod.rs`).
    #[cfg(feature = "tracing")]
    Mark(BindBox<crate::engine::tracing::MarkK>),
}

/// The continuation of a `Poll` node: the poll itself, the fiber and the
/// mask depth of the region it belongs to (two words: the common block
/// layout, checked in `bind.rs`).
pub(crate) struct PollK {
    pub(crate) poll: Poll,
}

/// A guarantee finalizer: given the outcome of its source, builds the
/// finalizer program and hands the outcome back (so that it can be restored
/// once the finalizer has run).
pub(crate) type GuaranteeK = ErasedFn<Outcome<Value, Value>, (Node, Outcome<Value, Value>)>;

/// A node's vtable word: the vtable pointer with the tag (a node kind with
/// a vtable, below [`FRAME_VTABLE_FIRST`]) in its low bits.
#[inline(always)]
fn tagged<T>(vtable: *const T, tag: Tag) -> *const () {
    debug_assert!((tag as usize) < Tag::FlatMap as usize);
    vtable.cast::<()>().map_addr(|a| a | tag as usize)
}

/// A frame's vtable word: the vtable pointer with the tag (a frame kind
/// with a vtable), counted from [`FRAME_VTABLE_FIRST`], in its low bits.
#[inline(always)]
fn tagged_frame<T>(vtable: *const T, tag: Tag) -> *const () {
    debug_assert!((Tag::FlatMap as usize..=Tag::RegionEnd as usize).contains(&(tag as usize)));
    vtable
        .cast::<()>()
        .map_addr(|a| a | (tag as usize - FRAME_VTABLE_FIRST))
}

/// The vtable word of a node or frame without a vtable: the tag itself, or
/// in the compact encoding the tag above the [`BARE`] code.
#[inline(always)]
fn bare(tag: Tag) -> *const () {
    if COMPACT {
        ptr::without_provenance(((tag as usize) << BARE.count_ones()) | BARE)
    } else {
        ptr::without_provenance(tag as usize)
    }
}

/// The tag of a vtable word; `vtable_first`: the tag stored as 0 in the
/// low bits (`Pure` for a node, [`FRAME_VTABLE_FIRST`] for a frame).
#[inline(always)]
fn tag_of(word: *const (), vtable_first: usize) -> Tag {
    let low = word.addr() & LOW_BITS;
    let bits = if !COMPACT {
        low
    } else if low == BARE {
        word.addr() >> BARE.count_ones()
    } else {
        low + vtable_first
    };
    // SAFETY: every constructor stores a valid tag, in one of the two
    // encodings read here.
    unsafe { Tag::from_bits(bits) }
}

/// A source that a `flat_map` or `map` runs in its own step
/// ([`Node::into_immediate`]; never made on targets narrower than 64
/// bits, whose steps push a frame instead).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
pub(crate) enum Immediate {
    /// A `delay`'s thunk.
    Delay(ErasedFn<(), Value>),
    /// A `Start` node's closure.
    Start(ErasedFn<crate::fiber::Spawner, Value>),
    /// A `Local` node's closure.
    Local(ErasedFn<crate::fiber::FiberLocals, Value>),
}

/// Whether a vtable word holds `tag`, without decoding it: one mask and
/// compare. `vtable_kinds`: the tags stored next to a vtable pointer (for
/// a node or a frame), the first of them stored as 0.
#[inline(always)]
fn has_tag(word: *const (), tag: Tag, vtable_kinds: core::ops::RangeInclusive<usize>) -> bool {
    let t = tag as usize;
    if !COMPACT {
        word.addr() & LOW_BITS == t
    } else if vtable_kinds.contains(&t) {
        word.addr() & LOW_BITS == t - vtable_kinds.start()
    } else {
        // A bare word is the tag and the `BARE` code, nothing else.
        word.addr() == bare(tag).addr()
    }
}

/// The tags a node stores next to a vtable pointer.
const NODE_VTABLE_KINDS: core::ops::RangeInclusive<usize> = 0..=Tag::Local as usize;
/// The tags a frame stores next to a vtable pointer.
const FRAME_VTABLE_KINDS: core::ops::RangeInclusive<usize> =
    Tag::FlatMap as usize..=Tag::RegionEnd as usize;

/// The vtable pointer of a vtable word (meaningless for a bare one).
#[inline(always)]
fn untagged(word: *const ()) -> *const () {
    word.map_addr(|a| a & !LOW_BITS)
}

/// The payload word of a leaf that keeps only a call site: the site's word,
/// or null (no site, or tracing compiled out).
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn site_word(site: Option<Site>) -> Word {
    #[cfg(feature = "tracing")]
    if let Some(site) = site {
        return core::mem::MaybeUninit::new(site.into_raw().as_ptr());
    }
    core::mem::MaybeUninit::new(ptr::null_mut())
}

/// Takes the site back out of [`site_word`]'s word.
///
/// # Safety
/// * `word` was made by `site_word` and is read once.
#[inline(always)]
unsafe fn word_site(word: Word) -> Option<Site> {
    #[cfg(feature = "tracing")]
    {
        // SAFETY: `site_word` always initialises the word.
        let ptr = unsafe { word.assume_init() };
        // SAFETY: a non-null word is a site's `into_raw`, read once.
        core::ptr::NonNull::new(ptr).map(|p| unsafe { Site::from_raw(p) })
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = word;
        None
    }
}

impl Node {
    #[inline(always)]
    fn raw(word: Word, vtable: *const ()) -> Node {
        Node { word, vtable }
    }

    /// Moves the node out of `*src` with one load per word.
    ///
    /// For a node that was just written word by word (as a node built in
    /// registers is) and is read back at once: a load as wide as two
    /// stores cannot take its data from them while they are in flight (the
    /// processor waits for them to reach the cache), and a plain move of a
    /// two-word node is compiled to such a load. `read_volatile` keeps the
    /// two loads apart (IO blocks' `.await`, `future/block.rs`).
    ///
    /// # Safety
    /// * `src` points at a live node, which the caller treats as moved out
    ///   (it is not dropped or read again).
    #[inline(always)]
    pub(crate) unsafe fn read_by_words(src: *const Node) -> Node {
        // SAFETY: function contract: both fields are initialised and
        // readable; the node moves out once.
        unsafe {
            Node {
                word: ptr::read_volatile(ptr::addr_of!((*src).word)),
                vtable: ptr::read_volatile(ptr::addr_of!((*src).vtable)),
            }
        }
    }

    #[inline(always)]
    fn from_value(value: Value, tag: Tag) -> Node {
        let (word, vtable) = value.into_raw();
        Node::raw(word, tagged(vtable, tag))
    }

    #[inline(always)]
    fn from_fn<I, O>(f: ErasedFn<I, O>, tag: Tag) -> Node {
        let (word, vtable) = f.into_raw();
        Node::raw(word, tagged(vtable, tag))
    }

    #[inline(always)]
    fn from_bind<K>(bind: BindBox<K>, tag: Tag) -> Node {
        let block = ManuallyDrop::new(bind).ptr;
        Node::raw(
            core::mem::MaybeUninit::new(block.as_ptr().cast()),
            bare(tag),
        )
    }

    /// The node's kind (module doc, "Encoding").
    #[inline(always)]
    pub(crate) fn tag(&self) -> Tag {
        tag_of(self.vtable, 0)
    }

    /// Decodes the node, giving up ownership of its payload to the result.
    #[inline(always)]
    pub(crate) fn into_kind(self) -> Kind {
        let this = ManuallyDrop::new(self);
        // SAFETY: the payload is moved out exactly once (`this` is not dropped).
        unsafe { decode(this.word, this.vtable) }
    }

    /// Whether the node is a plain value or error (a result on its way
    /// through continuations).
    #[inline(always)]
    pub(crate) fn is_settled(&self) -> bool {
        self.is(Tag::Pure) || self.is(Tag::Error)
    }

    /// Whether the node is of kind `tag` (cheaper than `tag() == tag`).
    #[inline(always)]
    fn is(&self, tag: Tag) -> bool {
        has_tag(self.vtable, tag, NODE_VTABLE_KINDS)
    }

    /// The result, if the node is a plain value or error; the node itself
    /// otherwise.
    #[inline(always)]
    pub(crate) fn into_settled(self) -> Result<Res, Node> {
        if self.is(Tag::Pure) {
            self.into_value().map(Ok)
        } else if self.is(Tag::Error) {
            match self.into_kind() {
                Kind::Error(error) => Ok(Err(error)),
                _ => unreachable!(),
            }
        } else {
            Err(self)
        }
    }

    /// The source and finalizer of a `guarantee_case` node; any other node
    /// itself.
    #[inline(always)]
    pub(crate) fn into_guarantee_case(self) -> Result<BindBox<OnOutcome>, Node> {
        if self.is(Tag::GuaranteeCase) {
            let this = ManuallyDrop::new(self);
            // SAFETY: a `GuaranteeCase` node's word is the block of a
            // `BindBox<OnOutcome>` (`Node::guarantee_case`), moved out
            // once (`this` is not dropped).
            Ok(unsafe { BindBox::from_word(this.word) })
        } else {
            Err(self)
        }
    }

    /// The value, if the node is a plain value; the node itself otherwise.
    #[inline(always)]
    pub(crate) fn into_value(self) -> Result<Value, Node> {
        if self.is(Tag::Pure) {
            let this = ManuallyDrop::new(self);
            // SAFETY: a `Pure` node was made by `Node::pure` from a value's
            // raw parts (its tag, 0, leaves the vtable pointer as it was);
            // they are moved out once (`this` is not dropped).
            Ok(unsafe { Value::from_raw(this.word, &*this.vtable.cast::<ValueVTable>()) })
        } else {
            Err(self)
        }
    }

    /// The error and its site, if the node is an error raised at a site
    /// (`raise_error` with tracing); the node itself otherwise.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn into_raised(self) -> Result<crate::engine::erased::RaisedError, Node> {
        if self.is(Tag::RaiseError) {
            let this = ManuallyDrop::new(self);
            // SAFETY: a `RaiseError` node was made by `raise_error_at` from
            // a `RaisedError`'s raw parts and its vtable tagged; they are
            // moved out once (`this` is not dropped).
            Ok(unsafe {
                crate::engine::erased::RaisedError::from_raw(
                    this.word,
                    &*untagged(this.vtable).cast(),
                )
            })
        } else {
            Err(self)
        }
    }

    /// The thunk, if the node is a `delay`; the node itself otherwise.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn into_delay(self) -> Result<ErasedFn<(), Value>, Node> {
        if self.is(Tag::Delay) {
            match self.into_kind() {
                Kind::Delay(thunk) => Ok(thunk),
                _ => unreachable!(),
            }
        } else {
            Err(self)
        }
    }

    /// The closure, if the node is a `delay` or a `Start` (a closure run
    /// with the fiber's spawner): the sources a `flat_map` or `map` runs
    /// in its own step. One mask test for both, so that a source that is
    /// neither pays one test, as when only `delay` was run in place; the
    /// node itself otherwise.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn into_immediate(self) -> Result<Immediate, Node> {
        const MASK: u64 =
            (1 << Tag::Delay as u64) | (1 << Tag::Start as u64) | (1 << Tag::Local as u64);
        let t = self.vtable.addr() & LOW_BITS;
        if (MASK >> t) & 1 == 0 {
            return Err(self);
        }
        // Decoded with the tag known (each branch folds to one kind).
        if t == Tag::Delay as usize {
            match self.into_kind() {
                Kind::Delay(thunk) => Ok(Immediate::Delay(thunk)),
                _ => unreachable!(),
            }
        } else {
            // A `Start` or a `Local` node (the one tag of the mask above
            // `Start`), decoded here rather than by `into_kind`'s whole
            // switch: one compare, after the `delay`'s.
            const _: () = assert!(
                (Tag::Delay as usize) < Tag::Start as usize
                    && (Tag::Start as usize) < Tag::Local as usize
            );
            let this = ManuallyDrop::new(self);
            let vtable = untagged(this.vtable);
            if t > Tag::Start as usize {
                // SAFETY: the tag is `Local`: `Node::local` stored a closure
                // erased with this vtable's type, read once (`this` is not
                // dropped).
                Ok(Immediate::Local(unsafe {
                    ErasedFn::from_raw(this.word, &*vtable.cast())
                }))
            } else {
                // SAFETY: as above, the tag is `Start` (`Node::start`).
                Ok(Immediate::Start(unsafe {
                    ErasedFn::from_raw(this.word, &*vtable.cast())
                }))
            }
        }
    }

    #[inline(always)]
    pub(crate) fn pure(value: Value) -> Node {
        Node::from_value(value, Tag::Pure)
    }
    #[inline(always)]
    pub(crate) fn error(error: Value) -> Node {
        Node::from_value(error, Tag::Error)
    }
    #[inline(always)]
    pub(crate) fn from_res(res: Res) -> Node {
        match res {
            Ok(v) => Node::pure(v),
            Err(e) => Node::error(e),
        }
    }
    #[inline(always)]
    pub(crate) fn delay(f: ErasedFn<(), Value>) -> Node {
        Node::from_fn(f, Tag::Delay)
    }
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) fn local(f: ErasedFn<crate::fiber::FiberLocals, Value>) -> Node {
        Node::from_fn(f, Tag::Local)
    }
    #[inline(always)]
    pub(crate) fn defer(f: ErasedFn<(), Node>) -> Node {
        Node::from_fn(f, Tag::Defer)
    }
    #[inline(always)]
    pub(crate) fn flat_map(source: Node, k: ErasedFn<Value, Node>, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnSuccess(k), site), Tag::FlatMap)
    }
    #[inline(always)]
    pub(crate) fn map(source: Node, k: ErasedFn<Value, Value>, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnSuccess(k), site), Tag::Map)
    }
    #[inline(always)]
    pub(crate) fn handle_error_with(
        source: Node,
        k: ErasedFn<Value, Node>,
        site: Option<Site>,
    ) -> Node {
        Node::from_bind(BindBox::new(source, OnError(k), site), Tag::HandleErrorWith)
    }
    #[inline(always)]
    pub(crate) fn map_err(source: Node, k: ErasedFn<Value, Value>, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnError(k), site), Tag::MapError)
    }
    /// `k` always returns `Ok` (its users are `attempt` and `redeem`): the
    /// cancellation check at the end of a masked region counts on it
    /// (`passed_before_next_program` in `fiber/run_loop.rs`).
    #[inline(always)]
    pub(crate) fn fold(source: Node, k: ErasedFn<Res, Res>, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnResult(k), site), Tag::Fold)
    }
    #[inline(always)]
    pub(crate) fn fold_with(source: Node, k: ErasedFn<Res, Node>, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnResult(k), site), Tag::FoldWith)
    }
    #[inline(always)]
    pub(crate) fn from_callback(register: ErasedFn<RawCallback, Option<Node>>) -> Node {
        Node::from_fn(register, Tag::Async)
    }
    #[inline(always)]
    pub(crate) fn cede(site: Option<Site>) -> Node {
        Node::raw(site_word(site), bare(Tag::Cede))
    }
    #[inline(always)]
    pub(crate) fn never(site: Option<Site>) -> Node {
        Node::raw(site_word(site), bare(Tag::Never))
    }
    #[inline(always)]
    pub(crate) fn sleep(duration: Duration, site: Option<Site>) -> Node {
        #[cfg(feature = "tracing")]
        {
            Node::from_value(Value::new((duration, site)), Tag::Sleep)
        }
        #[cfg(not(feature = "tracing"))]
        {
            let _ = site;
            Node::from_value(Value::new(duration), Tag::Sleep)
        }
    }
    /// A read of the monotonic clock: a `Clock` node whose word is 0.
    #[inline(always)]
    pub(crate) fn monotonic() -> Node {
        Node::raw(
            core::mem::MaybeUninit::new(ptr::null_mut()),
            bare(Tag::Clock),
        )
    }
    /// A read of the wall clock: a `Clock` node whose word is 1.
    #[inline(always)]
    pub(crate) fn real_time() -> Node {
        Node::raw(
            core::mem::MaybeUninit::new(ptr::without_provenance_mut(1)),
            bare(Tag::Clock),
        )
    }
    /// `register`'s suspension, ended at the latest at `deadline` (on the
    /// executor's monotonic clock).
    #[inline(always)]
    pub(crate) fn async_until(
        deadline: Duration,
        register: ErasedFn<RawCallback, Option<Node>>,
    ) -> Node {
        Node::from_value(
            Value::new(AsyncUntilSpec { deadline, register }),
            Tag::AsyncUntil,
        )
    }
    /// `body` under a deadline `duration` from when the node runs, on the
    /// fiber's own stack; `fallback` when the deadline ends it
    /// (`fiber/region.rs`). 64-bit targets only (`combinators/timeout.rs`).
    #[cfg(target_pointer_width = "64")]
    pub(crate) fn region(body: Node, duration: Duration, fallback: Fallback) -> Node {
        Node::from_value(
            Value::new(RegionSpec {
                body,
                duration,
                fallback,
            }),
            Tag::Region,
        )
    }
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn panicked(message: PanicMessage) -> Node {
        Node::from_value(Value::new(message), Tag::Panicked)
    }
    #[inline(always)]
    pub(crate) fn uncancelable(body: ErasedFn<Poll, Node>) -> Node {
        Node::from_fn(body, Tag::Uncancelable)
    }
    #[inline(always)]
    pub(crate) fn poll(source: Node, poll: Poll) -> Node {
        Node::from_bind(BindBox::new(source, PollK { poll }, None), Tag::Poll)
    }
    #[inline(always)]
    pub(crate) fn canceled(site: Option<Site>) -> Node {
        Node::raw(site_word(site), bare(Tag::Canceled))
    }
    #[inline(always)]
    pub(crate) fn on_cancel(
        source: Node,
        finalizer: ErasedFn<(), Node>,
        site: Option<Site>,
    ) -> Node {
        Node::from_bind(BindBox::new(source, finalizer, site), Tag::OnCancel)
    }
    #[inline(always)]
    pub(crate) fn guarantee_case(source: Node, finalizer: GuaranteeK, site: Option<Site>) -> Node {
        Node::from_bind(
            BindBox::new(source, OnOutcome(finalizer), site),
            Tag::GuaranteeCase,
        )
    }
    /// `source` run holding what `k` acquires when the node runs: `k`,
    /// given `source`, takes what it guards (a free permit) and returns
    /// `source` with the closure that gives it back, which the run-loop
    /// pushes as a `Release` frame (run once, whatever the outcome);
    /// or, when it must wait, returns the program that waits and runs
    /// `source` (which guards it itself), without a frame. One pooled
    /// block, and no allocation for a one-word release closure.
    #[inline(always)]
    pub(crate) fn acquire(source: Node, k: AcquireK, site: Option<Site>) -> Node {
        Node::from_bind(BindBox::new(source, OnBody(k), site), Tag::Acquire)
    }
    /// `source`, recorded as the operation `k.op` at `site` (or a traced
    /// scope, or a trace read: `k.kind`). Without the `tracing` feature,
    /// `source` itself.
    #[inline(always)]
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn mark(
        source: Node,
        #[cfg(feature = "tracing")] k: crate::engine::tracing::MarkK,
        site: Option<Site>,
    ) -> Node {
        #[cfg(feature = "tracing")]
        {
            Node::from_bind(BindBox::new(source, k, site), Tag::Mark)
        }
        #[cfg(not(feature = "tracing"))]
        {
            source
        }
    }
    #[inline(always)]
    pub(crate) fn start(prepare: ErasedFn<crate::fiber::Spawner, Value>) -> Node {
        Node::from_fn(prepare, Tag::Start)
    }
    #[inline(always)]
    pub(crate) fn blocking(thunk: ErasedFn<(), Value>) -> Node {
        Node::from_fn(thunk, Tag::Blocking)
    }
    /// An error raised at `site`, recorded there when it is evaluated (the
    /// error and the site stored once, together: `RaisedError`).
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn raise_error_at<E: Send + 'static>(error: E, site: Site) -> Node {
        let (word, vtable) = crate::engine::erased::RaisedError::new(error, site).into_raw();
        Node::raw(word, tagged(vtable, Tag::RaiseError))
    }
    /// The next step of an IO block (or of a future a fiber drives):
    /// `resume` polls it (`future/block.rs`).
    #[inline(always)]
    pub(crate) fn block(resume: Resume) -> Node {
        let (word, vtable) = resume.into_raw();
        Node::raw(word, tagged(vtable, Tag::Block))
    }
    #[inline(always)]
    pub(crate) fn unwind() -> Node {
        Node::raw(EMPTY_WORD, bare(Tag::Unwind))
    }
    /// A placeholder without payload (what a node is replaced with while its
    /// contents are moved elsewhere).
    #[inline(always)]
    fn placeholder() -> Node {
        Node::unwind()
    }
}

/// Rebuilds the typed payload of a node or frame from its raw parts.
///
/// # Safety
/// * `word` and `vtable` come from one of `Node`'s or `Frame`'s constructors
///   and are decoded once.
#[inline(always)]
unsafe fn decode(word: Word, vtable: *const ()) -> Kind {
    let tag = tag_of(vtable, 0);
    let vt = untagged(vtable);
    // SAFETY (every arm): the tag says which constructor stored the parts,
    // so the vtable has the type named here and the word holds its payload.
    unsafe {
        let value = || Value::from_raw(word, &*vt.cast::<ValueVTable>());
        match tag {
            Tag::Pure => Kind::Pure(value()),
            Tag::Error => Kind::Error(value()),
            Tag::Delay => Kind::Delay(ErasedFn::from_raw(word, &*vt.cast())),
            Tag::Defer => Kind::Defer(ErasedFn::from_raw(word, &*vt.cast())),
            Tag::FlatMap => Kind::FlatMap(BindBox::from_word(word)),
            Tag::Map => Kind::Map(BindBox::from_word(word)),
            Tag::HandleErrorWith => Kind::HandleErrorWith(BindBox::from_word(word)),
            Tag::MapError => Kind::MapError(BindBox::from_word(word)),
            Tag::Fold => Kind::Fold(BindBox::from_word(word)),
            Tag::FoldWith => Kind::FoldWith(BindBox::from_word(word)),
            Tag::Async => Kind::Async(ErasedFn::from_raw(word, &*vt.cast())),
            Tag::Cede => Kind::Cede(word_site(word)),
            Tag::Never => Kind::Never(word_site(word)),
            #[cfg(feature = "tracing")]
            Tag::Sleep => {
                let (duration, site) = value().take::<(Duration, Option<Site>)>();
                Kind::Sleep(duration, site)
            }
            #[cfg(not(feature = "tracing"))]
            Tag::Sleep => Kind::Sleep(value().take::<Duration>(), None),
            // `monotonic` and `real_time` initialise the word.
            Tag::Clock if word.assume_init().is_null() => Kind::Monotonic,
            Tag::Clock => Kind::RealTime,
            Tag::AsyncUntil => {
                let spec = value().take::<AsyncUntilSpec>();
                Kind::AsyncUntil(spec.deadline, spec.register)
            }
            Tag::Panicked => Kind::Panicked(value().take::<PanicMessage>()),
            Tag::Uncancelable => Kind::Uncancelable(ErasedFn::from_raw(word, &*vt.cast())),
            Tag::Poll => Kind::Poll(BindBox::from_word(word)),
            Tag::Canceled => Kind::Canceled(word_site(word)),
            Tag::OnCancel => Kind::OnCancel(BindBox::from_word(word)),
            Tag::GuaranteeCase => Kind::GuaranteeCase(BindBox::from_word(word)),
            Tag::Acquire => Kind::Acquire(BindBox::from_word(word)),
            Tag::Start => Kind::Start(ErasedFn::from_raw(word, &*vt.cast())),
            #[cfg(target_pointer_width = "64")]
            Tag::Local => Kind::Local(ErasedFn::from_raw(word, &*vt.cast())),
            #[cfg(not(target_pointer_width = "64"))]
            Tag::Local => unreachable!("io-core: a local node on a narrow target"),
            Tag::Unwind => Kind::Unwind,
            Tag::Blocking => Kind::Blocking(ErasedFn::from_raw(word, &*vt.cast())),
            Tag::Block => Kind::Block(Resume::from_raw(word, &*vt.cast())),
            #[cfg(feature = "tracing")]
            Tag::RaiseError => Kind::RaiseError(crate::engine::erased::RaisedError::from_raw(
                word,
                &*vt.cast(),
            )),
            #[cfg(not(feature = "tracing"))]
            Tag::RaiseError => unreachable!("io-core: a sited error without tracing"),
            #[cfg(feature = "tracing")]
            Tag::Mark => Kind::Mark(BindBox::from_word(word)),
            #[cfg(not(feature = "tracing"))]
            Tag::Mark => unreachable!("io-core: a mark without tracing"),
            #[cfg(target_pointer_width = "64")]
            Tag::Region => Kind::Region(PendingRegion::new(value())),
            // (Narrower targets make no region: `combinators/timeout.rs`;
            // the run-loop's region steps then compile out.)
            #[cfg(not(target_pointer_width = "64"))]
            Tag::Region => unreachable!("io-core: a deadline region on a narrow target"),
            Tag::Unmask
            | Tag::Remask
            | Tag::RestoreOk
            | Tag::RestoreErr
            | Tag::Release
            | Tag::ResumeBlock
            | Tag::RegionEnd
            | Tag::ResumeUnwind
            | Tag::TraceScope => {
                unreachable!("io-core: a frame tag on a node")
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        match self.tag() {
            // Nothing to free.
            Tag::Clock | Tag::Unwind => {}
            // At most a call site.
            #[cfg(not(feature = "tracing"))]
            Tag::Cede | Tag::Never | Tag::Canceled => {}
            // SAFETY: `self` is not used after this; the word is read once.
            #[cfg(feature = "tracing")]
            Tag::Cede | Tag::Never | Tag::Canceled => drop(unsafe { word_site(self.word) }),
            // SAFETY: `self` is not used after this; the payload is decoded
            // once and dropped with its own type's glue.
            _ => drop(unsafe { decode(self.word, self.vtable) }),
        }
    }
}

impl Node {
    /// Whether this node owns a block with a source (and so may start a
    /// long chain).
    #[inline(always)]
    fn has_source(&self) -> bool {
        matches!(
            self.tag(),
            Tag::FlatMap
                | Tag::Map
                | Tag::HandleErrorWith
                | Tag::MapError
                | Tag::Fold
                | Tag::FoldWith
                | Tag::Mark
                | Tag::Region
                | Tag::Acquire
        )
    }

    /// Drops one level: returns the source (if any) still to be dropped.
    fn dismantle(self) -> Option<Node> {
        match self.into_kind() {
            Kind::FlatMap(b) => Some(b.into_parts().0),
            Kind::HandleErrorWith(b) => Some(b.into_parts().0),
            Kind::Map(b) => Some(b.into_parts().0),
            Kind::MapError(b) => Some(b.into_parts().0),
            Kind::Fold(b) => Some(b.into_parts().0),
            Kind::FoldWith(b) => Some(b.into_parts().0),
            Kind::Poll(b) => Some(b.into_parts().0),
            Kind::OnCancel(b) => Some(b.into_parts().0),
            Kind::GuaranteeCase(b) => Some(b.into_parts().0),
            Kind::Acquire(b) => Some(b.into_parts().0),
            #[cfg(feature = "tracing")]
            Kind::Mark(b) => Some(b.into_parts().0),
            Kind::Region(region) => Some(region.into_spec().body),
            leaf => {
                drop(leaf);
                None
            }
        }
    }
}

/// Drops `node` without recursing once per level of nesting.
pub(crate) fn drop_node(node: Node) {
    trampoline::drop_deferred(node);
}

/// Runs the drop work list until nothing is left.
fn drain(mut next: impl FnMut() -> Option<Node>) {
    while let Some(node) = next() {
        let mut current = Some(node);
        while let Some(n) = current {
            current = n.dismantle();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{
        FRAME_VTABLE_FIRST, FRAME_VTABLE_KINDS, LAST_TAG, NODE_VTABLE_KINDS, Tag, bare, has_tag,
        tag_of, tagged, tagged_frame, untagged,
    };
    use crate::engine::erased::ValueVTable;

    /// Every tag, in order.
    fn all_tags() -> impl Iterator<Item = Tag> {
        // SAFETY: `Tag` is `repr(usize)` with the discriminants 0 to
        // `LAST_TAG`, without gaps.
        (0..=LAST_TAG as usize).map(|bits| unsafe { Tag::from_bits(bits) })
    }

    /// Checks the encoding of the target it runs on: the five-bit tags on
    /// a 64-bit host, the compact encoding under Miri for a 32-bit target
    /// (`--target i686-unknown-linux-gnu`).
    #[test]
    fn every_tag_survives_the_vtable_word_of_a_node_and_of_a_frame() {
        let vtable: *const ValueVTable = crate::engine::erased::UNIT_VTABLE;
        for (kinds, first, frame) in [
            (NODE_VTABLE_KINDS, 0, false),
            (FRAME_VTABLE_KINDS, FRAME_VTABLE_FIRST, true),
        ] {
            for tag in all_tags() {
                let with_vtable = kinds.contains(&(tag as usize));
                let word = match (with_vtable, frame) {
                    (false, _) => bare(tag),
                    (true, false) => tagged(vtable, tag),
                    (true, true) => tagged_frame(vtable, tag),
                };
                assert_eq!(tag_of(word, first), tag, "{tag:?} (frame: {frame})");
                for other in all_tags() {
                    assert_eq!(
                        has_tag(word, other, kinds.clone()),
                        other == tag,
                        "{tag:?} tested for {other:?} (frame: {frame})"
                    );
                }
                if with_vtable {
                    assert_eq!(untagged(word), vtable.cast::<()>(), "{tag:?}");
                }
            }
        }
    }
}
