//! exec-single's loop: determinism, timer order, wake-ups from other
//! threads, repeated `block_on`, nesting, and what dropping the executor
//! frees.
//!
//! exec-single has no `spawn` of its own yet; the tests start extra fibers
//! the way an executor's user can: `Fiber::new(io, rt.handle(), ..)` handed
//! to `Executor::schedule_fiber`.

// These tests run on the system clock and threads (`std`); without it
// (`--no-default-features`) this file is empty.
#![cfg(feature = "std")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use spindle_core::{Callback, Executor, Fiber, IO, IORuntime, Outcome, UIO};
use spindle_exec_single::{Builder, Clock, Handle, RunError, SingleThreaded, StdClock};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Generous limit for tests whose failure mode is a hang.
const HANG_LIMIT: Duration = Duration::from_secs(10);

/// Runs `f` on a new thread; `None` if it did not finish within `HANG_LIMIT`.
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(HANG_LIMIT) {
        Ok(Ok(r)) => Some(r),
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => None,
    }
}

/// A shared counter.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl Counter {
    fn incr(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Counts its drops.
struct DropCounter(Counter);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.incr();
    }
}

/// A shared event log.
#[derive(Clone)]
struct Log<T>(Arc<Mutex<Vec<T>>>);

impl<T: Clone> Log<T> {
    fn new() -> Self {
        Log(Arc::new(Mutex::new(Vec::new())))
    }
    fn push(&self, event: T) {
        self.0.lock().unwrap().push(event);
    }
    fn events(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
}

/// A program that starts `io` as a new fiber on `handle`'s executor.
fn spawn<C, A, E, X>(handle: &Handle<C>, io: IO<A, E>) -> IO<(), X>
where
    C: Clock,
    A: Send + 'static,
    E: Send + 'static,
    X: Send + 'static,
{
    spawn_then(handle, io, |_| {})
}

/// Like [`spawn`], with a completion callback for the new fiber.
fn spawn_then<C, A, E, X>(
    handle: &Handle<C>,
    io: IO<A, E>,
    on_complete: impl FnOnce(Outcome<A, E>) + Send + 'static,
) -> IO<(), X>
where
    C: Clock,
    A: Send + 'static,
    E: Send + 'static,
    X: Send + 'static,
{
    let handle = handle.clone();
    IO::delay(move || {
        let fiber = Fiber::new(io, handle.clone(), on_complete);
        handle.schedule_fiber(fiber);
    })
}

/// A clock held at zero until released, then running from zero: timers set
/// while it is held get exact deadlines (their durations), which makes
/// deadline ties and timer order independent of how long setting them took.
#[derive(Clone, Default)]
struct HeldClock(Arc<Mutex<Option<Instant>>>);

impl HeldClock {
    fn release(&self) {
        self.0.lock().unwrap().get_or_insert_with(Instant::now);
    }
}

impl Clock for HeldClock {
    fn now(&self) -> Duration {
        match *self.0.lock().unwrap() {
            None => Duration::ZERO,
            Some(start) => start.elapsed(),
        }
    }
}

/// Callbacks that fibers leave for others to call, one slot per fiber.
type Slots<A> = Arc<Mutex<Vec<Option<Callback<A, ()>>>>>;

/// Cedes until `done` holds (other fibers run in between).
fn cede_until<E: Send + 'static>(done: impl Fn() -> bool + Send + 'static) -> IO<(), E> {
    IO::iterate_until(|| IO::cede(), move |()| done()).void()
}

// ---------------------------------------------------------------------------
// Determinism and order
// ---------------------------------------------------------------------------

