//! The `Executor` contract, seen through a tiny executor written here, and
//! auto-yield (fairness) configuration.
//!
//! `QueueExecutor` below is also a worked example of implementing
//! [`spindle_core::Executor`]: a FIFO run queue of [`Fiber`] handles, timers in a
//! map ordered by (deadline, sequence number), and a *virtual* clock that
//! jumps to the next deadline when nothing is runnable (as Cats Effect's
//! `TestControl` does), so sleeping costs no real time. It numbers its
//! fibers with io-core's `FiberIds`. It counts the calls
//! fibers make into it, which is how these tests observe auto-yield and
//! cede.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Counter, DropCounter, HANG_LIMIT, Log, rt_test};
use spindle_core::error::ConfigError;
use spindle_core::executor::support::FiberIds;
use spindle_core::{
    Callback, DEFAULT_AUTO_YIELD_AFTER, Executor, Fiber, FiberConfig, FiberId, IO, Outcome,
    TimerCallback, UIO,
};

// ---------------------------------------------------------------------------
// A test executor
// ---------------------------------------------------------------------------

/// A deterministic single-queue executor with virtual time.
#[derive(Clone)]
struct QueueExecutor {
    shared: Arc<Shared>,
}

struct Shared {
    config: FiberConfig,
    queue: Mutex<VecDeque<Fiber<QueueExecutor>>>,
    timers: Mutex<BTreeMap<(Duration, u64), TimerCallback>>,
    next_timer_seq: AtomicU64,
    now: Mutex<Duration>,
    schedules: AtomicUsize,
    reschedules: AtomicUsize,
    ids: FiberIds,
}

impl Executor for QueueExecutor {
    type TimerKey = (Duration, u64);
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        self.shared.schedules.fetch_add(1, Ordering::SeqCst);
        self.shared.queue.lock().unwrap().push_back(fiber);
    }

    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        self.shared.reschedules.fetch_add(1, Ordering::SeqCst);
        // Behind everything already waiting, as the contract asks.
        self.shared.queue.lock().unwrap().push_back(fiber);
    }

    fn monotonic(&self) -> Duration {
        *self.shared.now.lock().unwrap()
    }

    // `real_time` keeps the trait's default: the monotonic clock.

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> Self::TimerKey {
        let key = (
            deadline,
            self.shared.next_timer_seq.fetch_add(1, Ordering::SeqCst),
        );
        self.shared.timers.lock().unwrap().insert(key, callback);
        key
    }

    fn cancel_timer(&self, key: Self::TimerKey) {
        self.shared.timers.lock().unwrap().remove(&key);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    fn next_fiber_id(&self) -> FiberId {
        self.shared.ids.next()
    }
}

impl QueueExecutor {
    fn new(config: FiberConfig) -> Self {
        QueueExecutor {
            shared: Arc::new(Shared {
                config,
                queue: Mutex::new(VecDeque::new()),
                timers: Mutex::new(BTreeMap::new()),
                next_timer_seq: AtomicU64::new(0),
                now: Mutex::new(Duration::ZERO),
                schedules: AtomicUsize::new(0),
                reschedules: AtomicUsize::new(0),
                ids: FiberIds::new(),
            }),
        }
    }

    fn with_auto_yield_after(steps: u32) -> Self {
        QueueExecutor::new(
            FiberConfig::builder()
                .auto_yield_after(steps)
                .build()
                .unwrap(),
        )
    }

    /// Starts a fiber: it runs when the executor next runs.
    fn spawn<A, E>(&self, io: IO<A, E>, on_complete: impl FnOnce(Outcome<A, E>) + Send + 'static)
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.schedule_fiber(Fiber::new(io, self.clone(), on_complete));
    }

