//! Type-erased values and closures in two machine words.
//!
//! The run-loop interprets one untyped node type, so every value that flows
//! between steps and every continuation closure is stored with its type
//! erased. A `Box<dyn Any>` per value and per closure would cost a heap
//! allocation per step; the seed discussion "Optimize IO's encoding" shows
//! that this is where an effect runtime's speed is won or lost.
//!
//! So [`Value`] and [`ErasedFn`] are two words: a payload word and a pointer
//! to a static vtable generated per type. A payload of at most one word (and
//! at most word alignment) lives *in* the payload word: integers, pointers,
//! `Box`, `Arc`, closures capturing one such thing, and every zero-sized
//! type (functions, non-capturing closures). A payload of up to four words
//! (`String`, `Vec`, `Result<u64, E>`, closures capturing a few things) goes
//! to a block of the per-thread pool of `engine/blocks.rs`; only larger ones are
//! boxed. Two words travel in two registers: a value
//! returned by a continuation never goes through memory.
//!
//! Vtables are aligned to 64 bytes on 64-bit targets, 16 on narrower ones,
//! so that `engine/node/` can keep a node's kind in the low bits of the
//! vtable pointer (a node is then two words too): six bits, 64 kinds, on a
//! host. The alignment is padding in read-only data, never on the heap or
//! in a step's instructions: a host vtable takes 64 bytes instead of its 24
//! to 40. On a 32-bit microcontroller, where a vtable is 8 to 20 bytes and
//! flash is scarce, 32-byte alignment cost 24 bytes of flash per vtable
//! (about 2 KB in the firmware example); 16 costs 8, for a slightly longer
//! tag decoding there (`engine/node/mod.rs`, "Encoding").
//!
//! # Invariants
//!
//! * A [`Value`] made by `Value::new::<T>` is only ever read back as `T`
//!   (`take::<T>`). The typed `IO<A, E>` handle guarantees this statically;
//!   debug builds check it with the stored `TypeId`.
//! * An [`ErasedFn<I, O>`] made from `F` is called at most once: `call`
//!   consumes it. Dropping it without a call drops `F`.
//! * Everything stored is `Send + 'static`, which is why the containers are
//!   `Send` (they are not `Sync`: nothing shares them).

use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop, MaybeUninit};
use core::ptr;

use alloc::boxed::Box;

/// One payload word. `MaybeUninit` keeps padding and unused bytes legal, and
/// being `repr(transparent)` over a pointer it is passed in a register (with
/// its provenance, so that boxed payloads stay valid under strict provenance).
pub(crate) type Word = MaybeUninit<*mut ()>;

/// An uninitialised word, for nodes without payload.
pub(crate) const EMPTY_WORD: Word = MaybeUninit::uninit();

/// Whether `T` is stored in the word itself (decided at compile time).
#[inline(always)]
pub(crate) const fn fits_inline<T>() -> bool {
    mem::size_of::<T>() <= mem::size_of::<Word>() && mem::align_of::<T>() <= mem::align_of::<Word>()
}

/// Whether a `T` too large for the word fits in a pooled block (`engine/blocks.rs`):
/// then it takes a block from the per-thread free list instead of a `Box`.
#[inline(always)]
pub(crate) const fn fits_block<T>() -> bool {
    mem::size_of::<T>() <= crate::engine::blocks::BLOCK.size()
        && mem::align_of::<T>() <= crate::engine::blocks::BLOCK.align()
}

/// Whether a `T` too large for a pooled block fits in a large one
/// (`pool::LARGE_BLOCK`, eight words).
#[inline(always)]
pub(crate) const fn fits_large_block<T>() -> bool {
    mem::size_of::<T>() <= crate::engine::blocks::LARGE_BLOCK.size()
        && mem::align_of::<T>() <= crate::engine::blocks::LARGE_BLOCK.align()
}

