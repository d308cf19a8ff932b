//! A fiber is one tokio task for its whole life (the `task` module of
//! exec-tokio): resumptions wake that task instead of spawning one, the
//! task ends with the fiber, and `block_on` runs its main fiber on the
//! calling thread until the fiber first waits.
//!
//! tokio tells which task runs a piece of code (`tokio::task::try_id`) and
//! how many tasks a runtime has alive (`RuntimeMetrics::num_alive_tasks`):
//! what these tests assert with.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use spindle_core::{Callback, FiberHandle, FiberStatus, IO, IORuntime, Outcome, RuntimeBuilder};
use spindle_exec_tokio::TokioExecutor;

/// How long a test waits for something that should happen at once, before
/// it fails instead of hanging (a hang guard, not a measurement).
const HANG_LIMIT: Duration = Duration::from_secs(20);

/// Polls `done` until it holds, failing after [`HANG_LIMIT`].
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < HANG_LIMIT,
            "{what}: not within {HANG_LIMIT:?}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// The owned runtimes of both flavours.
fn owned_executors() -> [(&'static str, TokioExecutor); 2] {
    [
        (
            "multi_thread",
            TokioExecutor::builder().multi_thread(2).build().unwrap(),
        ),
        (
            "current_thread",
            TokioExecutor::builder().current_thread().build().unwrap(),
        ),
    ]
}

/// `rounds` waits, each ended by a callback that a helper thread
/// completes; each resumption records the tokio task running the fiber.
/// The program's value is the sum of the numbers the callbacks carried
/// (1, 2, ..., `rounds`).
fn resumed_from_another_thread(
    rounds: u64,
    tasks: Arc<Mutex<Vec<Option<tokio::task::Id>>>>,
) -> (IO<u64, ()>, thread::JoinHandle<u64>) {
    let (callbacks, inbox) = std::sync::mpsc::channel::<Callback<u64, ()>>();
    let helper = thread::spawn(move || {
        let mut completed = 0;
        for cb in inbox {
            completed += 1;
            assert!(cb.succeed(completed));
        }
        completed
    });
    let program = IO::tail_rec((0u64, 0u64), move |(round, sum)| {
        if round == rounds {
            return IO::pure(ControlFlow::Break(sum));
        }
        let callbacks = callbacks.clone();
        let tasks = tasks.clone();
        IO::from_callback(move |cb| {
            callbacks.send(cb).expect("the helper waits");
            None
        })
        .map(move |n| {
            tasks.lock().unwrap().push(tokio::task::try_id());
            ControlFlow::Continue((round + 1, sum + n))
        })
    });
    (program, helper)
}

#[test]
fn a_fiber_resumed_a_thousand_times_from_another_thread_stays_in_one_tokio_task() {
    for (flavor, executor) in owned_executors() {
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let (rounds, helper) = resumed_from_another_thread(1_000, tasks.clone());
        // A child fiber: it runs in a task from its start.
        let program = rounds.start().flat_map(|fiber| fiber.join::<()>());
        let outcome = executor.block_on(program).unwrap();
        assert_eq!(
            outcome,
            Outcome::Succeeded(Outcome::Succeeded(500_500)),
            "{flavor}"
        );
        assert_eq!(helper.join().unwrap(), 1_000, "{flavor}");
        let tasks = tasks.lock().unwrap();
        assert_eq!(tasks.len(), 1_000, "{flavor}");
        let first = tasks[0].unwrap_or_else(|| panic!("{flavor}: the fiber ran outside a task"));
        assert!(
            tasks.iter().all(|task| *task == Some(first)),
            "{flavor}: the fiber moved between tokio tasks"
        );
        // The task ended with the fiber: none is left on the runtime.
        eventually(flavor, || executor.metrics().tokio_alive_tasks == 0);
    }
}

#[test]
fn block_on_runs_the_main_fiber_on_the_calling_thread_until_it_first_waits_then_in_one_task() {
    for (flavor, executor) in owned_executors() {
        let caller = thread::current().id();
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let (rounds, helper) = resumed_from_another_thread(100, tasks.clone());
        let first_run = IO::<_, ()>::delay(|| (thread::current().id(), tokio::task::try_id()));
        // A sleep: a wait that ends only after the fiber has suspended.
        let program = first_run.flat_map(move |first| {
            IO::sleep(Duration::from_millis(1)).product_r(rounds.map(move |sum| (first, sum)))
        });
        let ((thread_of_first_run, task_of_first_run), sum) =
            executor.block_on(program).unwrap().succeeded().unwrap();
        assert_eq!(sum, 5_050, "{flavor}");
        assert_eq!(
            thread_of_first_run, caller,
            "{flavor}: the first run is the caller's"
        );
        assert_eq!(
            task_of_first_run, None,
            "{flavor}: the first run is in no task"
        );
        helper.join().unwrap();
        // From its first real wait on (the sleep), it runs in one task. (A
        // callback that comes before the fiber has really suspended lets it
        // go on in the same run: the first entries can only be `None` if
        // the sleep ended before the fiber suspended, which a loaded
        // machine may do.)
        let tasks = tasks.lock().unwrap();
        let in_tasks: Vec<_> = tasks.iter().skip_while(|t| t.is_none()).collect();
        assert!(
            in_tasks.iter().all(|t| **t == *in_tasks[0]),
            "{flavor}: the main fiber moved between tokio tasks: {in_tasks:?}"
        );
        eventually(flavor, || executor.metrics().tokio_alive_tasks == 0);
    }
}

#[test]
fn a_block_on_of_a_program_that_never_waits_runs_it_on_the_calling_thread_in_no_task() {
    for (flavor, executor) in owned_executors() {
        let caller = thread::current().id();
        for i in 0..100u32 {
            let program =
                IO::<_, ()>::delay(move || (i + 1, thread::current().id(), tokio::task::try_id()));
            let (value, thread, task) = executor.block_on(program).unwrap().succeeded().unwrap();
            assert_eq!(value, i + 1, "{flavor}");
            assert_eq!(thread, caller, "{flavor}: no hop to the runtime's threads");
            assert_eq!(task, None, "{flavor}: no tokio task spawned for it");
        }
        assert_eq!(executor.metrics().tokio_alive_tasks, 0, "{flavor}");
        assert_eq!(executor.metrics().live_fibers, 0, "{flavor}");
    }
}

/// A slot where a registration leaves its callback for the test.
type Slot = Arc<Mutex<Option<Callback<u32, ()>>>>;

/// Counts its drops.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fiber that waits in a task of its own for the callback it leaves in
/// `slot`, holding a `Dropped` in its continuation, with a finalizer that
/// counts its runs.
fn waiting_fiber(
    slot: &Slot,
    dropped: &Arc<AtomicUsize>,
    finalized: &Arc<AtomicUsize>,
) -> IO<u32, ()> {
    let (slot, held, finalized) = (slot.clone(), Dropped(dropped.clone()), finalized.clone());
    IO::from_callback(move |cb| {
        *slot.lock().unwrap() = Some(cb);
        None
    })
    .map(move |x| {
        let _held = &held;
        x
    })
    .guarantee(IO::delay(move || {
        finalized.fetch_add(1, Ordering::SeqCst);
    }))
}

/// An executor attached to a multi-thread runtime of the test's own, with
/// one [`waiting_fiber`] spawned on it.
struct Attached {
    runtime: tokio::runtime::Runtime,
    executor: TokioExecutor,
    slot: Slot,
    dropped: Arc<AtomicUsize>,
    finalized: Arc<AtomicUsize>,
}

impl Attached {
    /// Spawns `wrap(waiting_fiber(..))` and returns once it waits, with
    /// its task (the runtime's only one) parked; the fiber's handle too.
    fn waiting<A: Send + 'static>(
        wrap: impl FnOnce(IO<u32, ()>) -> IO<A, ()>,
    ) -> (Self, FiberHandle<A, ()>) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Listed, so that the test can see when the fiber's wait is
        // published (its status `Suspended`).
        let executor = TokioExecutor::builder()
            .handle(runtime.handle().clone())
            .track_fibers(true)
            .build()
            .unwrap();
        let (slot, dropped, finalized): (Slot, _, _) = Default::default();
        let fiber = executor
            .spawn(wrap(waiting_fiber(&slot, &dropped, &finalized)))
            .unwrap();
        // Its callback is in the slot as soon as it is registered, before
        // the wait is published: a callback completed in between lets the
        // fiber go on in the same run, past its finalizer, and nothing is
        // resumed. So wait for the published wait.
        eventually("the fiber waits", || {
            slot.lock().unwrap().is_some()
                && executor
                    .live_fibers()
                    .iter()
                    .any(|fiber| fiber.status == FiberStatus::Suspended)
        });
        assert_eq!(runtime.metrics().num_alive_tasks(), 1);
        let attached = Attached {
            runtime,
            executor,
            slot,
            dropped,
            finalized,
        };
        (attached, fiber)
    }

    /// The callback the waiting fiber left.
    fn callback(&self) -> Callback<u32, ()> {
        self.slot.lock().unwrap().take().unwrap()
    }

    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    fn finalized(&self) -> usize {
        self.finalized.load(Ordering::SeqCst)
    }

    /// Fails unless the runtime's tasks all end within the hang limit.
    fn assert_its_task_ends(&self) {
        eventually("its task ends", || {
            self.runtime.metrics().num_alive_tasks() == 0
        });
    }
}