    /// One unit of work: runs the next fiber, or else fires the earliest
    /// timer after moving the virtual clock to its deadline. False if there
    /// was nothing to do.
    fn step(&self) -> bool {
        // Take the fiber out before running it: `run` calls back into
        // `schedule_fiber`/`set_timer`, which lock.
        let next = self.shared.queue.lock().unwrap().pop_front();
        if let Some(fiber) = next {
            fiber.run();
            return true;
        }
        let timer = self.shared.timers.lock().unwrap().pop_first();
        if let Some(((deadline, _), callback)) = timer {
            let mut now = self.shared.now.lock().unwrap();
            *now = (*now).max(deadline);
            drop(now);
            callback.fire();
            return true;
        }
        false
    }

    /// Runs until no fiber is runnable and no timer is pending.
    fn run_until_idle(&self) {
        while self.step() {}
    }

    /// Runs `io` to its end; waits (polling) for wake-ups from other threads.
    fn block_on<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> Outcome<A, E> {
        let slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        self.spawn(io, move |outcome| *s.lock().unwrap() = Some(outcome));
        let give_up = Instant::now() + HANG_LIMIT;
        loop {
            if let Some(outcome) = slot.lock().unwrap().take() {
                return outcome;
            }
            if !self.step() {
                assert!(Instant::now() < give_up, "the program did not finish");
                thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn schedules(&self) -> usize {
        self.shared.schedules.load(Ordering::SeqCst)
    }

    fn reschedules(&self) -> usize {
        self.shared.reschedules.load(Ordering::SeqCst)
    }
}

/// A loop of `n` iterations, each one `delay` (at least one run-loop step).
fn busy_loop(n: u32) -> IO<u32, ()> {
    IO::tail_rec(0u32, move |i| {
        IO::delay(move || {
            if i == n {
                ControlFlow::Break(i)
            } else {
                ControlFlow::Continue(i + 1)
            }
        })
    })
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[test]
fn auto_yield_after_zero_is_a_configuration_error_naming_the_setting() {
    let err = FiberConfig::builder()
        .auto_yield_after(0)
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::AutoYieldAfterZero);
    assert!(err.to_string().contains("auto_yield_after"), "{err}");
}

#[test]
fn the_default_configuration_yields_after_1024_steps() {
    assert_eq!(DEFAULT_AUTO_YIELD_AFTER, 1024);
    assert_eq!(FiberConfig::default().auto_yield_after(), 1024);
    assert_eq!(
        FiberConfig::builder().build().unwrap(),
        FiberConfig::default()
    );
}

#[test]
fn auto_yield_after_accepts_every_positive_step_count() {
    for steps in [1, 2, 1000, u32::MAX] {
        let config = FiberConfig::builder()
            .auto_yield_after(steps)
            .build()
            .unwrap();
        assert_eq!(config.auto_yield_after(), steps);
    }
}

// ---------------------------------------------------------------------------
// Auto-yield
// ---------------------------------------------------------------------------

#[test]
fn a_fiber_yields_to_its_executor_after_every_n_steps() {
    // A fiber yields once it has taken N steps, at the next step that
    // starts a program (a result travelling through continuations reaches
    // its next program first, as in Cats Effect). With N = 1 it yields
    // before every program step but the first: that counts them, P.
    let one = QueueExecutor::with_auto_yield_after(1);
    assert_eq!(one.block_on(busy_loop(1000)), Outcome::Succeeded(1000));
    let programs = one.reschedules() + 1;
    assert!(
        programs > 1000,
        "each iteration starts at least one program: {programs}"
    );
    // Every step is a program step or a result step, and a result step is
    // followed by a program step (or the end), so the T steps of the run
    // are between P and 2P + 1. A turn takes N steps, or N + 1 when its
    // last budgeted step handed on a result: T / (N + 1) <= turns <= T / N.
    for n in [2u32, 3, 10, 64, 1000] {
        let executor = QueueExecutor::with_auto_yield_after(n);
        assert_eq!(executor.block_on(busy_loop(1000)), Outcome::Succeeded(1000));
        let turns = executor.reschedules() + 1;
        let n = n as usize;
        assert!(
            turns >= programs / (n + 1) && turns <= (2 * programs + 1).div_ceil(n),
            "auto_yield_after({n}): {turns} turns for {programs} program steps"
        );
        assert_eq!(
            executor.schedules(),
            1,
            "yielding goes through reschedule_fiber only"
        );
    }
}

#[test]
fn a_short_fiber_is_not_rescheduled_with_the_default_configuration() {
    let executor = QueueExecutor::new(FiberConfig::default());
    assert_eq!(executor.block_on(busy_loop(100)), Outcome::Succeeded(100));
    assert_eq!(executor.reschedules(), 0);
}

#[test]
fn a_long_fiber_is_rescheduled_with_the_default_configuration() {
    let executor = QueueExecutor::new(FiberConfig::default());
    assert_eq!(
        executor.block_on(busy_loop(10_000)),
        Outcome::Succeeded(10_000)
    );
    assert!(executor.reschedules() >= 10_000 / DEFAULT_AUTO_YIELD_AFTER as usize - 1);
}

/// A fiber with tracing off whose every step is a traced scope: each scope
/// switches the run-loop to its tracing instantiation and back. Those
/// switches are not turns: the auto-yield budget carries over them.
#[cfg(feature = "tracing")]
#[test]
fn a_fiber_switching_in_and_out_of_traced_scopes_still_yields_after_n_steps() {
    const N: u32 = 16;
    const ITERATIONS: u32 = 1000;
    let executor = QueueExecutor::new(
        FiberConfig::builder()
            .auto_yield_after(N)
            .tracing(spindle_core::TracingMode::None)
            .build()
            .unwrap(),
    );
    let traced_steps: IO<u32, ()> = IO::tail_rec(0u32, move |i| {
        IO::delay(move || {
            if i == ITERATIONS {
                ControlFlow::Break(i)
            } else {
                ControlFlow::Continue(i + 1)
            }
        })
        .traced()
    });
    assert_eq!(
        executor.block_on(traced_steps),
        Outcome::Succeeded(ITERATIONS)
    );
    // Each iteration takes at least 3 steps (the scope, the delay, the
    // step that ends the scope): at least 3,000 steps, so at least
    // 3000 / (N + 1) - 1 = 175 reschedules. A budget reset at every switch
    // never yields at all.
    let reschedules = executor.reschedules();
    assert!(
        reschedules >= (3 * ITERATIONS / (N + 1) - 1) as usize,
        "{reschedules} reschedules for {ITERATIONS} traced steps"
    );
}

#[test]
fn a_busy_fiber_cannot_starve_another_one() {
    const N: u32 = 16;
    let executor = QueueExecutor::with_auto_yield_after(N);
    let log: Log<char> = Log::new();
    for name in ['a', 'b'] {
        let l = log.clone();
        let io: IO<(), ()> = IO::replicate(200, move || {
            let l = l.clone();
            IO::delay(move || l.push(name))
        })
        .void();
        executor.spawn(io, |_| {});
    }
    executor.run_until_idle();
    let events = log.events();
    assert_eq!(events.len(), 400);
    let longest_run = events
        .chunk_by(|x, y| x == y)
        .map(|run| run.len())
        .max()
        .unwrap();
    assert!(
        longest_run <= N as usize,
        "one fiber ran {longest_run} effects in a row"
    );
}

#[test]
fn without_yielding_fibers_run_one_after_the_other_in_fifo_order() {
    let executor = QueueExecutor::with_auto_yield_after(u32::MAX);
    let log: Log<char> = Log::new();
    for name in ['a', 'b'] {
        let l = log.clone();
        let io: IO<(), ()> = IO::replicate(100, move || {
            let l = l.clone();
            IO::delay(move || l.push(name))
        })
        .void();
        executor.spawn(io, |_| {});
    }
    executor.run_until_idle();
    let expected: Vec<char> = std::iter::repeat_n('a', 100)
        .chain(std::iter::repeat_n('b', 100))
        .collect();
    assert_eq!(log.events(), expected);
    assert_eq!(executor.reschedules(), 0);
}

// ---------------------------------------------------------------------------
// Cede, async, timers and clocks through the trait
// ---------------------------------------------------------------------------

#[test]
fn each_cede_reschedules_the_fiber_once() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let io: IO<u8, ()> = IO::replicate(5, IO::cede).map_to(1);
    assert_eq!(executor.block_on(io), Outcome::Succeeded(1));
    assert_eq!(executor.reschedules(), 5);
    assert_eq!(executor.schedules(), 1);
}

#[test]
fn cede_lets_the_other_fibers_run_first() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let log: Log<&'static str> = Log::new();
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    let first: IO<(), ()> = IO::delay(move || l1.push("a1"))
        .product_r(IO::cede())
        .product_r(IO::delay(move || l2.push("a2")));
    let second: IO<(), ()> = IO::delay(move || l3.push("b"));
    executor.spawn(first, |_| {});
    executor.spawn(second, |_| {});
    executor.run_until_idle();
    assert_eq!(log.events(), ["a1", "b", "a2"]);
}

#[test]
fn a_callback_completed_during_registration_does_not_go_through_the_executor() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let io: IO<u8, ()> = IO::from_callback(|cb| {
        cb.succeed(1);
        None
    });
    assert_eq!(executor.block_on(io), Outcome::Succeeded(1));
    assert_eq!((executor.schedules(), executor.reschedules()), (1, 0));
}