/// Whether a `T` too large for a large block fits in a huge one
/// (`pool::HUGE_BLOCK`).
#[inline(always)]
pub(crate) const fn fits_huge_block<T>() -> bool {
    mem::size_of::<T>() <= crate::engine::blocks::HUGE_BLOCK.size()
        && mem::align_of::<T>() <= crate::engine::blocks::HUGE_BLOCK.align()
}

/// Whether payloads too large for the word go to the pool's blocks: only
/// with `std`, whose pool keeps per-thread free lists. Without it, a block
/// comes from the global allocator like a `Box`, but with the block's size:
/// a payload of two words took a four-word block (a suspended fiber's wait
/// cleanup, on the firmware: 16 bytes instead of 8), so there each payload
/// is boxed at its own size.
const POOL: bool = cfg!(feature = "std");

/// Whether a `T` too large for the word goes to a pooled block.
#[inline(always)]
const fn pooled_block<T>() -> bool {
    POOL && fits_block::<T>()
}

/// The pool class of a `T` that fits no smaller block (`None`: boxed).
#[inline(always)]
const fn outer_class<T>() -> Option<crate::engine::blocks::Class> {
    if !POOL {
        None
    } else if fits_large_block::<T>() {
        Some(crate::engine::blocks::Class::Large)
    } else if fits_huge_block::<T>() {
        Some(crate::engine::blocks::Class::Huge)
    } else {
        None
    }
}

/// Stores `t` in a word: inline, in a pooled block (of one of the three
/// sizes), or boxed.
#[inline(always)]
pub(crate) fn store<T>(t: T) -> Word {
    let mut word = EMPTY_WORD;
    if fits_inline::<T>() {
        // SAFETY: `T` fits in the word in size and alignment (checked just
        // above), and the word is uninitialised, so nothing is overwritten.
        unsafe { ptr::write(word.as_mut_ptr().cast::<T>(), t) };
    } else if pooled_block::<T>() {
        let block = crate::engine::blocks::allocate().cast::<T>();
        // SAFETY: a fresh block, large and aligned enough for `T` (checked).
        unsafe { block.as_ptr().write(t) };
        word = MaybeUninit::new(block.as_ptr().cast::<()>());
    } else if let Some(class) = outer_class::<T>() {
        let block = crate::engine::blocks::allocate_in(class).cast::<T>();
        // SAFETY: a fresh block of `class`, large and aligned enough for `T`
        // (checked by `outer_class`).
        unsafe { block.as_ptr().write(t) };
        word = MaybeUninit::new(block.as_ptr().cast::<()>());
    } else {
        word = MaybeUninit::new(Box::into_raw(Box::new(t)).cast::<()>());
    }
    word
}

/// Moves the `T` out of a word.
///
/// # Safety
/// * `word` was filled by `store::<T>` and is read once.
#[inline(always)]
pub(crate) unsafe fn load<T>(word: Word) -> T {
    if fits_inline::<T>() {
        // SAFETY: by the precondition the word holds an inline `T`.
        unsafe { ptr::read(word.as_ptr().cast::<T>()) }
    } else if pooled_block::<T>() {
        // SAFETY: by the precondition the word holds a pooled block with a
        // `T` in it, read once; the block is then released, never reused here.
        unsafe {
            let block = word.assume_init().cast::<T>();
            let t = ptr::read(block);
            crate::engine::blocks::release(core::ptr::NonNull::new_unchecked(block.cast()));
            t
        }
    } else if let Some(class) = outer_class::<T>() {
        // SAFETY: as above, with a block of `class` (`store` chose the same
        // class for the same `T`).
        unsafe {
            let block = word.assume_init().cast::<T>();
            let t = ptr::read(block);
            crate::engine::blocks::release_in(
                class,
                core::ptr::NonNull::new_unchecked(block.cast()),
            );
            t
        }
    } else {
        // SAFETY: by the precondition the word holds a pointer made by
        // `Box::into_raw(Box<T>)`, read here exactly once.
        unsafe { *Box::from_raw(word.assume_init().cast::<T>()) }
    }
}

