//! The runtime's API: the builder's checks, `block_on`'s errors, shutdown,
//! metrics, the live-fiber listing, parking when idle, and fairness to
//! fibers scheduled from outside the pool.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{HANG_LIMIT, runtime, wait_until, within};
use spindle_core::executor::ParkedBlockOn;
use spindle_core::{
    Deferred, Executor, FiberConfig, FiberHandle, IO, IORuntime, Outcome, RuntimeBuilder,
    TracingMode, UIO,
};
use spindle_exec_wstp::{BuildError, FiberStatus, RunError, Runtime};

type E = ();

const SETTLE: Duration = Duration::from_secs(10);

// ----- builder ----------------------------------------------------------------------

#[test]
fn worker_threads_zero_is_refused_with_an_error_naming_the_field() {
    let error = Runtime::builder()
        .worker_threads(0)
        .build()
        .expect_err("refused");
    assert!(matches!(error, BuildError::ZeroWorkerThreads), "{error:?}");
    assert!(error.to_string().contains("worker_threads"), "{error}");
}

#[test]
fn global_queue_interval_zero_is_refused_with_an_error_naming_the_field() {
    let error = Runtime::builder()
        .worker_threads(1)
        .global_queue_interval(0)
        .build()
        .expect_err("refused");
    assert!(
        matches!(error, BuildError::ZeroGlobalQueueInterval),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("global_queue_interval"),
        "{error}"
    );
}

#[test]
fn max_blocking_threads_zero_is_refused_with_an_error_naming_the_field() {
    let error = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(0)
        .build()
        .expect_err("refused");
    assert!(
        matches!(error, BuildError::ZeroBlockingThreads),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("max_blocking_threads"),
        "{error}"
    );
}

#[test]
fn a_runtime_of_one_worker_and_a_global_queue_checked_every_tick_runs_programs() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .global_queue_interval(1)
        .max_blocking_threads(1)
        .build()
        .expect("valid");
    let io = IO::<u64, E>::par_traverse((0..100u64).collect(), |i| IO::delay(move || i))
        .map(|v| v.into_iter().sum::<u64>())
        .both(IO::blocking(|| 1u64));
    assert_eq!(rt.block_on(io), Ok(Outcome::Succeeded((4950, 1))));
    assert_eq!(rt.handle().worker_threads(), 1);
}

// ----- block_on, spawn and shutdown --------------------------------------------------

#[test]
fn block_on_and_spawn_after_shutdown_are_err_shut_down() {
    let rt = runtime(2);
    let handle = rt.handle().clone();
    assert_eq!(rt.shutdown(Duration::from_secs(10)), Ok(()));
    assert_eq!(
        handle.block_on(IO::<u32, E>::pure(1)),
        Err(RunError::ShutDown)
    );
    assert_eq!(
        handle.spawn(IO::<u32, E>::pure(1)).err(),
        Some(RunError::ShutDown)
    );
}

#[test]
fn block_on_inside_a_fibers_delay_is_err_nested() {
    let rt = runtime(2);
    let handle = rt.handle().clone();
    let io =
        IO::<Result<Outcome<u32, E>, RunError>, E>::delay(move || handle.block_on(IO::pure(1)));
    assert_eq!(
        rt.block_on(io),
        Ok(Outcome::Succeeded(Err(RunError::Nested)))
    );
    // The worker that refused goes on running programs.
    assert_eq!(
        rt.block_on(IO::<u32, E>::pure(2)),
        Ok(Outcome::Succeeded(2))
    );
}

#[test]
fn block_on_runs_the_main_fiber_on_the_calling_thread_until_its_first_wait() {
    let rt = runtime(2);
    let caller = std::thread::current().id();
    let io = IO::<_, E>::delay(|| std::thread::current().id()).flat_map(|before| {
        IO::sleep(std::time::Duration::from_millis(1))
            .map(move |()| (before, std::thread::current().id()))
    });
    let (before, after) = rt.block_on(io).expect("runs").succeeded().expect("a value");
    assert_eq!(
        before, caller,
        "the part before the first wait runs on the caller"
    );
    assert_ne!(after, caller, "a resumed main fiber runs on a worker");
}