/// Runs five fibers that cede, resume each other through async callbacks
/// and sleep; returns the events they recorded, in order.
fn five_fibers_program() -> Vec<(usize, String)> {
    const WORKERS: usize = 5;
    let sleeps_ms = [15u64, 5, 10, 5, 15];
    let clock = HeldClock::default();
    let rt = Builder::with_clock(clock.clone())
        .build()
        .expect("an executor");
    let handle = rt.handle().clone();
    let log: Log<(usize, String)> = Log::new();
    let callbacks: Slots<usize> = Arc::new(Mutex::new((0..WORKERS).map(|_| None).collect()));
    let sleeping = Counter::default();

    let mut main: IO<(), ()> = IO::unit();
    for (i, sleep_ms) in sleeps_ms.into_iter().enumerate() {
        let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
        let (cbs, asleep) = (callbacks.clone(), sleeping.clone());
        let worker: IO<(), ()> = IO::delay(move || l1.push((i, "start".into())))
            .product_r(IO::cede())
            .product_r(IO::delay(move || l2.push((i, "after cede".into()))))
            .product_r(IO::from_callback(move |cb| {
                // Leave our callback, and resume the previous worker.
                let mut cbs = cbs.lock().unwrap();
                cbs[i] = Some(cb);
                if i > 0 {
                    let previous = cbs[i - 1].take().expect("previous worker waits");
                    assert!(previous.succeed(i));
                }
                None
            }))
            .flat_map(move |by| IO::delay(move || l3.push((i, format!("resumed by {by}")))))
            .product_r(IO::delay(move || {
                asleep.incr();
            }))
            .product_r(IO::sleep(Duration::from_millis(sleep_ms)))
            .product_r(IO::delay(move || {
                l4.push((i, format!("woke after {sleep_ms} ms")))
            }));
        main = main.product_r(spawn(&handle, worker));
    }
    let (cbs, asleep, c, l) = (
        callbacks.clone(),
        sleeping.clone(),
        clock.clone(),
        log.clone(),
    );
    let last_resumed = Arc::new(Mutex::new(false));
    let lr = last_resumed.clone();
    let main = main
        // Resume the last worker once it waits.
        .product_r(cede_until(move || {
            let mut cbs = cbs.lock().unwrap();
            let mut done = lr.lock().unwrap();
            if !*done {
                if let Some(cb) = cbs[WORKERS - 1].take() {
                    assert!(cb.succeed(usize::MAX));
                    *done = true;
                }
            }
            *done
        }))
        .product_r(cede_until(move || asleep.get() == WORKERS))
        // Every worker has set its timer on the held clock: let time run.
        .product_r(IO::delay(move || c.release()))
        .product_r(IO::sleep(Duration::from_millis(40)))
        .product_r(IO::delay(move || l.events()));
    match within(move || rt.block_on(main).expect("block_on")) {
        Some(Outcome::Succeeded(events)) => events,
        other => panic!("the program did not succeed: {other:?}"),
    }
}

#[test]
fn the_same_program_records_the_same_events_in_the_same_order_on_every_run() {
    let first = five_fibers_program();
    assert_eq!(first.len(), 5 * 4);
    for run in 1..20 {
        assert_eq!(
            five_fibers_program(),
            first,
            "run {run} differs from the first"
        );
    }
    // The timers fired in deadline order, ties in the order they were set
    // (the order in which the workers were resumed).
    let resumed: Vec<usize> = first
        .iter()
        .filter(|(_, e)| e.starts_with("resumed"))
        .map(|(i, _)| *i)
        .collect();
    let woke: Vec<usize> = first
        .iter()
        .filter(|(_, e)| e.starts_with("woke"))
        .map(|(i, _)| *i)
        .collect();
    let mut expected = resumed.clone();
    let sleeps_ms = [15u64, 5, 10, 5, 15];
    expected.sort_by_key(|i| sleeps_ms[*i]);
    assert_eq!(woke, expected, "resumed in order {resumed:?}");
}

