//! A per-thread free list of the fixed-size blocks that hold `Bind` nodes.
//!
//! Every combinator with a source (`flat_map`, `map`, handlers) boxes its
//! source and continuation in one block, and the run-loop frees that block a
//! moment later. The system allocator's per-thread cache holds only a few
//! blocks per size class, so a chain of 120 maps, built and then run, falls
//! through to its slow paths (the profile of the MapCalls workload showed
//! more than half of the time in `malloc`/`free`/`malloc_consolidate`).
//! Every `Bind<K>` has the same layout (a node and one erased closure), so
//! one free list per thread serves all of them: allocation and release are a
//! thread-local pointer swap.
//!
//! * A block freed on another thread than the one that allocated it simply
//!   joins that thread's list: all blocks come from the global allocator
//!   with the same layout.
//! * At most [`MAX_CACHED`] blocks are kept per thread; beyond, blocks go
//!   back to the global allocator. The list is freed when the thread ends.
//! * Without `std` (no thread-locals) blocks come straight from the global
//!   allocator.

use alloc::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use core::ptr::NonNull;

/// The layout of every block: that of a `Bind` node.
pub(crate) const BLOCK: Layout = Layout::new::<crate::node::Bind<crate::node::AnyK>>();

/// The most blocks one thread keeps for reuse.
#[cfg(feature = "std")]
const MAX_CACHED: usize = 1024;

/// A block of [`BLOCK`]'s layout, uninitialised.
#[inline]
pub(crate) fn allocate() -> NonNull<u8> {
    #[cfg(feature = "std")]
    if let Some(block) = cache::pop() {
        return block;
    }
    // SAFETY: `BLOCK` has a non-zero size.
    let ptr = unsafe { alloc(BLOCK) };
    match NonNull::new(ptr) {
        Some(p) => p,
        None => handle_alloc_error(BLOCK),
    }
}

/// Returns a block.
///
/// # Safety
/// * `block` came from [`allocate`], its contents were moved out or dropped,
///   and it is not used again.
#[inline]
pub(crate) unsafe fn release(block: NonNull<u8>) {
    #[cfg(feature = "std")]
    // SAFETY: forwarded precondition.
    let block = match unsafe { cache::push(block) } {
        None => return,
        Some(rejected) => rejected,
    };
    // SAFETY: forwarded precondition; the block has `BLOCK`'s layout.
    unsafe { dealloc(block.as_ptr(), BLOCK) }
}

#[cfg(feature = "std")]
mod cache {
    //! The free list lives in a `const`-initialised thread-local without
    //! `Drop`, which the compiler reads as a plain thread-relative access
    //! (no lazy-initialisation check on the hot path). Freeing the list when
    //! the thread ends is the job of a second thread-local, the reaper,
    //! which has a destructor and is touched only once per thread, when the
    //! list first keeps a block.
    use super::*;
    use core::cell::Cell;
    use core::ptr;

    /// An intrusive singly-linked list: a free block's first word points to
    /// the next free block.
    struct FreeList {
        head: Cell<*mut u8>,
        len: Cell<usize>,
        /// The reaper is registered (its destructor will free the list).
        armed: Cell<bool>,
        /// The reaper has run: keep nothing more.
        reaped: Cell<bool>,
    }