#[test]
fn a_main_fiber_that_yields_keeps_running_on_the_calling_thread_and_other_fibers_still_run() {
    let rt = runtime(2);
    let caller = std::thread::current().id();
    let ran = Arc::new(AtomicBool::new(false));
    let seen = ran.clone();
    // The main fiber starts a fiber that runs on a worker, then yields
    // until it has run: every yield comes back to the caller's thread.
    let io = IO::<_, E>::delay(move || ran.store(true, Ordering::SeqCst))
        .start::<E>()
        .flat_map(move |_| {
            IO::tail_rec(0u32, move |yields| {
                if seen.load(Ordering::SeqCst) || yields > 1_000_000 {
                    return IO::pure(ControlFlow::Break(yields));
                }
                IO::cede().map(move |()| {
                    assert_eq!(std::thread::current().id(), caller, "after a yield");
                    ControlFlow::Continue(yields + 1)
                })
            })
        })
        .map(move |yields| (yields, std::thread::current().id()));
    let (yields, thread) = rt.block_on(io).expect("runs").succeeded().expect("a value");
    assert_eq!(thread, caller, "the main fiber ended on the caller");
    assert!(
        yields <= 1_000_000,
        "the started fiber ran on a worker meanwhile"
    );
}

#[test]
fn sockets_made_by_the_main_fiber_of_a_fresh_runtime_wait_even_before_its_workers_start() {
    // The main fiber runs inline on the caller, possibly before any worker
    // thread has started: its sockets' waits must still be polled (they
    // once failed with "nothing polls this socket" about once in a
    // hundred fresh runtimes). Many fresh runtimes make the race likely.
    use spindle_net::{TcpListener, TcpStream};
    for round in 0..200 {
        let rt = runtime(2);
        let io =
            TcpListener::bind("127.0.0.1:0".parse().expect("an address")).flat_map(|listener| {
                listener.local_addr().flat_map(move |addr| {
                    let server = listener
                        .accept()
                        .flat_map(|(stream, _)| stream.read_exact(2));
                    let client =
                        TcpStream::connect(addr).flat_map(|stream| stream.write_all(b"hi"));
                    server.both(client)
                })
            });
        match rt.block_on(io).expect("runs") {
            Outcome::Succeeded((read, ())) => assert_eq!(read, b"hi", "round {round}"),
            other => panic!("round {round}: {other:?}"),
        }
    }
}

#[test]
fn block_on_inside_a_main_fiber_resumed_on_a_worker_is_err_nested() {
    let rt = runtime(2);
    let handle = rt.handle().clone();
    let io =
        IO::<(), E>::cede().product_r(IO::delay(move || handle.block_on(IO::<u32, E>::pure(1))));
    assert_eq!(
        rt.block_on(io),
        Ok(Outcome::Succeeded(Err(RunError::Nested)))
    );
}

#[test]
fn try_block_on_of_a_program_that_can_never_finish_is_err_deadlock() {
    let rt = runtime(2);
    let result = within("try_block_on(never)", HANG_LIMIT, move || {
        rt.try_block_on(UIO::<u32>::never())
    });
    assert_eq!(result, Err(RunError::Deadlock));
}

#[test]
fn block_on_of_a_program_that_can_never_finish_waits_until_the_runtime_shuts_down() {
    let rt = runtime(2);
    let handle = rt.handle().clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(handle.block_on(UIO::<u32>::never()));
    });
    // It keeps waiting (as Cats Effect's unsafeRunSync on IO.never) ...
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(
        rt.block_on(IO::<u32, E>::pure(1)),
        Ok(Outcome::Succeeded(1))
    );
    // ... until the runtime is shut down.
    assert_eq!(rt.shutdown(Duration::from_secs(10)), Ok(()));
    assert_eq!(rx.recv_timeout(HANG_LIMIT), Ok(Err(RunError::ShutDown)));
}

#[test]
fn block_on_from_many_threads_at_once_gives_each_its_own_result() {
    let rt = runtime(2);
    let handle = rt.handle().clone();
    within("block_on from many threads", HANG_LIMIT, move || {
        std::thread::scope(|scope| {
            for t in 0..8u64 {
                let handle = handle.clone();
                scope.spawn(move || {
                    for i in 0..200u64 {
                        let io = UIO::cede().product_r(IO::delay(move || t * 1000 + i));
                        assert_eq!(handle.block_on(io), Ok(Outcome::Succeeded(t * 1000 + i)));
                    }
                });
            }
        });
    });
}

#[test]
fn shutdown_of_an_idle_runtime_returns_ok() {
    let rt = runtime(2);
    assert_eq!(
        rt.block_on(IO::<u32, E>::pure(1)),
        Ok(Outcome::Succeeded(1))
    );
    let result = within("shutdown", HANG_LIMIT, move || {
        rt.shutdown(Duration::from_secs(10))
    });
    assert_eq!(result, Ok(()));
}

