//! `Mutex` (mutual exclusion, the lock as a `Resource`, served under storms
//! of short timeouts and cancellation) and `CountDownLatch` (opens after n
//! releases).

mod common;

use common::{Counter, Log, eventually, rt_test, yield_after_every_step};
use spindle_core::error::{InvalidCount, TimeoutError};
use spindle_core::{CountDownLatch, Deferred, IO, Mutex, Outcome, Resource, UIO};
use spindle_exec_single::testkit::TestControl;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Error {
    TimedOut,
    Failed(&'static str),
}

impl From<TimeoutError> for Error {
    fn from(_: TimeoutError) -> Self {
        Error::TimedOut
    }
}

type E = Error;

/// [`common::cancel_after`] for this file's error type.
fn cancel_after(steps: usize, holder: IO<(), E>) -> IO<Outcome<(), E>, E> {
    common::cancel_after(steps, holder)
}

/// Whether the lock can be taken now: succeeds at once on a free lock,
/// times out (generously) on a held one. (Through `with_lock`: a wait in
/// `lock()` cannot be canceled by the timeout, see the ignored test below.)
fn lock_is_free(mutex: &Mutex) -> IO<bool, E> {
    mutex
        .with_lock(IO::pure(true))
        .timeout(Duration::from_secs(2))
        .handle_error(|_| false)
}

/// Whether the lock is held by someone else: waiting for it a short while
/// times out.
fn lock_is_held(mutex: &Mutex) -> IO<bool, E> {
    mutex
        .with_lock(IO::pure(false))
        .timeout(Duration::from_millis(50))
        .handle_error(|e| e == Error::TimedOut)
}

/// Whether `mutex` has exactly one permit: its lock can be taken (within a
/// generous timeout), and is then held (no second permit was given back by
/// a double release). A mutex has no permit count to read; its `Debug`
/// says whether it is locked.
fn exactly_one_permit(mutex: &Mutex) -> IO<bool, E> {
    let inside = mutex.clone();
    mutex
        .with_lock(IO::delay(move || {
            format!("{inside:?}").contains("locked: true")
        }))
        .timeout(Duration::from_secs(2))
        .handle_error(|_| false)
}

/// Waits until `n` fibers wait for `mutex` (a `cede` does not ensure that a
/// started fiber waits already on a multi-threaded executor).
fn waiting_for(mutex: &Mutex, n: usize) -> IO<(), E> {
    let mutex = mutex.clone();
    eventually(move || mutex.waiting() == n)
}

/// Counts how many programs are inside the lock at once.
#[derive(Clone, Default)]
struct Inside {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Inside {
    fn critical_section(&self) -> IO<(), E> {
        let (enter, leave) = (self.clone(), self.clone());
        IO::delay(move || {
            let n = enter.now.fetch_add(1, Ordering::SeqCst) + 1;
            enter.peak.fetch_max(n, Ordering::SeqCst);
        })
        .product_r(IO::cede())
        .product_r(IO::sleep(Duration::from_micros(100)))
        .product_r(IO::delay(move || {
            leave.now.fetch_sub(1, Ordering::SeqCst);
        }))
    }
}

rt_test! {
    // ----- Mutex --------------------------------------------------------------------

    fn lock_gives_mutual_exclusion_between_many_fibers() {
        let mutex = Mutex::new();
        let inside = Inside::default();
        let (m, i) = (mutex.clone(), inside.clone());
        let io = IO::<(), E>::par_traverse((0..20u32).collect(), move |_| {
            let i = i.clone();
            m.lock().use_with(move |_| i.critical_section())
        });
        assert!(run(io).is_succeeded());
        assert_eq!(inside.peak.load(Ordering::SeqCst), 1);
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true));
    }

    fn with_lock_gives_mutual_exclusion_between_many_fibers() {
        let mutex = Mutex::new();
        let inside = Inside::default();
        let (m, i) = (mutex.clone(), inside.clone());
        let io = IO::<(), E>::par_traverse((0..20u32).collect(), move |_| {
            m.with_lock(i.critical_section())
        });
        assert!(run(io).is_succeeded());
        assert_eq!(inside.peak.load(Ordering::SeqCst), 1);
    }

    fn a_mutex_keeps_serving_the_fibers_that_run_while_woken_ones_time_out() {
        // Fibers lock (`with_lock`, or `lock().use_with`), each under a
        // 0-2 ms timeout, some canceled at random (`common::storm`);
        // one holder in 32 yields while it holds, so that fibers wait
        // and are woken. The fibers that run must keep getting the lock
        // (the design that handed it to woken fibers completed at most a
        // few dozen locks here), one at a time, and at the end it is free.
        const FIBERS: u64 = 200;
        const MIN_COMPLETED: usize = 500;
        let mutex = Mutex::new();
        let inside = Inside::default();
        let completed = Arc::new(AtomicUsize::new(0));
        let storm = {
            let (mutex, inside, completed) = (mutex.clone(), inside.clone(), completed.clone());
            common::storm::storm::<E, _>(FIBERS, move |_, r| {
                let (enter, leave, done) = (inside.clone(), inside.clone(), completed.clone());
                // Entering is masked with the finalizer's installation, so
                // that a leave is counted exactly when an enter was (a
                // cancellation may come right after `guarantee` starts).
                let work = IO::uncancelable(move |poll| {
                    IO::delay(move || {
                        let now = enter.now.fetch_add(1, Ordering::SeqCst) + 1;
                        enter.peak.fetch_max(now, Ordering::SeqCst);
                    })
                    .product_r(poll.apply(
                        if (r >> 8) % 32 == 0 { IO::cede() } else { IO::unit() }.product_r(IO::delay(
                            move || {
                                done.fetch_add(1, Ordering::SeqCst);
                            },
                        )),
                    ))
                    .guarantee(IO::delay(move || {
                        leave.now.fetch_sub(1, Ordering::SeqCst);
                    }))
                });
                if r % 2 == 0 {
                    mutex.with_lock(work)
                } else {
                    mutex.lock().use_with(move |_| work)
                }
            })
        };
        assert_eq!(run(storm), Outcome::Succeeded(()));
        let completed = completed.load(Ordering::SeqCst);
        assert!(
            completed >= MIN_COMPLETED,
            "{completed} holders completed in {:?}: the mutex stopped serving the fibers that run",
            common::storm::window()
        );
        assert_eq!(inside.peak.load(Ordering::SeqCst), 1, "one holder at a time");
        assert_eq!(mutex.waiting(), 0);
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn the_lock_is_held_while_in_use_and_free_after() {
        let mutex = Mutex::new();
        let inner = mutex.clone();
        let io: IO<bool, E> = mutex.lock().use_with(move |_| lock_is_held(&inner));
        assert_eq!(run(io), Outcome::Succeeded(true));
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true));
    }

    fn the_lock_is_released_on_error_self_cancel_and_panic() {
        let mutex = Mutex::new();
        let failing = mutex.lock().use_with(|_| IO::<u32, E>::raise_error(Error::Failed("boom")));
        assert_eq!(run(failing), Outcome::Errored(Error::Failed("boom")));
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true), "error");
        let canceled = mutex.lock().use_with(|_| UIO::canceled());
        assert_eq!(run(canceled), Outcome::Canceled);
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true), "self-cancel");
        let panicking = mutex.lock().use_with(|_| IO::<u32, E>::delay(|| panic!("bad")));
        assert!(run(panicking).is_panicked());
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true), "panic");
    }

    fn the_lock_is_released_when_its_holder_is_canceled() {
        let mutex = Mutex::new();
        let started = Deferred::<()>::new();
        let s = started.clone();
        let holder = mutex
            .lock()
            .use_with(move |_| s.complete(()).product_r(IO::never()));
        let io: IO<Outcome<(), E>, E> = holder.start().flat_map(move |h| {
            started.get().product_r(h.cancel()).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(run(lock_is_free(&mutex)), Outcome::Succeeded(true));
    }

    fn a_fiber_canceled_while_waiting_in_with_lock_never_takes_the_lock() {
        let mutex = Mutex::new();
        let (gate, started) = (Deferred::<()>::new(), Deferred::<()>::new());
        let ran = Counter::new();
        let (g, s) = (gate.clone(), started.clone());
        let holder = mutex.with_lock(s.complete::<E>(()).product_r(g.get::<E>()));
        let waiter = mutex.with_lock(ran.incr_io::<E>());
        let m = mutex.clone();
        let counted = mutex.clone();
        let io: IO<(Outcome<(), E>, bool), E> = holder.start().flat_map(move |h| {
            started.get().product_r(waiter.start()).flat_map(move |w| {
                waiting_for(&counted, 1)
                    .product_r(w.cancel())
                    .product_r(w.join())
                    .flat_map(move |ow| {
                        gate.complete(())
                            .product_r(h.join_void())
                            .product_r(lock_is_free(&m))
                            .map(move |free| (ow, free))
                    })
            })
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, true)));
        assert_eq!(ran.get(), 0);
    }

    fn waiters_get_the_lock_in_fifo_order_when_nobody_else_locks() {
        // Waiters are woken in arrival order; with no other fiber locking
        // (one that found the lock free would take it first), each woken
        // waiter takes the lock.
        let mutex = Mutex::new();
        let log = Log::new();
        let gate = Deferred::<()>::new();
        let (m, g, l) = (mutex.clone(), gate.clone(), log.clone());
        let held = Deferred::<()>::new();
        let h2 = held.clone();
        let holder = mutex.lock::<E>().use_with(move |_| h2.complete::<E>(()).product_r(g.get()));
        let io: IO<(), E> = holder.start().flat_map(move |h| {
            held.get()
                .product_r(IO::traverse(vec![1u32, 2, 3], move |i| {
                    // Each waiter waits before the next one starts.
                    let (l, counted) = (l.clone(), m.clone());
                    m.lock::<E>()
                        .use_with(move |_| l.record(i))
                        .start()
                        .flat_map(move |w| waiting_for(&counted, i as usize).map_to(w))
                }))
                .flat_map(move |waiters| {
                    gate.complete(())
                        .product_r(h.join_void())
                        .product_r(IO::traverse(waiters, |w| w.join_void()))
                        .void()
                })
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), [1, 2, 3]);
    }

    fn a_lock_canceled_right_after_it_is_acquired_releases_it_exactly_once() {
        // Every fiber yields after each step, and the cancellation lands
        // after 0, 1, 2, ... steps of the holder: one of them between the
        // step that takes the free lock and the one that installs its
        // release (on the single-threaded executor, deterministically), for
        // `with_lock` and for `lock().use_with`.
        for steps in 0..40 {
            let mutex = Mutex::new();
            let rt = rt_with_config(yield_after_every_step());
            let outcome = rt
                .run(cancel_after(steps, mutex.with_lock(IO::unit())))
                .succeeded()
                .expect("the canceler succeeds");
            assert!(outcome.is_succeeded() || outcome.is_canceled(), "{steps}: {outcome:?}");
            assert_eq!(rt.run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "with_lock, {steps}");
            let used = mutex.lock().use_with(|_| IO::unit());
            let outcome = rt
                .run(cancel_after(steps, used))
                .succeeded()
                .expect("the canceler succeeds");
            assert!(outcome.is_succeeded() || outcome.is_canceled(), "{steps}: {outcome:?}");
            assert_eq!(rt.run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "lock, {steps}");
        }
    }

    fn with_lock_inside_an_uncancelable_region_releases_the_lock_when_its_use_errors() {
        let mutex = Mutex::new();
        let (m1, m2) = (mutex.clone(), mutex.clone());
        let io: IO<u32, E> =
            IO::uncancelable(move |_| m1.with_lock(IO::raise_error(Error::Failed("boom"))));
        assert_eq!(run(io), Outcome::Errored(Error::Failed("boom")));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "with_lock");
        let io: IO<u32, E> = IO::uncancelable(move |_| {
            m2.lock().use_with(|_| IO::raise_error(Error::Failed("boom")))
        });
        assert_eq!(run(io), Outcome::Errored(Error::Failed("boom")));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "lock");
    }

    fn the_use_of_the_lock_runs_with_the_cancelability_of_its_caller() {
        let mutex = Mutex::new();
        let ran = Counter::new();
        // Unmasked: a self-cancel in the use is observed at once.
        let canceled_use = |r: &Counter| IO::<(), E>::canceled().product_r(r.incr_io());
        assert_eq!(run(mutex.with_lock(canceled_use(&ran))), Outcome::Canceled);
        let r = ran.clone();
        assert_eq!(run(mutex.lock().use_with(move |_| canceled_use(&r))), Outcome::Canceled);
        assert_eq!(ran.get(), 0, "unmasked");
        // Masked: the use runs to its end; the cancellation is observed
        // when the region ends (the program after it does not run).
        let (m, r) = (mutex.clone(), ran.clone());
        let io = IO::uncancelable(move |_| m.with_lock(canceled_use(&r))).product_r(ran.incr_io());
        assert_eq!(run(io), Outcome::Canceled);
        let (m, r) = (mutex.clone(), ran.clone());
        let io = IO::uncancelable(move |_| m.lock().use_with(move |_| canceled_use(&r)))
            .product_r(ran.incr_io());
        assert_eq!(run(io), Outcome::Canceled);
        assert_eq!(ran.get(), 2, "masked");
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn locks_nested_inside_a_masked_region_are_each_released() {
        let (outer, inner) = (Mutex::new(), Mutex::new());
        let (o, i) = (outer.clone(), inner.clone());
        let io: IO<u32, E> =
            IO::uncancelable(move |_| o.lock().use_with(move |_| i.with_lock(IO::pure(1))));
        assert_eq!(run(io), Outcome::Succeeded(1));
        let (o, i) = (outer.clone(), inner.clone());
        let io: IO<u32, E> =
            IO::uncancelable(move |_| o.with_lock(i.lock().use_with(|_| IO::pure(2))));
        assert_eq!(run(io), Outcome::Succeeded(2));
        assert_eq!(run(exactly_one_permit(&outer)), Outcome::Succeeded(true), "outer");
        assert_eq!(run(exactly_one_permit(&inner)), Outcome::Succeeded(true), "inner");
    }

    fn a_lock_composed_with_other_resources_is_held_for_the_scope_and_released_last() {
        let mutex = Mutex::new();
        let log = Log::new();
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let file = Resource::make(IO::delay(move || l1.push("open")), move |()| {
            IO::delay(move || l2.push("close"))
        });
        let inner = mutex.clone();
        let io: IO<bool, E> = mutex.lock().both(file).map(|_| 7).use_with(move |seven| {
            assert_eq!(seven, 7);
            l3.push("use");
            lock_is_held(&inner)
        });
        assert_eq!(run(io), Outcome::Succeeded(true), "both, map");
        assert_eq!(log.events(), ["open", "use", "close"]);
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "both, map");

        let inner = mutex.clone();
        let io: IO<bool, E> = mutex.lock().allocated().flat_map(move |allocated| {
            lock_is_held(&inner).flat_map(move |held| allocated.release().map_to(held))
        });
        assert_eq!(run(io), Outcome::Succeeded(true), "allocated");
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "allocated");

        let failing = mutex.lock().flat_map(|_| {
            Resource::make(IO::<(), E>::raise_error(Error::Failed("no")), |()| IO::unit())
        });
        assert_eq!(run(failing.use_with(|_| IO::unit())), Outcome::Errored(Error::Failed("no")));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "flat_map");
    }

    fn a_lock_whose_use_panics_while_it_is_built_is_released() {
        let mutex = Mutex::new();
        let io: IO<u32, E> = mutex.lock().use_with(|_| panic!("bad"));
        assert!(run(io).is_panicked());
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    // ----- with_lock's release frame (taken at once, released as its result passes) ---

    fn with_lock_releases_the_lock_exactly_once_when_its_body_errors_or_panics() {
        let mutex = Mutex::new();
        let failing = mutex.with_lock(IO::<u32, E>::raise_error(Error::Failed("boom")));
        assert_eq!(run(failing), Outcome::Errored(Error::Failed("boom")));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "error");
        let panicking = mutex.with_lock(IO::<u32, E>::delay(|| panic!("bad")));
        assert!(run(panicking).is_panicked());
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "panic");
        let canceled = mutex.with_lock(UIO::canceled());
        assert_eq!(run(canceled), Outcome::Canceled);
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true), "self-cancel");
    }

    fn the_lock_is_free_when_an_error_of_with_lock_reaches_its_handler() {
        let mutex = Mutex::new();
        let inner = mutex.clone();
        let io: IO<bool, E> = mutex
            .with_lock(IO::<bool, E>::raise_error(Error::Failed("boom")))
            .handle_error_with(move |_| lock_is_free(&inner));
        assert_eq!(run(io), Outcome::Succeeded(true));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn the_lock_is_free_when_the_value_of_with_lock_reaches_the_next_step() {
        let mutex = Mutex::new();
        let (inner, after) = (mutex.clone(), mutex.clone());
        let io: IO<(bool, bool), E> = mutex
            .with_lock(IO::defer(move || lock_is_held(&inner)))
            .flat_map(move |held| lock_is_free(&after).map(move |free| (held, free)));
        assert_eq!(run(io), Outcome::Succeeded((true, true)));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn with_lock_releases_the_lock_exactly_once_when_its_body_is_canceled() {
        let mutex = Mutex::new();
        let started = Deferred::<()>::new();
        let s = started.clone();
        let finalized = Counter::new();
        let f = finalized.clone();
        let holder = mutex
            .with_lock(s.complete(()).product_r(IO::<(), E>::never()))
            .guarantee(f.incr_io());
        let io: IO<Outcome<(), E>, E> = holder.start().flat_map(move |h| {
            started.get().product_r(h.cancel()).product_r(h.join())
        });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(finalized.get(), 1);
        assert_eq!(mutex.waiting(), 0);
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn with_lock_releases_the_lock_exactly_once_when_its_body_times_out() {
        let mutex = Mutex::new();
        let io: IO<(), E> = mutex
            .with_lock(IO::<(), E>::never())
            .timeout(Duration::from_millis(10));
        assert_eq!(run(io), Outcome::Errored(Error::TimedOut));
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    fn a_canceled_waiter_of_with_lock_leaves_exactly_one_permit_for_the_others() {
        let mutex = Mutex::new();
        let (gate, started) = (Deferred::<()>::new(), Deferred::<()>::new());
        let ran = Counter::new();
        let (g, s) = (gate.clone(), started.clone());
        let holder = mutex.with_lock(s.complete::<E>(()).product_r(g.get::<E>()));
        let canceled = mutex.with_lock(ran.incr_io::<E>());
        let kept = mutex.with_lock(ran.incr_io::<E>());
        let counted = mutex.clone();
        type TwoWaiters = (Outcome<(), E>, Outcome<(), E>);
        let io: IO<TwoWaiters, E> = holder.start().flat_map(move |h| {
            started.get().product_r(canceled.start()).flat_map(move |c| {
                let later = counted.clone();
                waiting_for(&counted, 1)
                    .product_r(kept.start())
                    .flat_map(move |k| {
                        waiting_for(&later, 2)
                            .product_r(c.cancel())
                            .product_r(gate.complete(()))
                            .product_r(h.join_void())
                            .product_r(c.join())
                            .flat_map(move |oc| k.join().map(move |ok| (oc, ok)))
                    })
            })
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Canceled, Outcome::Succeeded(())))
        );
        assert_eq!(ran.get(), 1, "only the waiter that was not canceled ran");
        assert_eq!(mutex.waiting(), 0);
        assert_eq!(run(exactly_one_permit(&mutex)), Outcome::Succeeded(true));
    }

    // ----- CountDownLatch -------------------------------------------------------------

    fn a_latch_of_zero_is_invalid_count() {
        assert_eq!(CountDownLatch::new(0).err(), Some(InvalidCount));
        assert_eq!(CountDownLatch::new(3).expect("valid").remaining(), 3);
    }

    fn await_waits_until_the_last_of_n_releases() {
        let latch = CountDownLatch::new(3).expect("valid");
        let opened = Counter::new();
        let o = opened.clone();
        let waiter = latch.wait::<E>().product_r(o.incr_io());
        let (l1, l2, l3) = (latch.clone(), latch.clone(), latch.clone());
        let io: IO<(usize, usize), E> = waiter.start().flat_map(move |h| {
            let before = opened.clone();
            l1.release()
                .product_r(l2.release())
                .product_r(IO::cede())
                .product_r(IO::cede())
                .map(move |()| before.get())
                .flat_map(move |after_two| {
                    l3.release()
                        .product_r(h.join_void())
                        .map(move |()| (after_two, opened.get()))
                })
        });
        assert_eq!(run(io), Outcome::Succeeded((0, 1)));
        assert_eq!(latch.remaining(), 0);
    }

    fn await_on_an_open_latch_returns_at_once() {
        let latch = CountDownLatch::new(1).expect("valid");
        let l = latch.clone();
        let io: IO<&str, E> = latch.release().product_r(l.wait()).product_r(l.wait()).map_to("open");
        assert_eq!(run(io), Outcome::Succeeded("open"));
    }

    fn releases_past_zero_do_nothing() {
        let latch = CountDownLatch::new(2).expect("valid");
        let l = latch.clone();
        let io: IO<(), E> = IO::replicate(5, move || l.release()).void();
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(latch.remaining(), 0);
        assert_eq!(run(latch.wait::<E>()), Outcome::Succeeded(()));
    }

    fn every_waiter_is_woken_when_the_latch_opens() {
        let latch = CountDownLatch::new(2).expect("valid");
        let (w, r) = (latch.clone(), latch.clone());
        let io: IO<usize, E> = IO::sequence((0..10).map(|_| w.wait::<E>().start()).collect())
            .flat_map(move |hs| {
                IO::cede()
                    .product_r(r.release())
                    .product_r(r.release())
                    .product_r(IO::traverse(hs, |h| h.join()))
                    .map(|outcomes| outcomes.iter().filter(|o| o.is_succeeded()).count())
            });
        assert_eq!(run(io), Outcome::Succeeded(10));
    }

    fn releases_from_many_fibers_open_the_latch_exactly_when_all_are_done() {
        let latch = CountDownLatch::new(50).expect("valid");
        let (r, w) = (latch.clone(), latch.clone());
        let io: IO<u64, E> = IO::<(), E>::par_traverse((0..50u32).collect(), move |_| {
            IO::cede().product_r(r.release())
        })
        .product_r(w.wait())
        .map(move |()| w.remaining());
        assert_eq!(run(io), Outcome::Succeeded(0));
    }

    fn a_canceled_await_does_not_affect_the_latch_or_other_waiters() {
        let latch = CountDownLatch::new(1).expect("valid");
        let (w1, w2, r) = (latch.clone(), latch.clone(), latch.clone());
        type TwoWaiters = (Outcome<(), E>, Outcome<(), E>);
        let io: IO<TwoWaiters, E> = w1.wait().start().flat_map(move |canceled| {
            w2.wait().start().flat_map(move |kept| {
                let c = canceled.cancel_handle();
                IO::cede()
                    .product_r(c.cancel())
                    .product_r(r.release())
                    .product_r(canceled.join())
                    .flat_map(move |oc| kept.join().map(move |ok| (oc, ok)))
            })
        });
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Canceled, Outcome::Succeeded(())))
        );
    }
}

// ----- waiting for the lock as a Resource is cancelable ------------------------------

/// A holder takes the lock and keeps it forever; a waiter waits for it
/// through `lock()` (the Resource); the waiter is canceled after a second of
/// virtual time. Produces the waiter's outcome.
fn cancel_a_waiter_of_a_held_lock() -> IO<Outcome<(), E>, E> {
    let mutex = Mutex::new();
    let started = Deferred::<()>::new();
    let (m, s) = (mutex.clone(), started.clone());
    let holder = mutex
        .lock()
        .use_with(move |_| s.complete(()).product_r(UIO::<()>::never()));
    holder.start().flat_map(move |_holder| {
        started
            .get()
            .product_r(m.lock().use_with(|_| IO::unit()).start())
            .flat_map(|waiter| {
                IO::sleep(Duration::from_secs(1))
                    .product_r(waiter.cancel())
                    .product_r(waiter.join())
            })
    })
}

#[test]
fn a_fiber_canceled_while_waiting_for_the_lock_resource_is_canceled_at_once() {
    assert_eq!(
        TestControl::run(cancel_a_waiter_of_a_held_lock()),
        Ok(Outcome::Succeeded(Outcome::Canceled))
    );
}