#[test]
fn spawned_fibers_start_in_the_order_they_were_scheduled_and_cede_goes_behind_them() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let log: Log<String> = Log::new();
    let mut main: IO<(), ()> = IO::unit();
    for i in 0..3 {
        let (l1, l2) = (log.clone(), log.clone());
        let worker: IO<(), ()> = IO::delay(move || l1.push(format!("{i} start")))
            .product_r(IO::cede())
            .product_r(IO::delay(move || l2.push(format!("{i} end"))));
        main = main.product_r(spawn(&handle, worker));
    }
    let (done, l) = (Counter::default(), log.clone());
    let d = done.clone();
    let main = main
        .product_r(cede_until(move || l.events().len() == 6))
        .product_r(IO::delay(move || d.incr()));
    assert_eq!(
        within(move || rt.block_on(main).expect("block_on")).map(|o| o.is_succeeded()),
        Some(true)
    );
    assert_eq!(
        log.events(),
        ["0 start", "1 start", "2 start", "0 end", "1 end", "2 end"]
    );
    assert_eq!(done.get(), 1);
}

#[test]
fn timers_fire_in_deadline_order_and_ties_in_the_order_they_were_set() {
    let clock = HeldClock::default();
    let rt = Builder::with_clock(clock.clone())
        .build()
        .expect("an executor");
    let handle = rt.handle().clone();
    let log: Log<(char, u64)> = Log::new();
    let sleeping = Counter::default();
    let mut main: IO<(), ()> = IO::unit();
    for (name, ms) in [
        ('a', 30u64),
        ('b', 10),
        ('c', 20),
        ('d', 10),
        ('e', 30),
        ('f', 10),
    ] {
        let (l, s) = (log.clone(), sleeping.clone());
        let sleeper: IO<(), ()> = IO::delay(move || {
            s.incr();
        })
        .product_r(IO::sleep(Duration::from_millis(ms)))
        .product_r(IO::delay(move || l.push((name, ms))));
        main = main.product_r(spawn(&handle, sleeper));
    }
    let (s, c) = (sleeping.clone(), clock.clone());
    let main = main
        .product_r(cede_until(move || s.get() == 6))
        .product_r(IO::delay(move || c.release()))
        .product_r(IO::sleep(Duration::from_millis(60)));
    assert_eq!(
        within(move || rt.block_on(main).expect("block_on")),
        Some(Outcome::Succeeded(()))
    );
    assert_eq!(
        log.events(),
        [
            ('b', 10),
            ('d', 10),
            ('f', 10),
            ('c', 20),
            ('a', 30),
            ('e', 30)
        ]
    );
}

#[test]
fn timers_with_different_deadlines_on_the_system_clock_fire_in_deadline_order() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let log: Log<u64> = Log::new();
    let mut main: IO<(), ()> = IO::unit();
    for ms in [90u64, 30, 60] {
        let l = log.clone();
        main = main.product_r(spawn(
            &handle,
            UIO::sleep(Duration::from_millis(ms)).product_r(IO::delay(move || l.push(ms))),
        ));
    }
    let main = main.product_r(IO::sleep(Duration::from_millis(150)));
    assert_eq!(
        within(move || rt.block_on(main).expect("block_on")),
        Some(Outcome::Succeeded(()))
    );
    assert_eq!(log.events(), [30, 60, 90]);
}

#[test]
fn the_clock_given_to_the_executor_is_the_one_programs_read() {
    let clock = HeldClock::default();
    let rt = Builder::with_clock(clock.clone())
        .build()
        .expect("an executor");
    let io: IO<(Duration, Duration), ()> =
        IO::monotonic().flat_map(|m| IO::real_time().map(move |r| (m, r)));
    assert_eq!(
        rt.block_on(io).expect("block_on"),
        Outcome::Succeeded((Duration::ZERO, Duration::ZERO))
    );
    clock.release();
    let io: IO<(), ()> = IO::sleep(Duration::from_millis(20));
    assert_eq!(
        within(move || rt.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded(()))
    );
    assert!(clock.now() >= Duration::from_millis(20));
}

