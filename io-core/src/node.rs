//! The untyped program nodes that the run-loop interprets, the continuation
//! frames it keeps on its explicit stack, and the drop trampoline that keeps
//! dropping a deep program off the native stack.
//!
//! # Encoding
//!
//! `IO<A, E>` (in `io.rs`) is a typed handle over one [`Node`]. Leaves carry
//! their payload inline ([`Value`], [`ErasedFn`]: no allocation for small
//! payloads). A node that has a *source* program (`flat_map`, `map`,
//! `handle_error_with`, ...) boxes the source together with its continuation
//! in one [`Bind`]: one allocation per combinator, never one per value or
//! closure.
//!
//! When the run-loop meets a `Bind`, it pushes the continuation as a
//! [`Frame`] and evaluates the source; a result then pops frames. Success pops
//! error-handler frames without calling anything; an error drops `map` and
//! `flat_map` frames until the nearest handler.
//!
//! # Dropping deep programs
//!
//! A left-nested chain (`io.flat_map(f).flat_map(g)...`) is a linked list of
//! `Bind` boxes, and a right-nested chain built ahead of time is a list of
//! closures that capture programs. Dropping either with the compiler's drop
//! glue would recurse once per level. [`Bind`]'s `Drop` instead hands its
//! source to [`drop_node`], a trampoline: the outermost drop on a thread runs
//! a loop over a work list, and every nested drop that happens meanwhile
//! (also through closures' captures) only pushes onto that list.

use core::time::Duration;

use alloc::vec::Vec;

use crate::erased::{ErasedFn, Value};
use crate::fiber::RawCallback;

/// The result of a step: a value or an error, both erased.
pub(crate) type Res = Result<Value, Value>;

/// One node of a program.
pub(crate) enum Node {
    /// A value.
    Pure(Value),
    /// A typed error.
    Error(Value),
    /// A suspended thunk producing a value.
    Delay(ErasedFn<(), Value>),
    /// A suspended thunk producing a program.
    Defer(ErasedFn<(), Node>),
    /// `source.flat_map(k)`.
    FlatMap(BindBox<ErasedFn<Value, Node>>),
    /// `source.map(k)`.
    Map(BindBox<ErasedFn<Value, Value>>),
    /// `source.handle_error_with(k)`.
    HandleErrorWith(BindBox<ErasedFn<Value, Node>>),
    /// `source.map_error(k)`.
    MapError(BindBox<ErasedFn<Value, Value>>),
    /// `source` then `k` on its result, success or error (attempt, redeem).
    Fold(BindBox<ErasedFn<Res, Res>>),
    /// `source` then the program `k` returns for its result (redeem_with).
    FoldWith(BindBox<ErasedFn<Res, Node>>),
    /// Suspend until the callback given to the registration is called; the
    /// registration may return a finalizer for cancellation.
    Async(ErasedFn<RawCallback, Option<Node>>),
    /// Give the executor the chance to run something else.
    Cede,
    /// Suspend forever.
    Never,
    /// Suspend for a duration, through the executor's timers.
    Sleep(Duration),
    /// Read the executor's monotonic clock.
    Monotonic,
    /// Read the executor's wall clock.
    RealTime,
    /// A closure panicked: unwind the fiber's stack and end it (internal;
    /// only made with `std`, where panics are caught).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    Panicked(crate::outcome::PanicMessage),
}

/// A source program and the continuation to run on its result, stored
/// together in one pooled block (see `pool.rs`).
pub(crate) struct Bind<K> {
    source: Node,
    k: K,
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
    same_layout!(ErasedFn<Value, Value>, ErasedFn<Res, Res>, ErasedFn<Res, Node>);
};

/// An owning pointer to a `Bind<K>` in a pooled block.
pub(crate) struct BindBox<K> {
    ptr: core::ptr::NonNull<Bind<K>>,
}

// SAFETY: a `BindBox` owns its `Bind` like a `Box` does; the node and the
// erased closures inside are `Send`.
unsafe impl<K: Send> Send for BindBox<K> {}

impl<K> BindBox<K> {
    /// Stores `source` and `k` in a block.
    #[inline(always)]
    pub(crate) fn new(source: Node, k: K) -> Self {
        debug_assert!(core::alloc::Layout::new::<Bind<K>>() == crate::pool::BLOCK);
        let ptr = crate::pool::allocate().cast::<Bind<K>>();
        // SAFETY: the block is fresh, and has the layout of `Bind<K>`
        // (every `Bind<K>` has the layout of `pool::BLOCK`: checked above).
        unsafe { ptr.as_ptr().write(Bind { source, k }) };
        BindBox { ptr }
    }

    /// Moves the parts out and releases the block, without running `Bind`'s
    /// `Drop`.
    #[inline(always)]
    pub(crate) fn into_parts(self) -> (Node, K) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the block holds an initialised `Bind<K>` that we own; each
        // field is read exactly once, then the block is released and never
        // used again (`this` is not dropped).
        unsafe {
            let bind = this.ptr.as_ptr();
            let parts = (
                core::ptr::read(&raw const (*bind).source),
                core::ptr::read(&raw const (*bind).k),
            );
            crate::pool::release(this.ptr.cast());
            parts
        }
    }

    /// Whether the source is a plain value (the run-loop's fast path).
    #[inline(always)]
    pub(crate) fn source_is_pure(&self) -> bool {
        // SAFETY: the block holds an initialised `Bind<K>` that we own.
        matches!(unsafe { &(*self.ptr.as_ptr()).source }, Node::Pure(_))
    }
}

