use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Executor, Fiber, FiberConfig, IO, Outcome, TimerCallback};

const DEPTH: u64 = if cfg!(miri) { 300 } else { 100_000 };

/// A minimal executor: one queue, a manual clock, timers fired by `run`.
/// (Also the data types' unit tests' executor, `stdlib/data/tests`.)
#[derive(Clone)]
pub(crate) struct TestExecutor(Arc<State>);

struct State {
    queue: Mutex<VecDeque<Fiber<TestExecutor>>>,
    /// io-core's own timer heap, so that these tests (and Miri) cover it.
    timers: Mutex<crate::executor::timers::TimerHeap>,
    now: Mutex<Duration>,
    reschedules: AtomicUsize,
    config: FiberConfig,
}

impl Executor for TestExecutor {
    type TimerKey = crate::executor::timers::TimerId;
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        self.0.queue.lock().unwrap().push_back(fiber);
    }

    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        self.0.reschedules.fetch_add(1, Ordering::SeqCst);
        self.0.queue.lock().unwrap().push_back(fiber);
    }

    fn monotonic(&self) -> Duration {
        *self.0.now.lock().unwrap()
    }

    fn set_timer(
        &self,
        deadline: Duration,
        callback: TimerCallback,
    ) -> crate::executor::timers::TimerId {
        let deadline_ns = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        self.0.timers.lock().unwrap().insert(deadline_ns, callback)
    }

    fn cancel_timer(&self, key: crate::executor::timers::TimerId) {
        let callback = self.0.timers.lock().unwrap().cancel(key);
        drop(callback);
    }

    fn config(&self) -> &FiberConfig {
        &self.0.config
    }
}

impl TestExecutor {
    fn new(config: FiberConfig) -> Self {
        TestExecutor(Arc::new(State {
            queue: Mutex::new(VecDeque::new()),
            timers: Mutex::new(crate::executor::timers::TimerHeap::new()),
            now: Mutex::new(Duration::ZERO),
            reschedules: AtomicUsize::new(0),
            config,
        }))
    }

    /// Runs `io` to its outcome: runs the queue; when it is empty, jumps the
    /// clock to the earliest timer; waits (yields) for other threads'
    /// callbacks, then gives up (`None`: nothing resumed the fiber).
    pub(crate) fn run<A: Send + 'static, E: Send + 'static>(
        &self,
        io: IO<A, E>,
    ) -> Option<Outcome<A, E>> {
        let slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        self.schedule_fiber(Fiber::new(io, self.clone(), move |o| {
            *s.lock().unwrap() = Some(o)
        }));
        let mut idle_rounds = 0;
        // Gives up on other threads' callbacks after 10,000 idle rounds and,
        // outside Miri, at least a second: on a loaded machine a thread
        // spawned by a callback test may take longer than 10,000 yields to
        // start.
        let started = std::time::Instant::now();
        loop {
            let next = self.0.queue.lock().unwrap().pop_front();
            match next {
                Some(fiber) => {
                    idle_rounds = 0;
                    fiber.run();
                }
                None => {
                    if let Some(o) = slot.lock().unwrap().take() {
                        return Some(o);
                    }
                    let mut timers = self.0.timers.lock().unwrap();
                    if let Some(deadline_ns) = timers.next_deadline() {
                        let mut due = Vec::new();
                        timers.take_due(deadline_ns, &mut due);
                        drop(timers);
                        let deadline = Duration::from_nanos(deadline_ns);
                        *self.0.now.lock().unwrap() = deadline;
                        due.into_iter().for_each(TimerCallback::fire);
                        continue;
                    }
                    drop(timers);
                    idle_rounds += 1;
                    if idle_rounds > 10_000
                        && (cfg!(miri) || started.elapsed() >= Duration::from_secs(1))
                    {
                        return None;
                    }
                    std::thread::yield_now();
                }
            }
        }
    }
}

pub(crate) fn rt() -> TestExecutor {
    TestExecutor::new(FiberConfig::default())
}

#[test]
fn binds_maps_and_handlers_compute_the_reference_result() {
    let io: IO<u64, String> = IO::pure(1)
        .flat_map(|x| IO::delay(move || x + 1))
        .map(|x| x * 10)
        .handle_error_with(|_| IO::pure(0))
        .flat_map(|x| IO::defer(move || IO::pure(x + 2)));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(22)));
}

