//! Unit tests of the future bridge on a minimal executor. They run every
//! `unsafe` path of `cell.rs` (both waker vtables: clone, wake, wake by
//! reference, drop; the lazy cell's install) and the join future's waiter,
//! and run under Miri in CI (`cargo +nightly miri test -p spindle-core --lib
//! future::`).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Wake;

use crate::fiber::handle::FiberHandle;
use crate::future::cell::{Resume, WakeCell};
use crate::wait::CellOwner;
use crate::{Executor, Fiber, FiberConfig, IO, Outcome, TimerCallback};

/// One queue, no timers (nothing here sleeps).
#[derive(Clone)]
struct Exec(Arc<ExecState>);

struct ExecState {
    queue: Mutex<VecDeque<Fiber<Exec>>>,
    config: FiberConfig,
}

impl Executor for Exec {
    type TimerKey = ();
    type FiberSlot = ();
    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        self.0.queue.lock().unwrap().push_back(fiber);
    }
    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        self.0.queue.lock().unwrap().push_back(fiber);
    }
    fn monotonic(&self) -> Duration {
        Duration::ZERO
    }
    fn set_timer(&self, _: Duration, callback: TimerCallback) {
        drop(callback);
    }
    fn cancel_timer(&self, _: ()) {}
    fn config(&self) -> &FiberConfig {
        &self.0.config
    }
}

impl Exec {
    fn new() -> Self {
        Exec(Arc::new(ExecState {
            queue: Mutex::new(VecDeque::new()),
            config: FiberConfig::default(),
        }))
    }

    /// Runs queued fibers until `done` holds or nothing is left for a while
    /// (other threads' wakes included).
    fn run_until(&self, done: impl Fn() -> bool) {
        let mut idle = 0;
        while !done() {
            let next = self.0.queue.lock().unwrap().pop_front();
            match next {
                Some(fiber) => {
                    idle = 0;
                    fiber.run();
                }
                None => {
                    idle += 1;
                    if idle > if cfg!(miri) { 2_000 } else { 100_000 } {
                        return;
                    }
                    std::thread::yield_now();
                }
            }
        }
    }

    fn run<A: Send + 'static, E: Send + 'static>(&self, io: IO<A, E>) -> Option<Outcome<A, E>> {
        let slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        self.schedule_fiber(Fiber::new(io, self.clone(), move |o| {
            *s.lock().unwrap() = Some(o)
        }));
        self.run_until(|| slot.lock().unwrap().is_some());
        slot.lock().unwrap().take()
    }
}

/// A one-shot channel's receiving future: `Pending` until `send`.
#[derive(Clone, Default)]
struct Oneshot(Arc<Mutex<(Option<u32>, Option<Waker>)>>);