/// Drops the `T` in a word.
///
/// # Safety
/// * `word` was filled by `store::<T>` and is not read again.
unsafe fn drop_stored<T>(word: Word) {
    // SAFETY: forwarded precondition.
    drop(unsafe { load::<T>(word) });
}

/// The drop entry of a vtable: `None` when dropping a `T` does nothing and
/// the storage is inline, so that dropping such an erased value is free.
const fn drop_fn<T>() -> Option<unsafe fn(Word)> {
    if fits_inline::<T>() && !mem::needs_drop::<T>() {
        None
    } else {
        Some(drop_stored::<T>)
    }
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// Vtable of an erased value: how to drop it, and its type (checked by
/// debug builds on every read, and by readers that cannot know the type
/// statically: [`Value::is`]). A function, since `TypeId::of` is not
/// `const` at the crate's minimum Rust version; the vtable is padded to its
/// alignment anyway, so it takes no space.
#[cfg_attr(target_pointer_width = "64", repr(C, align(64)))]
#[cfg_attr(not(target_pointer_width = "64"), repr(C, align(16)))]
pub(crate) struct ValueVTable {
    pub(crate) drop: Option<unsafe fn(Word)>,
    type_id: fn() -> core::any::TypeId,
}

trait HasValueVTable {
    const VTABLE: &'static ValueVTable;
}

impl<T: 'static> HasValueVTable for T {
    const VTABLE: &'static ValueVTable = &ValueVTable {
        drop: drop_fn::<T>(),
        type_id: core::any::TypeId::of::<T>,
    };
}

/// The vtable of `()`, also used by nodes without payload.
pub(crate) const UNIT_VTABLE: &ValueVTable = <() as HasValueVTable>::VTABLE;

/// A value of some `Send + 'static` type, with the type erased.
pub(crate) struct Value {
    word: Word,
    vtable: &'static ValueVTable,
}

// SAFETY: `Value::new` only accepts `Send` types, and a `Value` is never
// shared (it has no `&self` access to its contents).
unsafe impl Send for Value {}

impl Value {
    /// Erases `t`. No allocation when `T` fits in one word.
    #[inline(always)]
    pub(crate) fn new<T: Send + 'static>(t: T) -> Value {
        Value {
            word: store(t),
            vtable: <T as HasValueVTable>::VTABLE,
        }
    }

    /// The unit value, the result of effects that produce nothing.
    #[inline(always)]
    pub(crate) fn unit() -> Value {
        Value {
            word: EMPTY_WORD,
            vtable: UNIT_VTABLE,
        }
    }

    /// Whether the value was made by `Value::new::<T>` (for readers that
    /// cannot know the type statically: the suppressed errors of a fiber,
    /// which may come from a scope whose error type is not the fiber's).
    #[inline]
    pub(crate) fn is<T: 'static>(&self) -> bool {
        (self.vtable.type_id)() == core::any::TypeId::of::<T>()
    }

    /// Takes the value back as the type it was made from.
    ///
    /// # Safety
    /// * The value was made by `Value::new::<T>` (debug builds check this).
    #[inline(always)]
    pub(crate) unsafe fn take<T: 'static>(self) -> T {
        #[cfg(debug_assertions)]
        assert!(
            (self.vtable.type_id)() == core::any::TypeId::of::<T>(),
            "io-core: a value was read back as `{}`, which is not its type",
            core::any::type_name::<T>()
        );
        let this = ManuallyDrop::new(self);
        // SAFETY: the word holds an unread `T` (precondition), and
        // `ManuallyDrop` keeps `Drop` from touching it again.
        unsafe { load::<T>(this.word) }
    }

    /// Borrows the value as the type it was made from (for readers that
    /// clone it, such as the joiners of a fiber).
    ///
    /// # Safety
    /// * The value was made by `Value::new::<T>` (debug builds check this).
    #[inline]
    pub(crate) unsafe fn peek<T: 'static>(&self) -> &T {
        #[cfg(debug_assertions)]
        assert!(
            (self.vtable.type_id)() == core::any::TypeId::of::<T>(),
            "io-core: a value was read back as `{}`, which is not its type",
            core::any::type_name::<T>()
        );
        if fits_inline::<T>() {
            // SAFETY: by the precondition the word holds an inline `T`, alive
            // as long as `self`.
            unsafe { &*self.word.as_ptr().cast::<T>() }
        } else {
            // SAFETY: by the precondition the word points at a live `T` (in a
            // pooled block or a box) owned by `self`.
            unsafe { &*self.word.assume_init().cast::<T>().cast_const() }
        }
    }

    /// Splits into the raw parts (for nodes); the caller owns the payload.
    #[inline(always)]
    pub(crate) fn into_raw(self) -> (Word, &'static ValueVTable) {
        let this = ManuallyDrop::new(self);
        (this.word, this.vtable)
    }

    /// Rebuilds a value from [`into_raw`](Value::into_raw)'s parts.
    ///
    /// # Safety
    /// * The parts come from `into_raw` and are used once.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(word: Word, vtable: &'static ValueVTable) -> Value {
        Value { word, vtable }
    }
}

