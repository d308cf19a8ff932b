//! What `Signal::signal` allocates and frees on the "interrupt handler"
//! side (a plain thread here), counted by a global allocator that counts
//! the allocations and frees of the current thread only.
//!
//! A binary of its own, so that the counting allocator serves only these
//! tests. The waiting fiber runs on exec-single (its remote queue is the
//! path a firmware's interrupt handlers take).

use spindle_core::{IO, IORuntime, Outcome, Signal};
use spindle_exec_single::{SingleThreaded, StdClock};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

/// Allocations (reallocations included) plus frees on this thread so far.
fn allocations() -> usize {
    counting_alloc::allocations() + counting_alloc::frees()
}

/// Runs a fiber waiting on `signal` on `rt`; a thread plays the interrupt
/// handler: once the fiber waits, it signals `value`, counting its own
/// allocations and frees over that `signal` call only. Returns the fiber's value and
/// that count.
fn wake_from_a_thread(
    rt: &SingleThreaded<StdClock>,
    signal: &'static Signal<u32>,
    value: u32,
) -> (u32, usize) {
    let io: IO<(u32, usize), ()> = signal.wait::<()>().start().flat_map(move |waiter| {
        IO::delay(move || {
            std::thread::spawn(move || {
                while signal.waiters() == 0 {
                    std::thread::yield_now();
                }
                let before = allocations();
                signal.signal(value);
                allocations() - before
            })
        })
        .flat_map(move |handler| {
            waiter
                .join_with_never()
                .map(move |v| (v, handler.join().expect("the handler thread ends")))
        })
    });
    match rt.block_on(io) {
        Ok(Outcome::Succeeded(got)) => got,
        other => panic!("the waiting fiber did not succeed: {other:?}"),
    }
}

/// Signals `values` from a new thread with nobody waiting; the allocations
/// of those calls.
fn signal_unwaited(signal: &'static Signal<u32>, values: std::ops::Range<u32>) -> usize {
    std::thread::spawn(move || {
        let before = allocations();
        for v in values {
            signal.signal(v);
        }
        allocations() - before
    })
    .join()
    .expect("the handler thread ends")
}

#[test]
fn a_signal_from_another_thread_wakes_the_waiting_fiber_without_allocating_when_the_remote_queue_has_room()
 {
    static SIG: Signal<u32> = Signal::new();
    let rt = SingleThreaded::builder()
        .remote_capacity(4)
        .build()
        .expect("build");
    for round in 0..50 {
        let (got, allocated) = wake_from_a_thread(&rt, &SIG, round);
        assert_eq!(got, round);
        assert_eq!(allocated, 0, "round {round}: the waking signal allocated");
    }
}

#[test]
fn signals_with_nobody_waiting_replace_the_value_without_allocating() {
    static SIG: Signal<u32> = Signal::new();
    assert_eq!(signal_unwaited(&SIG, 0..100), 0);
    assert_eq!((SIG.try_take(), SIG.overwritten()), (Some(99), 99));
}

#[test]
fn without_reserved_room_the_first_wake_up_from_another_thread_grows_the_remote_queue() {
    static SIG: Signal<u32> = Signal::new();
    let rt = SingleThreaded::builder().build().expect("build");
    // A signal that lands while the waiting fiber is still on its way to
    // suspending resumes it in place (no queue push): the first wake-up
    // that does go through the remote queue allocates its buffer.
    let mut grown_at = None;
    for round in 0..50 {
        let (got, allocated) = wake_from_a_thread(&rt, &SIG, round);
        assert_eq!(got, round);
        match grown_at {
            None if allocated > 0 => grown_at = Some(round),
            None => {}
            // The buffer is kept: later wake-ups find room.
            Some(_) => assert_eq!(allocated, 0, "round {round}: the buffer was kept"),
        }
    }
    assert!(
        grown_at.is_some(),
        "the remote queue's first push allocates its buffer (why remote_capacity exists)"
    );
}
