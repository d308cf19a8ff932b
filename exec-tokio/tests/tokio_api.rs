//! exec-tokio's own behaviour: how it meets tokio (virtual time, the run
//! queue, the blocking pool, async code) and its build and run errors.
//! The behaviour every executor shares is tested in tests-integration,
//! whose shared bodies run on exec-tokio too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use spindle_core::error::TimeoutError;
use spindle_core::executor::ParkedBlockOn;
use spindle_core::{Deferred, Executor, IO, IORuntime, Outcome, RuntimeBuilder, UIO};
use spindle_exec_tokio::{BuildError, Flavor, RunError, TokioExecutor};

#[derive(Debug, PartialEq)]
struct TimedOut;

impl From<TimeoutError> for TimedOut {
    fn from(_: TimeoutError) -> Self {
        TimedOut
    }
}

#[tokio::test(start_paused = true)]
async fn io_sleep_runs_on_tokios_paused_clock() {
    let executor = TokioExecutor::current().expect("attach to the test runtime");
    let start = tokio::time::Instant::now();
    let program: IO<Duration, ()> = IO::monotonic().flat_map(|before| {
        IO::sleep(Duration::from_secs(3600))
            .product_r(IO::monotonic())
            .map(move |after| after - before)
    });
    let slept = executor
        .run_async(program)
        .await
        .unwrap()
        .succeeded()
        .unwrap();
    // The fiber's clock and tokio's moved by the hour (tokio advances its
    // paused clock to the timer's deadline, at millisecond granularity).
    assert!(slept >= Duration::from_secs(3600), "{slept:?}");
    assert!(slept < Duration::from_secs(3601), "{slept:?}");
    assert!(start.elapsed() >= Duration::from_secs(3600));
}

