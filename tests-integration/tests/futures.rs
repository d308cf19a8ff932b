//! Futures inside `IO` (`IO::from_future` and friends) and fibers awaited as
//! futures (`FiberHandle: IntoFuture`, `IO::into_future_on`), on every
//! executor.
//!
//! The futures here are hand-written (a one-shot channel, `poll_fn`s), and
//! the async side is a tiny thread-parking `block_on` (the shape of the
//! `futures` crate's `executor::block_on`; no code copied), so no async
//! runtime is involved.

mod common;

use std::future::{Future, IntoFuture};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use common::{Counter, DropCounter, HANG_LIMIT, Log, RunError, rt_test, within};
use spindle_core::{FiberHandle, IO, IORuntime, Outcome};

/// Wakes by unparking the thread that blocks.
struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parking between polls.
fn block_on<F: IntoFuture>(future: F) -> F::Output {
    let mut future = pin!(future.into_future());
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => thread::park(),
        }
    }
}

/// A waker that does nothing (for a single poll).
struct NoopWaker;

impl Wake for NoopWaker {
    fn wake(self: Arc<Self>) {}
}

/// Runs `f` on a new thread; the program resumes with its result.
fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> IO<T, ()> {
    IO::from_callback(move |cb| {
        thread::spawn(move || cb.succeed(f()));
        None
    })
}

/// The receiving half of a one-shot channel, as a future.
#[derive(Clone, Default)]
struct Oneshot<T>(Arc<Mutex<(Option<T>, Option<Waker>)>>);