#[test]
fn the_handle_reads_the_system_clocks() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let a = handle.monotonic();
    thread::sleep(Duration::from_millis(5));
    let b = handle.monotonic();
    assert!(b >= a + Duration::from_millis(5), "{a:?} then {b:?}");
    let system = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let real = handle.real_time();
    let diff = real.abs_diff(system);
    assert!(
        diff < Duration::from_secs(5),
        "real_time {real:?} vs {system:?}"
    );
    assert!(StdClock::default().now() < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------
// Wake-ups from other threads
// ---------------------------------------------------------------------------

#[test]
fn a_wake_up_from_another_thread_resumes_the_parked_loop() {
    let rt = SingleThreaded::new().expect("an executor");
    let io: IO<u32, ()> = IO::from_callback(|cb| {
        thread::spawn(move || {
            // Long enough for the loop to find nothing to do and park.
            thread::sleep(Duration::from_millis(50));
            cb.succeed(9);
        });
        None
    });
    let start = Instant::now();
    assert_eq!(
        within(move || rt.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded(9))
    );
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn a_wake_up_from_another_thread_resumes_a_loop_parked_until_a_distant_timer() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    // Another fiber sleeps for an hour: the loop parks with that deadline.
    let io: IO<u32, ()> =
        spawn(&handle, UIO::sleep(Duration::from_secs(3600))).product_r(IO::from_callback(|cb| {
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                cb.succeed(10);
            });
            None
        }));
    assert_eq!(
        within(move || rt.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded(10))
    );
}

#[test]
fn a_fiber_scheduled_from_another_thread_runs_on_the_loop_thread() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let io: IO<bool, ()> = IO::from_callback(move |cb: Callback<thread::ThreadId, ()>| {
        thread::spawn(move || {
            let fiber = Fiber::new(
                IO::<thread::ThreadId, ()>::delay(|| thread::current().id()),
                handle.clone(),
                move |outcome| {
                    cb.complete(match outcome {
                        Outcome::Succeeded(id) => Ok(id),
                        _ => Err(()),
                    });
                },
            );
            handle.schedule_fiber(fiber);
        });
        None
    })
    .map(|ran_on| ran_on == thread::current().id());
    assert_eq!(
        within(move || rt.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded(true))
    );
}