#[tokio::test(start_paused = true)]
async fn timeout_fires_on_virtual_time_and_the_cancelled_timer_is_dropped() {
    let executor = TokioExecutor::current().unwrap();
    let slow: IO<u8, TimedOut> = IO::sleep(Duration::from_secs(10)).map_to(1);
    let outcome = executor
        .run_async(slow.timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Errored(TimedOut));
    let fast: IO<u8, TimedOut> = IO::pure(2);
    let outcome = executor
        .run_async(fast.timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Succeeded(2));
    // Both timers are gone once tokio has processed the aborts.
    for _ in 0..1000 {
        if executor.metrics().timers == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(executor.metrics().timers, 0);
}

/// A program that spawns two tokio tasks, cedes, and then reports whether
/// both ran before it resumed.
fn spawn_two_tasks_then_cede() -> IO<bool, ()> {
    let ran = Arc::new(AtomicUsize::new(0));
    let (spawner, reader) = (ran.clone(), ran);
    IO::delay(move || {
        for _ in 0..2 {
            let ran = spawner.clone();
            tokio::spawn(async move {
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
    })
    .product_r(IO::cede())
    .map(move |()| reader.load(Ordering::SeqCst) == 2)
}

#[test]
fn a_cede_on_a_multi_thread_worker_runs_behind_the_tasks_already_waiting() {
    // One worker: the second task spawned sits in tokio's LIFO slot and
    // the first in the local queue. A cede that `spawn`ed the fiber again
    // would take the LIFO slot and run first; the yield path queues it
    // behind both. (A child fiber: it runs on the worker from its start,
    // where `block_on`'s main fiber first runs on the calling thread.)
    let executor = TokioExecutor::builder().multi_thread(1).build().unwrap();
    for _ in 0..100 {
        let on_the_worker = spawn_two_tasks_then_cede()
            .start()
            .flat_map(|fiber| fiber.join::<()>());
        assert_eq!(
            executor.block_on(on_the_worker),
            Ok(Outcome::Succeeded(Outcome::Succeeded(true)))
        );
    }
}

#[tokio::test]
async fn a_cede_on_a_current_thread_runtime_runs_behind_the_tasks_already_waiting() {
    let executor = TokioExecutor::current().unwrap();
    assert_eq!(
        executor.run_async(spawn_two_tasks_then_cede()).await,
        Ok(Outcome::Succeeded(true))
    );
}

#[tokio::test]
async fn auto_yield_lets_a_tokio_task_run_while_a_fiber_loops() {
    // A fiber that never cedes on its own still yields after its step
    // budget: a tokio task on the same single thread gets to run.
    let executor = TokioExecutor::current().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let setter = flag.clone();
    // The task is spawned by the running fiber, so it waits behind it.
    let spawn_setter: IO<(), ()> = IO::delay(move || {
        tokio::spawn(async move { setter.store(true, Ordering::SeqCst) });
    });
    let reader = flag.clone();
    let spin: IO<u64, ()> = spawn_setter.product_r(IO::tail_rec(0u64, move |n| {
        let reader = reader.clone();
        IO::delay(move || {
            if reader.load(Ordering::SeqCst) {
                std::ops::ControlFlow::Break(n)
            } else {
                std::ops::ControlFlow::Continue(n + 1)
            }
        })
    }));
    let steps = executor.run_async(spin).await.unwrap().succeeded().unwrap();
    assert!(flag.load(Ordering::SeqCst));
    assert!(steps > 0);
}

#[tokio::test]
async fn a_callback_completed_by_a_tokio_task_resumes_the_fiber() {
    let executor = TokioExecutor::current().unwrap();
    let io: IO<u32, ()> = IO::from_callback(|cb| {
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            cb.succeed(7);
        });
        None
    });
    assert_eq!(
        executor.run_async(io.map(|x| x * 6)).await,
        Ok(Outcome::Succeeded(42))
    );
}

#[tokio::test]
async fn block_on_inside_a_tokio_runtime_is_refused_with_nested() {
    let attached = TokioExecutor::current().unwrap();
    assert_eq!(
        attached.block_on(IO::<u8, ()>::pure(1)),
        Err(RunError::Nested)
    );
    assert_eq!(
        attached.try_block_on(IO::<u8, ()>::pure(1)),
        Err(RunError::Nested)
    );
    // Also for an executor that owns its runtime, and its drop here
    // (where blocking is not allowed) does not panic.
    let owned = TokioExecutor::builder().multi_thread(1).build().unwrap();
    assert_eq!(owned.block_on(IO::<u8, ()>::pure(2)), Err(RunError::Nested));
    assert_eq!(
        owned.run_async(IO::<u8, ()>::pure(3)).await,
        Ok(Outcome::Succeeded(3))
    );
    drop(owned);
}

#[test]
fn block_on_inside_a_fiber_is_refused_with_nested_and_inside_io_blocking_runs() {
    let executor = TokioExecutor::builder().multi_thread(2).build().unwrap();
    let handle = executor.handle().clone();
    let in_fiber = handle.clone();
    let nested: IO<Result<Outcome<u8, ()>, RunError>, ()> =
        IO::delay(move || in_fiber.block_on(IO::pure(1)));
    assert_eq!(
        executor.block_on(nested),
        Ok(Outcome::Succeeded(Err(RunError::Nested)))
    );
    let blocking: IO<Result<Outcome<u8, ()>, RunError>, ()> =
        IO::blocking(move || handle.block_on(IO::pure(2)));
    assert_eq!(
        executor.block_on(blocking),
        Ok(Outcome::Succeeded(Ok(Outcome::Succeeded(2))))
    );
}

#[tokio::test]
async fn run_async_resolves_to_deadlock_for_a_program_that_can_never_finish() {
    let executor = TokioExecutor::current().unwrap();
    assert_eq!(
        executor.run_async(UIO::<u8>::never()).await,
        Err(RunError::Deadlock)
    );
    assert_eq!(
        executor.run_async(IO::<u8, ()>::pure(4)).await,
        Ok(Outcome::Succeeded(4))
    );
}

#[test]
fn io_blocking_runs_on_the_owned_runtimes_blocking_pool() {
    let executor = TokioExecutor::builder()
        .current_thread()
        .thread_name("tokio-fibers")
        .build()
        .unwrap();
    // A child fiber: it runs on the runtime's one thread from its start
    // (`block_on`'s main fiber first runs on the calling thread).
    let names: IO<(String, String), ()> =
        IO::delay(|| std::thread::current().name().map(str::to_owned)).flat_map(|fiber| {
            IO::blocking(|| std::thread::current().id()).map(move |blocking| {
                (
                    fiber.unwrap_or_default(),
                    format!("{}", blocking != std::thread::current().id()),
                )
            })
        });
    let child = names.start().flat_map(|fiber| fiber.join::<()>());
    let (fiber_thread, elsewhere) = executor
        .block_on(child)
        .unwrap()
        .succeeded()
        .unwrap()
        .succeeded()
        .unwrap();
    assert_eq!(fiber_thread, "tokio-fibers");
    assert_eq!(elsewhere, "true", "the blocking call ran on another thread");
}

#[test]
fn a_current_thread_executor_runs_every_fiber_on_its_one_thread() {
    let executor = TokioExecutor::builder().current_thread().build().unwrap();
    assert_eq!(executor.metrics().flavor, Flavor::CurrentThread);
    let threads =
        IO::<std::thread::ThreadId, ()>::par_traverse((0..50).collect::<Vec<u32>>(), |_| {
            IO::cede().product_r(IO::delay(|| std::thread::current().id()))
        });
    let ids = executor.block_on(threads).unwrap().succeeded().unwrap();
    assert!(ids.windows(2).all(|w| w[0] == w[1]));
    assert_ne!(ids[0], std::thread::current().id());
}

#[test]
fn current_outside_a_tokio_runtime_is_a_build_error() {
    let error = TokioExecutor::current().unwrap_err();
    assert!(matches!(error, BuildError::NoCurrentRuntime), "{error:?}");
    assert!(error.to_string().contains("not inside a tokio runtime"));
}

#[test]
fn attaching_to_a_runtime_without_timers_is_a_build_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let error = TokioExecutor::builder()
        .handle(runtime.handle().clone())
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::TimersDisabled), "{error:?}");
    assert!(error.to_string().contains("enable_time"));
}

