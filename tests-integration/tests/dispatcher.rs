//! `Dispatcher` on every executor, driven from `std::thread`s that no
//! executor knows: `run_blocking`, `to_future` (driven by
//! `futures::executor::block_on`) and `run_and_forget` all run their
//! programs; a sequential dispatcher keeps submission order, a parallel one
//! runs submissions concurrently; the release cancels what still runs (each
//! finalizer once) or, in await mode, waits for it; a submission after the
//! release is refused; `run_blocking` inside a fiber of the executor is
//! refused instead of deadlocking; dropping or canceling a future cancels
//! its program; the failures of forgotten programs are reported; a
//! dispatcher whose scope is never released closes itself when its last
//! handle is dropped (canceling or awaiting its programs as its release
//! would), and its state and worker fiber go, also after its executor has
//! shut down.
//!
//! The main fiber never blocks its thread while the foreign threads work
//! (on exec-single and exec-batching that thread runs every fiber): it
//! waits for them through a callback (`on_thread`).

mod common;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak, mpsc};
use std::time::{Duration, Instant};

use common::rt_test;
use futures::FutureExt;
use spindle_core::error::DispatcherError;
use spindle_core::{
    Allocated, Callback, Deferred, Dispatcher, Executor, ForgottenFailure, IO, Outcome, Resource,
};

type E = String;

/// The outcomes of two programs.
type Pair<A> = (Outcome<A, E>, Outcome<A, E>);

/// What the three forms of submission said: `run_and_forget`,
/// `run_blocking`, `to_future`.
type Answers = (
    Result<(), DispatcherError>,
    Result<(), DispatcherError>,
    Result<(), DispatcherError>,
);

/// Sequential or parallel, times awaiting or canceling at release.
const EVERY_KIND: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

/// How long a foreign thread waits for something the executor must do
/// before the test fails (generous: the machine is shared and slow).
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `f` on a new `std::thread` (one no executor knows); the fiber
/// waits for its result without blocking its own thread. A panic of `f`
/// (a failed assertion) fails the fiber with its message, so that the
/// test fails instead of waiting forever.
fn on_thread<T, F>(f: F) -> IO<T, E>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    IO::from_callback(move |cb: Callback<T, E>| {
        std::thread::spawn(move || {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                Ok(value) => cb.succeed(value),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    cb.fail(format!("the foreign thread panicked: {message}"))
                }
            };
        });
        None
    })
}

/// Runs `f` on a new `std::thread` from a thread that is not a fiber, and
/// waits for it.
fn on_thread_now<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("the thread ends")
}

/// A dispatcher used from a foreign thread while the main fiber waits: the
/// dispatcher of `resource`, as a scope (released when `body` returns).
fn from_thread<T, F>(resource: Resource<Dispatcher, E>, body: F) -> IO<T, E>
where
    T: Send + 'static,
    F: FnOnce(Dispatcher) -> T + Send + 'static,
{
    resource.use_with(move |dispatcher| on_thread(move || body(dispatcher)))
}

/// A dispatcher allocated and never released, given to `body` on a
/// foreign thread while the main fiber waits (so the executor runs).
fn never_released<T, F>(resource: Resource<Dispatcher, E>, body: F) -> IO<T, E>
where
    T: Send + 'static,
    F: FnOnce(Allocated<Dispatcher, E>) -> T + Send + 'static,
{
    resource
        .allocated()
        .flat_map(move |allocated| on_thread(move || body(allocated)))
}

/// Counts into `counter` when run.
fn count(counter: &Arc<AtomicUsize>) -> IO<(), E> {
    let counter = counter.clone();
    IO::delay(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })
}

/// A program that says it started (on `started`), then waits forever;
/// its cancellation counts into `finalized`.
fn forever(started: mpsc::Sender<()>, finalized: &Arc<AtomicUsize>) -> IO<u32, E> {
    IO::delay(move || {
        let _ = started.send(());
    })
    .product_r(spindle_core::never::<u32, E>())
    .on_cancel(count(finalized))
}