#[test]
fn a_callback_completed_from_another_thread_schedules_the_fiber_once() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let io: IO<u8, ()> = IO::from_callback(|cb| {
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            cb.succeed(2);
            cb.succeed(3);
        });
        None
    });
    assert_eq!(executor.block_on(io), Outcome::Succeeded(2));
    thread::sleep(Duration::from_millis(20));
    assert_eq!(executor.schedules(), 2, "spawn, then one resume");
    assert_eq!(executor.reschedules(), 0);
}

#[test]
fn sleep_sets_a_timer_at_now_plus_the_duration_and_resumes_when_it_fires() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let hour = Duration::from_secs(3600);
    let io: IO<(Duration, Duration), ()> = IO::monotonic().flat_map(move |before| {
        IO::sleep(hour)
            .product_r(IO::monotonic())
            .map(move |after| (before, after))
    });
    let started = Instant::now();
    assert_eq!(
        executor.block_on(io),
        Outcome::Succeeded((Duration::ZERO, hour))
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "virtual time costs no real time"
    );
    assert_eq!(executor.schedules(), 2, "spawn, then the timer's resume");
}

#[test]
fn a_timeout_whose_body_ends_without_waiting_sets_no_timer_and_starts_no_fiber() {
    let ex = QueueExecutor::new(FiberConfig::default());
    let io: IO<u32, spindle_core::error::TimeoutError> =
        IO::delay(|| 7u32).timeout(Duration::from_secs(3600));
    assert_eq!(ex.block_on(io), Outcome::Succeeded(7));
    assert_eq!(
        ex.shared.next_timer_seq.load(Ordering::SeqCst),
        0,
        "no timer set"
    );
    assert_eq!(
        ex.schedules(),
        1,
        "only the program's own fiber was scheduled"
    );
}