#[test]
fn bad_configurations_are_build_errors_naming_what_was_wrong() {
    let error = TokioExecutor::builder()
        .multi_thread(0)
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::ZeroWorkerThreads));
    assert!(error.to_string().contains("multi_thread"));
    let error = TokioExecutor::builder()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::ZeroBlockingThreads));
    assert!(error.to_string().contains("max_blocking_threads"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let error = TokioExecutor::builder()
        .handle(runtime.handle().clone())
        .thread_name("x")
        .build()
        .unwrap_err();
    assert!(matches!(
        error,
        BuildError::OptionOfOwnedRuntime("thread_name")
    ));
    assert!(error.to_string().contains("thread_name"));
}

#[test]
fn an_executor_attached_from_a_plain_thread_runs_block_on() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let executor = TokioExecutor::builder()
        .handle(runtime.handle().clone())
        .build()
        .unwrap();
    assert!(!executor.metrics().owns_runtime);
    let slept: IO<u8, ()> = IO::sleep(Duration::from_millis(1)).map_to(5);
    assert_eq!(executor.block_on(slept), Ok(Outcome::Succeeded(5)));
    assert_eq!(
        executor.try_block_on(UIO::<u8>::never()),
        Err(RunError::Deadlock)
    );
}

struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn dropping_an_owning_executor_drops_its_sleeping_fibers_and_refuses_new_work() {
    for builder in [
        TokioExecutor::builder().multi_thread(2),
        TokioExecutor::builder().current_thread(),
    ] {
        let executor = builder.build().unwrap();
        let handle = executor.handle().clone();
        let dropped = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let guard = CountDrop(dropped.clone());
            let sleeper: IO<(), ()> =
                IO::sleep(Duration::from_secs(3600)).map(move |()| drop(guard));
            executor.spawn(sleeper).unwrap();
        }
        drop(executor);
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert!(matches!(
            handle.spawn(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        ));
        assert_eq!(
            handle.block_on(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        );
    }
}

#[test]
fn a_fiber_dump_lists_the_waiting_fibers_and_the_executors_state() {
    let executor = TokioExecutor::builder()
        .multi_thread(2)
        .track_fibers(true)
        .build()
        .unwrap();
    let gate: Deferred<()> = Deferred::new();
    for _ in 0..3 {
        executor.spawn(gate.get::<()>()).unwrap();
    }
    // Fibers are listed once their first run ends (they wait): a moment
    // after their wait is registered.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while gate.waiters() < 3 || executor.live_fibers().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the three fibers are never listed: {:?}",
            executor.live_fibers()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let handle = executor.handle().clone();
    let waiting = executor
        .block_on(IO::<usize, ()>::delay(move || handle.live_fibers().len()))
        .unwrap()
        .succeeded()
        .unwrap();
    // The three waiters (the fiber that counted is in its first run: not
    // listed yet).
    assert_eq!(waiting, 3, "{waiting}");
    let dump = executor.fiber_dump();
    assert!(dump.fibers.len() >= 3, "{dump}");
    assert!(
        dump.executor
            .iter()
            .any(|(name, value)| *name == "workers" && *value == 2)
    );
    assert!(executor.metrics().live_fibers >= 3);
    assert_eq!(
        executor.block_on(gate.complete::<()>(())),
        Ok(Outcome::Succeeded(Ok(())))
    );
}

#[test]
fn block_on_of_a_program_that_can_never_finish_waits_until_the_executor_is_dropped() {
    let executor = TokioExecutor::builder().multi_thread(1).build().unwrap();
    let handle = executor.handle().clone();
    let (started, waiting) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        started.send(()).unwrap();
        handle.block_on(UIO::<u8>::never())
    });
    waiting.recv().unwrap();
    // Whether the waiter is still starting the program or already waits
    // for the shutdown, the drop ends its wait with ShutDown.
    drop(executor);
    assert_eq!(waiter.join().unwrap(), Err(RunError::ShutDown));
}

