//! The heap: embedded-alloc's, counting the allocations made while an
//! interrupt handler runs (the handlers must make none; each program checks
//! the count at its end). Shared by both programs; each declares the
//! `#[global_allocator]` static itself (the architecture's entry point
//! gives it its memory through `crate::HEAP`).

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use embedded_alloc::LlffHeap;

/// Whether an interrupt handler of the program is running (set and
/// cleared by the program's handlers, which do not nest).
pub static IN_HANDLER: AtomicBool = AtomicBool::new(false);

/// Allocations made while an interrupt handler ran: the handlers must make
/// none (the program checks it).
pub static HANDLER_ALLOCS: AtomicU32 = AtomicU32::new(0);

/// embedded-alloc's heap, counting the allocations made in interrupt
/// handlers.
pub struct Heap(LlffHeap);

impl Heap {
    /// A heap without memory yet ([`Heap::init`] gives it some).
    pub const fn empty() -> Self {
        Heap(LlffHeap::empty())
    }

    /// Gives the heap its memory.
    ///
    /// # Safety
    ///
    /// As `LlffHeap::init`: called once, before any allocation, with memory
    /// used by nothing else.
    pub unsafe fn init(&self, start: usize, size: usize) {
        // SAFETY: the caller's contract is `LlffHeap::init`'s.
        unsafe { self.0.init(start, size) }
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.0.used()
    }
}

// SAFETY: every call is forwarded unchanged to embedded-alloc's heap; the
// count beside it touches no memory of the heap's.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if IN_HANDLER.load(Ordering::Relaxed) {
            // Only handlers write it, and they do not nest.
            HANDLER_ALLOCS.store(
                HANDLER_ALLOCS.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
        }
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `GlobalAlloc::dealloc`'s; `ptr`
        // came from `alloc` above, that is from the same heap.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}
