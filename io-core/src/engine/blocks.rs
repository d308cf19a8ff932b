//! Per-thread free lists of the fixed-size blocks that hold `Bind` nodes
//! (and erased payloads of that size), and of blocks two and four times
//! that size (larger erased payloads: closures that capture a few buffers
//! and handles, a connection's state).
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
pub(crate) const BLOCK: Layout =
    Layout::new::<crate::engine::node::Bind<crate::engine::node::AnyK>>();

/// The layout of a large block: twice a [`BLOCK`], for the erased values
/// and closures too large for a block and up to twice that (with tracing,
/// a block is five words; without, four) that would otherwise each be a
/// `Box` (a socket operation's retry state, a closure capturing a buffer
/// and a few handles).
pub(crate) const LARGE_BLOCK: Layout = times(2);

/// The layout of a huge block: four [`BLOCK`]s, for the payloads of up to
/// 16 (or 20, with tracing) words: a continuation that captures a
/// connection's whole state, as an `async` block's state machine would
/// hold it.
pub(crate) const HUGE_BLOCK: Layout = times(4);

const fn times(n: usize) -> Layout {
    match Layout::from_size_align(n * BLOCK.size(), BLOCK.align()) {
        Ok(layout) => layout,
        Err(_) => panic!("io-core: a few blocks make a valid layout"),
    }
}

/// The size classes: [`BLOCK`], [`LARGE_BLOCK`] and [`HUGE_BLOCK`], each
/// with its own free list.
#[derive(Clone, Copy)]
pub(crate) enum Class {
    Small = 0,
    Large = 1,
    Huge = 2,
}

impl Class {
    /// Every class, in index order (the std free lists are one per class).
    #[cfg(feature = "std")]
    const ALL: [Class; 3] = [Class::Small, Class::Large, Class::Huge];

    #[inline(always)]
    const fn layout(self) -> Layout {
        match self {
            Class::Small => BLOCK,
            Class::Large => LARGE_BLOCK,
            Class::Huge => HUGE_BLOCK,
        }
    }
}

/// The most blocks one thread keeps for reuse, per class.
#[cfg(feature = "std")]
const MAX_CACHED: usize = 1024;

/// A block of [`BLOCK`]'s layout, uninitialised.
#[inline]
pub(crate) fn allocate() -> NonNull<u8> {
    allocate_in(Class::Small)
}

/// Returns a block of [`BLOCK`]'s layout.
///
/// # Safety
/// * `block` came from [`allocate`], its contents were moved out or dropped,
///   and it is not used again.
#[inline]
pub(crate) unsafe fn release(block: NonNull<u8>) {
    // SAFETY: forwarded precondition.
    unsafe { release_in(Class::Small, block) }
}

/// A block of `class`, uninitialised.
#[inline]
pub(crate) fn allocate_in(class: Class) -> NonNull<u8> {
    #[cfg(feature = "std")]
    if let Some(block) = cache::pop(class) {
        return block;
    }
    allocate_new(class)
}

/// A block from the global allocator: out of line, so that the code that
/// builds a node inlines only the free list's fast path (and stays small
/// enough for the compiler to inline the user's function that builds it).
#[cold]
#[inline(never)]
fn allocate_new(class: Class) -> NonNull<u8> {
    let layout = class.layout();
    // SAFETY: both layouts have a non-zero size.
    let ptr = unsafe { alloc(layout) };
    match NonNull::new(ptr) {
        Some(p) => p,
        None => handle_alloc_error(layout),
    }
}

/// Returns a block of `class`.
///
/// # Safety
/// * `block` came from [`allocate_in`] with the same `class` (or from
///   [`allocate`] for [`Class::Small`]), its contents were moved out or
///   dropped, and it is not used again.
#[inline]
pub(crate) unsafe fn release_in(class: Class, block: NonNull<u8>) {
    #[cfg(feature = "std")]
    // SAFETY: forwarded precondition.
    let block = match unsafe { cache::push(class, block) } {
        None => return,
        Some(rejected) => rejected,
    };
    // SAFETY: forwarded precondition; the block has `class`'s layout.
    unsafe { dealloc(block.as_ptr(), class.layout()) }
}