/// Borrows the `T` a word holds (the word of a [`Value`] split by
/// [`Value::into_raw`], kept by a frame).
///
/// # Safety
/// * `word` was filled by `store::<T>` (`Value::new::<T>`) and not read
///   since; the `T` lives as long as the borrow of `word`.
#[inline]
pub(crate) unsafe fn peek_word<T>(word: &Word) -> &T {
    if fits_inline::<T>() {
        // SAFETY: by the precondition the word holds an inline `T`.
        unsafe { &*word.as_ptr().cast::<T>() }
    } else {
        // SAFETY: by the precondition the word points at a live `T` (in a
        // pooled block or a box) owned with the word.
        unsafe { &*word.assume_init().cast::<T>().cast_const() }
    }
}

/// An `Option<Result<Value, Value>>` in a value's two words, not three:
/// the result's side is the low bit of the vtable pointer (vtables are
/// 16-aligned at least, so the bit is free) and "empty" is a null vtable pointer.
/// A fiber's header keeps the result a callback delivers in one, so that
/// every fiber is a word smaller.
pub(crate) struct ResSlot {
    word: Word,
    /// Null: empty; otherwise the value's vtable, with `ERR` set for an
    /// error.
    vtable: *const ValueVTable,
}

const _: () = assert!(mem::align_of::<ValueVTable>() > ResSlot::ERR);

impl ResSlot {
    const ERR: usize = 1;

    /// An empty slot.
    pub(crate) const fn empty() -> ResSlot {
        ResSlot {
            word: EMPTY_WORD,
            vtable: ptr::null(),
        }
    }

    /// Whether the slot holds nothing.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.vtable.is_null()
    }

    /// Puts `res` in the slot (dropping what was there).
    #[inline(always)]
    pub(crate) fn put(&mut self, res: crate::engine::node::Res) {
        drop(self.take());
        let (err, value) = match res {
            Ok(value) => (0, value),
            Err(error) => (Self::ERR, error),
        };
        let (word, vtable) = value.into_raw();
        self.word = word;
        self.vtable = ptr::from_ref(vtable).map_addr(|addr| addr | err);
    }

    /// Takes the result out, if there is one.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Option<crate::engine::node::Res> {
        if self.vtable.is_null() {
            return None;
        }
        let tagged = mem::replace(&mut self.vtable, ptr::null());
        let err = tagged.addr() & Self::ERR != 0;
        let vtable = tagged.map_addr(|addr| addr & !Self::ERR);
        // SAFETY: a non-null pointer is, once untagged, the `&'static`
        // vtable `put` stored with `word`, whose value is taken once (the
        // slot is empty from now on).
        let value = unsafe { Value::from_raw(self.word, &*vtable) };
        Some(if err { Err(value) } else { Ok(value) })
    }
}