#[test]
fn with_lock_gives_its_permit_back_once_on_success_error_cancellation_and_unrun_drop() {
    // The `Acquire` node and its `Release` frame (`fiber/run_loop.rs`),
    // under Miri: the frame's closure is called once whichever way the
    // body ends, and a program never run drops its node's block.
    let mutex = crate::Mutex::new();
    let free = |m: &crate::Mutex| alloc::format!("{m:?}").contains("locked: false");
    let ok: IO<u64, String> = mutex.with_lock(IO::pure(7)).map(|x| x + 1);
    assert_eq!(rt().run(ok), Some(Outcome::Succeeded(8)));
    assert!(free(&mutex), "success");
    let failed: IO<u64, String> = mutex
        .with_lock(IO::raise_error(String::from("boom")))
        .handle_error(|e| e.len() as u64);
    assert_eq!(rt().run(failed), Some(Outcome::Succeeded(4)));
    assert!(free(&mutex), "error");
    let canceled: IO<u64, String> = mutex.with_lock(IO::canceled().map(|()| 1));
    assert_eq!(rt().run(canceled), Some(Outcome::Canceled));
    assert!(free(&mutex), "cancellation");
    let nested: IO<u64, String> = mutex.with_lock(IO::pure(1));
    let held = mutex.clone();
    let inside: IO<bool, String> = mutex.with_lock(IO::delay(move || {
        alloc::format!("{held:?}").contains("locked: true")
    }));
    assert_eq!(rt().run(inside), Some(Outcome::Succeeded(true)));
    drop(nested);
    assert!(free(&mutex), "a program never run");
}

#[test]
fn an_error_skips_binds_and_reaches_the_nearest_handler() {
    let skipped = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (skipped.clone(), skipped.clone());
    let io: IO<u64, String> = IO::raise_error(String::from("boom"))
        .map(move |x: u64| {
            s1.fetch_add(1, Ordering::SeqCst);
            x
        })
        .flat_map(move |x| {
            s2.fetch_add(1, Ordering::SeqCst);
            IO::pure(x)
        })
        .map_err(|e| e + "!")
        .handle_error_with(|e| IO::pure(e.len() as u64));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(5)));
    assert_eq!(skipped.load(Ordering::SeqCst), 0);
}

#[test]
fn attempt_and_redeem_fold_both_outcomes() {
    let ok: IO<u64, String> = IO::pure(3);
    let err: IO<u64, String> = IO::raise_error(String::from("e"));
    assert_eq!(rt().run(ok.attempt()), Some(Outcome::Succeeded(Ok(3))));
    assert_eq!(
        rt().run(err.attempt()),
        Some(Outcome::Succeeded(Err(String::from("e"))))
    );
    let r: IO<u64, String> = IO::<u64, String>::raise_error(String::from("ee"))
        .redeem_with(|e| IO::pure(e.len() as u64), IO::pure);
    assert_eq!(rt().run(r), Some(Outcome::Succeeded(2)));
}

#[test]
fn large_values_and_closures_survive_the_erased_storage() {
    let big = [7u64; 16];
    let io: IO<[u64; 16], ()> = IO::pure(big).map(move |a| {
        let mut b = a;
        b[0] = big[1] + 1;
        b
    });
    let out = rt().run(io).and_then(Outcome::succeeded).unwrap();
    assert_eq!(out[0], 8);
    assert_eq!(out[15], 7);
}

#[test]
fn deep_left_and_right_nested_binds_complete() {
    let mut left: IO<u64, ()> = IO::pure(0);
    for _ in 0..DEPTH {
        left = left.flat_map(|x| IO::pure(x + 1));
    }
    assert_eq!(rt().run(left), Some(Outcome::Succeeded(DEPTH)));

    fn right(i: u64) -> IO<u64, ()> {
        if i < DEPTH {
            IO::pure(i + 1).flat_map(right)
        } else {
            IO::pure(i)
        }
    }
    assert_eq!(
        rt().run(IO::pure(0).flat_map(right)),
        Some(Outcome::Succeeded(DEPTH))
    );
}

#[test]
fn dropping_deep_unevaluated_programs_frees_every_capture_once() {
    let witness = Arc::new(());
    let mut left: IO<u64, ()> = IO::pure(0);
    for _ in 0..DEPTH {
        let w = witness.clone();
        left = left.map(move |x| x + Arc::strong_count(&w) as u64);
    }
    let mut right: IO<u64, ()> = IO::pure(0);
    for _ in 0..DEPTH {
        let w = witness.clone();
        right = IO::pure(0).flat_map(move |_| {
            let _ = &w;
            right
        });
    }
    assert_eq!(Arc::strong_count(&witness), 1 + 2 * DEPTH as usize);
    drop(left);
    drop(right);
    assert_eq!(Arc::strong_count(&witness), 1);
}

#[test]
fn a_callback_called_during_registration_continues_synchronously() {
    let io: IO<u64, ()> = IO::from_callback(|cb| {
        assert!(cb.succeed(5));
        assert!(!cb.succeed(6), "a second call is ignored");
        None
    });
    assert_eq!(rt().run(io.map(|x| x + 1)), Some(Outcome::Succeeded(6)));
}

#[test]
fn a_callback_from_another_thread_resumes_the_fiber_exactly_once() {
    let rounds = if cfg!(miri) { 3 } else { 200 };
    for i in 0..rounds {
        let io: IO<u64, String> = IO::from_callback(move |cb| {
            let other = cb.clone();
            std::thread::spawn(move || cb.succeed(i));
            std::thread::spawn(move || other.fail(String::from("late")));
            None
        });
        let outcome = rt().run(io).expect("resumed");
        // Either callback may win the race; only one result is delivered.
        assert!(
            outcome == Outcome::Succeeded(i) || outcome == Outcome::Errored(String::from("late")),
            "{outcome:?}"
        );
    }
}