#[test]
fn shutdown_drops_sleeping_and_waiting_fibers_and_returns_ok() {
    let rt = runtime(2);
    let gate = Deferred::<()>::new();
    for i in 0..100u64 {
        let io = if i % 2 == 0 {
            UIO::sleep(Duration::from_secs(3600))
        } else {
            gate.get()
        };
        rt.spawn(io).expect("runs");
    }
    let result = within("shutdown", HANG_LIMIT, move || {
        rt.shutdown(Duration::from_secs(10))
    });
    assert_eq!(result, Ok(()));
}

#[test]
fn shutdown_returns_at_its_timeout_when_a_blocking_call_outlives_it() {
    let rt = runtime(2);
    let entered = Arc::new(AtomicBool::new(false));
    let e = entered.clone();
    rt.spawn(IO::<(), E>::blocking(move || {
        e.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(5));
    }))
    .expect("runs");
    wait_until("the blocking call runs", SETTLE, || {
        entered.load(Ordering::SeqCst)
    });
    let started = Instant::now();
    let result = within("shutdown with a timeout", HANG_LIMIT, move || {
        rt.shutdown(Duration::from_millis(100))
    });
    let took = started.elapsed();
    let timed_out = result.expect_err("the blocking thread is still in its call");
    assert!(
        timed_out.threads_still_running.is_some_and(|n| n >= 1),
        "{timed_out}"
    );
    assert_eq!(timed_out.blocking_calls_still_running, 1, "{timed_out}");
    // It returned at its timeout, not when the 5 s call ended.
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
}

// ----- metrics and the fiber listing --------------------------------------------------

#[test]
fn metrics_count_suspended_fibers_as_live_and_none_once_they_complete() {
    let rt = runtime(2);
    assert_eq!(rt.metrics().live_fibers, 0);
    let gate = Deferred::<()>::new();
    let waiters: Vec<FiberHandle<(), E>> = (0..10)
        .map(|_| rt.spawn(gate.get()).expect("runs"))
        .collect();
    let counted = gate.clone();
    wait_until("the ten fibers wait", SETTLE, || counted.waiters() == 10);
    let metrics = rt.metrics();
    assert_eq!(metrics.live_fibers, 10, "{metrics}");
    let io = gate
        .complete::<E>(())
        .product_r(IO::traverse(waiters, |h| h.join_void()));
    assert!(rt.block_on(io).expect("runs").is_succeeded());
    let metrics = rt.metrics();
    assert_eq!(metrics.live_fibers, 0, "{metrics}");
}

#[test]
fn live_fibers_lists_suspended_fibers_and_forgets_them_once_complete() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .track_fibers(true)
        .build()
        .expect("valid");
    let gate = Deferred::<()>::new();
    // Three fibers spawned from outside the pool, and two started by a fiber
    // on a worker.
    let outside: Vec<FiberHandle<(), E>> = (0..3)
        .map(|_| rt.spawn(gate.get()).expect("runs"))
        .collect();
    let (g1, g2) = (gate.clone(), gate.clone());
    let inside: Vec<FiberHandle<(), E>> = rt
        .block_on(g1.get::<E>().start::<E>().both(g2.get::<E>().start::<E>()))
        .expect("runs")
        .succeeded()
        .map(|(a, b)| vec![a, b])
        .expect("succeeds");
    let counted = gate.clone();
    // A fiber is listed once it has suspended, a moment after its wait is
    // registered: await both.
    wait_until("the five fibers wait", SETTLE, || {
        counted.waiters() == 5 && rt.live_fibers().len() == 5
    });
    let listed = rt.live_fibers();
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(
        listed.iter().all(|f| f.status == FiberStatus::Suspended),
        "{listed:?}"
    );
    // (Where each fiber was started is not part of the listing: every
    // executor lists io-core's one `FiberInfo`.)
    let mut ids: Vec<spindle_core::FiberId> = listed.iter().map(|f| f.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 5, "distinct ids: {listed:?}");

    let io = gate.complete::<E>(()).product_r(IO::traverse(
        outside.into_iter().chain(inside).collect(),
        |h| h.join_void(),
    ));
    assert!(rt.block_on(io).expect("runs").is_succeeded());
    assert!(rt.live_fibers().is_empty());
}

