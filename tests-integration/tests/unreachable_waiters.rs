//! A fiber that can never be woken is not kept forever: a fiber waiting on
//! a `Deferred`, a `Queue`, a `Semaphore` (`acquire`, `acquire_n`,
//! `with_permit`), a `Mutex` (`with_lock`, `lock()`, used or allocated), a
//! `CountDownLatch`, or on the join of a fiber that nothing else references
//! (or holding a `Mutex` while it waits on one of those) is freed once the
//! last thing that could wake it is gone (its finalizers are not run, as a
//! garbage-collected fiber's are not), and a main fiber freed that way is a
//! `RunError::Deadlock`, as `IO::never()` is (`wait/cell.rs`, "Waits
//! nobody can end").

mod common;

use common::{
    Counter, DropCounter, HANG_LIMIT, RunError, TestRuntime, eventually, rt_test, within,
};
use spindle_core::{CountDownLatch, Deferred, IO, Mutex, Outcome, Queue, Semaphore};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

type E = ();

/// How many fibers the memory tests leave waiting.
const FIBERS: usize = if cfg!(miri) { 100 } else { 100_000 };

/// Runs `make()` as the main fiber of a fresh `R` (`try_block_on`) on
/// another thread; fails the test if it has not returned within
/// [`HANG_LIMIT`] (the symptom of a fiber kept forever).
fn try_run_within<R: TestRuntime + 'static>(
    make: impl FnOnce() -> IO<(), E> + Send + 'static,
) -> Result<Outcome<(), E>, RunError> {
    within(HANG_LIMIT, move || R::new().try_block_on(make()))
        .expect("try_block_on hung: the main fiber was kept alive although nothing can wake it")
}

/// How many kinds of wait [`wait_forever`] makes.
const KINDS: usize = 12;

/// The kinds of [`wait_forever`] that wait for a permit through
/// `with_permit`, `with_lock` or `lock()`.
const PERMIT_KINDS: std::ops::Range<usize> = 7..11;

/// A mutex locked by an allocation that was dropped without its release:
/// it stays locked, and nothing but the returned handle refers to it.
fn locked_forever(then: impl FnOnce(Mutex) -> IO<(), E> + Send + 'static) -> IO<(), E> {
    let mutex = Mutex::new();
    let handle = mutex.clone();
    mutex.lock::<E>().allocated().flat_map(move |allocated| {
        drop(allocated);
        then(handle)
    })
}

/// What a fiber waits for, forever, once its program has started: each
/// kind of wait Spindle's data types offer, on a structure that only the
/// waiting fiber references.
fn wait_forever(kind: usize) -> IO<(), E> {
    match kind % KINDS {
        0 => Deferred::<u32>::new().get().void(),
        1 => Queue::<u32>::unbounded().take().void(),
        2 => Queue::<u32>::synchronous().offer(1),
        3 => {
            let sem = Semaphore::new(1).expect("1 permit");
            sem.acquire().product_r(sem.acquire())
        }
        4 => {
            // A fiber that holds a mutex while it waits on a deferred that
            // nobody else holds (its release is a finalizer: not run).
            let mutex = Mutex::new();
            mutex.with_lock(Deferred::<u32>::new().get().void())
        }
        5 => CountDownLatch::new(1).expect("a count of 1").wait(),
        6 => IO::<(), E>::never().start().flat_map(|h| h.join().void()),
        // The first permit is taken by a bare acquire (no release will
        // come), the wait is in `with_permit`.
        7 => {
            let sem = Semaphore::new(1).expect("1 permit");
            sem.acquire().product_r(sem.with_permit(IO::unit()))
        }
        8 => locked_forever(|mutex| mutex.with_lock(IO::unit())),
        9 => locked_forever(|mutex| mutex.lock().use_with(|()| IO::unit())),
        // A composed lock (`allocated`, as `flat_map` and `both` of a lock
        // allocate).
        10 => locked_forever(|mutex| mutex.lock().allocated().void()),
        _ => Semaphore::new(1).expect("1 permit").acquire_n(2),
    }
}