#[test]
fn a_dropped_callback_frees_the_suspended_fiber() {
    let witness = Arc::new(());
    let w = witness.clone();
    let io: IO<u64, ()> = IO::pure(1).flat_map(move |x| {
        IO::from_callback(move |cb: crate::Callback<u64, ()>| {
            drop(cb);
            None
        })
        .map(move |y| x + y + Arc::strong_count(&w) as u64)
    });
    assert_eq!(rt().run(io), None, "nothing can resume the fiber");
    assert_eq!(
        Arc::strong_count(&witness),
        1,
        "the fiber and its frames were freed"
    );
}

#[test]
fn a_panicking_closure_ends_only_its_fiber_and_drops_its_frames() {
    let witness = Arc::new(());
    let w = witness.clone();
    let io: IO<u64, ()> =
        IO::delay(|| -> u64 { panic!("kaboom") }).map(move |x| x + Arc::strong_count(&w) as u64);
    match rt().run(io) {
        Some(Outcome::Panicked(p)) => assert_eq!(p.message(), "kaboom"),
        other => panic!("expected a panic outcome, got {other:?}"),
    }
    assert_eq!(Arc::strong_count(&witness), 1);
    assert_eq!(rt().run(IO::<u8, ()>::pure(1)), Some(Outcome::Succeeded(1)));
}

#[test]
fn sleep_uses_the_executors_timers_and_clock() {
    let io: IO<Duration, ()> = IO::sleep(Duration::from_secs(5)).product_r(IO::monotonic());
    assert_eq!(
        rt().run(io),
        Some(Outcome::Succeeded(Duration::from_secs(5)))
    );
}

#[test]
fn cede_and_auto_yield_reschedule_through_the_executor() {
    let config = FiberConfig::builder().auto_yield_after(10).build().unwrap();
    let ex = TestExecutor::new(config);
    let io: IO<u64, ()> = IO::tail_rec(0u64, |i| {
        IO::pure(if i == 100 {
            core::ops::ControlFlow::Break(i)
        } else {
            core::ops::ControlFlow::Continue(i + 1)
        })
    });
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(100)));
    let yields = ex.0.reschedules.load(Ordering::SeqCst);
    assert!(
        (9..=11).contains(&yields),
        "one step per iteration, a yield every 10 steps: {yields}"
    );

    let ex = rt();
    let io: IO<(), ()> = IO::cede().product_r(IO::cede());
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(())));
    assert_eq!(ex.0.reschedules.load(Ordering::SeqCst), 2);
}

#[test]
fn a_started_fiber_is_joined_and_a_sleeping_one_is_canceled_with_its_finalizers() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (l1, l2) = (log.clone(), log.clone());
    let child: IO<u64, ()> = IO::sleep(Duration::from_secs(60))
        .map_to(1)
        .on_cancel(IO::delay(move || l1.lock().unwrap().push("on_cancel")))
        .guarantee_case(move |o| {
            let canceled = o.is_canceled();
            IO::delay(move || {
                l2.lock().unwrap().push(if canceled {
                    "guarantee canceled"
                } else {
                    "guarantee other"
                })
            })
        });
    // The cede lets the child run up to its sleep (a fiber canceled before
    // it first runs installs no finalizer at all).
    let io: IO<Outcome<u64, ()>, ()> = child
        .start()
        .flat_map(|fiber| IO::cede().product_r(fiber.cancel()).product_r(fiber.join()));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(Outcome::Canceled)));
    assert_eq!(*log.lock().unwrap(), ["on_cancel", "guarantee canceled"]);

    let io: IO<Outcome<u64, ()>, ()> = IO::<u64, ()>::pure(3).start().flat_map(|f| f.join());
    assert_eq!(
        rt().run(io),
        Some(Outcome::Succeeded(Outcome::Succeeded(3)))
    );
}

#[test]
fn canceled_timers_are_rebuilt_away_and_the_live_ones_fire_in_deadline_order() {
    let rt = rt();
    let fired = Arc::new(Mutex::new(Vec::new()));
    let n: u64 = if cfg!(miri) { 120 } else { 400 };
    // `n` sleepers, the latest deadline started first; every fourth one is
    // kept, the others canceled: more than the 64 stale entries and half
    // the heap that make `cancel` rebuild it.
    type Sleepers = Vec<(u64, crate::FiberHandle<(), ()>)>;
    let mut start: IO<Sleepers, ()> = IO::pure(Vec::new());
    for i in 0..n {
        let f = fired.clone();
        start = start.flat_map(move |mut handles| {
            IO::sleep(Duration::from_millis(n - i))
                .map(move |_| f.lock().unwrap().push(n - i))
                .start()
                .map(move |h| {
                    handles.push((i, h));
                    handles
                })
        });
    }
    let timers = rt.clone();
    let io: IO<(), ()> = start.flat_map(move |handles| {
        // Let every sleeper reach its timer before any is canceled.
        let mut end: IO<(), ()> = IO::cede();
        let mut kept = Vec::new();
        for (i, h) in handles {
            if i % 4 == 0 {
                kept.push(h);
            } else {
                end = end.product_r(h.cancel());
            }
        }
        end.flat_map(move |()| {
            let t = timers.0.timers.lock().unwrap();
            assert_eq!(t.len(), kept.len(), "the live timers");
            assert!(
                t.entries() <= 2 * t.len(),
                "the stale entries were rebuilt away: {} entries for {} timers",
                t.entries(),
                t.len()
            );
            drop(t);
            kept.into_iter()
                .fold(IO::unit(), |io, h| io.product_r(h.join_void()))
        })
    });
    assert_eq!(rt.run(io), Some(Outcome::Succeeded(())));
    let fired = fired.lock().unwrap();
    let expected: Vec<u64> = (0..n).rev().filter(|i| i % 4 == 0).map(|i| n - i).collect();
    assert_eq!(*fired, expected, "the kept sleepers fire in deadline order");
    assert!(rt.0.timers.lock().unwrap().is_empty());
}