impl Oneshot {
    fn send(&self, value: u32) {
        let waker = {
            let mut state = self.0.lock().unwrap();
            state.0 = Some(value);
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Future for Oneshot {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let mut state = self.0.lock().unwrap();
        match state.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                state.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Wakes itself by reference `times` times (returning `Pending`), then is
/// ready: a `yield_now`.
struct YieldTimes(usize);

impl Future for YieldTimes {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        if self.0 == 0 {
            return Poll::Ready(7);
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_ready_future_produces_its_value() {
    let io: IO<u32, ()> = IO::from_future(async { 5 });
    assert_eq!(Exec::new().run(io), Some(Outcome::Succeeded(5)));
}

#[test]
fn futures_of_every_size_are_pinned_polled_and_dropped() {
    // Zero-sized (no allocation), small (a pool block), large (a `Box`).
    struct Zst;
    impl Future for Zst {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
            Poll::Ready(1)
        }
    }
    let large = [7u8; 600];
    let exec = Exec::new();
    assert_eq!(
        exec.run(IO::<u32, ()>::from_future(Zst)),
        Some(Outcome::Succeeded(1))
    );
    assert_eq!(
        exec.run(IO::<usize, ()>::from_future(YieldTimes(2)).map(|n| n as u32)),
        Some(Outcome::Succeeded(7))
    );
    let big = async move {
        YieldTimes(1).await;
        large.iter().map(|&b| u32::from(b)).sum::<u32>()
    };
    assert!(size_of_val(&big) > crate::engine::blocks::BLOCK.size());
    assert_eq!(
        exec.run(IO::<u32, ()>::from_future(big)),
        Some(Outcome::Succeeded(4200))
    );
}

#[test]
fn a_future_woken_by_reference_during_poll_is_polled_again() {
    let io: IO<usize, ()> = IO::from_future(YieldTimes(3));
    assert_eq!(Exec::new().run(io), Some(Outcome::Succeeded(7)));
}

#[test]
fn a_clone_woken_during_poll_and_a_clone_woken_later_resume_the_fiber() {
    // First poll: clone (installs the cell), wake the clone by value and a
    // second clone by reference, all during the poll. Second poll: keep a
    // clone for a thread that wakes it after the poll.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let future = core::future::poll_fn(move |cx| match p.fetch_add(1, Ordering::SeqCst) {
        0 => {
            let a = cx.waker().clone();
            let b = a.clone();
            a.wake();
            b.wake_by_ref();
            drop(b);
            Poll::Pending
        }
        1 => {
            let waker = cx.waker().clone();
            std::thread::spawn(move || waker.wake());
            Poll::Pending
        }
        _ => Poll::Ready(3u8),
    });
    let io: IO<u8, ()> = IO::from_future(future);
    assert_eq!(Exec::new().run(io), Some(Outcome::Succeeded(3)));
    assert_eq!(polls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_pending_future_is_resumed_by_a_wake_from_another_thread() {
    let rx = Oneshot::default();
    let tx = rx.clone();
    let io: IO<u32, ()> = IO::from_future(rx);
    let sender = std::thread::spawn(move || {
        std::thread::yield_now();
        tx.send(11);
    });
    assert_eq!(Exec::new().run(io), Some(Outcome::Succeeded(11)));
    sender.join().unwrap();
}

#[test]
fn a_waker_kept_after_the_future_is_done_does_nothing_and_frees_its_cell() {
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let k = kept.clone();
    let mut first = true;
    let future = core::future::poll_fn(move |cx| {
        if first {
            first = false;
            *k.lock().unwrap() = Some(cx.waker().clone());
            cx.waker().wake_by_ref();
            Poll::Pending
        } else {
            Poll::Ready(1u8)
        }
    });
    let exec = Exec::new();
    assert_eq!(
        exec.run(IO::<u8, ()>::from_future(future)),
        Some(Outcome::Succeeded(1))
    );
    let waker = kept.lock().unwrap().take().unwrap();
    waker.wake_by_ref();
    let clone = waker.clone(); // cell_clone, then cell_wake (by value)
    clone.wake();
    waker.wake();
    assert!(exec.0.queue.lock().unwrap().is_empty());
}

#[test]
fn canceling_a_waiting_fiber_drops_its_future_once_and_releases_the_waker_cell() {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = Dropped(drops.clone());
    let rx = Oneshot::default();
    let tx = rx.clone();
    let future = async move {
        let _guard = guard;
        rx.await
    };
    let exec = Exec::new();
    let child = FiberHandle::spawn(IO::<u32, ()>::from_future(future), &exec);
    exec.run_until(|| false);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "waiting, not dropped");
    let outcome = exec.run(child.cancel::<()>().product_r(child.join()));
    assert_eq!(outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // The receiver's stored waker still points at the closed cell.
    tx.send(1);
    assert!(exec.0.queue.lock().unwrap().is_empty());
}

#[test]
fn a_fiber_whose_future_dropped_every_waker_is_freed_with_its_future() {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = Dropped(drops.clone());
    // Clones its waker, hands it to a thread that drops it, never ready.
    let future = core::future::poll_fn(move |cx| {
        let _keep = &guard;
        let waker = cx.waker().clone();
        std::thread::spawn(move || drop(waker));
        Poll::<u8>::Pending
    });
    let exec = Exec::new();
    assert_eq!(exec.run(IO::<u8, ()>::from_future(future)), None);
    // Once the last waker is gone the fiber is garbage: freed, future too.
    exec.run_until(|| drops.load(Ordering::SeqCst) == 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// Counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_join_future_keeps_only_its_latest_waker_and_is_woken_once_with_the_outcome() {
    let exec = Exec::new();
    let gate = Oneshot::default();
    let open = gate.clone();
    let handle = FiberHandle::spawn(IO::<u32, ()>::from_future(gate), &exec);
    let mut join = handle.into_future();
    let first = Arc::new(CountingWaker::default());
    let second = Arc::new(CountingWaker::default());
    let (w1, w2) = (Waker::from(first.clone()), Waker::from(second.clone()));
    assert!(
        Pin::new(&mut join)
            .poll(&mut Context::from_waker(&w1))
            .is_pending()
    );
    assert!(
        Pin::new(&mut join)
            .poll(&mut Context::from_waker(&w1))
            .is_pending()
    );
    assert!(
        Pin::new(&mut join)
            .poll(&mut Context::from_waker(&w2))
            .is_pending()
    );
    assert_eq!(join.fiber.cell().waiter_count(), 1);
    exec.run_until(|| false);
    open.send(9);
    exec.run_until(|| second.0.load(Ordering::SeqCst) > 0);
    assert_eq!(
        (
            first.0.load(Ordering::SeqCst),
            second.0.load(Ordering::SeqCst)
        ),
        (0, 1)
    );
    let polled = Pin::new(&mut join).poll(&mut Context::from_waker(&w2));
    assert_eq!(polled, Poll::Ready(Outcome::Succeeded(9)));
}

#[test]
fn a_dropped_join_future_removes_its_waiter_and_cancels_only_when_asked() {
    let exec = Exec::new();
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let mut cx = Context::from_waker(&waker);

    let detached = FiberHandle::spawn(IO::<u32, ()>::never(), &exec);
    let canceler = detached.cancel_handle();
    let mut join = detached.into_future();
    assert!(Pin::new(&mut join).poll(&mut cx).is_pending());
    let fiber = join.fiber.clone();
    drop(join);
    assert_eq!(fiber.cell().waiter_count(), 0);
    exec.run_until(|| false);
    assert!(fiber.cell().with_value(|v| v.is_none()), "still running");
    assert_eq!(
        exec.run(canceler.cancel::<()>()),
        Some(Outcome::Succeeded(()))
    );

    let canceled = FiberHandle::spawn(IO::<u32, ()>::never(), &exec);
    let mut join = canceled.into_future().cancel_on_drop();
    exec.run_until(|| false);
    assert!(Pin::new(&mut join).poll(&mut cx).is_pending());
    let fiber = join.fiber.clone();
    drop(join);
    exec.run_until(|| fiber.cell().with_value(|v| v.is_some()));
    let outcome = fiber.cell().with_value(|v| v.map(|(o, _)| o.is_canceled()));
    assert_eq!(outcome, Some(true));
}

#[test]
fn an_io_awaited_as_a_future_inside_another_io_round_trips() {
    let exec = Exec::new();
    let inner = IO::<usize, ()>::from_future(YieldTimes(1)).map(|n| n as u32 * 6);
    let io: IO<Outcome<u32, ()>, ()> = IO::from_future(inner.into_future_on(&exec));
    assert_eq!(
        exec.run(io),
        Some(Outcome::Succeeded(Outcome::Succeeded(42)))
    );
}

/// The cell alone: a stale callback, a register after a wake, the last
/// waker's release, close.
#[test]
fn the_wake_cell_resumes_exactly_the_registered_callback() {
    struct Probe(Arc<Mutex<Vec<u8>>>, u8);
    impl Resume for Probe {
        fn resume(self) {
            self.0.lock().unwrap().push(self.1);
        }
    }
    let log = Arc::new(Mutex::new(Vec::new()));
    let cell = WakeCell::new();
    cell.waker_made(); // one owned waker, kept throughout
    cell.begin_poll();
    cell.register(Probe(log.clone(), 1));
    cell.wake();
    cell.wake();
    assert_eq!(*log.lock().unwrap(), [1]);
    cell.begin_poll();
    cell.wake(); // during the poll
    cell.register(Probe(log.clone(), 2)); // resumes itself
    assert_eq!(*log.lock().unwrap(), [1, 2]);
    // The last waker goes while the fiber waits: the callback is dropped,
    // not resumed, and a later registration with no waker is dropped too.
    cell.begin_poll();
    let probe = Arc::new(Mutex::new(Vec::new()));
    cell.register(Probe(probe.clone(), 3));
    cell.waker_dropped();
    assert_eq!(Arc::strong_count(&probe), 1);
    cell.begin_poll();
    cell.register(Probe(probe.clone(), 4));
    assert_eq!(Arc::strong_count(&probe), 1);
    assert!(probe.lock().unwrap().is_empty());
    // Closed: wakes do nothing, the slot stays empty.
    cell.waker_made();
    cell.begin_poll();
    cell.register(Probe(log.clone(), 5));
    cell.close();
    cell.wake();
    cell.waker_dropped();
    assert_eq!(*log.lock().unwrap(), [1, 2]);
}

// ----- IO blocks (`block.rs`): every path of the slot and the poll waker ----

#[test]
fn a_block_runs_its_awaits_on_the_fiber_and_combines_their_values() {
    let exec = Exec::new();
    let io: IO<u32, &'static str> = IO::block(async {
        let a = IO::<u32, &'static str>::pure(40).await?;
        let b = IO::<u32, &'static str>::delay(|| 2).await?;
        Ok(a + b)
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded(42)));
}

#[test]
fn an_awaited_error_comes_back_to_the_block_as_its_err() {
    let exec = Exec::new();
    let io: IO<u32, &'static str> = IO::block(async {
        let first = IO::<u32, &'static str>::raise_error("no").await;
        assert_eq!(first, Err("no"));
        let second = IO::<u32, &'static str>::raise_error("again").await?;
        Ok(second)
    });
    assert_eq!(exec.run(io), Some(Outcome::Errored("again")));
}

#[test]
fn a_block_that_clones_its_waker_between_awaits_is_resumed_by_it() {
    // The poll waker's clone installs the cell (the lazy path), a wake by
    // reference before it sets the flag, and the awaits around the foreign
    // future still run on the fiber.
    let exec = Exec::new();
    let channel = Oneshot::default();
    let sender = channel.clone();
    let io: IO<u32, ()> = IO::block(async move {
        let before = IO::<u32, ()>::pure(1).await?;
        let yielded = YieldTimes(2).await as u32;
        let value = IO::<u32, ()>::delay(move || {
            sender.send(30);
            before
        })
        .await?;
        let received = channel.await;
        let after = IO::<u32, ()>::pure(4).await?;
        Ok(value + yielded + received + after)
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded(42)));
}

#[test]
fn two_awaits_polled_in_one_poll_take_turns_and_each_gets_its_own_result() {
    // A join of two awaits: only one request per poll, and a result goes
    // to the await whose token it carries, even when the other asks first.
    struct Join<F1: Future, F2: Future>(
        Pin<Box<F1>>,
        Pin<Box<F2>>,
        Option<F1::Output>,
        Option<F2::Output>,
    );
    impl<F1: Future, F2: Future> Future for Join<F1, F2>
    where
        F1::Output: Unpin,
        F2::Output: Unpin,
    {
        type Output = (F1::Output, F2::Output);
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = &mut *self;
            if this.3.is_none() {
                if let Poll::Ready(v) = this.1.as_mut().poll(cx) {
                    this.3 = Some(v);
                }
            }
            if this.2.is_none() {
                if let Poll::Ready(v) = this.0.as_mut().poll(cx) {
                    this.2 = Some(v);
                }
            }
            match (this.2.take(), this.3.take()) {
                (Some(a), Some(b)) => Poll::Ready((a, b)),
                (a, b) => {
                    this.2 = a;
                    this.3 = b;
                    Poll::Pending
                }
            }
        }
    }
    let exec = Exec::new();
    let io: IO<(u32, u64), ()> = IO::block(async {
        let (a, b) = Join(
            Box::pin(IO::<u32, ()>::delay(|| 2).into_future()),
            Box::pin(IO::<u64, ()>::delay(|| 40).into_future()),
            None,
            None,
        )
        .await;
        Ok((a?, b?))
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded((2, 40))));
}

#[test]
fn an_await_dropped_after_asking_leaves_its_result_to_be_dropped() {
    // The await asks, is dropped before its result comes back (the block
    // moved on), and the result is dropped, not given to the next await.
    struct AskOnce<F>(Option<Pin<Box<F>>>);
    impl<F: Future> Future for AskOnce<F> {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if let Some(mut fut) = self.0.take() {
                assert!(fut.as_mut().poll(cx).is_pending());
                // Dropped here, sent; wake so that the block is polled.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(())
        }
    }
    let exec = Exec::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = dropped.clone();
    let io: IO<u32, ()> = IO::block(async move {
        // (A `map` does not finish at once: the await asks the run-loop.)
        AskOnce(Some(Box::pin(
            IO::<Counted, ()>::delay(move || Counted(d))
                .map(|c| c)
                .into_future(),
        )))
        .await;
        IO::<u32, ()>::pure(5).await
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded(5)));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the orphaned result was dropped once"
    );
}

