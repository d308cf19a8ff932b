//! `IO::blocking` on the event loop: a bounded pool of blocking threads
//! (io-core's `BlockingPool`), never the loop thread; its configuration and
//! its errors. (What happens when the operating system refuses a thread is
//! tested on the pool itself, in io-core's `executor::support::blocking`,
//! where a refusal can be simulated.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_batching::{
    BuildError, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS, EventLoop, Handle,
};

fn with_blocking_threads(n: usize) -> EventLoop {
    EventLoop::builder()
        .max_blocking_threads(n)
        .build()
        .expect("build an event loop")
}

/// The thread running the calling fiber (the loop thread).
fn this_thread<E: Send + 'static>() -> IO<ThreadId, E> {
    IO::delay(|| std::thread::current().id())
}

#[test]
fn many_concurrent_blocking_calls_never_run_more_thunks_at_once_than_the_bound() {
    const BOUND: usize = 3;
    const CALLS: usize = 24;
    let rt = with_blocking_threads(BOUND);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let calls = (0..CALLS)
        .map(|i| {
            let (running, most) = (running.clone(), most.clone());
            IO::<usize, ()>::blocking(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Stay until the bound was reached once (or 10 s passed),
                // so that the pool is full at least once whatever the
                // machine's load; then a little longer.
                let deadline = Instant::now() + Duration::from_secs(10);
                while most.load(Ordering::SeqCst) < BOUND && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(1));
                running.fetch_sub(1, Ordering::SeqCst);
                i
            })
        })
        .collect::<Vec<_>>();
    let outcome = rt.block_on(IO::par_sequence(calls)).expect("block_on");
    // Every call completed with its own value, in order.
    assert_eq!(outcome, Outcome::Succeeded((0..CALLS).collect::<Vec<_>>()));
    // The bound held, and was reached.
    assert_eq!(most.load(Ordering::SeqCst), BOUND);
    let metrics = rt.metrics();
    assert!(metrics.blocking_threads <= BOUND, "{metrics}");
    assert_eq!(metrics.blocking_queue_len, 0, "{metrics}");
}

#[test]
fn blocking_work_never_runs_on_the_loop_thread() {
    // With a bound of one thread too: a full pool queues the call, it does
    // not fall back to the loop thread.
    for bound in [1, DEFAULT_MAX_BLOCKING_THREADS] {
        let rt = with_blocking_threads(bound);
        let calls = (0..8)
            .map(|_| {
                IO::<(ThreadId, Option<String>), ()>::blocking(|| {
                    let me = std::thread::current();
                    (me.id(), me.name().map(String::from))
                })
            })
            .collect::<Vec<_>>();
        let program = this_thread()
            .flat_map(move |loop_thread| IO::par_sequence(calls).map(move |r| (loop_thread, r)));
        let (loop_thread, ran_on) = rt
            .block_on(program)
            .expect("block_on")
            .succeeded()
            .expect("the program succeeds");
        assert_eq!(loop_thread, std::thread::current().id());
        for (thread, name) in ran_on {
            assert_ne!(thread, loop_thread);
            assert_eq!(name.as_deref(), Some("exec-batching-blocking"));
        }
    }
}

#[test]
fn max_blocking_threads_zero_is_a_build_error_that_names_the_setting() {
    let error = EventLoop::builder()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(
        matches!(error, BuildError::ZeroBlockingThreads),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("max_blocking_threads"), "{message}");
    assert!(message.contains("at least 1"), "{message}");
    assert!(std::error::Error::source(&error).is_none());
}

#[test]
fn the_defaults_are_exec_wstps_blocking_defaults() {
    assert_eq!(DEFAULT_MAX_BLOCKING_THREADS, 512);
    assert_eq!(DEFAULT_BLOCKING_KEEP_ALIVE, Duration::from_secs(10));
    // A default loop runs blocking work.
    let rt = EventLoop::new().expect("build an event loop");
    let program: IO<u8, ()> = IO::blocking(|| 4);
    assert_eq!(
        rt.block_on(program).expect("block_on"),
        Outcome::Succeeded(4)
    );
}

#[test]
fn blocking_calls_complete_with_their_values_errors_and_panics() {
    let rt = with_blocking_threads(2);
    let value: IO<u32, String> = IO::blocking(|| 7);
    assert_eq!(rt.block_on(value).expect("block_on"), Outcome::Succeeded(7));
    let failed: IO<u32, String> = IO::try_blocking(|| Err(String::from("disk on fire")));
    assert_eq!(
        rt.block_on(failed).expect("block_on"),
        Outcome::Errored(String::from("disk on fire"))
    );
    let recovered: IO<u32, String> =
        IO::try_blocking(|| Err(String::from("retry"))).handle_error(|_| 8);
    assert_eq!(
        rt.block_on(recovered).expect("block_on"),
        Outcome::Succeeded(8)
    );
    let panicked: IO<u32, String> = IO::blocking(|| panic!("a thunk panicked"));
    let outcome = rt.block_on(panicked).expect("block_on");
    assert!(matches!(outcome, Outcome::Panicked(_)), "{outcome:?}");
    // The loop and its pool go on.
    let after: IO<u32, String> = IO::blocking(|| 9);
    assert_eq!(rt.block_on(after).expect("block_on"), Outcome::Succeeded(9));
}

#[test]
fn a_blocking_call_beyond_the_bound_waits_in_the_queue_while_the_loop_goes_on() {
    let rt = with_blocking_threads(1);
    let (started, has_started) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let first: IO<&'static str, ()> = IO::blocking(move || {
        started.send(()).unwrap_or(());
        released.recv().unwrap_or(());
        "first"
    });
    let second: IO<&'static str, ()> = IO::blocking(|| "second");
    let queue_len =
        || IO::delay(|| Handle::current().map_or(usize::MAX, |h| h.metrics().blocking_queue_len));
    // (Blocks the loop thread until the first call runs on the pool's one
    // thread: a test's shortcut, not something a program should do.)
    let first_runs = IO::delay(move || has_started.recv_timeout(Duration::from_secs(10)).is_ok());
    // The cede lets the first fiber (a microtask) run and hand its call to
    // the pool.
    let program = first.start().flat_map(move |first| {
        IO::cede().product_r(first_runs).flat_map(move |first_ran| {
            second.start().flat_map(move |second| {
                // The loop still runs fibers and timers while the second
                // call waits in the queue.
                IO::sleep(Duration::from_millis(5))
                    .product_r(queue_len())
                    .flat_map(move |waiting| {
                        IO::delay(move || release.send(()).unwrap_or(()))
                            .product_r(first.join_with_never())
                            .flat_map(move |a| {
                                second
                                    .join_with_never()
                                    .map(move |b| (first_ran, waiting, a, b))
                            })
                    })
            })
        })
    });
    assert_eq!(
        rt.block_on(program).expect("block_on"),
        Outcome::Succeeded((true, 1, "first", "second"))
    );
}

#[test]
fn an_idle_blocking_thread_exits_after_the_keep_alive() {
    let rt = EventLoop::builder()
        .blocking_keep_alive(Duration::from_millis(5))
        .build()
        .expect("build an event loop");
    let program: IO<u8, ()> = IO::blocking(|| 1);
    assert_eq!(
        rt.block_on(program).expect("block_on"),
        Outcome::Succeeded(1)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while rt.metrics().blocking_threads > 0 {
        assert!(Instant::now() < deadline, "{}", rt.metrics());
        std::thread::sleep(Duration::from_millis(1));
    }
}