#[test]
fn cancellation_waits_for_the_end_of_an_uncancelable_region() {
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (ran.clone(), ran.clone());
    let io: IO<(), ()> = IO::uncancelable(move |_| {
        IO::canceled().product_r(IO::delay(move || {
            r1.fetch_add(1, Ordering::SeqCst);
        }))
    })
    .product_r(IO::delay(move || {
        r2.fetch_add(10, Ordering::SeqCst);
    }));
    assert_eq!(rt().run(io), Some(Outcome::Canceled));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the region finishes, what follows does not run"
    );
}

/// `depth` uncancelable regions nested around `inner`.
fn nested_regions(depth: u32, inner: IO<(), ()>) -> IO<(), ()> {
    (0..depth).fold(inner, |io, _| IO::uncancelable(move |_| io))
}

#[test]
fn cancellation_waits_for_the_end_of_more_nested_regions_than_a_u16_counts() {
    // The mask depth is a `u16` in the fiber, the levels beyond it counted
    // aside (`Core::mask`): the deepest region still runs to its end, and
    // cancellation is observed once the outermost region ends, not before.
    let depth = if cfg!(miri) { 300 } else { 70_000 };
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (ran.clone(), ran.clone());
    let inner = IO::canceled().product_r(IO::delay(move || {
        r1.fetch_add(1, Ordering::SeqCst);
    }));
    let io = nested_regions(depth, inner).product_r(IO::delay(move || {
        r2.fetch_add(10, Ordering::SeqCst);
    }));
    assert_eq!(rt().run(io), Some(Outcome::Canceled));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the regions finish, what follows does not run"
    );
}

#[test]
fn a_poll_more_than_a_u16_of_regions_deep_unmasks_only_its_own_region() {
    // The innermost region's poll, 70,000 regions deep, unmasks that one
    // region: the regions around it still mask, so a cancellation
    // requested inside the poll is observed only after the outermost ends.
    let depth = if cfg!(miri) { 300 } else { 70_000 };
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2, r3) = (ran.clone(), ran.clone(), ran.clone());
    let inner: IO<(), ()> = IO::uncancelable(move |poll| {
        poll.apply(IO::canceled().product_r(IO::delay(move || {
            r1.fetch_add(1, Ordering::SeqCst);
        })))
        .product_r(IO::delay(move || {
            r2.fetch_add(10, Ordering::SeqCst);
        }))
    });
    let io = nested_regions(depth, inner).product_r(IO::delay(move || {
        r3.fetch_add(100, Ordering::SeqCst);
    }));
    assert_eq!(rt().run(io), Some(Outcome::Canceled));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        11,
        "everything inside the regions runs, nothing after them"
    );
}

#[test]
fn an_async_wait_canceled_runs_its_finalizer_and_ignores_a_late_callback() {
    let slot: Arc<Mutex<Option<crate::Callback<u64, ()>>>> = Arc::new(Mutex::new(None));
    let finalized = Arc::new(AtomicUsize::new(0));
    let (s1, f1) = (slot.clone(), finalized.clone());
    let waiting: IO<u64, ()> = IO::from_callback(move |cb| {
        *s1.lock().unwrap() = Some(cb);
        Some(IO::delay(move || {
            f1.fetch_add(1, Ordering::SeqCst);
        }))
    });
    let io: IO<Outcome<u64, ()>, ()> = waiting
        .start()
        .flat_map(|fiber| IO::cede().product_r(fiber.cancel()).product_r(fiber.join()));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(Outcome::Canceled)));
    assert_eq!(finalized.load(Ordering::SeqCst), 1);
    let late = slot.lock().unwrap().take().expect("registered");
    assert!(!late.succeed(5), "a callback after cancellation is ignored");
}

#[test]
fn races_and_data_types_work_on_a_plain_executor() {
    let d = crate::Deferred::<u64>::new();
    let d2 = d.clone();
    let io: IO<u64, ()> = d
        .get()
        .start()
        .flat_map(move |fiber| d2.complete(9).product_r(fiber.join_with_never()));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(9)));

    let q = crate::Queue::<u64>::bounded(1).unwrap();
    let (p, c) = (q.clone(), q);
    let io: IO<Vec<u64>, ()> = IO::traverse(vec![1, 2, 3], move |i| p.offer::<()>(i))
        .start()
        .product_r(IO::replicate(3, move || c.take()));
    assert_eq!(rt().run(io), Some(Outcome::Succeeded(vec![1, 2, 3])));

    let slow: IO<u64, ()> = IO::sleep(Duration::from_secs(10)).map_to(1);
    let fast: IO<u64, ()> = IO::sleep(Duration::from_secs(1)).map_to(2);
    assert_eq!(
        rt().run(slow.race(fast)),
        Some(Outcome::Succeeded(crate::Either::Right(2)))
    );
}