#[test]
fn an_await_polled_with_a_context_made_on_another_thread_is_refused_and_still_usable() {
    // The borrowed poll waker reaches another thread during the poll, and a
    // new `Context` is made from it there: the await there is refused (as
    // outside a block: a panic on that thread), touching nothing; polled
    // afterwards by the block itself, the same await runs its program.
    let exec = Exec::new();
    let io: IO<u32, ()> = IO::block(async {
        let mut fut = IO::<u32, ()>::delay(|| 42).into_future();
        core::future::poll_fn(|cx| {
            let waker = cx.waker();
            std::thread::scope(|s| {
                let refused = s
                    .spawn(|| {
                        let mut cx = Context::from_waker(waker);
                        let _ = Pin::new(&mut fut).poll(&mut cx);
                    })
                    .join();
                assert!(refused.is_err(), "the other thread's await panicked");
            });
            Poll::Ready(())
        })
        .await;
        fut.await
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded(42)));
}

#[test]
fn a_block_that_awaits_only_values_yields_and_can_be_canceled() {
    // Awaits of values go back to the block without a frame; the budget
    // still runs down at each, so the fiber yields (letting the canceler
    // run) and observes the cancellation where an await starts.
    let exec = Exec::new();
    let spins = Arc::new(AtomicUsize::new(0));
    let counted = spins.clone();
    let spinning: IO<(), ()> = IO::block(async move {
        loop {
            IO::<(), ()>::pure(()).await?;
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let child = FiberHandle::spawn(spinning, &exec);
    let outcome = exec.run(child.cancel::<()>().product_r(child.join()));
    assert_eq!(outcome, Some(Outcome::Succeeded(Outcome::Canceled)));
    assert!(
        spins.load(Ordering::Relaxed) > 0,
        "the block ran before the cancel"
    );
}

#[test]
fn awaits_that_finish_at_once_run_inside_the_poll_and_a_panic_there_drops_everything_once() {
    // Values and `delay`s are run inline by their awaits (64-bit hosts),
    // other programs on the run-loop; a `delay` that panics inside the poll
    // leaves its program dropped once (by the unwinding, not again by the
    // await) and the block's state dropped once.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let exec = Exec::new();
    let io: IO<u64, ()> = IO::block(async {
        let mut total = 0u64;
        for i in 0..50u64 {
            total += IO::<u64, ()>::pure(i).await?;
            total += IO::<u64, ()>::delay(move || i).await?;
            total += IO::<u64, ()>::delay(move || i).map(|i| i).await?;
        }
        Ok(total)
    });
    assert_eq!(exec.run(io), Some(Outcome::Succeeded(3 * 49 * 50 / 2)));

    let (captured, state) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, s) = (captured.clone(), state.clone());
    let io: IO<u32, ()> = IO::block(async move {
        let _state = Counted(s);
        let held = Counted(c);
        IO::<u32, ()>::delay(move || {
            let _held = &held;
            panic!("inside the poll")
        })
        .await
    });
    match exec.run(io) {
        Some(Outcome::Panicked(_)) => {}
        other => panic!("expected a panic, got {other:?}"),
    }
    assert_eq!(
        captured.load(Ordering::SeqCst),
        1,
        "the delay's closure, once"
    );
    assert_eq!(state.load(Ordering::SeqCst), 1, "the block's state, once");
}