#[cfg(feature = "std")]
mod cache {
    //! The free lists live in a `const`-initialised thread-local without
    //! `Drop`, which the compiler reads as a plain thread-relative access
    //! (no lazy-initialisation check on the hot path). Freeing the lists
    //! when the thread ends is the job of a second thread-local, the
    //! reaper, which has a destructor and is touched only once per thread,
    //! when a list first keeps a block.
    use super::*;
    use core::cell::Cell;
    use core::ptr;

    /// An intrusive singly-linked list: a free block's first word points to
    /// the next free block.
    struct FreeList {
        head: Cell<*mut u8>,
        len: Cell<usize>,
    }

    /// The lists of a thread, one per [`Class`].
    struct Lists {
        lists: [FreeList; 3],
        /// The reaper is registered (its destructor will free the lists).
        armed: Cell<bool>,
        /// The reaper has run: keep nothing more.
        reaped: Cell<bool>,
    }

    struct Reaper;

    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = FREE.try_with(|lists| {
                lists.reaped.set(true);
                for class in Class::ALL {
                    let list = &lists.lists[class as usize];
                    let mut next = list.head.replace(ptr::null_mut());
                    list.len.set(0);
                    while !next.is_null() {
                        // SAFETY: every block in the list is a live
                        // allocation of `class`'s layout whose first word
                        // holds the next pointer.
                        unsafe {
                            let block = next;
                            next = ptr::read(block.cast::<*mut u8>());
                            dealloc(block, class.layout());
                        }
                    }
                }
            });
        }
    }

    std::thread_local! {
        static FREE: Lists = const {
            Lists {
                lists: [
                    FreeList { head: Cell::new(ptr::null_mut()), len: Cell::new(0) },
                    FreeList { head: Cell::new(ptr::null_mut()), len: Cell::new(0) },
                    FreeList { head: Cell::new(ptr::null_mut()), len: Cell::new(0) },
                ],
                armed: Cell::new(false),
                reaped: Cell::new(false),
            }
        };
        static REAPER: Reaper = const { Reaper };
    }

    #[inline]
    pub(super) fn pop(class: Class) -> Option<NonNull<u8>> {
        FREE.with(|lists| {
            let list = &lists.lists[class as usize];
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
    /// * As for [`release_in`](super::release_in).
    #[inline]
    pub(super) unsafe fn push(class: Class, block: NonNull<u8>) -> Option<NonNull<u8>> {
        FREE.with(|lists| {
            let list = &lists.lists[class as usize];
            if list.len.get() >= MAX_CACHED || !arm(lists) {
                return Some(block);
            }
            // SAFETY: the block is ours, unused, word-aligned and at least a
            // word long (both layouts), so its first word can hold the link.
            unsafe { ptr::write(block.as_ptr().cast::<*mut u8>(), list.head.get()) };
            list.head.set(block.as_ptr());
            list.len.set(list.len.get() + 1);
            None
        })
    }

    /// Registers the reaper once; false once it has run.
    #[inline]
    fn arm(lists: &Lists) -> bool {
        if lists.armed.get() {
            return !lists.reaped.get();
        }
        lists.armed.set(true);
        // Touching the reaper registers its destructor; during thread
        // teardown that is refused, and the lists then keep nothing.
        let registered = REAPER.try_with(|_| ()).is_ok();
        if !registered {
            lists.reaped.set(true);
        }
        registered
    }
}

/// An owned `T` in a block of the pool, as a `Box` holds one in its own
/// allocation: for the small structures made and dropped on hot paths
/// whose size is not a node's (a joined fiber's waiter list, a fiber's
/// rarely used state), so that making one is, with `std`, a thread-local
/// pointer swap rather than a `malloc`. A `T` that fits no block (or any
/// `T` without `std`, where the pool keeps no free lists and a block would
/// only be larger than the `T`) is in a `Box`.
pub(crate) struct PoolBox<T> {
    ptr: NonNull<T>,
    _owns: core::marker::PhantomData<T>,
}

// SAFETY: a `PoolBox` owns its `T` as a `Box` does.
unsafe impl<T: Send> Send for PoolBox<T> {}
// SAFETY: as above: shared access gives only `&T`.
unsafe impl<T: Sync> Sync for PoolBox<T> {}

impl<T> PoolBox<T> {
    /// The class of the `T`'s block; `None`: a `Box`.
    const CLASS: Option<Class> = if !cfg!(feature = "std") {
        None
    } else if fits(BLOCK, Layout::new::<T>()) {
        Some(Class::Small)
    } else if fits(LARGE_BLOCK, Layout::new::<T>()) {
        Some(Class::Large)
    } else if fits(HUGE_BLOCK, Layout::new::<T>()) {
        Some(Class::Huge)
    } else {
        None
    };

    /// Moves `t` into a block (or a `Box`).
    #[inline]
    pub(crate) fn new(t: T) -> Self {
        let ptr = match Self::CLASS {
            Some(class) => {
                let block = allocate_in(class).cast::<T>();
                // SAFETY: a fresh block of `class`, large and aligned enough
                // for a `T` (checked by `CLASS`).
                unsafe { block.as_ptr().write(t) };
                block
            }
            None => NonNull::from(alloc::boxed::Box::leak(alloc::boxed::Box::new(t))),
        };
        PoolBox {
            ptr,
            _owns: core::marker::PhantomData,
        }
    }
}

/// Whether a value of `layout` fits in a block of `block`.
const fn fits(block: Layout, layout: Layout) -> bool {
    layout.size() <= block.size() && layout.align() <= block.align()
}

impl<T> core::ops::Deref for PoolBox<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the `T` is alive and owned by this box until its drop.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> core::ops::DerefMut for PoolBox<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes the access unique.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for PoolBox<T> {
    #[inline]
    fn drop(&mut self) {
        match Self::CLASS {
            // SAFETY: `new` wrote the `T` into a block of `class` (the same
            // `CLASS`); it is dropped once here, and the block is not used
            // again.
            Some(class) => unsafe {
                core::ptr::drop_in_place(self.ptr.as_ptr());
                release_in(class, self.ptr.cast());
            },
            // SAFETY: made by `Box::leak` in `new`, freed once here.
            None => drop(unsafe { alloc::boxed::Box::from_raw(self.ptr.as_ptr()) }),
        }
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

    use crate::engine::node::Frame;

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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Class, PoolBox};
    use alloc::sync::Arc;
    use core::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>, [usize; 2]);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_pool_box_holds_its_value_and_drops_it_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut small = PoolBox::new(Counted(drops.clone(), [1, 2]));
        small.1[0] = 7;
        assert_eq!(small.1, [7, 2]);
        // Too large for any block: a `Box`, with the same behaviour.
        let large = PoolBox::new((Counted(drops.clone(), [3, 4]), [0u8; 1024]));
        assert_eq!(large.0.1, [3, 4]);
        drop(small);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(large);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_pool_box_takes_the_smallest_block_that_fits_and_a_box_beyond() {
        assert!(matches!(PoolBox::<[usize; 2]>::CLASS, Some(Class::Small)));
        assert!(matches!(
            PoolBox::<[usize; 7]>::CLASS,
            Some(Class::Large | Class::Huge)
        ));
        assert!(PoolBox::<[u8; 4096]>::CLASS.is_none());
        // A block freed by one box is taken again by the next.
        let first = PoolBox::new([1usize, 2]);
        let at = (&*first as *const [usize; 2]).addr();
        drop(first);
        let second = PoolBox::new([3usize, 4]);
        assert_eq!((&*second as *const [usize; 2]).addr(), at);
        assert_eq!(*second, [3, 4]);
    }
}