#[test]
fn a_timeout_whose_body_waits_arms_its_deadline_on_the_wait_and_removes_it_when_the_body_resumes() {
    let ex = QueueExecutor::new(FiberConfig::default());
    let io: IO<u32, spindle_core::error::TimeoutError> = IO::sleep(Duration::from_secs(1))
        .map_to(7u32)
        .timeout(Duration::from_secs(3600));
    assert_eq!(ex.block_on(io), Outcome::Succeeded(7));
    // The sleep's timer and the deadline's, armed on the same wait.
    assert_eq!(ex.shared.next_timer_seq.load(Ordering::SeqCst), 2);
    assert!(ex.shared.timers.lock().unwrap().is_empty(), "no timer left");
    // Started once, resumed once by the sleep's timer: no child fiber.
    assert_eq!(ex.schedules(), 2);
}

#[test]
fn sleeping_fibers_wake_in_deadline_order() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let log: Log<u64> = Log::new();
    for secs in [30u64, 10, 20, 10] {
        let l = log.clone();
        executor.spawn(
            UIO::sleep(Duration::from_secs(secs)).product_r(IO::delay(move || l.push(secs))),
            |_| {},
        );
    }
    executor.run_until_idle();
    assert_eq!(log.events(), [10, 10, 20, 30]);
    assert_eq!(executor.monotonic(), Duration::from_secs(30));
}