#[test]
fn a_fiber_waiting_on_what_nothing_else_references_is_freed_without_its_finalizers() {
    /// Counts its drop: captured by the waiting fiber's continuation.
    struct Token(Arc<AtomicUsize>);
    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let waits: Vec<fn() -> IO<(), ()>> = vec![
        || crate::Deferred::<u64>::new().get().void(),
        || IO::<(), ()>::never().start().flat_map(|h| h.join().void()),
        || crate::Queue::<u64>::unbounded().take().void(),
        || {
            let sem = crate::Semaphore::new(1).unwrap();
            sem.acquire().product_r(sem.acquire())
        },
    ];
    for wait in waits {
        let (freed, finalized) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (token, fin) = (Token(freed.clone()), finalized.clone());
        let io = wait()
            .map(move |()| drop(token))
            .guarantee(IO::delay(move || {
                fin.fetch_add(1, Ordering::SeqCst);
            }));
        // The main fiber is freed as it suspends: nothing can resume it.
        assert_eq!(rt().run(io), None);
        assert_eq!(
            freed.load(Ordering::SeqCst),
            1,
            "the waiting fiber is freed"
        );
        assert_eq!(
            finalized.load(Ordering::SeqCst),
            0,
            "its finalizers do not run"
        );
    }
}

#[test]
fn an_executor_that_numbers_nothing_gives_every_fiber_number_0() {
    // `TestExecutor` keeps `Executor::next_fiber_id`'s default.
    let ex = rt();
    let a = Fiber::new(IO::<(), ()>::unit(), ex.clone(), |_| {});
    let b = Fiber::new(IO::<(), ()>::unit(), ex, |_| {});
    assert_eq!(a.id(), crate::FiberId::UNNUMBERED);
    assert_eq!(b.id(), crate::FiberId::UNNUMBERED);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn a_fiber_with_a_one_word_executor_and_its_join_state_is_one_allocation_of_at_most_168_bytes() {
    // The per-fiber cost of a million suspended fibers: reference counts,
    // header (with the join state), run-loop state and executor handle.
    let size =
        core::mem::size_of::<crate::sync::Arc<crate::fiber::vtable::FiberInner<TestExecutor>>>();
    assert_eq!(size, 8, "a fiber handle is one pointer");
    assert_eq!(
        core::mem::size_of::<crate::FiberHandle<u64, ()>>(),
        16,
        "a fiber handle is a pointer and a vtable"
    );
    // With or without tracing: its ring pointer and dump state byte
    // (header) take what padding leaves free beside the fiber's number.
    // The join state's waiter list is out of line (one word, not four:
    // 232 bytes before), and shares its word with the outcome's slot; the
    // poll owner is in the rarely used part (`Cold`), and the completion
    // callback in the join state's bytes (`FiberJoin`); the mask depth
    // is a `u16` beside the flags (208 bytes before these three). The
    // result slot is two words, the result's side in its vtable pointer
    // (176 bytes before).
    let limit = 168;
    assert!(
        core::mem::size_of::<crate::fiber::vtable::FiberInner<TestExecutor>>() + 16 <= limit,
        "FiberInner is {} bytes",
        core::mem::size_of::<crate::fiber::vtable::FiberInner<TestExecutor>>()
    );
}

#[test]
fn a_fiber_suspended_with_an_empty_stack_holds_no_stack_buffer() {
    let ex = rt();
    let (tx, rx) = std::sync::mpsc::channel();
    // Frames are pushed and popped before the suspension (the stack had a
    // buffer), and none is pending while the fiber waits.
    let io: IO<u64, ()> = IO::pure(1)
        .map(|x| x + 1)
        .flat_map(|x| IO::delay(move || x * 2))
        .flat_map(move |_| {
            IO::from_callback(move |cb: crate::Callback<u64, ()>| {
                tx.send(cb).unwrap();
                None
            })
        });
    let fiber = Fiber::new(io, ex.clone(), |_| {});
    let inner = fiber.inner.clone();
    fiber.run();
    let cb = rx.recv().expect("the fiber suspended");
    // SAFETY: the fiber is suspended and nothing resumes it while we look
    // (its only callback is here, not called).
    let (capacity, resumable) = inner.core.with_mut(|core| unsafe {
        (
            (*core).stack.capacity(),
            matches!((*core).next, crate::fiber::run_state::Next::Resume),
        )
    });
    assert_eq!(
        capacity, 0,
        "the empty stack's buffer went back to the thread"
    );
    assert!(resumable);
    assert!(cb.succeed(7));
    let fiber = ex.0.queue.lock().unwrap().pop_front().expect("resumed");
    fiber.run();
    // SAFETY: the fiber has a completion callback, and it completed:
    // nothing else touches it.
    let callback_left = unsafe { inner.header.join.has_callback() };
    assert!(
        !callback_left,
        "the resumed fiber ran to its end: its completion callback was taken"
    );
}

#[test]
fn a_fiber_waiting_in_a_deferreds_get_holds_no_stack_buffer() {
    // `get` decides in the read whether there is a value to resume with
    // (`Read::read`), so no frame of its own is pending while it waits.
    let ex = rt();
    let gate = crate::Deferred::<u64>::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let fiber = Fiber::new(gate.get::<()>(), ex.clone(), move |outcome| {
        tx.send(outcome).unwrap()
    });
    let inner = fiber.inner.clone();
    fiber.run();
    // SAFETY: the fiber is suspended, and nothing resumes it while we look
    // (the deferred is not complete).
    let capacity = inner
        .core
        .with_mut(|core| unsafe { (*core).stack.capacity() });
    assert_eq!(capacity, 0, "no frame is pending while the get waits");
    assert_eq!(gate.waiters(), 1);
    drop(inner);
    // Completing the deferred resumes the fiber with the value.
    let completed = Fiber::new(gate.complete::<()>(5), ex.clone(), |_| {});
    completed.run();
    loop {
        let next = ex.0.queue.lock().unwrap().pop_front();
        match next {
            Some(fiber) => {
                fiber.run();
            }
            None => break,
        }
    }
    assert_eq!(rx.try_recv(), Ok(crate::Outcome::Succeeded(5)));
}

/// An executor of another type than [`TestExecutor`] (its fibers have
/// another vtable), which never resumes anything.
#[derive(Clone)]
struct OtherExecutor(TestExecutor);

impl Executor for OtherExecutor {
    type TimerKey = crate::executor::timers::TimerId;
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        drop(fiber);
    }

    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        drop(fiber);
    }

    fn monotonic(&self) -> Duration {
        self.0.monotonic()
    }

    fn set_timer(
        &self,
        deadline: Duration,
        callback: TimerCallback,
    ) -> crate::executor::timers::TimerId {
        self.0.set_timer(deadline, callback)
    }

    fn cancel_timer(&self, key: crate::executor::timers::TimerId) {
        self.0.cancel_timer(key)
    }

    fn config(&self) -> &FiberConfig {
        self.0.config()
    }
}

