//! Real parallel work stays parallel: two CPU-bound children of a fiber
//! that runs on a worker run at the same time on the pool's two workers,
//! though the pool wakes a sleeping worker for the fibers a worker pushes
//! only once the fiber that pushed them stops running (`worker.rs`).
//!
//! Each child is one step that never yields: it spins until the other
//! child has started. On one worker the first child would spin forever
//! (the hang guard gives up and the test fails), so the children finishing
//! proves that they overlapped on two workers.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{HANG_LIMIT, runtime, within};
use spindle_core::{IO, IORuntime};

type E = ();

/// One step that never yields: counts itself as started, then spins until
/// `started` reaches 2; true if it did, false if it gave up after
/// [`HANG_LIMIT`] (the hang guard).
fn spin_until_both_started(started: Arc<AtomicUsize>) -> IO<bool, E> {
    IO::delay(move || {
        started.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while started.load(Ordering::SeqCst) < 2 {
            if start.elapsed() > HANG_LIMIT {
                return false;
            }
            std::hint::spin_loop();
        }
        true
    })
}

/// Runs `parent` as a fiber on a worker (`block_on`'s own fiber runs on
/// the calling thread) and gives its value.
fn on_a_worker(parent: IO<(bool, bool), E>) -> (bool, bool) {
    let rt = runtime(2);
    within("two spinning children", HANG_LIMIT * 2, move || {
        rt.block_on(parent.start::<E>().flat_map(|fiber| fiber.join()))
            .expect("runs")
            .succeeded()
            .expect("the parent succeeds")
            .succeeded()
            .expect("the fiber succeeds")
    })
}

/// Starts `first`, then `second`, as fibers of their own, then joins both
/// and gives their values.
fn start_both_then_join(first: IO<bool, E>, second: IO<bool, E>) -> IO<(bool, bool), E> {
    first.start().flat_map(move |first| {
        second.start().flat_map(move |second| {
            first.join().flat_map(move |a| {
                second.join().map(move |b| {
                    (
                        a.succeeded().expect("the first succeeds"),
                        b.succeeded().expect("the second succeeds"),
                    )
                })
            })
        })
    })
}

#[test]
fn the_two_cpu_bound_sides_of_both_on_a_worker_run_at_the_same_time_on_two_workers() {
    let started = Arc::new(AtomicUsize::new(0));
    let parent = spin_until_both_started(started.clone()).both(spin_until_both_started(started));
    assert_eq!(
        on_a_worker(parent),
        (true, true),
        "each side saw the other start while it spun"
    );
}

#[test]
fn two_cpu_bound_fibers_started_by_a_fiber_on_a_worker_run_at_the_same_time_on_two_workers() {
    let started = Arc::new(AtomicUsize::new(0));
    let parent = start_both_then_join(
        spin_until_both_started(started.clone()),
        spin_until_both_started(started),
    );
    assert_eq!(
        on_a_worker(parent),
        (true, true),
        "each fiber saw the other start while it spun"
    );
}