/// Waits until `n` programs have said they started on `starts`.
fn expect_starts(starts: &mpsc::Receiver<()>, n: usize) {
    for i in 0..n {
        starts
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("program {i} of {n} did not start"));
    }
}

/// Polls `done` (from a thread that is not the executor's) until it
/// holds; fails the test, naming `what`, after [`PATIENCE`].
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "never saw: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The output of `future`, awaited on a thread of its own; fails the test
/// after [`PATIENCE`] (a future that never completes is a failure, not a
/// hang).
fn ready_within_patience<T, F>(future: F) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(futures::executor::block_on(future));
    });
    rx.recv_timeout(PATIENCE).expect("the future completes")
}

/// A program whose fiber waits until a foreign thread fires the callback
/// left in `gate`.
fn gated(gate: &Arc<Mutex<Option<Callback<(), E>>>>) -> IO<(), E> {
    let gate = gate.clone();
    IO::from_callback(move |cb| {
        *gate.lock().unwrap() = Some(cb);
        None
    })
}

/// Fires the callback a [`gated`] program left (once it has left it).
fn open_gate(gate: &Arc<Mutex<Option<Callback<(), E>>>>) {
    wait_until("the gated program waits", || gate.lock().unwrap().is_some());
    let callback = gate.lock().unwrap().take().expect("the program waits");
    callback.succeed(());
}

/// Submits a counting program in each form, from a new thread; what each
/// said.
fn submit_in_every_form(dispatcher: &Dispatcher, ran: &Arc<AtomicUsize>) -> Answers {
    let (d, r) = (dispatcher.clone(), ran.clone());
    on_thread_now(move || {
        (
            d.run_and_forget(count(&r)),
            d.run_blocking(count(&r)).map(|_| ()),
            futures::executor::block_on(d.to_future(count(&r))).map(|_| ()),
        )
    })
}

/// A dispatcher (sequential or parallel, awaiting or not) whose state is
/// watched: the `Weak` is dead once the state has been freed (its
/// reporter holds the other end).
fn watched(sequential: bool, await_on_release: bool) -> (Resource<Dispatcher, E>, Weak<()>) {
    let token = Arc::new(());
    let state = Arc::downgrade(&token);
    let reporter = move |_: ForgottenFailure| {
        let _held = &token;
    };
    let resource = if sequential {
        Dispatcher::sequential_reporting::<E, _>(await_on_release, reporter)
    } else {
        Dispatcher::parallel_reporting::<E, _>(await_on_release, reporter)
    };
    (resource, state)
}

/// The fibers the executor behind `handle` runs now (started, not ended).
fn live_fibers<X: Executor>(handle: &X) -> u64 {
    handle
        .counters()
        .fibers_live
        .expect("every executor counts them")
}

/// A reporter that records each failure as a line, and the lines.
fn recording_reporter() -> (
    impl Fn(ForgottenFailure) + Send + Sync + 'static,
    Arc<Mutex<Vec<String>>>,
) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = reports.clone();
    let reporter = move |failure: ForgottenFailure| {
        let report = match failure {
            spindle_core::error::Failure::Errored(e) => format!("errored {e:?}"),
            spindle_core::error::Failure::Panicked(p) => format!("panicked {}", p.message()),
            spindle_core::error::Failure::Canceled => "canceled".to_string(),
        };
        r.lock().unwrap().push(report);
    };
    (reporter, reports)
}