/// Starts a fiber on `ex` that waits for a callback; returns the fiber's
/// weak reference and the callback.
fn waiting_fiber<X: Executor>(ex: &X) -> (crate::fiber::WeakFiber, crate::Callback<u64, ()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let io: IO<u64, ()> = IO::from_callback(move |cb: crate::Callback<u64, ()>| {
        tx.send(cb).unwrap();
        None
    });
    let fiber = Fiber::new(io, ex.clone(), |_| {});
    let weak = fiber.downgrade();
    fiber.run();
    (weak, rx.recv().expect("the fiber waits"))
}

#[test]
fn a_listing_keeps_one_word_per_fiber_of_one_executor_type_and_lists_every_live_fiber() {
    let ex = rt();
    let other = OtherExecutor(rt());
    let mut list = crate::fiber::WeakFibers::new();
    let mut callbacks = Vec::new();
    for _ in 0..3 {
        let (weak, cb) = waiting_fiber(&ex);
        list.push(weak);
        callbacks.push(cb);
    }
    // A fiber of another executor type: listed too, as a whole reference.
    let (weak, other_cb) = waiting_fiber(&other);
    list.push(weak);
    assert_eq!(list.entries(), (3, 1));
    assert_eq!(list.live().count(), 4);
    assert!(
        list.live()
            .all(|(_, status)| status == crate::fiber::FiberStatus::Suspended)
    );
    assert_eq!(list.infos().count(), 4);
    // One ends: it is no longer listed.
    assert!(callbacks.pop().unwrap().succeed(1));
    ex.0.queue
        .lock()
        .unwrap()
        .pop_front()
        .expect("resumed")
        .run();
    assert_eq!(list.live().count(), 3);
    assert_eq!(list.infos().count(), 3);
    // The other executor's fiber is freed with its callback.
    drop(other_cb);
    assert_eq!(list.live().count(), 2);
    // A sweep (once the list has doubled) drops the gone ones' entries.
    for _ in 0..64 {
        let (weak, cb) = waiting_fiber(&ex);
        list.push(weak);
        drop(cb);
    }
    let (thin, others) = list.entries();
    assert!(
        thin < 64 && others == 0,
        "swept: {thin} thin, {others} others"
    );
    assert_eq!(list.live().count(), 2);
    drop(list);
    drop(callbacks);
}