impl Drop for ResSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl Drop for Value {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(drop) = self.vtable.drop {
            // SAFETY: the word holds the value the vtable was made for and it
            // has not been taken (`take`/`into_raw` forget `self`).
            unsafe { drop(self.word) }
        }
    }
}

// ---------------------------------------------------------------------------
// Closures
// ---------------------------------------------------------------------------

/// Vtable of an erased `FnOnce(I) -> O`.
#[cfg_attr(target_pointer_width = "64", repr(C, align(64)))]
#[cfg_attr(not(target_pointer_width = "64"), repr(C, align(16)))]
pub(crate) struct FnVTable<I, O> {
    pub(crate) drop: Option<unsafe fn(Word)>,
    call: unsafe fn(Word, I) -> O,
    /// The traced operation this closure belongs to (`engine/tracing/mod.rs`).
    #[cfg(feature = "tracing")]
    op: &'static crate::engine::tracing::Op,
    /// Where the site stored next to the closure (`Sited`) is, if it has
    /// one: read with a load, not a call.
    #[cfg(feature = "tracing")]
    site: SiteAt,
}

/// Where an erased closure's site is (see `Sited`).
#[cfg(feature = "tracing")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SiteAt {
    /// The closure has no site.
    Nowhere,
    /// In the word itself (a zero-sized closure: the word is the site).
    InWord,
    /// At the start of the block the word points at.
    InBlock,
}

/// An erased `FnOnce(I) -> O + Send + 'static`, inline when one word or less.
pub(crate) struct ErasedFn<I: 'static, O: 'static> {
    word: Word,
    vtable: &'static FnVTable<I, O>,
}

// SAFETY: `ErasedFn` is only made from `Send` closures and never shared.
unsafe impl<I: 'static, O: 'static> Send for ErasedFn<I, O> {}

/// Adapts a typed closure to the erased calling convention.
///
/// `Adapter` turns the erased input into the closure's own argument and its
/// result into the erased output, so one generic `ErasedFn` serves every
/// frame kind of the run-loop.
pub(crate) trait Adapter<I, O, F> {
    /// Calls `f` with the erased input.
    ///
    /// # Safety
    /// * `input` holds what `F` expects (the typed API guarantees it).
    unsafe fn call(f: F, input: I) -> O;
}

struct VTableFor<A, F, I, O, M>(PhantomData<(A, F, I, O, M)>);

impl<A, F, I: 'static, O: 'static, M> VTableFor<A, F, I, O, M>
where
    A: Adapter<I, O, F>,
    F: Send + 'static,
    M: crate::engine::tracing::OpMeta,
{
    const VTABLE: &'static FnVTable<I, O> = &FnVTable {
        drop: drop_fn::<F>(),
        call: Self::call,
        #[cfg(feature = "tracing")]
        op: M::OP,
        #[cfg(feature = "tracing")]
        site: SiteAt::Nowhere,
    };

    /// # Safety
    /// * `word` holds an unread `F`; the input satisfies `A::call`.
    #[inline(always)]
    unsafe fn call(word: Word, input: I) -> O {
        // SAFETY: forwarded preconditions; the closure is read exactly once.
        unsafe { A::call(load::<F>(word), input) }
    }
}

/// A closure stored with the call site of the operation that made it (the
/// leaves of `engine/tracing/mod.rs`).
#[cfg(feature = "tracing")]
#[repr(C)]
struct Sited<F> {
    /// First, so that it is found without knowing `F` (`SiteAt`).
    site: crate::engine::tracing::Site,
    f: F,
}

#[cfg(feature = "tracing")]
struct SitedVTableFor<A, F, I, O, M>(PhantomData<(A, F, I, O, M)>);