impl<T> Oneshot<T> {
    fn send(&self, value: T) {
        let waker = {
            let mut state = self.0.lock().unwrap();
            state.0 = Some(value);
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The waker the receiver left, if any (to wake it spuriously).
    fn waker(&self) -> Option<Waker> {
        self.0.lock().unwrap().1.clone()
    }
}

impl<T> Future for Oneshot<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut state = self.0.lock().unwrap();
        match state.0.take() {
            Some(value) => Poll::Ready(value),
            None => {
                state.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A joined fiber's outcome, in the awaiting test.
type Joined = Outcome<u32, String>;

/// Records the thread it is dropped on.
struct OnDrop(Log<thread::ThreadId>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.push(thread::current().id());
    }
}

rt_test! {
    fn a_ready_future_produces_its_value() {
        let io: IO<u32, ()> = IO::from_future(async { 40 + 2 });
        assert_eq!(run(io), Outcome::Succeeded(42));
    }

    fn a_pending_future_woken_from_another_thread_resumes_its_fiber() {
        let rx: Oneshot<u32> = Oneshot::default();
        let tx = rx.clone();
        let io: IO<u32, ()> = IO::from_future(rx).map(|n| n + 1);
        let sender = thread::spawn(move || {
            thread::sleep(std::time::Duration::from_millis(20));
            tx.send(6);
        });
        assert_eq!(run(io), Outcome::Succeeded(7));
        sender.join().unwrap();
    }

    fn a_future_woken_during_poll_resumes_its_fiber() {
        // Poll 1: woken by reference, no clone (a yield). Poll 2: a clone is
        // woken on another thread that is joined before `poll` returns.
        // Poll 3: ready.
        let polls = Counter::new();
        let p = polls.clone();
        // `incr` returns the count before the increment.
        let future = std::future::poll_fn(move |cx| match p.incr() + 1 {
            1 => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            2 => {
                let waker = cx.waker().clone();
                thread::spawn(move || waker.wake()).join().unwrap();
                Poll::Pending
            }
            _ => Poll::Ready("done"),
        });
        let io: IO<&str, ()> = IO::from_future(future);
        assert_eq!(run(io), Outcome::Succeeded("done"));
        assert_eq!(polls.get(), 3);
    }

    fn spurious_wakes_only_cost_extra_polls() {
        let rx: Oneshot<u32> = Oneshot::default();
        let tx = rx.clone();
        let polls = Counter::new();
        let p = polls.clone();
        let mut rx = rx;
        let future = std::future::poll_fn(move |cx| {
            p.incr();
            Pin::new(&mut rx).poll(cx)
        });
        let io: IO<u32, ()> = IO::from_future(future);
        let waker = thread::spawn(move || {
            // Wake without a value a few times, then send it.
            for _ in 0..5 {
                while tx.waker().is_none() {
                    thread::yield_now();
                }
                tx.waker().unwrap().wake();
                thread::sleep(std::time::Duration::from_millis(2));
            }
            tx.send(9);
        });
        assert_eq!(run(io), Outcome::Succeeded(9));
        waker.join().unwrap();
        assert!((2..=7).contains(&polls.get()), "polls: {}", polls.get());
    }

    fn many_wakes_from_many_threads_resume_the_fiber_and_it_finishes() {
        // The future is ready once 8 threads have each woken it 100 times;
        // it is polled at most once per wake (plus the first poll).
        let wakes = Arc::new(AtomicUsize::new(0));
        let polls = Counter::new();
        let (w, p) = (wakes.clone(), polls.clone());
        let started = Arc::new(Mutex::new(false));
        let s = started.clone();
        let future = std::future::poll_fn(move |cx| {
            p.incr();
            if w.load(Ordering::SeqCst) == 800 {
                return Poll::Ready(800);
            }
            let mut started = s.lock().unwrap();
            if !*started {
                *started = true;
                for _ in 0..8 {
                    let (waker, w) = (cx.waker().clone(), w.clone());
                    thread::spawn(move || {
                        for _ in 0..100 {
                            w.fetch_add(1, Ordering::SeqCst);
                            waker.wake_by_ref();
                        }
                    });
                }
            }
            Poll::Pending
        });
        let io: IO<usize, ()> = IO::from_future(future);
        assert_eq!(run(io), Outcome::Succeeded(800));
        assert!(polls.get() <= 802, "polls: {}", polls.get());
    }

    fn a_wake_after_the_fiber_is_gone_does_nothing() {
        let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
        let k = kept.clone();
        let mut polled = false;
        let future = std::future::poll_fn(move |cx| {
            if polled {
                return Poll::Ready(1u8);
            }
            polled = true;
            *k.lock().unwrap() = Some(cx.waker().clone());
            cx.waker().wake_by_ref();
            Poll::Pending
        });
        let rt = rt();
        assert_eq!(rt.run(IO::<u8, ()>::from_future(future)), Outcome::Succeeded(1));
        let waker = kept.lock().unwrap().take().expect("the future kept a waker");
        waker.wake_by_ref();
        thread::spawn(move || waker.wake()).join().unwrap();
        // The executor is still fine afterwards.
        assert_eq!(rt.run(IO::<u8, ()>::pure(2)), Outcome::Succeeded(2));
    }

    fn a_future_that_dropped_every_waker_can_never_finish_and_try_run_says_so() {
        // Keeps no waker at all.
        let forgetful = std::future::poll_fn(|_| Poll::<u8>::Pending);
        let io: IO<u8, ()> = IO::from_future(forgetful);
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Err(RunError::Deadlock)));
        // Clones its waker and drops the clone later, on another thread.
        let dropped = Counter::new();
        let guard = DropCounter(dropped.clone());
        let later = std::future::poll_fn(move |cx| {
            let _keep = &guard;
            let waker = cx.waker().clone();
            thread::spawn(move || {
                thread::sleep(std::time::Duration::from_millis(20));
                drop(waker);
            });
            Poll::<u8>::Pending
        });
        let io: IO<u8, ()> = IO::from_future(later);
        assert_eq!(within(HANG_LIMIT, move || try_run(io)), Some(Err(RunError::Deadlock)));
        assert_eq!(dropped.get(), 1, "the freed fiber dropped its future");
    }

    fn canceling_a_waiting_fiber_drops_its_future_once_and_runs_its_finalizer_once() {
        let drops = Counter::new();
        let finalized = Counter::new();
        let guard = DropCounter(drops.clone());
        // Where the future was dropped and where the finalizer ran: the
        // same thread (the fiber's: the finalizer runs right after the drop,
        // in the same run of the fiber), never a waker's thread.
        let threads: Log<thread::ThreadId> = Log::new();
        let on_drop = OnDrop(threads.clone());
        let rx: Oneshot<u32> = Oneshot::default();
        let tx = rx.clone();
        let t = threads.clone();
        let waiting = IO::<u32, ()>::from_future(async move {
            let _guard = guard;
            let _on_drop = on_drop;
            rx.await
        })
        .on_cancel(finalized.incr_io().product_r(IO::delay(move || t.push(thread::current().id()))));
        let d = drops.clone();
        let io: IO<(Outcome<u32, ()>, usize), ()> = waiting.start().flat_map(move |fiber| {
            common::eventually(move || tx.waker().is_some())
                .product_r(fiber.cancel())
                .product_r(fiber.join())
                .map(move |outcome| (outcome, d.get()))
        });
        assert_eq!(run(io), Outcome::Succeeded((Outcome::Canceled, 1)));
        assert_eq!(drops.get(), 1);
        assert_eq!(finalized.get(), 1);
        let threads = threads.events();
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0], threads[1], "dropped on the fiber's thread");
    }

    fn a_panic_in_poll_ends_the_fiber_as_panicked() {
        let future = std::future::poll_fn(|_| -> Poll<u32> { panic!("poll exploded") });
        let outcome = run(IO::<u32, ()>::from_future(future));
        assert!(outcome.is_panicked(), "{outcome:?}");
        // A panic in a later poll, after a wake, too.
        let mut first = true;
        let later = std::future::poll_fn(move |cx| -> Poll<u32> {
            if first {
                first = false;
                let waker = cx.waker().clone();
        waker.wake();
                Poll::Pending
            } else {
                panic!("second poll exploded")
            }
        });
        assert!(run(IO::<u32, ()>::from_future(later)).is_panicked());
    }

    fn the_lazy_form_builds_its_future_only_when_run_and_once_per_run() {
        let built = Counter::new();
        let b = built.clone();
        let io: IO<usize, ()> = IO::from_future_with(move || {
            let n = b.incr() + 1;
            async move { n * 10 }
        });
        assert_eq!(built.get(), 0, "building the IO builds no future");
        // Run twice inside one program: each run of the step builds once.
        let b2 = built.clone();
        let twice: IO<usize, ()> = io.flat_map(move |first| {
            let b = b2.clone();
            IO::from_future_with(move || {
                let n = b.incr() + 1;
                async move { first + n }
            })
        });
        assert_eq!(run(twice), Outcome::Succeeded(12));
        assert_eq!(built.get(), 2);
    }

    fn an_err_output_of_a_try_future_is_the_programs_typed_error() {
        let failing: IO<u32, String> = IO::from_try_future(async { Err("refused".to_string()) });
        assert_eq!(run(failing), Outcome::Errored("refused".to_string()));
        let ok: IO<u32, String> = IO::from_try_future_with(|| async { Ok(5) });
        assert_eq!(run(ok), Outcome::Succeeded(5));
        let handled: IO<u32, String> =
            IO::from_try_future(async { Err::<u32, _>("x".to_string()) }).handle_error(|e| e.len() as u32);
        assert_eq!(run(handled), Outcome::Succeeded(1));
    }

    fn awaiting_a_fiber_handle_from_async_code_gives_its_outcome() {
        let child: IO<u32, String> = IO::<(), String>::cede().map(|()| 3);
        let failing: IO<u32, String> = IO::raise_error("no".to_string());
        let io: IO<(Joined, Joined), ()> = child
            .start()
            .flat_map(move |a| failing.start().map(move |b| (a, b)))
            .flat_map(|(a, b)| on_thread(move || (block_on(a), block_on(b.into_future()))));
        assert_eq!(
            run(io),
            Outcome::Succeeded((Outcome::Succeeded(3), Outcome::Errored("no".to_string())))
        );
    }

    fn dropping_the_awaiting_future_leaves_the_fiber_running() {
        let log: Log<&str> = Log::new();
        let rx: Oneshot<()> = Oneshot::default();
        let tx = rx.clone();
        let child = IO::<(), ()>::from_future(rx)
            .product_r(log.record("child finished"))
            .on_cancel(log.record("child canceled"));
        let io: IO<(), ()> = child.start().flat_map(move |fiber: FiberHandle<(), ()>| {
            let waiter = fiber.cancel_handle();
            on_thread(move || {
                let mut join = fiber.into_future();
                let waker = Waker::from(Arc::new(NoopWaker));
                assert!(Pin::new(&mut join).poll(&mut Context::from_waker(&waker)).is_pending());
                drop(join);
                tx.send(());
            })
            .product_r(waiter.join_void())
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(log.events(), ["child finished"]);
    }

    fn cancel_on_drop_cancels_the_fiber_and_its_finalizer_runs_once() {
        let finalized = Counter::new();
        let started = Counter::new();
        // The finalizer is installed before `started` counts (a fiber
        // canceled before it starts runs no finalizer, by design).
        let child = started
            .incr_io()
            .product_r(IO::<u32, ()>::never())
            .on_cancel(finalized.incr_io());
        let io: IO<(), ()> = child.start().flat_map(move |fiber: FiberHandle<u32, ()>| {
            let waiter = fiber.cancel_handle();
            on_thread(move || {
                while started.get() == 0 {
                    thread::yield_now();
                }
                let mut join = fiber.into_future().cancel_on_drop();
                let waker = Waker::from(Arc::new(NoopWaker));
                assert!(Pin::new(&mut join).poll(&mut Context::from_waker(&waker)).is_pending());
                drop(join);
            })
            .product_r(waiter.join_void())
        });
        assert_eq!(run(io), Outcome::Succeeded(()));
        assert_eq!(finalized.get(), 1);
    }

    fn an_io_awaited_as_a_future_inside_another_io_round_trips() {
        let io: IO<Outcome<u32, ()>, ()> = IO::<(), ()>::cede()
            .map(|()| 41u32)
            .start()
            .flat_map(|fiber| IO::from_future(fiber.into_future()))
            .map(|outcome| match outcome {
                Outcome::Succeeded(n) => Outcome::Succeeded(n + 1),
                other => other,
            });
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Succeeded(42)));
    }
}

/// `IO::into_future_on` on an executor's handle: a program started from
/// async code on a plain thread (exec-wstp runs its fibers on its own
/// workers, so the thread only waits).
#[test]
fn into_future_on_starts_the_program_and_its_future_gives_the_outcome() {
    let rt = common::Wstp::builder().worker_threads(2).build().unwrap();
    let handle = rt.handle().clone();
    let outcome = block_on(
        IO::<u32, ()>::pure(6)
            .map(|n| n * 7)
            .into_future_on(&handle),
    );
    assert_eq!(outcome, Outcome::Succeeded(42));
}