#[test]
fn a_weak_reference_cancels_a_waiting_fiber_which_then_runs_its_finalizer() {
    let ex = rt();
    let finalized = Arc::new(AtomicUsize::new(0));
    let outcome = Arc::new(Mutex::new(None));
    let (f, o) = (finalized.clone(), outcome.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let io: IO<u64, ()> = IO::from_callback(move |cb: crate::Callback<u64, ()>| {
        tx.send(cb).unwrap();
        None
    })
    .on_cancel(IO::delay(move || {
        f.fetch_add(1, Ordering::Relaxed);
    }));
    let fiber = Fiber::new(io, ex.clone(), move |outcome| {
        *o.lock().unwrap() = Some(outcome);
    });
    let weak = fiber.downgrade();
    fiber.run();
    let cb = rx.recv().expect("the fiber waits");
    assert!(weak.request_cancel());
    // Resumed (scheduled) by the cancellation, it finalizes and ends.
    ex.0.queue
        .lock()
        .unwrap()
        .pop_front()
        .expect("scheduled by the cancellation")
        .run();
    assert_eq!(finalized.load(Ordering::Relaxed), 1);
    assert_eq!(*outcome.lock().unwrap(), Some(Outcome::Canceled));
    assert!(!cb.succeed(1), "the wait was already ended");
    // A fiber that is gone: nothing to cancel.
    assert!(weak.is_gone());
    assert!(!weak.request_cancel());
}

#[test]
#[cfg(feature = "tracing")]
fn tracing_adds_one_word_to_a_fiber_its_ring_pointer_and_no_byte_to_its_run_state() {
    // The ring's header, the activity byte and the listing's entry are
    // elsewhere (the ring's one allocation, one word in the listing); the
    // recording flag shares a byte with the listed flag.
    assert_eq!(
        core::mem::size_of::<crate::engine::tracing::RingSlot>(),
        core::mem::size_of::<usize>()
    );
    assert_eq!(
        core::mem::size_of::<crate::engine::tracing::FiberFlags>(),
        1
    );
}

#[test]
fn a_fiber_with_a_completion_callback_keeps_it_in_its_join_state_without_a_separate_block() {
    // A race or `both` child: its callback waits in the bytes its join
    // state leaves free, so that making the fiber allocates nothing
    // beside the fiber (a pool block per child before).
    let ex = rt();
    let (tx, rx) = std::sync::mpsc::channel();
    let fiber = Fiber::new(IO::<u64, ()>::pure(5), ex.clone(), move |outcome| {
        tx.send(outcome).unwrap()
    });
    let inner = fiber.inner.clone();
    // SAFETY: the fiber has not run; nothing else touches its core.
    let (has_cold, has_callback) = inner
        .core
        .with_mut(|core| unsafe { ((*core).cold.is_some(), (*core).has_callback()) });
    assert!(!has_cold, "no separate block for the callback");
    assert!(has_callback, "the run state says where the outcome goes");
    // SAFETY: made with a callback; the fiber has not run.
    assert!(unsafe { inner.header.join.has_callback() });
    fiber.run();
    assert_eq!(rx.recv().unwrap(), Outcome::Succeeded(5));
    // SAFETY: made with a callback; the fiber completed.
    assert!(!unsafe { inner.header.join.has_callback() }, "taken once");
}

#[test]
fn a_fiber_dropped_before_it_completes_drops_its_completion_callback_once() {
    // The join state is a union of the cell and the callback: the fiber's
    // drop drops the one in use (Miri checks that it is dropped once and
    // that nothing leaks).
    let ex = rt();
    let witness = Arc::new(());
    let held = witness.clone();
    let fiber = Fiber::new(IO::<u64, ()>::never(), ex.clone(), move |_| drop(held));
    assert_eq!(Arc::strong_count(&witness), 2, "the callback holds it");
    drop(fiber);
    assert_eq!(Arc::strong_count(&witness), 1, "dropped with the fiber");
}

#[test]
fn a_started_fiber_freed_with_a_joiner_waiting_frees_the_joiner_once() {
    // A fiber made without a callback: its join cell (with its waiter
    // list) is the join state's field in use, dropped with the fiber.
    let ex = rt();
    let gate = crate::Deferred::<u64>::new();
    let witness = Arc::new(());
    let held = witness.clone();
    let io: IO<(), ()> = gate
        .get::<()>()
        .start()
        .flat_map(move |child| child.join().map(move |_| drop(held)));
    let fiber = Fiber::new(io, ex.clone(), |_| {});
    fiber.run();
    let child = ex.0.queue.lock().unwrap().pop_front().expect("the child");
    child.run();
    assert_eq!(
        Arc::strong_count(&witness),
        2,
        "the parent waits in the join"
    );
    // Nothing else holds the gate: the child waiting on it is freed, with
    // its join cell and the parent waiting in it.
    drop(gate);
    assert_eq!(
        Arc::strong_count(&witness),
        1,
        "the child's join cell and the joiner in it were dropped"
    );
}

#[test]
fn the_completion_callback_takes_no_bytes_beside_the_join_cell() {
    assert_eq!(
        core::mem::size_of::<crate::fiber::join::FiberJoin>(),
        core::mem::size_of::<crate::wait::JoinCell<crate::fiber::join::Completed>>(),
    );
}

// ----- deadline regions (`fiber/region.rs`) -----

/// A counter of how often a finalizer ran.
fn counter() -> (Arc<AtomicUsize>, impl Fn() -> IO<(), ()> + Clone) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    (count, move || {
        let c = c.clone();
        IO::delay(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
    })
}

#[test]
fn a_region_ends_its_waiting_body_at_the_deadline_after_its_finalizers_ran_once() {
    let ex = TestExecutor::new(FiberConfig::default());
    let (ran, incr) = counter();
    let body = IO::<u32, ()>::never().on_cancel(incr()).guarantee(incr());
    let io = body.timeout_to(
        Duration::from_secs(5),
        IO::monotonic().map(|t| t.as_secs() as u32),
    );
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(5)));
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert!(ex.0.timers.lock().unwrap().is_empty());
}