#[cfg(feature = "tracing")]
impl<A, F, I: 'static, O: 'static, M> SitedVTableFor<A, F, I, O, M>
where
    A: Adapter<I, O, F>,
    F: Send + 'static,
    M: crate::engine::tracing::OpMeta,
{
    const VTABLE: &'static FnVTable<I, O> = &FnVTable {
        drop: drop_fn::<Sited<F>>(),
        call: Self::call,
        op: M::OP,
        site: if fits_inline::<Sited<F>>() {
            SiteAt::InWord
        } else {
            SiteAt::InBlock
        },
    };

    /// # Safety
    /// * `word` holds an unread `Sited<F>`; the input satisfies `A::call`.
    #[inline(always)]
    unsafe fn call(word: Word, input: I) -> O {
        // SAFETY: forwarded preconditions; read exactly once.
        let sited = unsafe { load::<Sited<F>>(word) };
        #[cfg(feature = "tracing-full")]
        drop(sited.site);
        // SAFETY: forwarded precondition.
        unsafe { A::call(sited.f, input) }
    }
}

impl<I: 'static, O: 'static> ErasedFn<I, O> {
    /// Erases `f`, to be called through the adapter `A`.
    #[inline(always)]
    pub(crate) fn new<A, F>(f: F) -> Self
    where
        A: Adapter<I, O, F>,
        F: Send + 'static,
    {
        ErasedFn::new_op::<A, F, crate::engine::tracing::Internal>(f)
    }

    /// Erases `f`, to be called through `A`, as part of the traced
    /// operation `M` (its site is stored elsewhere: in the node's block).
    #[inline(always)]
    pub(crate) fn new_op<A, F, M>(f: F) -> Self
    where
        A: Adapter<I, O, F>,
        F: Send + 'static,
        M: crate::engine::tracing::OpMeta,
    {
        ErasedFn {
            word: store(f),
            vtable: VTableFor::<A, F, I, O, M>::VTABLE,
        }
    }

    /// Erases `f` together with the call site of the traced operation `M`
    /// that made it (for leaves, whose node has no block).
    #[inline(always)]
    pub(crate) fn new_sited<A, F, M>(f: F, site: Option<crate::engine::tracing::Site>) -> Self
    where
        A: Adapter<I, O, F>,
        F: Send + 'static,
        M: crate::engine::tracing::OpMeta,
    {
        #[cfg(feature = "tracing")]
        {
            match site {
                // A one-word closure stored with its site no longer fits
                // the node's word: keep the site only where sites are kept
                // (`spindle_trace::call_sites_for`).
                Some(_)
                    if fits_inline::<F>()
                        && !fits_inline::<Sited<F>>()
                        && !crate::engine::tracing::Site::call_sites_kept() =>
                {
                    ErasedFn::new_op::<A, F, M>(f)
                }
                Some(site) => ErasedFn {
                    word: store(Sited { f, site }),
                    vtable: SitedVTableFor::<A, F, I, O, M>::VTABLE,
                },
                // No site: the closure alone, as without tracing.
                None => ErasedFn::new_op::<A, F, M>(f),
            }
        }
        #[cfg(not(feature = "tracing"))]
        {
            let _ = site;
            ErasedFn::new_op::<A, F, M>(f)
        }
    }

