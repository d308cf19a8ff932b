//! Trace rings are not made per fiber: a run of a fiber without a ring of
//! its own records into its thread's scratch ring (made once per thread,
//! at the first run that traces), and the fiber adopts that ring only if
//! it recorded and lives on after the run (it suspended or yielded). A
//! fiber that ends within its first run, however much it recorded,
//! allocates no ring; a fiber in mode `none` allocates none until a traced
//! scope runs.
//!
//! A global allocator counts, per thread, the allocations of the size of a
//! ring (`TRACE_CAPACITY` events of two pointers each: an operation and a
//! call site, 8 KiB on a 64-bit target, plus the ring's header, a few
//! words, in the same allocation; a size nothing else in these runs
//! allocates). Each run builds an exec-single
//! executor (which runs its fibers on the thread that calls `block_on`)
//! on a thread of its own, so that no ring freed earlier on that thread
//! is waiting to be reused (`spare_rings` in io-core's
//! `engine/tracing/fiber_on.rs`) and every ring made is an allocation counted. The
//! fiber measured is the main fiber of one `block_on`, started and run to
//! completion while the count runs. The counts of the fibers that do record
//! (one ring each) show that the method sees a ring when there is one.
//!
//! A binary of its own, so that the counting allocator serves only these
//! tests; compiled out with tracing (no ring exists then).

#![cfg(feature = "tracing")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spindle_core::{FiberConfig, IO, IORuntime, RuntimeBuilder, TracingMode};
use spindle_exec_single::SingleThreaded;

/// Events per fiber in these runs: a ring (slots and header) is an
/// allocation of a size nothing else here makes.
const TRACE_CAPACITY: usize = 512;

/// The bytes of a ring's slots: an operation pointer and a call-site
/// pointer per event (`spindle_trace::Ring`).
const RING_SLOTS_BYTES: usize = TRACE_CAPACITY * 2 * size_of::<usize>();

/// The most a ring's header adds to its slots in its allocation: two
/// words, with full mode's sites a `Vec` more; eight words is room enough.
const RING_HEADER_MAX: usize = 8 * size_of::<[usize; 1]>();

struct Counting;

thread_local! {
    /// Allocations of a ring's size on this thread, while `WATCHING`.
    static RINGS: Cell<usize> = const { Cell::new(0) };
    /// Allocations of any size on this thread, while `WATCHING`.
    static ALL: Cell<usize> = const { Cell::new(0) };
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    let _ = WATCHING.try_with(|watching| {
        if watching.get() {
            let _ = ALL.try_with(|n| n.set(n.get() + 1));
        }
    });
    if (RING_SLOTS_BYTES..=RING_SLOTS_BYTES + RING_HEADER_MAX).contains(&size) {
        let _ = WATCHING.try_with(|watching| {
            if watching.get() {
                let _ = RINGS.try_with(|n| n.set(n.get() + 1));
            }
        });
    }
}

// SAFETY: forwards every call to `System` unchanged; the count is in
// thread-local `Cell`s (no allocation, no re-entrance).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An exec-single executor in tracing mode `mode`, keeping
/// `TRACE_CAPACITY` events per fiber.
fn runtime(mode: TracingMode) -> SingleThreaded<spindle_exec_single::StdClock> {
    let config = FiberConfig::builder()
        .tracing(mode)
        .trace_capacity(TRACE_CAPACITY)
        .build()
        .unwrap();
    SingleThreaded::builder()
        .fiber_config(config)
        .build()
        .unwrap()
}

/// The ring-sized allocations made while a fresh exec-single executor in
/// tracing mode `mode` runs `make()`'s program as its main fiber, on a
/// thread of its own.
fn rings_allocated(mode: TracingMode, make: fn() -> IO<u64, ()>) -> usize {
    rings_allocated_by_runs(mode, make, 1)
}

/// As [`rings_allocated`], for `runs` programs run one after the other by
/// one executor on one thread.
fn rings_allocated_by_runs(mode: TracingMode, make: fn() -> IO<u64, ()>, runs: usize) -> usize {
    std::thread::spawn(move || {
        let rt = runtime(mode);
        for _ in 0..runs {
            let program = make();
            WATCHING.with(|w| w.set(true));
            let outcome = rt.block_on(program);
            WATCHING.with(|w| w.set(false));
            assert!(outcome.unwrap().is_succeeded(), "the program succeeds");
        }
        RINGS.with(Cell::get)
    })
    .join()
    .unwrap()
}

#[test]
fn fibers_that_end_within_their_first_run_share_the_scratch_ring_of_their_thread() {
    // A hundred main fibers, one after the other, each recording two
    // events and ending in its first run: one ring in all, the thread's.
    assert_eq!(
        rings_allocated_by_runs(
            TracingMode::Cached,
            || IO::delay(|| 1).flat_map(|x| IO::delay(move || x + 1)),
            100
        ),
        1
    );
    // Fibers that record nothing do not even make the thread's ring twice.
    assert_eq!(
        rings_allocated_by_runs(TracingMode::Cached, || IO::pure(1), 10),
        1
    );
}

#[test]
fn a_fiber_that_suspends_after_recording_keeps_the_ring_and_its_children_share_another() {
    // The main fiber records (`start`) and suspends in its first `join`:
    // it adopts the scratch ring. Its hundred children, each ending in its
    // first run on the same thread, share one new scratch ring.
    fn program() -> IO<u64, ()> {
        IO::traverse((0..100u64).collect(), |i| IO::delay(move || i).start())
            .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
            .map(|values| values.into_iter().sum())
    }
    // (Before the scratch ring, each of the 101 fibers made one.)
    assert_eq!(rings_allocated(TracingMode::Cached, program), 2);
}

#[test]
fn a_fiber_in_mode_none_allocates_a_trace_ring_only_once_a_traced_scope_records() {
    // Traced operations, but mode `none` and no traced scope: nothing is
    // recorded, so no ring.
    assert_eq!(
        rings_allocated(TracingMode::None, || IO::delay(|| 1).map(|x| x + 1)),
        0
    );
    // The same program inside `traced()`: its events are recorded, in a
    // ring made then.
    assert_eq!(
        rings_allocated(TracingMode::None, || IO::delay(|| 1)
            .map(|x| x + 1)
            .traced()),
        1
    );
}

#[test]
fn recording_twenty_thousand_events_allocates_nothing_per_event() {
    // 10,000 steps of `delay` then `flat_map` (two events each, 20,000 in
    // all) in mode `cached`, on a fresh thread: whatever the run allocates
    // (the fiber, its stack, the thread's scratch ring, the first pooled
    // blocks), it is a few dozen allocations, not one per event.
    fn steps(i: u64) -> IO<u64, ()> {
        if i < 10_000 {
            IO::delay(move || i + 1).flat_map(steps)
        } else {
            IO::pure(i)
        }
    }
    let allocations = std::thread::spawn(|| {
        let rt = runtime(TracingMode::Cached);
        let program = steps(0);
        WATCHING.with(|w| w.set(true));
        let outcome = rt.block_on(program);
        WATCHING.with(|w| w.set(false));
        assert_eq!(outcome.unwrap().succeeded(), Some(10_000));
        ALL.with(Cell::get)
    })
    .join()
    .unwrap();
    assert!(
        allocations < 64,
        "{allocations} allocations for 20,000 recorded events"
    );
}