#[test]
fn fiber_dump_lists_waiting_fibers_with_their_traces_and_the_pools_state() {
    if !spindle_core::executor::support::lists_fibers(&FiberConfig::default()) {
        return;
    }
    let rt = Runtime::builder()
        .worker_threads(2)
        .fiber_config(FiberConfig::default())
        .build()
        .expect("valid");
    let gate = Deferred::<()>::new();
    let get_line = line!() + 2;
    let waiters: Vec<FiberHandle<(), E>> = (0..3)
        .map(|_| rt.spawn(gate.get()).expect("runs"))
        .collect();
    let counted = gate.clone();
    wait_until("the three fibers wait", SETTLE, || {
        counted.waiters() == 3
            && rt
                .fiber_dump()
                .in_state(spindle_core::FiberState::Waiting)
                .count()
                == 3
    });
    let dump = rt.fiber_dump();
    assert_eq!(dump.fibers.len(), 3, "{dump}");
    for fiber in &dump.fibers {
        let trace = fiber.trace.as_ref().expect("traced");
        let last = trace.events().last().expect("an event");
        assert_eq!(last.location().file(), file!(), "{dump}");
        assert_eq!(last.location().line(), get_line, "{dump}");
    }
    let value = |name: &str| {
        dump.counter(name)
            .unwrap_or_else(|| panic!("no {name:?}: {dump:?}"))
    };
    assert_eq!(value("workers"), 2);
    assert_eq!(value("global queue"), 0);
    assert_eq!(value("local queues"), 0);
    assert_eq!(value("blocking threads"), 0);
    let io = gate
        .complete::<E>(())
        .product_r(IO::traverse(waiters, |h| h.join_void()));
    assert!(rt.block_on(io).expect("runs").is_succeeded());
    assert!(rt.fiber_dump().fibers.is_empty());
}

#[test]
fn live_fibers_is_empty_when_fibers_do_not_trace_and_tracking_is_off() {
    let untraced = FiberConfig::builder()
        .tracing(TracingMode::None)
        .build()
        .expect("valid");
    let rt = Runtime::builder()
        .worker_threads(2)
        .fiber_config(untraced)
        .build()
        .expect("valid");
    let gate = Deferred::<()>::new();
    let waiter = rt.spawn(gate.get::<E>()).expect("runs");
    let counted = gate.clone();
    wait_until("the fiber waits", SETTLE, || counted.waiters() == 1);
    assert_eq!(rt.metrics().live_fibers, 1);
    assert!(rt.live_fibers().is_empty());
    let io = gate.complete::<E>(()).product_r(waiter.join_void());
    assert!(rt.block_on(io).expect("runs").is_succeeded());
}

#[test]
fn an_idle_pool_with_only_sleepers_has_every_worker_parked() {
    const SLEEPERS: usize = 1_000;
    let rt = runtime(2);
    let io = IO::<FiberHandle<(), E>, E>::traverse((0..SLEEPERS).collect(), |_| {
        IO::sleep(Duration::from_secs(3600)).start()
    });
    let _sleepers = rt
        .block_on(io)
        .expect("runs")
        .succeeded()
        .expect("succeeds");
    wait_until("every worker parks", SETTLE, || {
        rt.metrics().parked_workers == 2
    });
    let metrics = rt.metrics();
    assert_eq!(metrics.parked_workers, 2, "{metrics}");
    assert!(metrics.workers.iter().all(|w| w.parked), "{metrics}");
    assert_eq!(metrics.searching_workers, 0, "{metrics}");
    assert_eq!(
        metrics.workers.iter().map(|w| w.timers).sum::<usize>(),
        SLEEPERS,
        "{metrics}"
    );
    assert_eq!(metrics.live_fibers, SLEEPERS as u64, "{metrics}");
    assert_eq!(metrics.global_queue_len, 0, "{metrics}");
    assert!(
        metrics.workers.iter().all(|w| w.local_queue_len == 0),
        "{metrics}"
    );
}

#[test]
fn a_parked_pool_wakes_for_a_timer_and_for_work_from_outside() {
    let rt = runtime(2);
    wait_until("every worker parks", SETTLE, || {
        rt.metrics().parked_workers == 2
    });
    // A timer set from outside the pool.
    let slept = rt.block_on(UIO::sleep(Duration::from_millis(20)).timed());
    let (took, ()) = slept.expect("runs").succeeded().expect("succeeds");
    assert!(took >= Duration::from_millis(20), "slept {took:?}");
    wait_until("every worker parks again", SETTLE, || {
        rt.metrics().parked_workers == 2
    });
    // Work from outside.
    assert_eq!(
        rt.block_on(IO::<u32, E>::delay(|| 5)),
        Ok(Outcome::Succeeded(5))
    );
}

// ----- fairness ------------------------------------------------------------------------