    /// The traced operation this closure belongs to.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn op(&self) -> &'static crate::engine::tracing::Op {
        self.vtable.op
    }

    /// The call site stored with the closure, if any.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn site(&self) -> Option<&crate::engine::tracing::Site> {
        match self.vtable.site {
            SiteAt::Nowhere => None,
            // SAFETY: this vtable's closure is a `Sited<F>` stored in the
            // word (`repr(C)`, the site first), not moved out (`&self`).
            SiteAt::InWord => {
                Some(unsafe { &*self.word.as_ptr().cast::<crate::engine::tracing::Site>() })
            }
            // SAFETY: as above, in the block the word points at.
            SiteAt::InBlock => Some(unsafe {
                &*self
                    .word
                    .assume_init()
                    .cast::<crate::engine::tracing::Site>()
                    .cast_const()
            }),
        }
    }

    /// Calls the closure, consuming it.
    ///
    /// # Safety
    /// * `input` has the type the adapter of this closure expects.
    #[inline(always)]
    pub(crate) unsafe fn call(self, input: I) -> O {
        let this = ManuallyDrop::new(self);
        // SAFETY: the word holds the closure the vtable was made for, not yet
        // read; `ManuallyDrop` keeps `Drop` from touching it again.
        unsafe { (this.vtable.call)(this.word, input) }
    }

    /// Splits into the raw parts (for nodes and frames).
    #[inline(always)]
    pub(crate) fn into_raw(self) -> (Word, &'static FnVTable<I, O>) {
        let this = ManuallyDrop::new(self);
        (this.word, this.vtable)
    }

    /// Rebuilds a closure from [`into_raw`](ErasedFn::into_raw)'s parts.
    ///
    /// # Safety
    /// * The parts come from `into_raw` of an `ErasedFn<I, O>` and are used once.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(word: Word, vtable: &'static FnVTable<I, O>) -> Self {
        ErasedFn { word, vtable }
    }
}

impl<I: 'static, O: 'static> Drop for ErasedFn<I, O> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(drop) = self.vtable.drop {
            // SAFETY: the closure has not been called (`call` forgets `self`).
            unsafe { drop(self.word) }
        }
    }
}

// ---------------------------------------------------------------------------
// Errors raised at a call site
// ---------------------------------------------------------------------------

/// An error and the call site that raised it, stored together (the
/// `RaiseError` node of `IO::raise_error` with tracing), with the error's
/// type erased: a tagged word and the error's [`ValueVTable`].
///
/// With the pool (`std`), an error that `store` keeps in a pooled block of
/// its own (more than a word, up to a block less a word) is stored *once*:
/// at the start of one pooled block, with the site in the block's last
/// word. Splitting it (in the run-loop, without a call) reads the site out,
/// and the block, the error at its start as `store` would have put it,
/// *is* the error's value (tag [`RAISED_SHARED`]). Before, the error took a
/// block and the pair of it and the site another.
///
/// Any other error is stored as a `(Value, Site)` pair (tag
/// [`RAISED_PAIR`]): a one-word error is in the value's word, so the pair
/// is one block, as a block shared with the site would be (measured the
/// same); a larger error, or any without the pool, takes what `store`
/// gives it. The tag is the low bit of the word, which holds a pointer
/// aligned to at least a word.
#[cfg(feature = "tracing")]
pub(crate) struct RaisedError {
    word: Word,
    vtable: &'static ValueVTable,
}

// SAFETY: made only from `Send` errors (and sites, which are `Send`), never
// shared.
#[cfg(feature = "tracing")]
unsafe impl Send for RaisedError {}

/// [`RaisedError`]'s tags.
#[cfg(feature = "tracing")]
const RAISED_SHARED: usize = 0;
#[cfg(feature = "tracing")]
const RAISED_PAIR: usize = 1;
#[cfg(feature = "tracing")]
const RAISED_TAGS: usize = 0b1;
/// Where a block keeps the site of the error at its start: its last word.
#[cfg(feature = "tracing")]
const RAISED_SITE_AT: usize =
    crate::engine::blocks::BLOCK.size() - mem::size_of::<crate::engine::tracing::Site>();

#[cfg(feature = "tracing")]
const _: () = assert!(mem::align_of::<*mut ()>() > RAISED_TAGS);
#[cfg(feature = "tracing")]
const _: () = assert!(
    crate::engine::blocks::BLOCK.align() >= mem::align_of::<crate::engine::tracing::Site>()
        && RAISED_SITE_AT % mem::align_of::<crate::engine::tracing::Site>() == 0
);