impl<K> Drop for BindBox<K> {
    fn drop(&mut self) {
        // SAFETY: we own the initialised `Bind<K>`; it is dropped in place
        // once, then its block is released and never used again.
        unsafe {
            core::ptr::drop_in_place(self.ptr.as_ptr());
            crate::pool::release(self.ptr.cast());
        }
    }
}

impl<K> Drop for Bind<K> {
    fn drop(&mut self) {
        // `k` is dropped by the drop glue after this; the source goes through
        // the trampoline so that chains of any length drop in constant stack.
        let source = core::mem::replace(&mut self.source, Node::Cede);
        if source.has_source() {
            drop_node(source);
        }
    }
}

impl Node {
    /// Whether this node owns a boxed source (and so may start a long chain).
    #[inline(always)]
    fn has_source(&self) -> bool {
        matches!(
            self,
            Node::FlatMap(_)
                | Node::Map(_)
                | Node::HandleErrorWith(_)
                | Node::MapError(_)
                | Node::Fold(_)
                | Node::FoldWith(_)
        )
    }

    /// Drops one level: returns the source (if any) still to be dropped.
    fn dismantle(self) -> Option<Node> {
        match self {
            Node::FlatMap(b) | Node::HandleErrorWith(b) => Some(b.into_parts().0),
            Node::Map(b) | Node::MapError(b) => Some(b.into_parts().0),
            Node::Fold(b) => Some(b.into_parts().0),
            Node::FoldWith(b) => Some(b.into_parts().0),
            leaf => {
                drop(leaf);
                None
            }
        }
    }
}

/// A continuation waiting on the explicit stack of a fiber.
pub(crate) enum Frame {
    /// Apply to a success.
    Map(ErasedFn<Value, Value>),
    /// Continue with a program on success.
    FlatMap(ErasedFn<Value, Node>),
    /// Recover from an error with a program; popped for free on success.
    HandleErrorWith(ErasedFn<Value, Node>),
    /// Transform an error; popped for free on success.
    MapError(ErasedFn<Value, Value>),
    /// Fold either outcome into a result.
    Fold(ErasedFn<Res, Res>),
    /// Fold either outcome into a program.
    FoldWith(ErasedFn<Res, Node>),
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

#[cfg(feature = "std")]
mod trampoline {
    //! With std the work list is thread-local: each thread drains its own.
    use super::*;
    use core::cell::RefCell;

    struct Work {
        active: bool,
        pending: Vec<Node>,
    }

    std::thread_local! {
        static WORK: RefCell<Work> = const { RefCell::new(Work { active: false, pending: Vec::new() }) };
    }

    pub(super) fn drop_deferred(node: Node) {
        // Either push (a drop is already running on this thread) or become
        // the thread's drainer.
        let mut slot = Some(node);
        let became_drainer = WORK.try_with(|w| {
            let mut w = w.borrow_mut();
            if w.active {
                w.pending.extend(slot.take());
                false
            } else {
                w.active = true;
                true
            }
        });
        let node = match (became_drainer, slot) {
            (Ok(false), _) | (_, None) => return,
            (Ok(true), Some(node)) => node,
            // The thread-local is gone (thread teardown): drop the chain with
            // a local list; nesting through closures then recurses.
            (Err(_), Some(node)) => return drop_locally(node),
        };
        let mut first = Some(node);
        drain(|| {
            first
                .take()
                .or_else(|| WORK.with(|w| w.borrow_mut().pending.pop()))
        });
        WORK.with(|w| {
            let mut w = w.borrow_mut();
            w.active = false;
            w.pending = Vec::new();
        });
    }

    fn drop_locally(node: Node) {
        let mut list = alloc::vec![node];
        drain(|| list.pop());
    }
}

#[cfg(not(feature = "std"))]
mod trampoline {
    //! Without std there are no thread-locals: one global work list behind a
    //! critical section (safe from interrupt handlers). Nodes are `Send`, so
    //! whichever context drains may drop nodes pushed by another.
    use super::*;
    use core::cell::RefCell;
    use critical_section::Mutex;

    struct Work {
        active: bool,
        pending: Vec<Node>,
    }

    static WORK: Mutex<RefCell<Work>> = Mutex::new(RefCell::new(Work {
        active: false,
        pending: Vec::new(),
    }));

    pub(super) fn drop_deferred(node: Node) {
        let node = critical_section::with(|cs| {
            let mut w = WORK.borrow_ref_mut(cs);
            if w.active {
                w.pending.push(node);
                None
            } else {
                w.active = true;
                Some(node)
            }
        });
        let Some(node) = node else { return };
        let mut first = Some(node);
        drain(|| {
            first.take().or_else(|| {
                critical_section::with(|cs| {
                    let mut w = WORK.borrow_ref_mut(cs);
                    let next = w.pending.pop();
                    if next.is_none() {
                        // Deactivate in the same critical section that saw the
                        // list empty, so no push is stranded.
                        w.active = false;
                        w.pending = Vec::new();
                    }
                    next
                })
            })
        });
    }
}