#[test]
fn delay_by_waits_on_the_executors_clock() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let io: IO<Duration, ()> = IO::monotonic().delay_by(Duration::from_millis(1500));
    assert_eq!(
        executor.block_on(io),
        Outcome::Succeeded(Duration::from_millis(1500))
    );
}

#[test]
fn real_time_defaults_to_the_monotonic_clock_of_the_executor() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let io: IO<(Duration, Duration), ()> = IO::sleep(Duration::from_secs(5))
        .product_r(IO::real_time())
        .flat_map(|real| IO::monotonic().map(move |mono| (real, mono)));
    assert_eq!(
        executor.block_on(io),
        Outcome::Succeeded((Duration::from_secs(5), Duration::from_secs(5)))
    );
}

// ---------------------------------------------------------------------------
// Fiber handles
// ---------------------------------------------------------------------------

#[test]
fn a_fiber_reports_its_executor_and_its_number_in_the_order_fibers_were_made() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let a = Fiber::new(UIO::unit(), executor.clone(), |_| {});
    let b = Fiber::new(UIO::unit(), executor.clone(), |_| {});
    assert_eq!((a.id().get(), b.id().get()), (1, 2));
    assert_eq!(format!("{a:?}"), "Fiber { id: #1 }");
    assert!(Arc::ptr_eq(&a.executor().shared, &executor.shared));
    // Another executor numbers its own fibers from 1.
    let other = QueueExecutor::new(FiberConfig::default());
    let c = Fiber::new(UIO::unit(), other, |_| {});
    assert_eq!(c.id().get(), 1);
}

#[test]
fn dropping_an_unrun_fiber_drops_its_program_and_never_reports_an_outcome() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let dropped = Counter::new();
    let completed = Counter::new();
    let (guard, c) = (DropCounter(dropped.clone()), completed.clone());
    let on_complete_dropped = Counter::new();
    let on_complete_guard = DropCounter(on_complete_dropped.clone());
    let fiber = Fiber::new(
        IO::<u8, ()>::pure(1).map(move |x| {
            let _keep = &guard;
            x
        }),
        executor,
        move |_| {
            let _keep = &on_complete_guard;
            c.incr();
        },
    );
    drop(fiber);
    assert_eq!(dropped.get(), 1, "the program was dropped exactly once");
    assert_eq!(
        on_complete_dropped.get(),
        1,
        "the completion callback was dropped exactly once"
    );
    assert_eq!(completed.get(), 0, "no outcome was reported");
}