/// Whether an `E` goes into one block with its site: with the pool, when
/// `store` keeps it in a pooled block of its own and it leaves the block's
/// last word to the site.
#[cfg(feature = "tracing")]
const fn raised_in_block<E>() -> bool {
    POOL && !fits_inline::<E>() && pooled_block::<E>() && mem::size_of::<E>() <= RAISED_SITE_AT
}

#[cfg(feature = "tracing")]
impl RaisedError {
    /// Stores `error` with `site` (one pooled block for both, for errors up
    /// to a block less a word).
    #[inline(always)]
    pub(crate) fn new<E: Send + 'static>(error: E, site: crate::engine::tracing::Site) -> Self {
        let vtable = <E as HasValueVTable>::VTABLE;
        if raised_in_block::<E>() {
            let block = crate::engine::blocks::allocate();
            // SAFETY: a fresh block of `BLOCK`'s layout: `E` fits before
            // the last word and is no more aligned than the block
            // (`raised_in_block`: a pooled `E`), the site fits the last
            // word (asserted above).
            unsafe {
                block.as_ptr().cast::<E>().write(error);
                block
                    .as_ptr()
                    .add(RAISED_SITE_AT)
                    .cast::<crate::engine::tracing::Site>()
                    .write(site);
            }
            RaisedError {
                word: MaybeUninit::new(block.as_ptr().cast::<()>().map_addr(|a| a | RAISED_SHARED)),
                vtable,
            }
        } else {
            let word = store::<(Value, crate::engine::tracing::Site)>((Value::new(error), site));
            // SAFETY: a pair is more than a word, so `store` put it behind
            // a pointer (a block or a box), aligned to at least a word.
            let ptr = unsafe { word.assume_init() };
            RaisedError {
                word: MaybeUninit::new(ptr.map_addr(|a| a | RAISED_PAIR)),
                vtable,
            }
        }
    }

    /// The error as a value, and the site.
    #[inline(always)]
    pub(crate) fn split(self) -> (Value, crate::engine::tracing::Site) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `new` always initialises the word.
        let tagged = unsafe { this.word.assume_init() };
        let ptr = tagged.map_addr(|a| a & !RAISED_TAGS);
        if tagged.addr() & RAISED_TAGS == RAISED_PAIR {
            // SAFETY: `new` stored a pair there with `store`, read once
            // (`this` is not dropped).
            return unsafe { load::<(Value, crate::engine::tracing::Site)>(MaybeUninit::new(ptr)) };
        }
        // SAFETY: `new` wrote the site in the block's last word, moved out
        // once here.
        let site = unsafe {
            ptr.cast::<u8>()
                .add(RAISED_SITE_AT)
                .cast::<crate::engine::tracing::Site>()
                .read()
        };
        // SAFETY: the block holds an unread `E` at its start, as the pooled
        // block `store::<E>` makes for it, and `this.vtable` is `E`'s: the
        // block is the error's value from now on (released by `load`
        // through that vtable).
        (
            unsafe { Value::from_raw(MaybeUninit::new(ptr), this.vtable) },
            site,
        )
    }

    /// Splits into the raw parts (for nodes); the caller owns the payload.
    #[inline(always)]
    pub(crate) fn into_raw(self) -> (Word, &'static ValueVTable) {
        let this = ManuallyDrop::new(self);
        (this.word, this.vtable)
    }

    /// Rebuilds from [`into_raw`](RaisedError::into_raw)'s parts.
    ///
    /// # Safety
    /// * The parts come from `into_raw` and are used once.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(word: Word, vtable: &'static ValueVTable) -> Self {
        RaisedError { word, vtable }
    }
}

#[cfg(feature = "tracing")]
impl Drop for RaisedError {
    fn drop(&mut self) {
        // SAFETY: the parts are moved out once; `self` is not used after.
        drop(unsafe { RaisedError::from_raw(self.word, self.vtable) }.split());
    }
}
