//! What a future step allocates, counted by a global allocator that counts
//! the allocations of the current thread (exec-single runs its fibers on
//! the thread that calls `block_on`, so other threads' noise is left out).
//!
//! A binary of its own, so that the counting allocator serves only these
//! tests. Print the table with `cargo test -p spindle-tests-integration
//! --test futures_alloc -- --nocapture`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_single::{SingleThreaded, StdClock};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations;

/// Allocations made while building and running `make()`'s program (the
/// median of several runs, after warming up the executor's pools).
fn count(rt: &SingleThreaded<StdClock>, make: impl Fn() -> IO<u64, ()>) -> usize {
    for _ in 0..8 {
        let _ = rt.block_on(make());
    }
    let mut counts: Vec<usize> = (0..9)
        .map(|_| {
            let before = allocations();
            let outcome = rt.block_on(make());
            let after = allocations();
            assert!(matches!(outcome, Ok(Outcome::Succeeded(_))));
            after - before
        })
        .collect();
    counts.sort_unstable();
    counts[counts.len() / 2]
}

/// Ready at once, and zero-sized: its box is no allocation.
struct ReadyNow;

impl Future for ReadyNow {
    type Output = u64;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u64> {
        Poll::Ready(1)
    }
}

/// Pending once (cloning its waker and waking the clone), then ready: the
/// path that needs the shared wake cell.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = u64;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        if self.0 {
            return Poll::Ready(1);
        }
        self.0 = true;
        let waker = cx.waker().clone();
        waker.wake();
        Poll::Pending
    }
}

#[test]
fn a_ready_future_allocates_nothing_more_than_a_delay_step() {
    let rt = SingleThreaded::new().unwrap();
    let pure = count(&rt, || IO::pure(1));
    let delay = count(&rt, || IO::delay(|| 1));
    let two_delays = count(&rt, || {
        IO::delay(|| 1).flat_map(|x| IO::delay(move || x + 1))
    });
    let ready = count(&rt, || IO::from_future(async { 1 }));
    let ready_zst = count(&rt, || IO::from_future(ReadyNow));
    let lazy = count(&rt, || IO::from_future_with(|| async { 1 }));
    let pending_once = count(&rt, || IO::from_future(PendingOnce(false)));
    println!("allocations per block_on (median of 9, exec-single):");
    println!("  IO::pure                          {pure}");
    println!("  IO::delay                         {delay}");
    println!("  two delay steps                   {two_delays}");
    println!("  from_future(ready)                {ready}");
    println!("  from_future(zero-sized, ready)    {ready_zst}");
    println!("  from_future_with(ready)           {lazy}");
    println!("  from_future(pending once, woken)  {pending_once}");
    // A small ready future is pinned in a block of the per-thread pool
    // (reused: no allocation once the pool is warm, as `count` makes it)
    // and polled with a waker on the stack (no wake cell): no allocation
    // beyond a delay step's.
    assert!(ready <= delay, "ready {ready}, delay {delay}");
    assert!(lazy <= delay, "lazy {lazy}, delay {delay}");
    // A zero-sized future takes no block at all.
    assert!(ready_zst <= delay, "zero-sized {ready_zst}, delay {delay}");
    // The pending path adds the shared wake cell, once; the wait itself
    // (a callback suspension and its continuation) allocates nothing more
    // here.
    assert!(pending_once <= delay + 1, "pending once {pending_once}");
}