#[test]
fn a_region_whose_body_ends_first_keeps_its_outcome_and_leaves_no_timer() {
    let ex = TestExecutor::new(FiberConfig::default());
    let waits = IO::<(), &str>::sleep(Duration::from_secs(1)).map(|()| 1u32);
    let fails = IO::<u32, &str>::delay(|| 2).flat_map(|_| IO::raise_error("boom"));
    let io = waits
        .timeout_to(Duration::from_secs(60), IO::pure(0))
        .flat_map(move |a| {
            fails
                .timeout_to(Duration::from_secs(60), IO::pure(0))
                .handle_error_with(move |e| IO::pure(a + e.len() as u32))
        });
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(5)));
    assert!(ex.0.timers.lock().unwrap().is_empty());
}

#[test]
fn nested_regions_end_the_expired_one_and_the_outer_one_unwinds_the_inner() {
    let ex = TestExecutor::new(FiberConfig::default());
    // The inner deadline passes first: the outer region goes on.
    let inner = IO::<u32, ()>::never().timeout_to(Duration::from_secs(1), IO::pure(1));
    let outer = inner
        .flat_map(|v| IO::sleep(Duration::from_secs(1)).map(move |()| v + 1))
        .timeout_to(Duration::from_secs(60), IO::pure(100));
    assert_eq!(ex.run(outer), Some(Outcome::Succeeded(2)));
    // The outer deadline passes first: both unwind, the outer fallback runs.
    let (ran, incr) = counter();
    let inner = IO::<u32, ()>::never()
        .on_cancel(incr())
        .timeout_to(Duration::from_secs(60), IO::pure(1));
    let outer = inner
        .on_cancel(incr())
        .timeout_to(Duration::from_secs(1), IO::pure(2));
    assert_eq!(ex.run(outer), Some(Outcome::Succeeded(2)));
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert!(ex.0.timers.lock().unwrap().is_empty());
}

#[test]
fn a_body_that_cancels_itself_ends_its_region_and_the_fallback_waits_for_the_deadline() {
    let ex = TestExecutor::new(FiberConfig::default());
    let io = IO::<(), ()>::canceled().map(|()| 1u32).timeout_to(
        Duration::from_secs(3),
        IO::monotonic().map(|t| t.as_secs() as u32),
    );
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(3)));
}

#[test]
fn a_masked_part_of_a_region_finishes_before_its_deadline_is_observed() {
    let ex = TestExecutor::new(FiberConfig::default());
    let (ran, incr) = counter();
    let body = IO::<(), ()>::uncancelable(move |_| {
        IO::sleep(Duration::from_secs(5)).flat_map(move |()| incr())
    })
    .flat_map(|()| IO::<u32, ()>::never());
    let io = body.timeout_to(
        Duration::from_secs(1),
        IO::monotonic().map(|t| t.as_secs() as u32),
    );
    assert_eq!(ex.run(io), Some(Outcome::Succeeded(5)));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn a_local_set_by_a_fiber_is_copied_into_the_children_it_starts_and_never_written_back() {
    let local = crate::IOLocal::new(0u32);
    let (child_sets, child_reads, parent_reads, sibling) =
        (local.clone(), local.clone(), local.clone(), local.clone());
    let io: IO<(u32, u32, u32), ()> = local.set(1).product_r(
        child_sets
            .update(|x| x + 10)
            .product_r(child_reads.get())
            .start()
            .flat_map(move |child| {
                sibling.get().start().flat_map(move |other| {
                    child
                        .join_with_never()
                        .flat_map(move |a| other.join_with_never().map(move |b| (a, b)))
                })
            })
            .flat_map(move |(a, b)| parent_reads.get().map(move |p| (a, b, p))),
    );
    assert_eq!(rt().run(io), Some(Outcome::Succeeded((11, 1, 1))));
}

#[test]
fn a_scoped_local_is_put_back_after_an_error_and_a_fiber_without_locals_reads_defaults() {
    let local = crate::IOLocal::new(String::from("default"));
    let (after, fresh) = (local.clone(), local.clone());
    let io: IO<(Result<(), String>, String), String> = local
        .local(
            String::from("scoped"),
            IO::raise_error(String::from("boom")),
        )
        .attempt()
        .flat_map(move |r| after.get().map(move |v| (r, v)));
    assert_eq!(
        rt().run(io),
        Some(Outcome::Succeeded((
            Err(String::from("boom")),
            String::from("default")
        )))
    );
    assert_eq!(
        rt().run(fresh.get::<()>()),
        Some(Outcome::Succeeded(String::from("default")))
    );
}