#[test]
fn fibers_scheduled_from_outside_are_not_starved_by_workers_busy_with_local_loops() {
    // Eight fibers that never stop on their own keep both workers busy with
    // local work: half cede in a loop (back of the local queue), half
    // compute in a loop (auto-yield). Programs sent from outside go to the
    // global queue and must still run.
    let rt = runtime(2);
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicUsize::new(0));
    let (s, n) = (stop.clone(), spins.clone());
    let start_loopers = IO::<FiberHandle<(), E>, E>::traverse((0..8).collect(), move |i| {
        let (s, n) = (s.clone(), n.clone());
        IO::<(), E>::tail_rec((), move |()| {
            n.fetch_add(1, Ordering::Relaxed);
            let step = if s.load(Ordering::Relaxed) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            };
            if i % 2 == 0 {
                IO::cede().map_to(step)
            } else {
                IO::pure(step)
            }
        })
        .start()
    });
    let loopers = rt
        .block_on(start_loopers)
        .expect("runs")
        .succeeded()
        .expect("succeeds");
    let counted = spins.clone();
    wait_until("the loops run", SETTLE, || {
        counted.load(Ordering::Relaxed) > 10_000
    });
    let handle = rt.handle().clone();
    let served = within("programs from outside", HANG_LIMIT, move || {
        (0..100u32)
            .map(|i| handle.block_on(IO::<u32, E>::delay(move || i)))
            .filter(|r| matches!(r, Ok(Outcome::Succeeded(_))))
            .count()
    });
    assert_eq!(served, 100);
    stop.store(true, Ordering::Relaxed);
    let joined = rt.block_on(IO::<(), E>::traverse(loopers, |h| h.join_void()));
    assert!(joined.expect("runs").is_succeeded());
}

#[test]
fn two_busy_fibers_started_by_the_main_fiber_take_turns_on_one_worker() {
    // The main fiber runs on the calling thread, so its children go to the
    // global queue. The one worker is busy with the first child (which
    // computes until the second has done its work, one auto-yield slice
    // per log entry) when the second arrives there: the second must get a
    // turn at the first's next yields, not only when the worker looks at
    // the global queue on its own (every 61 turns).
    let rt = Runtime::builder()
        .worker_threads(1)
        .fiber_config(
            FiberConfig::builder()
                .auto_yield_after(1_000)
                .build()
                .expect("valid"),
        )
        .build()
        .expect("a runtime");
    let log = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let second_done = Arc::new(AtomicBool::new(false));
    let push =
        |log: &Arc<std::sync::Mutex<Vec<u8>>>, id: u8| log.lock().expect("not poisoned").push(id);
    let (l1, d1) = (log.clone(), second_done.clone());
    let first = IO::<(), E>::tail_rec(0u32, move |i| {
        if i % 1_000 == 0 {
            push(&l1, 1);
        }
        let done = d1.load(Ordering::SeqCst);
        IO::pure(if done {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(i + 1)
        })
    });
    let (l2, d2) = (log.clone(), second_done.clone());
    let second = IO::<(), E>::tail_rec(0u32, move |i| {
        if i % 1_000 == 0 {
            push(&l2, 2);
        }
        if i == 5_000 {
            d2.store(true, Ordering::SeqCst);
            return IO::pure(ControlFlow::Break(()));
        }
        IO::pure(ControlFlow::Continue(i + 1))
    });
    let (l0, started) = (log.clone(), log.clone());
    let main = first.start::<E>().flat_map(move |first| {
        // Once the first runs on the worker: the marker, then the second.
        // (The main fiber waits by ceding, which keeps it on the calling
        // thread; a wait resumed by the worker would move it there.)
        IO::<(), E>::tail_rec((), move |()| {
            let running = started.lock().expect("not poisoned").contains(&1);
            IO::cede().map_to(if running {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })
        .product_r(IO::delay(move || push(&l0, 0)))
        .product_r(second.start::<E>())
        .flat_map(move |second| first.join_void().product_r(second.join_void()))
    });
    let outcome = within("both busy fibers", HANG_LIMIT, move || rt.block_on(main));
    assert!(matches!(outcome, Ok(Outcome::Succeeded(()))), "{outcome:?}");
    let log = log.lock().expect("not poisoned").clone();
    let marker = log.iter().position(|&id| id == 0).expect("the marker");
    let second_ran = log.iter().position(|&id| id == 2).expect("the second ran");
    let first_meanwhile = log[marker..second_ran]
        .iter()
        .filter(|&&id| id == 1)
        .count();
    assert!(
        first_meanwhile <= 3,
        "the second waited for {first_meanwhile} slices of the first: {log:?}"
    );
}