#[test]
fn many_wake_ups_from_many_threads_all_resume_their_fibers() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let results: Log<u32> = Log::new();
    let mut main: IO<(), ()> = IO::unit();
    for i in 0..50u32 {
        let r = results.clone();
        let worker: IO<(), ()> = IO::from_callback(move |cb| {
            thread::spawn(move || cb.succeed(i));
            None
        })
        .map(move |v| r.push(v));
        main = main.product_r(spawn(&handle, worker));
    }
    let r = results.clone();
    let main = main.product_r(IO::iterate_until(
        || IO::sleep(Duration::from_millis(1)),
        move |()| r.events().len() == 50,
    ));
    assert_eq!(
        within(move || rt.block_on(main).expect("block_on")),
        Some(Outcome::Succeeded(()))
    );
    let mut got = results.events();
    got.sort();
    assert_eq!(got, (0..50).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------
// Repeated and nested block_on
// ---------------------------------------------------------------------------

#[test]
fn block_on_can_be_called_repeatedly_on_one_executor() {
    let mut rt = SingleThreaded::new().expect("an executor");
    for i in 0..100u64 {
        let io: IO<u64, String> = match i % 4 {
            0 => IO::pure(i),
            1 => IO::sleep(Duration::from_micros(100)).map_to(i),
            2 => IO::from_callback(move |cb| {
                thread::spawn(move || cb.succeed(i));
                None
            }),
            _ => IO::raise_error(format!("{i}")),
        };
        let expected = if i % 4 == 3 {
            Outcome::Errored(format!("{i}"))
        } else {
            Outcome::Succeeded(i)
        };
        let (outcome, back) = within(move || {
            let outcome = rt.block_on(io).expect("block_on");
            (outcome, rt)
        })
        .expect("block_on finished");
        rt = back;
        assert_eq!(outcome, expected, "run {i}");
    }
}

#[test]
fn try_block_on_works_again_after_a_deadlock() {
    let rt = SingleThreaded::new().expect("an executor");
    assert_eq!(rt.try_block_on(UIO::<u8>::never()), Err(RunError::Deadlock));
    assert_eq!(
        rt.try_block_on(IO::<u8, ()>::pure(1)),
        Ok(Outcome::Succeeded(1))
    );
    assert_eq!(
        rt.block_on(UIO::sleep(Duration::from_millis(1)).map_to(2))
            .expect("block_on"),
        Outcome::Succeeded(2)
    );
    assert!(RunError::Deadlock.to_string().contains("deadlock"));
}

#[test]
fn block_on_returns_when_the_main_fiber_ends_even_if_others_still_sleep() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let io: IO<u8, ()> = spawn(&handle, UIO::sleep(Duration::from_secs(3600))).map_to(1);
    let start = Instant::now();
    assert_eq!(
        within(move || rt.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded(1))
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_fiber_left_sleeping_by_one_block_on_finishes_during_the_next() {
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let log: Log<&'static str> = Log::new();
    let l = log.clone();
    let first: IO<(), ()> = spawn(
        &handle,
        UIO::sleep(Duration::from_millis(10))
            .product_r(IO::delay(move || l.push("left-over fiber"))),
    );
    assert_eq!(
        rt.block_on(first).expect("block_on"),
        Outcome::Succeeded(())
    );
    assert!(log.events().is_empty());
    let second: IO<(), ()> = IO::sleep(Duration::from_millis(50));
    let (outcome, _rt) =
        within(move || (rt.block_on(second).expect("block_on"), rt)).expect("finished");
    assert_eq!(outcome, Outcome::Succeeded(()));
    assert_eq!(log.events(), ["left-over fiber"]);
}

#[test]
fn an_executor_can_block_on_inside_a_program_of_another_executor_on_the_same_thread() {
    let outer = SingleThreaded::new().expect("an executor");
    let io: IO<(u32, u32), ()> = IO::delay(|| {
        let inner = SingleThreaded::new().expect("an executor");
        inner
            .block_on(UIO::sleep(Duration::from_millis(1)).map_to(5u32))
            .expect("block_on")
            .succeeded()
            .unwrap()
    })
    // The outer loop still works afterwards: a timer and a remote wake-up.
    .flat_map(|a| IO::sleep(Duration::from_millis(1)).map_to(a))
    .flat_map(|a| {
        IO::from_callback(|cb| {
            thread::spawn(move || cb.succeed(6));
            None
        })
        .map(move |b| (a, b))
    });
    assert_eq!(
        within(move || outer.block_on(io).expect("block_on")),
        Some(Outcome::Succeeded((5, 6)))
    );
}

// ---------------------------------------------------------------------------
// Dropping the executor
// ---------------------------------------------------------------------------

/// A program that keeps `guard` alive until it ends, and counts if it ends.
fn holding<E: Send + 'static>(io: IO<(), E>, guard: DropCounter, ended: &Counter) -> IO<(), E> {
    let ended = ended.clone();
    io.map(move |()| {
        let _keep = &guard;
        ended.incr();
    })
}

#[test]
fn dropping_the_executor_frees_a_fiber_sleeping_on_a_timer() {
    let (dropped, ended, started) = (Counter::default(), Counter::default(), Counter::default());
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let s = started.clone();
    let sleeper = holding::<()>(
        IO::delay(move || {
            s.incr();
        })
        .product_r(IO::sleep(Duration::from_secs(3600))),
        DropCounter(dropped.clone()),
        &ended,
    );
    // The main fiber cedes once, so that the other one runs up to its sleep.
    let main: IO<(), ()> = spawn(&handle, sleeper).product_r(IO::cede());
    assert_eq!(rt.block_on(main).expect("block_on"), Outcome::Succeeded(()));
    assert_eq!(started.get(), 1, "the fiber went to sleep");
    assert_eq!(
        dropped.get(),
        0,
        "the sleeping fiber is alive while the executor is"
    );
    drop(rt);
    assert_eq!(
        dropped.get(),
        1,
        "the sleeping fiber was freed exactly once"
    );
    assert_eq!(ended.get(), 0);
    drop(handle);
    assert_eq!(dropped.get(), 1);
}

#[test]
fn dropping_the_executor_frees_a_fiber_still_in_its_run_queue() {
    let (dropped, ended) = (Counter::default(), Counter::default());
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let completed = Counter::default();
    let on_complete_dropped = Counter::default();
    let (c, guard) = (completed.clone(), DropCounter(on_complete_dropped.clone()));
    let queued = holding::<()>(IO::unit(), DropCounter(dropped.clone()), &ended);
    // The main fiber ends in the turn that queued the other fiber, which
    // would only have run in the next turn.
    let main: IO<(), ()> = spawn_then(&handle, queued, move |_| {
        let _keep = &guard;
        c.incr();
    });
    assert_eq!(rt.block_on(main).expect("block_on"), Outcome::Succeeded(()));
    assert_eq!(
        dropped.get(),
        0,
        "the queued fiber is alive while the executor is"
    );
    drop(rt);
    assert_eq!(dropped.get(), 1, "the queued fiber was freed exactly once");
    assert_eq!(
        on_complete_dropped.get(),
        1,
        "its completion callback was dropped exactly once"
    );
    assert_eq!((ended.get(), completed.get()), (0, 0), "it never ran");
}

#[test]
fn dropping_the_executor_frees_a_fiber_woken_after_block_on_returned() {
    let (dropped, ended) = (Counter::default(), Counter::default());
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let kept: Arc<Mutex<Option<Callback<(), ()>>>> = Arc::new(Mutex::new(None));
    let k = kept.clone();
    let waiter = holding(
        IO::from_callback(move |cb| {
            *k.lock().unwrap() = Some(cb);
            None
        }),
        DropCounter(dropped.clone()),
        &ended,
    );
    assert_eq!(
        rt.block_on(spawn::<_, _, _, ()>(&handle, waiter).product_r(IO::cede()))
            .expect("block_on"),
        Outcome::Succeeded(())
    );
    // Wake the fiber from another thread: it lands in the remote queue of a
    // loop that is not running.
    let cb = kept.lock().unwrap().take().expect("the fiber waits");
    assert!(thread::spawn(move || cb.succeed(())).join().unwrap());
    assert_eq!(
        dropped.get(),
        0,
        "the woken fiber waits in the executor's queue"
    );
    drop(handle);
    drop(rt);
    assert_eq!(dropped.get(), 1, "the woken fiber was freed exactly once");
    assert_eq!(ended.get(), 0);
}

#[test]
fn a_fiber_suspended_forever_is_freed_as_soon_as_nothing_can_resume_it() {
    let (dropped, ended) = (Counter::default(), Counter::default());
    let rt = SingleThreaded::new().expect("an executor");
    let handle = rt.handle().clone();
    let never = holding::<()>(IO::never(), DropCounter(dropped.clone()), &ended);
    assert_eq!(
        rt.block_on(spawn::<_, _, _, ()>(&handle, never).product_r(IO::cede()))
            .expect("block_on"),
        Outcome::Succeeded(())
    );
    assert_eq!(dropped.get(), 1);
    assert_eq!(ended.get(), 0);
}

#[test]
fn dropping_an_executor_that_never_ran_anything_is_fine() {
    drop(SingleThreaded::new().expect("an executor"));
    drop(SingleThreaded::builder().build().expect("an executor"));
    drop(
        Builder::with_clock(HeldClock::default())
            .build()
            .expect("an executor"),
    );
}