#[test]
fn a_fiber_resumed_after_its_executor_shut_down_is_dropped_and_its_parked_task_ends() {
    let (attached, fiber) = Attached::waiting(|io| io);
    let handle = attached.executor.handle().clone();
    let Attached {
        runtime,
        executor,
        slot,
        dropped,
        finalized,
    } = attached;
    drop(executor);
    let cb = slot.lock().unwrap().take().unwrap();
    assert!(cb.succeed(1), "the wait was still open");
    drop(cb);
    // Dropped, not run: its continuation's value is freed once, its
    // finalizer does not run, it is counted as ended, and its task,
    // woken by the close of its link, ends.
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "the fiber handle still holds it"
    );
    drop(fiber);
    eventually("the fiber is freed", || dropped.load(Ordering::SeqCst) == 1);
    assert_eq!(finalized.load(Ordering::SeqCst), 0);
    // Counted as ended: waited for like the drop (a tokio worker may still
    // hold the fiber for a moment).
    eventually("the fiber is counted as ended", || {
        handle.metrics().live_fibers == 0
    });
    eventually("its task ends", || runtime.metrics().num_alive_tasks() == 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn a_waiting_fiber_whose_callbacks_are_all_dropped_is_freed_and_its_parked_task_ends() {
    let (attached, fiber) = Attached::waiting(|io| io);
    // Not joined: nothing but its callback holds the fiber.
    drop(fiber);
    assert_eq!(attached.executor.metrics().live_fibers, 1);
    drop(attached.callback());
    // Freed by whichever holder lets go last (a tokio worker may still
    // hold the fiber for a moment: seen under AddressSanitizer).
    eventually("the fiber is freed", || attached.dropped() == 1);
    assert_eq!(attached.finalized(), 0);
    eventually("the fiber is counted as ended", || {
        attached.executor.metrics().live_fibers == 0
    });
    attached.assert_its_task_ends();
    assert_eq!(attached.dropped(), 1, "freed exactly once");
}

#[test]
fn a_fiber_resumed_on_a_running_executor_finishes_in_the_task_it_waited_in() {
    let (attached, fiber) = Attached::waiting(|io| io.map(|x| (x, tokio::task::try_id())));
    assert!(attached.callback().succeed(41));
    let (value, task) = attached
        .executor
        .block_on(fiber.join::<()>())
        .unwrap()
        .succeeded()
        .unwrap()
        .succeeded()
        .unwrap();
    assert_eq!(value, 41);
    assert!(task.is_some(), "resumed inside its task");
    assert_eq!(attached.finalized(), 1);
    attached.assert_its_task_ends();
}