#[test]
fn a_suspended_fiber_is_freed_when_its_last_callback_is_dropped() {
    let executor = QueueExecutor::new(FiberConfig::default());
    let kept: Arc<Mutex<Option<Callback<u8, ()>>>> = Arc::new(Mutex::new(None));
    let k = kept.clone();
    let dropped = Counter::new();
    let guard = DropCounter(dropped.clone());
    let completed = Counter::new();
    let c = completed.clone();
    let io: IO<u8, ()> = IO::from_callback(move |cb| {
        *k.lock().unwrap() = Some(cb);
        None
    })
    .map(move |x| {
        let _keep = &guard;
        x
    });
    executor.spawn(io, move |_| {
        c.incr();
    });
    executor.run_until_idle();
    assert_eq!(
        dropped.get(),
        0,
        "the callback keeps the suspended fiber alive"
    );
    drop(kept.lock().unwrap().take());
    assert_eq!(
        dropped.get(),
        1,
        "the fiber and its continuation were freed exactly once"
    );
    assert_eq!(completed.get(), 0);
}

#[test]
fn a_fiber_resumed_after_being_queued_behind_others_runs_them_first() {
    // Resumption goes through schedule_fiber: behind what is already queued.
    let executor = QueueExecutor::new(FiberConfig::default());
    let log: Log<&'static str> = Log::new();
    let kept: Arc<Mutex<Option<Callback<(), ()>>>> = Arc::new(Mutex::new(None));
    let (k, l1) = (kept.clone(), log.clone());
    executor.spawn(
        IO::<(), ()>::from_callback(move |cb| {
            *k.lock().unwrap() = Some(cb);
            None
        })
        .product_r(IO::delay(move || l1.push("resumed"))),
        |_| {},
    );
    let (k, l2, l3) = (kept.clone(), log.clone(), log.clone());
    executor.spawn(
        IO::<(), ()>::delay(move || {
            k.lock()
                .unwrap()
                .take()
                .expect("first fiber suspended")
                .succeed(());
            l2.push("completer");
        })
        .product_r(IO::cede())
        .product_r(IO::delay(move || l3.push("completer after cede"))),
        |_| {},
    );
    executor.run_until_idle();
    assert_eq!(
        log.events(),
        ["completer", "resumed", "completer after cede"]
    );
}

// ---------------------------------------------------------------------------
// Auto-yield on every executor
// ---------------------------------------------------------------------------

/// A program that exercises every kind of step: binds, handlers, async
/// (synchronous and from another thread), sleep and cede.
fn mixed_program() -> IO<u64, String> {
    IO::tail_rec(0u64, |i| {
        let step: IO<u64, String> = match i % 6 {
            0 => IO::delay(move || i).map(|x| x + 1),
            1 => IO::raise_error(format!("{i}"))
                .handle_error_with(|e| IO::pure(e.parse::<u64>().unwrap() + 1)),
            2 => IO::from_callback(move |cb| {
                cb.succeed(i + 1);
                None
            }),
            3 => IO::from_callback(move |cb| {
                thread::spawn(move || cb.succeed(i + 1));
                None
            }),
            4 => IO::sleep(Duration::from_micros(10)).map_to(i + 1),
            _ => IO::cede().map_to(i + 1).attempt().rethrow(),
        };
        step.map(|n| {
            if n == 120 {
                ControlFlow::Break(n)
            } else {
                ControlFlow::Continue(n)
            }
        })
    })
}

rt_test! {
    fn a_program_gives_the_same_outcome_whatever_the_auto_yield_threshold() {
        for steps in [1, 2, 3, 7, 1024, u32::MAX] {
            let config = FiberConfig::builder().auto_yield_after(steps).build().unwrap();
            let rt = rt_with_config(config);
            let outcome = common::within(HANG_LIMIT, move || rt.run(mixed_program()));
            assert_eq!(outcome, Some(Outcome::Succeeded(120)), "auto_yield_after({steps})");
        }
    }

    fn a_long_program_completes_when_it_yields_after_every_step() {
        let config = FiberConfig::builder().auto_yield_after(1).build().unwrap();
        let rt = rt_with_config(config);
        let mut io: IO<u64, ()> = IO::pure(0);
        for _ in 0..100_000 {
            io = io.flat_map(|x| IO::pure(x + 1));
        }
        assert_eq!(rt.run(io), Outcome::Succeeded(100_000));
    }
}
