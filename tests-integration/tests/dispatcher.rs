//! `Dispatcher` on every executor, driven from `std::thread`s that no
//! executor knows: `run_blocking`, `to_future` (driven by
//! `futures::executor::block_on`) and `run_and_forget` all run their
//! programs; a sequential dispatcher keeps submission order, a parallel one
//! runs submissions concurrently; the release cancels what still runs (each
//! finalizer once) or, in await mode, waits for it; a submission after the
//! release is refused; `run_blocking` inside a fiber of the executor is
//! refused instead of deadlocking; dropping or canceling a future cancels
//! its program; the failures of forgotten programs are reported.
//!
//! The main fiber never blocks its thread while the foreign threads work
//! (on exec-single and exec-batching that thread runs every fiber): it
//! waits for them through a callback (`on_thread`).

mod common;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::rt_test;
use futures::FutureExt;
use spindle_core::error::DispatcherError;
use spindle_core::{Callback, Deferred, Dispatcher, ForgottenFailure, IO, Outcome};

type E = String;

/// The outcomes of two programs.
type Pair<A> = (Outcome<A, E>, Outcome<A, E>);

/// How long a foreign thread waits for something the executor must do
/// before the test fails (generous: the machine is shared and slow).
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `f` on a new `std::thread` (one no executor knows); the fiber
/// waits for its result without blocking its own thread.
fn on_thread<T, F>(f: F) -> IO<T, E>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    IO::from_callback(move |cb: Callback<T, E>| {
        std::thread::spawn(move || {
            cb.succeed(f());
        });
        None
    })
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