/// Starts [`FIBERS`] fibers on `rt`, each waiting forever in one of the
/// `kinds` of [`wait_forever`] (in turn), and checks that every one is
/// freed (its continuation dropped) and that none runs a finalizer.
fn frees_every_waiter<R: TestRuntime>(rt: R, kinds: std::ops::Range<usize>) {
    // Each waiting fiber's continuation captures a drop counter: it is
    // dropped when the fiber is freed (its finalizers are not run).
    let count = kinds.len();
    let freed: Vec<Counter> = (0..count).map(|_| Counter::new()).collect();
    let finalized = Counter::new();
    let (f, fin) = (freed.clone(), finalized.clone());
    let start_all: IO<(), E> = IO::tail_rec(0usize, move |i| {
        if i == FIBERS {
            return IO::pure(std::ops::ControlFlow::Break(()));
        }
        let token = DropCounter(f[i % count].clone());
        let waiter = wait_forever(kinds.start + i % count)
            .map(move |()| drop(token))
            .on_cancel(fin.incr_io())
            .guarantee(fin.incr_io());
        waiter
            .start()
            .map(move |_handle| std::ops::ControlFlow::Continue(i + 1))
    });
    assert_eq!(rt.run(start_all), Outcome::Succeeded(()));
    // Fibers that nothing can wake are freed as they suspend: let the
    // runtime run every started fiber to its wait (a single-threaded
    // runtime runs only inside `block_on`), until every one is freed.
    let counters = freed.clone();
    let total = move || counters.iter().map(Counter::get).sum::<usize>();
    let all_freed = total.clone();
    // The drain stops as soon as every fiber is freed; the deadline only
    // ends a failing run. It is generous because an instrumented build
    // (AddressSanitizer in `.ci/asan`) on a loaded machine takes tens of
    // seconds to free 100,000 fibers.
    let deadline = std::time::Instant::now() + 12 * HANG_LIMIT;
    let drain: IO<(), E> = IO::tail_rec((), move |()| {
        let done = all_freed() == FIBERS || std::time::Instant::now() > deadline;
        IO::cede().map(move |()| {
            if done {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
    });
    assert_eq!(rt.run(drain), Outcome::Succeeded(()));
    let per_kind: Vec<usize> = freed.iter().map(Counter::get).collect();
    let expected: Vec<usize> = (0..count).map(|k| (FIBERS - k).div_ceil(count)).collect();
    assert_eq!(per_kind, expected, "waiting fibers freed, per kind of wait");
    assert_eq!(finalized.get(), 0, "no finalizer of a freed fiber runs");
    // The runtime still works.
    assert_eq!(rt.run(IO::<u32, E>::pure(7)), Outcome::Succeeded(7));
}

rt_test! {
    fn a_main_fiber_waiting_on_a_deferred_nobody_else_holds_is_a_deadlock() {
        let got = try_run_within::<Rt>(|| Deferred::<u32>::new().get().void());
        assert_eq!(got, Err(RunError::Deadlock));
    }

    fn a_main_fiber_taking_from_a_queue_nobody_else_holds_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(1)), Err(RunError::Deadlock));
        assert_eq!(try_run_within::<Rt>(|| wait_forever(2)), Err(RunError::Deadlock));
    }

    fn a_main_fiber_waiting_for_a_permit_nobody_else_can_release_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(3)), Err(RunError::Deadlock));
    }

    fn a_main_fiber_holding_a_mutex_while_it_waits_on_what_nobody_holds_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(4)), Err(RunError::Deadlock));
    }

    fn a_main_fiber_waiting_on_a_latch_nobody_else_holds_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(5)), Err(RunError::Deadlock));
    }

    fn a_main_fiber_joining_a_fiber_nothing_else_references_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(6)), Err(RunError::Deadlock));
    }

    fn a_hundred_thousand_fibers_waiting_on_structures_nobody_holds_are_freed() {
        frees_every_waiter(rt(), 0..KINDS);
    }

    fn a_hundred_thousand_fibers_waiting_for_a_permit_or_a_lock_nobody_else_holds_are_freed() {
        frees_every_waiter(rt(), PERMIT_KINDS);
    }

    fn a_main_fiber_waiting_in_with_permit_for_a_semaphore_nobody_else_holds_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(7)), Err(RunError::Deadlock));
    }

    fn a_main_fiber_waiting_in_with_lock_or_lock_for_a_mutex_nobody_else_holds_is_a_deadlock() {
        for kind in 8..11 {
            assert_eq!(try_run_within::<Rt>(move || wait_forever(kind)), Err(RunError::Deadlock), "{kind}");
        }
    }

    fn a_main_fiber_waiting_in_acquire_n_for_permits_nobody_can_release_is_a_deadlock() {
        assert_eq!(try_run_within::<Rt>(|| wait_forever(11)), Err(RunError::Deadlock));
    }

    fn a_with_lock_waiter_is_granted_the_lock_after_every_other_handle_is_gone() {
        // The holder keeps the mutex (through its release) while it holds
        // the lock; the waiter holds it only weakly while it waits. The
        // holder's release grants the waiter the lock with a strong
        // reference, so the waiter runs and releases although no handle is
        // left by then: nothing is freed, nothing hangs.
        let ran = Counter::new();
        let r = ran.clone();
        let io: IO<(), E> = IO::defer(move || {
            let mutex = Mutex::new();
            let (gate, held) = (Deferred::<()>::new(), Deferred::<()>::new());
            let (opened, waiter, holding) = (gate.clone(), mutex.clone(), held.clone());
            let holder = mutex.with_lock(
                held.complete::<E>(())
                    .product_r(gate.get())
                    .product_r(IO::cede()),
            );
            holder.start().product_l(holding.get()).flat_map(move |h| {
                let w = waiter.clone();
                waiter.with_lock(r.incr_io::<E>()).start().flat_map(move |wh| {
                    eventually(move || w.waiting() == 1)
                        .product_r(opened.complete(()))
                        .product_r(h.join_void())
                        .product_r(wh.join_void())
                })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(ran.get(), 1);
    }

    fn dropping_a_runtime_frees_its_sleeping_fibers_and_those_waiting_on_structures_dropped_since() {
        // Half the fibers sleep (the runtime's timers hold them), half wait
        // on a deferred the test holds until the runtime is gone.
        const EACH: usize = if cfg!(miri) { 50 } else { 5_000 };
        let freed = Counter::new();
        let d = Deferred::<u32>::new();
        let rt = rt();
        let (f, gate) = (freed.clone(), d.clone());
        let start_all: IO<(), E> = IO::tail_rec(0usize, move |i| {
            if i == 2 * EACH {
                return IO::pure(std::ops::ControlFlow::Break(()));
            }
            let token = DropCounter(f.clone());
            let wait = if i % 2 == 0 {
                IO::<(), E>::sleep(std::time::Duration::from_secs(3600))
            } else {
                gate.get().void()
            };
            wait.map(move |()| drop(token))
                .start()
                .map(move |_handle| std::ops::ControlFlow::Continue(i + 1))
        });
        assert_eq!(rt.run(start_all), Outcome::Succeeded(()));
        drop(rt);
        drop(d);
        // The wait stops as soon as every fiber is freed; the deadline only
        // ends a failing run (generous, as above, for instrumented builds).
        let deadline = std::time::Instant::now() + 12 * HANG_LIMIT;
        while freed.get() < 2 * EACH && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(freed.get(), 2 * EACH);
    }

    fn a_fiber_that_can_still_be_woken_is_kept() {
        // The deferred is held by the program that completes it later: the
        // waiter is not freed, and gets the value.
        let d = Deferred::<u32>::new();
        let (d1, d2) = (d.clone(), d);
        let io: IO<u32, E> = d1.get::<E>().start().flat_map(move |h| {
            IO::<(), E>::cede()
                .product_r(d2.complete(5))
                .product_r(h.join_with_never())
        });
        assert_eq!(run(io), Outcome::Succeeded(5));
    }

    fn canceling_a_wait_whose_structure_is_gone_does_nothing_and_finalizes() {
        // The handle keeps the fiber, not the deferred: once the deferred is
        // gone the fiber cannot be woken, yet it can still be canceled, and
        // then runs its finalizers.
        let finalized = Counter::new();
        let fin = finalized.clone();
        let waiting = Arc::new(AtomicBool::new(false));
        let flag = waiting.clone();
        let io: IO<Outcome<u32, E>, E> = IO::delay(move || flag.store(true, Ordering::SeqCst))
            .product_r(Deferred::<u32>::new().get::<E>())
            .on_cancel(fin.incr_io())
            .start()
            .flat_map(move |h| {
                eventually(move || waiting.load(Ordering::SeqCst))
                    .product_r(h.cancel())
                    .product_r(h.join())
            });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(finalized.get(), 1);
    }
}