rt_test! {
    fn programs_submitted_from_foreign_threads_run_in_every_form() {
        let forgotten = Arc::new(AtomicUsize::new(0));
        let all_forgotten = Deferred::<()>::new();
        let f = forgotten.clone();
        let done = all_forgotten.clone();
        const THREADS: usize = 4;
        let program: IO<Vec<Pair<usize>>, E> =
            Dispatcher::parallel::<E>(false).use_with(move |dispatcher| {
                let threads: Vec<IO<Pair<usize>, E>> = (0..THREADS)
                    .map(|i| {
                        let d = dispatcher.clone();
                        let f = f.clone();
                        let done = done.clone();
                        on_thread(move || {
                            let blocking = d
                                .run_blocking(IO::<usize, E>::delay(move || i * 10))
                                .expect("run_blocking from a foreign thread runs the program");
                            let future = d.to_future(IO::<usize, E>::delay(move || i * 10 + 1));
                            let awaited = futures::executor::block_on(future)
                                .expect("to_future from a foreign thread runs the program");
                            let last = f.clone();
                            d.run_and_forget(count(&f).flat_map(move |()| {
                                if last.load(Ordering::SeqCst) == THREADS {
                                    done.complete::<E>(()).void()
                                } else {
                                    IO::unit()
                                }
                            }))
                            .expect("run_and_forget from a foreign thread is accepted");
                            (blocking, awaited)
                        })
                    })
                    .collect();
                IO::par_sequence_n(NonZeroUsize::new(THREADS).expect("positive"), threads).flat_map(move |ran| {
                    // The forgotten programs' effect is observed.
                    all_forgotten.get::<E>().map_to(ran)
                })
            });
        let ran = run(program).succeeded().expect("the program succeeds");
        assert_eq!(forgotten.load(Ordering::SeqCst), THREADS);
        for (i, (blocking, awaited)) in ran.into_iter().enumerate() {
            assert_eq!(blocking, Outcome::Succeeded(i * 10));
            assert_eq!(awaited, Outcome::Succeeded(i * 10 + 1));
        }
    }

    fn a_sequential_dispatcher_runs_its_programs_in_submission_order() {
        const N: usize = 40;
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let last_done = Deferred::<()>::new();
        let last = last_done.clone();
        let program: IO<(), E> = Dispatcher::sequential::<E>(false).use_with(move |dispatcher| {
            on_thread(move || {
                for i in 0..N {
                    let o = o.clone();
                    let last = last.clone();
                    // Each program suspends halfway: a parallel dispatcher
                    // would interleave them.
                    let step = IO::<(), E>::delay({
                        let o = o.clone();
                        move || o.lock().unwrap().push(("start", i))
                    })
                    .product_r(spindle_core::sleep::<E>(Duration::from_micros(200)))
                    .product_r(IO::delay(move || o.lock().unwrap().push(("end", i))))
                    .product_r(if i + 1 == N { last.complete::<E>(()).void() } else { IO::unit() });
                    dispatcher.run_and_forget(step).expect("the dispatcher is open");
                }
            })
            .product_r(last_done.get())
        });
        assert_eq!(run(program), Outcome::Succeeded(()));
        let expected: Vec<(&str, usize)> =
            (0..N).flat_map(|i| [("start", i), ("end", i)]).collect();
        assert_eq!(*order.lock().unwrap(), expected);
    }

    fn a_parallel_dispatcher_runs_two_programs_that_wait_for_each_other() {
        let (left, right) = (Deferred::<()>::new(), Deferred::<()>::new());
        let program: IO<Pair<u8>, E> = from_thread(Dispatcher::parallel(false), move |dispatcher| {
            let a = dispatcher.to_future(left.complete::<E>(()).product_r(right.get()).map_to(1u8));
            let b = dispatcher.to_future(right.complete::<E>(()).product_r(left.get()).map_to(2u8));
            let (a, b) = futures::executor::block_on(futures::future::join(a, b));
            (a.expect("accepted"), b.expect("accepted"))
        });
        assert_eq!(
            run(program),
            Outcome::Succeeded((Outcome::Succeeded(1), Outcome::Succeeded(2)))
        );
    }

    fn the_release_cancels_the_running_programs_and_runs_each_finalizer_once() {
        const K: usize = 3;
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = from_thread(Dispatcher::parallel(false), move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let futures: Vec<_> = (0..K)
                .map(|_| dispatcher.to_future(forever(started.clone(), &f)))
                .collect();
            dispatcher
                .run_and_forget(forever(started, &f))
                .expect("the dispatcher is open");
            expect_starts(&starts, K + 1);
            futures
        })
        // The release has returned: every finalizer has run.
        .map({
            let finalized = finalized.clone();
            move |futures| (futures, finalized.load(Ordering::SeqCst))
        });
        let (futures, finalized_at_release) = run(program).succeeded().expect("succeeds");
        assert_eq!(finalized_at_release, K + 1);
        for future in futures {
            assert_eq!(futures::executor::block_on(future), Ok(Outcome::Canceled));
        }
        assert_eq!(finalized.load(Ordering::SeqCst), K + 1, "each finalizer ran once");
    }

    fn a_sequential_release_cancels_the_running_program_and_never_starts_the_queued_ones() {
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = from_thread(Dispatcher::sequential(false), move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let futures: Vec<_> = (0..3)
                .map(|_| dispatcher.to_future(forever(started.clone(), &f)))
                .collect();
            expect_starts(&starts, 1);
            (futures, starts)
        });
        let (futures, starts) = run(program).succeeded().expect("succeeds");
        assert_eq!(finalized.load(Ordering::SeqCst), 1, "the running program was canceled once");
        assert!(starts.try_recv().is_err(), "the queued programs never started");
        for future in futures {
            assert_eq!(futures::executor::block_on(future), Ok(Outcome::Canceled));
        }
    }

    fn an_awaiting_release_waits_for_the_running_programs_instead_of_canceling_them() {
        let canceled = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Mutex::new(None::<Callback<(), E>>));
        let (c, g) = (canceled.clone(), gate.clone());
        let program = Dispatcher::parallel::<E>(true).use_with(move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let submitted = dispatcher.clone();
            let opener = dispatcher.clone();
            let gated = IO::delay(move || {
                let _ = started.send(());
            })
            .product_r(gated(&g))
            .map_to(5u32)
            .on_cancel(count(&c));
            on_thread(move || {
                let future = submitted.to_future(gated);
                expect_starts(&starts, 1);
                // Opens the gate only once the release has begun: the
                // release can only end by waiting for the program.
                std::thread::spawn(move || {
                    wait_until("the release begins", || opener.is_closed());
                    open_gate(&gate);
                });
                future
            })
        });
        let future = run(program).succeeded().expect("succeeds");
        assert_eq!(futures::executor::block_on(future), Ok(Outcome::Succeeded(5)));
        assert_eq!(canceled.load(Ordering::SeqCst), 0);
    }

    fn an_awaiting_sequential_release_runs_the_queued_programs_in_order() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let program = from_thread(Dispatcher::sequential(true), move |dispatcher| {
            for i in 0..5 {
                let o = o.clone();
                dispatcher
                    .run_and_forget(
                        // Later ones sleep less: run at once, they
                        // would end in the reverse order.
                        spindle_core::sleep::<E>(Duration::from_millis(2 * (5 - i)))
                            .product_r(IO::delay(move || o.lock().unwrap().push(i))),
                    )
                    .expect("the dispatcher is open");
            }
        });
        assert_eq!(run(program), Outcome::Succeeded(()));
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    fn a_submission_after_the_release_is_refused_as_closed() {
        let program: IO<Dispatcher, E> = Dispatcher::parallel::<E>(false).use_with(IO::pure);
        let dispatcher = rt().run(program).succeeded().expect("succeeds");
        assert!(dispatcher.is_closed());
        let ran = Arc::new(AtomicUsize::new(0));
        let closed = Err(DispatcherError::Closed);
        assert_eq!(submit_in_every_form(&dispatcher, &ran), (closed, closed, closed));
        let (future, cancel) = dispatcher.to_future_cancelable(count(&ran));
        cancel.cancel();
        assert_eq!(futures::executor::block_on(future), Err(DispatcherError::Closed));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no refused program ran");
        assert!(DispatcherError::Closed.to_string().contains("shut down"));
    }

    fn a_submission_after_the_executor_shut_down_is_refused_as_shut_down() {
        let rt = rt();
        let program = Dispatcher::parallel::<E>(false).allocated();
        let allocated = rt.run(program).succeeded().expect("succeeds");
        let dispatcher = allocated.value().clone();
        drop(rt);
        let ran = Arc::new(AtomicUsize::new(0));
        let shut_down = Err(DispatcherError::ShutDown);
        assert_eq!(submit_in_every_form(&dispatcher, &ran), (shut_down, shut_down, shut_down));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no refused program ran");
        assert!(!dispatcher.is_closed(), "its scope never ended");
    }

    fn run_blocking_inside_a_fiber_of_the_executor_is_refused_instead_of_deadlocking() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let program = Dispatcher::parallel::<E>(false).use_with(move |dispatcher| {
            IO::delay(move || dispatcher.run_blocking(count(&r)).map(|_| ()))
        });
        assert_eq!(run(program), Outcome::Succeeded(Err(DispatcherError::Nested)));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "nothing ran");
    }

    fn dropping_a_future_cancels_its_program_whether_or_not_it_was_polled() {
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = from_thread(Dispatcher::parallel(false), move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let never_polled = dispatcher.to_future(forever(started.clone(), &f));
            let polled = dispatcher.to_future(forever(started, &f));
            expect_starts(&starts, 2);
            drop(never_polled);
            // Polled once (pending), then dropped.
            assert!(polled.now_or_never().is_none());
            wait_until("both programs' finalizers", || f.load(Ordering::SeqCst) >= 2);
            // Before the release: the drops canceled them.
            f.load(Ordering::SeqCst)
        });
        assert_eq!(run(program), Outcome::Succeeded(2));
        assert_eq!(finalized.load(Ordering::SeqCst), 2, "each finalizer ran once");
    }

    fn a_dropped_future_whose_program_has_not_started_never_starts_it() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let program = from_thread(Dispatcher::sequential(false), move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let finalized = Arc::new(AtomicUsize::new(0));
            // Occupies the sequential worker until the release.
            let first = dispatcher.to_future(forever(started, &finalized));
            expect_starts(&starts, 1);
            drop(dispatcher.to_future(count(&r)));
            first
        });
        let first = run(program).succeeded().expect("succeeds");
        assert_eq!(futures::executor::block_on(first), Ok(Outcome::Canceled));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }

    fn the_cancel_function_cancels_a_running_program_and_its_future_gives_canceled() {
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = from_thread(Dispatcher::parallel(false), move |dispatcher| {
            let (started, starts) = mpsc::channel();
            let (future, cancel) = dispatcher.to_future_cancelable(forever(started, &f));
            expect_starts(&starts, 1);
            on_thread_now(move || cancel.cancel());
            let outcome = futures::executor::block_on(future);
            // The future is ready once the finalizer has run.
            (outcome, f.load(Ordering::SeqCst))
        });
        assert_eq!(run(program), Outcome::Succeeded((Ok(Outcome::Canceled), 1)));
        assert_eq!(finalized.load(Ordering::SeqCst), 1);
    }

    fn the_failures_of_forgotten_programs_go_to_the_reporter() {
        let (reporter, reports) = recording_reporter();
        let program = from_thread(Dispatcher::parallel_reporting(true, reporter), |d| {
            d.run_and_forget(IO::<(), E>::raise_error("boom".into())).expect("open");
            d.run_and_forget(IO::<(), E>::delay(|| panic!("kaboom"))).expect("open");
            d.run_and_forget(IO::<(), E>::unit()).expect("open");
            d
        });
        // The scope awaits the forgotten programs.
        let dispatcher = run(program).succeeded().expect("succeeds");
        let mut reports = reports.lock().unwrap().clone();
        reports.sort();
        assert_eq!(reports, vec![r#"errored "boom""#.to_string(), "panicked kaboom".to_string()]);
        assert_eq!(dispatcher.failures_reported(), 2);
    }

    fn a_dispatcher_never_released_frees_its_state_and_ends_its_worker_once_its_handles_are_dropped() {
        for (sequential, awaiting) in EVERY_KIND {
            let rt = rt();
            let handle = rt.handle().clone();
            let (resource, state) = watched(sequential, awaiting);
            let program = never_released(resource, move |allocated| {
                let dispatcher = allocated.value().clone();
                let with_worker = live_fibers(&handle);
                drop(allocated);
                assert!(!dispatcher.is_closed(), "a handle is left");
                assert!(state.strong_count() > 0, "a handle is left");
                drop(dispatcher);
                wait_until("the state freed", || state.strong_count() == 0);
                wait_until("the worker ended", || live_fibers(&handle) == with_worker - 1);
            });
            assert_eq!(rt.run(program), Outcome::Succeeded(()), "{sequential} {awaiting}");
        }
    }

    fn a_dispatcher_never_released_on_an_executor_that_shut_down_frees_its_state_once_its_handles_are_dropped() {
        for (sequential, awaiting) in EVERY_KIND {
            let rt = rt();
            let (resource, state) = watched(sequential, awaiting);
            let allocated = rt.run(resource.allocated()).succeeded().expect("allocated");
            let dispatcher = allocated.value().clone();
            drop(rt);
            assert_eq!(
                dispatcher.run_and_forget(IO::<(), E>::unit()),
                Err(DispatcherError::ShutDown)
            );
            drop(allocated);
            assert!(state.strong_count() > 0, "a handle is left");
            drop(dispatcher);
            wait_until("the state freed", || state.strong_count() == 0);
        }
    }

    fn dropping_every_handle_of_a_sequential_dispatcher_never_released_cancels_its_running_program_once_and_drops_the_queued_ones() {
        let finalized = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let (f, r) = (finalized.clone(), ran.clone());
        let program = never_released(Dispatcher::sequential(false), move |allocated| {
            let (started, starts) = mpsc::channel();
            let running = allocated.value().to_future(forever(started, &f));
            let queued = allocated.value().to_future(count(&r));
            expect_starts(&starts, 1);
            drop(allocated);
            let outcomes = (
                ready_within_patience(running),
                ready_within_patience(queued),
            );
            // The running program's future is ready once its finalizer ran.
            (outcomes, f.load(Ordering::SeqCst))
        });
        let outcomes = (Ok(Outcome::Canceled), Ok(Outcome::Canceled));
        assert_eq!(run(program), Outcome::Succeeded((outcomes, 1)));
        assert_eq!(finalized.load(Ordering::SeqCst), 1, "the finalizer ran once");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the queued program never ran");
    }

    fn dropping_every_handle_of_a_parallel_dispatcher_never_released_cancels_its_programs_once_each() {
        const K: usize = 3;
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = never_released(Dispatcher::parallel(false), move |allocated| {
            let (started, starts) = mpsc::channel();
            let futures: Vec<_> = (0..K)
                .map(|_| allocated.value().to_future(forever(started.clone(), &f)))
                .collect();
            allocated
                .value()
                .run_and_forget(forever(started, &f))
                .expect("the dispatcher is open");
            expect_starts(&starts, K + 1);
            drop(allocated);
            let outcomes: Vec<_> = futures.into_iter().map(ready_within_patience).collect();
            wait_until("every finalizer", || f.load(Ordering::SeqCst) > K);
            outcomes
        });
        assert_eq!(run(program), Outcome::Succeeded(vec![Ok(Outcome::Canceled); K]));
        assert_eq!(finalized.load(Ordering::SeqCst), K + 1, "each finalizer ran once");
    }

    fn dropping_every_handle_of_an_awaiting_dispatcher_never_released_runs_its_queued_programs_in_order() {
        let canceled = Arc::new(AtomicUsize::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Mutex::new(None::<Callback<(), E>>));
        let (c, o) = (canceled.clone(), order.clone());
        let program = never_released(Dispatcher::sequential(true), move |allocated| {
            let first = allocated.value().to_future(gated(&gate).on_cancel(count(&c)));
            let queued: Vec<_> = (0..3)
                .map(|i| {
                    let o = o.clone();
                    allocated.value().to_future(IO::<(), E>::delay(move || o.lock().unwrap().push(i)))
                })
                .collect();
            drop(allocated);
            // Every handle is gone before the first program can end.
            open_gate(&gate);
            let first = ready_within_patience(first);
            let queued: Vec<_> = queued.into_iter().map(ready_within_patience).collect();
            (first, queued)
        });
        let ran = Ok(Outcome::Succeeded(()));
        assert_eq!(run(program), Outcome::Succeeded((ran.clone(), vec![ran; 3])));
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(canceled.load(Ordering::SeqCst), 0);
    }
}
