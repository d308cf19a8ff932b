//! Binds: a node's source program and its continuation, stored together in
//! one pooled block (`engine/blocks.rs`), so that a combinator costs one block, never
//! one allocation per value or closure. Every `Bind<K>` has the layout of
//! `Bind<AnyK>` (checked at compile time below), which is what lets one
//! pool serve them all.

use core::mem::ManuallyDrop;
use core::ptr::{self, NonNull};

use super::{
    GuaranteeK, Node, OnBody, OnError, OnOutcome, OnResult, OnSuccess, PollK, Res, drop_node,
};
use crate::engine::erased::{ErasedFn, Value, Word};
use crate::engine::tracing::Site;

/// A source program and the continuation to run on its result, stored
/// together in one pooled block (see `engine/blocks.rs`).
pub(crate) struct Bind<K> {
    source: Node,
    k: K,
    /// The call site of the operation that made this node (`engine/tracing/mod.rs`).
    #[cfg(feature = "tracing")]
    site: Option<Site>,
}

/// The continuation type used to compute the common block layout; every
/// `ErasedFn<I, O>` has the same size and alignment (checked below).
pub(crate) type AnyK = ErasedFn<Value, Node>;

const _: () = {
    use core::mem::{align_of, size_of};
    macro_rules! same_layout {
        ($($k:ty),*) => {$(
            assert!(size_of::<Bind<$k>>() == size_of::<Bind<AnyK>>());
            assert!(align_of::<Bind<$k>>() == align_of::<Bind<AnyK>>());
        )*};
    }
    same_layout!(
        ErasedFn<Value, Value>,
        ErasedFn<Res, Res>,
        ErasedFn<Res, Node>,
        ErasedFn<(), Node>,
        GuaranteeK,
        PollK,
        OnSuccess<Node>,
        OnSuccess<Value>,
        OnError<Node>,
        OnError<Value>,
        OnResult<Res>,
        OnResult<Node>,
        OnOutcome,
        OnBody
    );
    #[cfg(feature = "tracing")]
    same_layout!(crate::engine::tracing::MarkK);
};

/// An owning pointer to a `Bind<K>` in a pooled block.
pub(crate) struct BindBox<K> {
    pub(super) ptr: NonNull<Bind<K>>,
}

// SAFETY: a `BindBox` owns its `Bind` like a `Box` does; the node and the
// erased closures inside are `Send`.
unsafe impl<K: Send> Send for BindBox<K> {}

impl<K> BindBox<K> {
    /// Rebuilds the box from a node's payload word.
    ///
    /// # Safety
    /// * The word holds a block pointer stored by `Node::from_bind` for a
    ///   `BindBox<K>` of this very `K`, and is decoded once.
    #[inline(always)]
    pub(super) unsafe fn from_word(word: Word) -> Self {
        // SAFETY: forwarded precondition: a non-null block pointer.
        BindBox {
            ptr: unsafe { NonNull::new_unchecked(word.assume_init().cast()) },
        }
    }

    /// Stores `source` and `k` in a block.
    #[inline(always)]
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn new(source: Node, k: K, site: Option<Site>) -> Self {
        debug_assert!(core::alloc::Layout::new::<Bind<K>>() == crate::engine::blocks::BLOCK);
        let ptr = crate::engine::blocks::allocate().cast::<Bind<K>>();
        // SAFETY: the block is fresh, and has the layout of `Bind<K>`
        // (every `Bind<K>` has the layout of `pool::BLOCK`: checked above).
        unsafe {
            ptr.as_ptr().write(Bind {
                source,
                k,
                #[cfg(feature = "tracing")]
                site,
            })
        };
        BindBox { ptr }
    }

    /// The call site stored with the node.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn site(&self) -> Option<&Site> {
        // SAFETY: we own the initialised `Bind<K>`.
        unsafe { (*self.ptr.as_ptr()).site.as_ref() }
    }

    /// The continuation, borrowed (for its traced operation).
    #[cfg(feature = "tracing")]
    #[inline(always)]
    pub(crate) fn k(&self) -> &K {
        // SAFETY: we own the initialised `Bind<K>`.
        unsafe { &(*self.ptr.as_ptr()).k }
    }

    /// Moves the parts out and releases the block, without running `Bind`'s
    /// `Drop`.
    #[inline(always)]
    pub(crate) fn into_parts(self) -> (Node, K) {
        let this = ManuallyDrop::new(self);
        // SAFETY: the block holds an initialised `Bind<K>` that we own; each
        // field is read exactly once, then the block is released and never
        // used again (`this` is not dropped).
        unsafe {
            let bind = this.ptr.as_ptr();
            let parts = (
                ptr::read(&raw const (*bind).source),
                ptr::read(&raw const (*bind).k),
            );
            #[cfg(feature = "tracing")]
            ptr::drop_in_place(&raw mut (*bind).site);
            crate::engine::blocks::release(this.ptr.cast());
            parts
        }
    }
}

impl<K> Drop for BindBox<K> {
    fn drop(&mut self) {
        // SAFETY: we own the initialised `Bind<K>`; it is dropped in place
        // once, then its block is released and never used again.
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            crate::engine::blocks::release(self.ptr.cast());
        }
    }
}

impl<K> Drop for Bind<K> {
    fn drop(&mut self) {
        // `k` is dropped by the drop glue after this; the source goes through
        // the trampoline so that chains of any length drop in constant stack.
        let source = core::mem::replace(&mut self.source, Node::placeholder());
        if source.has_source() {
            drop_node(source);
        }
    }
}