/// A program whose fiber waits until a foreign thread fires the callback
/// left in `gate`.
fn gated(gate: &Arc<Mutex<Option<Callback<(), E>>>>) -> IO<(), E> {
    let gate = gate.clone();
    IO::from_callback(move |cb| {
        *gate.lock().unwrap() = Some(cb);
        None
    })
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
        let program: IO<Pair<u8>, E> =
            Dispatcher::parallel::<E>(false).use_with(move |dispatcher| {
                on_thread(move || {
                    let a = dispatcher.to_future(
                        left.complete::<E>(()).product_r(right.get()).map_to(1u8),
                    );
                    let b = dispatcher.to_future(
                        right.complete::<E>(()).product_r(left.get()).map_to(2u8),
                    );
                    let (a, b) = futures::executor::block_on(futures::future::join(a, b));
                    (a.expect("accepted"), b.expect("accepted"))
                })
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
        let program = Dispatcher::parallel::<E>(false)
            .use_with(move |dispatcher| {
                on_thread(move || {
                    let (started, starts) = mpsc::channel();
                    let futures: Vec<_> = (0..K)
                        .map(|_| dispatcher.to_future(forever(started.clone(), &f)))
                        .collect();
                    dispatcher
                        .run_and_forget(forever(started.clone(), &f))
                        .expect("the dispatcher is open");
                    for _ in 0..=K {
                        starts.recv_timeout(PATIENCE).expect("every program starts");
                    }
                    futures
                })
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
        let program = Dispatcher::sequential::<E>(false).use_with(move |dispatcher| {
            on_thread(move || {
                let (started, starts) = mpsc::channel();
                let futures: Vec<_> = (0..3)
                    .map(|_| dispatcher.to_future(forever(started.clone(), &f)))
                    .collect();
                starts.recv_timeout(PATIENCE).expect("the first program starts");
                (futures, starts)
            })
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
                starts.recv_timeout(PATIENCE).expect("the program starts");
                // Opens the gate only once the release has begun: the
                // release can only end by waiting for the program.
                std::thread::spawn(move || {
                    while !opener.is_closed() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let gate = gate.lock().unwrap().take().expect("the program waits");
                    gate.succeed(());
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
        let program = Dispatcher::sequential::<E>(true).use_with(move |dispatcher| {
            on_thread(move || {
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
            })
        });
        assert_eq!(run(program), Outcome::Succeeded(()));
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    fn a_submission_after_the_release_is_refused_as_closed() {
        let rt = rt();
        let program: IO<Dispatcher, E> = Dispatcher::parallel::<E>(false).use_with(IO::pure);
        let dispatcher = rt.run(program).succeeded().expect("succeeds");
        assert!(dispatcher.is_closed());
        let ran = Arc::new(AtomicUsize::new(0));
        let d = dispatcher.clone();
        let r = ran.clone();
        let refused = std::thread::spawn(move || {
            (
                d.run_and_forget(count(&r)),
                d.run_blocking(count(&r)).map(|_| ()),
                futures::executor::block_on(d.to_future(count(&r))).map(|_| ()),
            )
        })
        .join()
        .expect("the thread ends");
        let closed = Err(DispatcherError::Closed);
        assert_eq!(refused, (closed, closed, closed));
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
        let r = ran.clone();
        let d = dispatcher.clone();
        let refused = std::thread::spawn(move || {
            (
                d.run_and_forget(count(&r)),
                d.run_blocking(count(&r)).map(|_| ()),
                futures::executor::block_on(d.to_future(count(&r))).map(|_| ()),
            )
        })
        .join()
        .expect("the thread ends");
        let shut_down = Err(DispatcherError::ShutDown);
        assert_eq!(refused, (shut_down, shut_down, shut_down));
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
        let program = Dispatcher::parallel::<E>(false).use_with(move |dispatcher| {
            on_thread(move || {
                let (started, starts) = mpsc::channel();
                let never_polled = dispatcher.to_future(forever(started.clone(), &f));
                let polled = dispatcher.to_future(forever(started, &f));
                starts.recv_timeout(PATIENCE).expect("a program starts");
                starts.recv_timeout(PATIENCE).expect("both programs start");
                drop(never_polled);
                // Polled once (pending), then dropped.
                assert!(polled.now_or_never().is_none());
                let deadline = std::time::Instant::now() + PATIENCE;
                while f.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                // Before the release: the drops canceled them.
                f.load(Ordering::SeqCst)
            })
        });
        assert_eq!(run(program), Outcome::Succeeded(2));
        assert_eq!(finalized.load(Ordering::SeqCst), 2, "each finalizer ran once");
    }

    fn a_dropped_future_whose_program_has_not_started_never_starts_it() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let program = Dispatcher::sequential::<E>(false).use_with(move |dispatcher| {
            on_thread(move || {
                let (started, starts) = mpsc::channel();
                let finalized = Arc::new(AtomicUsize::new(0));
                // Occupies the sequential worker until the release.
                let first = dispatcher.to_future(forever(started, &finalized));
                starts.recv_timeout(PATIENCE).expect("the first program starts");
                drop(dispatcher.to_future(count(&r)));
                first
            })
        });
        let first = run(program).succeeded().expect("succeeds");
        assert_eq!(futures::executor::block_on(first), Ok(Outcome::Canceled));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }

    fn the_cancel_function_cancels_a_running_program_and_its_future_gives_canceled() {
        let finalized = Arc::new(AtomicUsize::new(0));
        let f = finalized.clone();
        let program = Dispatcher::parallel::<E>(false).use_with(move |dispatcher| {
            on_thread(move || {
                let (started, starts) = mpsc::channel();
                let (future, cancel) = dispatcher.to_future_cancelable(forever(started, &f));
                starts.recv_timeout(PATIENCE).expect("the program starts");
                std::thread::spawn(move || cancel.cancel()).join().expect("cancels");
                let outcome = futures::executor::block_on(future);
                // The future is ready once the finalizer has run.
                (outcome, f.load(Ordering::SeqCst))
            })
        });
        assert_eq!(run(program), Outcome::Succeeded((Ok(Outcome::Canceled), 1)));
        assert_eq!(finalized.load(Ordering::SeqCst), 1);
    }

    fn the_failures_of_forgotten_programs_go_to_the_reporter() {
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
        let program = Dispatcher::parallel_reporting::<E, _>(true, reporter).use_with(move |dispatcher| {
            let d = dispatcher.clone();
            on_thread(move || {
                d.run_and_forget(IO::<(), E>::raise_error("boom".into())).expect("open");
                d.run_and_forget(IO::<(), E>::delay(|| panic!("kaboom"))).expect("open");
                d.run_and_forget(IO::<(), E>::unit()).expect("open");
            })
            .map(move |()| dispatcher)
        });
        // The scope awaits the forgotten programs.
        let dispatcher = run(program).succeeded().expect("succeeds");
        let mut reports = reports.lock().unwrap().clone();
        reports.sort();
        assert_eq!(reports, vec![r#"errored "boom""#.to_string(), "panicked kaboom".to_string()]);
        assert_eq!(dispatcher.failures_reported(), 2);
    }
}