    struct Reaper;

    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = FREE.try_with(|list| {
                list.reaped.set(true);
                let mut next = list.head.replace(ptr::null_mut());
                list.len.set(0);
                while !next.is_null() {
                    // SAFETY: every block in the list is a live allocation of
                    // `BLOCK`'s layout whose first word holds the next pointer.
                    unsafe {
                        let block = next;
                        next = ptr::read(block.cast::<*mut u8>());
                        dealloc(block, BLOCK);
                    }
                }
            });
        }
    }

    std::thread_local! {
        static FREE: FreeList = const {
            FreeList {
                head: Cell::new(ptr::null_mut()),
                len: Cell::new(0),
                armed: Cell::new(false),
                reaped: Cell::new(false),
            }
        };
        static REAPER: Reaper = const { Reaper };
    }

    #[inline]
    pub(super) fn pop() -> Option<NonNull<u8>> {
        FREE.with(|list| {
            let head = NonNull::new(list.head.get())?;
            // SAFETY: a listed block's first word holds the next pointer.
            let next = unsafe { ptr::read(head.as_ptr().cast::<*mut u8>()) };
            list.head.set(next);
            list.len.set(list.len.get() - 1);
            Some(head)
        })
    }

    /// Keeps `block`; gives it back if the list is full or reaped.
    ///
    /// # Safety
    /// * As for [`release`](super::release).
    #[inline]
    pub(super) unsafe fn push(block: NonNull<u8>) -> Option<NonNull<u8>> {
        FREE.with(|list| {
            if list.len.get() >= MAX_CACHED || !arm(list) {
                return Some(block);
            }
            // SAFETY: the block is ours, unused, word-aligned and at least a
            // word long (`BLOCK`), so its first word can hold the link.
            unsafe { ptr::write(block.as_ptr().cast::<*mut u8>(), list.head.get()) };
            list.head.set(block.as_ptr());
            list.len.set(list.len.get() + 1);
            None
        })
    }

    /// Registers the reaper once; false once it has run.
    #[inline]
    fn arm(list: &FreeList) -> bool {
        if list.armed.get() {
            return !list.reaped.get();
        }
        list.armed.set(true);
        // Touching the reaper registers its destructor; during thread
        // teardown that is refused, and the list then keeps nothing.
        let registered = REAPER.try_with(|_| ()).is_ok();
        if !registered {
            list.reaped.set(true);
        }
        registered
    }
}

/// Reuse of fiber stacks: a fiber that completes, or suspends with an
/// empty continuation stack, leaves the stack's buffer to its thread, and
/// the next fiber to run there with no buffer takes it. Programs of many
/// short runs (`block_on` in a loop, fibers started by the thousand, two
/// fibers handing a value back and forth) reuse one buffer instead of
/// growing a new one each time, and a fiber that waits between two programs
/// holds none.
pub(crate) mod stacks {
    use alloc::vec::Vec;

    use crate::node::Frame;

    /// Stacks larger than this (in frames) are freed, not kept.
    #[cfg(feature = "std")]
    const MAX_KEPT: usize = 4096;

    #[cfg(feature = "std")]
    std::thread_local! {
        static SPARE: core::cell::Cell<Vec<Frame>> = const { core::cell::Cell::new(Vec::new()) };
    }

    /// Frames of a fresh stack: a fiber that suspends holding a frame or
    /// two (the usual `a.flat_map(wait).flat_map(rest)`) keeps a 32-byte
    /// buffer, not the 64 bytes of `Vec`'s first growth.
    const FIRST: usize = 2;

    /// A stack for a fiber that is about to run (empty, with capacity): the
    /// thread's spare one, or a fresh small one.
    #[inline]
    pub(crate) fn take() -> Vec<Frame> {
        #[cfg(feature = "std")]
        if let Ok(stack) = SPARE.try_with(|spare| spare.take())
            && stack.capacity() != 0
        {
            return stack;
        }
        Vec::with_capacity(FIRST)
    }

    /// Leaves an empty stack for the next fiber on this thread.
    #[inline]
    pub(crate) fn give(stack: Vec<Frame>) {
        debug_assert!(stack.is_empty());
        if stack.capacity() == 0 {
            return;
        }
        #[cfg(feature = "std")]
        if stack.capacity() <= MAX_KEPT {
            let _ = SPARE.try_with(|spare| {
                let previous = spare.replace(stack);
                // Keep the larger of the two.
                if previous.capacity() > 0 {
                    let current = spare.take();
                    spare.set(if current.capacity() >= previous.capacity() {
                        current
                    } else {
                        previous
                    });
                }
            });
            return;
        }
        drop(stack);
    }
}