#[tokio::test(start_paused = true)]
async fn an_attached_executor_dropped_lets_go_of_its_sleeping_fibers_without_running_them() {
    let executor = TokioExecutor::current().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let resumed = Arc::new(AtomicBool::new(false));
    let (guard, flag) = (CountDrop(dropped.clone()), resumed.clone());
    let sleeper: IO<(), ()> = IO::sleep(Duration::from_secs(3600)).map(move |()| {
        flag.store(true, Ordering::SeqCst);
        drop(guard);
    });
    executor.spawn(sleeper).unwrap();
    // Let the fiber run up to its sleep.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(executor.metrics().timers, 1);
    drop(executor);
    // The runtime goes on (it is the application's); when the timer
    // fires, the fiber is dropped instead of resumed.
    tokio::time::sleep(Duration::from_secs(7200)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(!resumed.load(Ordering::SeqCst));
}

/// A fiber step that awaits a tokio future: a tokio task runs it and
/// completes the fiber's callback (until io-core awaits futures itself).
fn await_on_tokio<A, F>(future: F) -> IO<A, std::io::Error>
where
    A: Send + 'static,
    F: std::future::Future<Output = std::io::Result<A>> + Send + 'static,
{
    IO::from_callback(move |cb| {
        tokio::spawn(async move {
            cb.complete(future.await);
        });
        None
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fiber_serves_a_tokio_tcp_connection_next_to_the_applications_tasks() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let executor = TokioExecutor::current().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server: IO<String, std::io::Error> = await_on_tokio(async move {
        let (mut stream, _) = listener.accept().await?;
        let mut request = String::new();
        stream.read_to_string(&mut request).await?;
        Ok((stream, request))
    })
    .flat_map(|(mut stream, request)| {
        await_on_tokio(async move {
            stream.write_all(b"pong").await?;
            Ok(request)
        })
    });
    let served = executor.spawn(server).unwrap();
    // The application's own task is the client.
    let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
    client.write_all(b"ping").await.unwrap();
    client.shutdown().await.unwrap();
    let mut reply = Vec::new();
    client.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"pong");
    let outcome = executor.run_async(served.join::<()>()).await.unwrap();
    assert_eq!(
        outcome.succeeded().and_then(|o| o.succeeded()),
        Some(String::from("ping"))
    );
}
