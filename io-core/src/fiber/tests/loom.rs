//! Loom model checks of the suspension protocol (module doc of `fiber`):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.
//!
//! * Completers racing each other and the fiber's own suspension.
//! * Cancellation racing a completer and the suspension: `request_cancel`
//!   may claim only an interruptible suspension, and whichever of the
//!   completer, the canceler and the fiber itself wins, the fiber is
//!   resumed exactly once, finding the value (completer) or no value
//!   (cancel).
//! * The same race on a whole fiber (run-loop, callbacks, `RawFiberRef`) on
//!   an executor that runs a resumed fiber at once on the resuming thread:
//!   one completion, finalizers exactly once, nothing leaked (loom checks
//!   that every `Arc` of the model is freed).
//!
//! The state that the fiber saves before it suspends is modelled by a
//! loom `UnsafeCell` written before `suspend` and read by whoever resumes:
//! loom fails the model if that read is not ordered after the write.
//!
//! The cancel request is a bit of the state word, set with `fetch_or`, so
//! the handshake between `State::transition_to_cancel_requested` and
//! `State::transition_to_suspended` is
//! two read-modify-writes of one word, which loom models exactly. (An
//! earlier version kept the request in a separate flag with a `SeqCst`
//! store/load handshake, which loom cannot check: it treats `SeqCst` loads
//! and stores as `AcqRel`. These models found that.)

use alloc::vec::Vec;
use core::time::Duration;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::config::FiberConfig;
use crate::engine::erased::Value;
use crate::executor::{Executor, Fiber, TimerCallback};
use crate::fiber::Header;
use crate::fiber::state::{
    Claim, TransitionToCancelRequested, TransitionToDelivered, TransitionToSuspended,
};
use crate::io::IO;
use crate::outcome::Outcome;

/// `loom::model` with at most 4 preemptions per execution (unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise): the three-thread models then
/// take seconds instead of minutes. Without a bound they pass as well
/// (checked once: the slowest, the completer-canceler race, takes about a
/// minute).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    builder.check(f);
}

/// Two completers race each other and the fiber's own suspension: exactly
/// one result is delivered, and the fiber is resumed exactly once, either
/// inline (it saw `DONE`) or by the completer that saw `SUSPENDED`.
#[test]
fn loom_racing_completers_and_suspension_resume_the_fiber_exactly_once() {
    loom::model(|| {
        let header = Arc::new(Header::new(crate::fiber::FiberId::UNNUMBERED, None));
        let generation = header.begin_suspension();
        let scheduled = Arc::new(AtomicUsize::new(0));
        let wins = Arc::new(AtomicUsize::new(0));

        let completers: Vec<_> = [1u32, 2u32]
            .into_iter()
            .map(|value| {
                let header = header.clone();
                let scheduled = scheduled.clone();
                let wins = wins.clone();
                thread::spawn(move || {
                    if header.claim(generation) == Claim::Won {
                        wins.fetch_add(1, Ordering::SeqCst);
                        if header.deliver(Ok(Value::new(value))) == TransitionToDelivered::Schedule
                        {
                            scheduled.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();

        let continued_inline = header.suspend(false) != TransitionToSuspended::Suspended;
        for c in completers {
            c.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::SeqCst), 1, "one completer wins");
        let resumes = continued_inline as usize + scheduled.load(Ordering::SeqCst);
        assert_eq!(resumes, 1, "the fiber is resumed exactly once");
        // The resumed fiber finds the winner's value.
        let value = header
            .take_result()
            .expect("a completer delivered")
            .ok()
            .expect("a value");
        // SAFETY: the completers deliver `u32`s.
        let value = unsafe { value.take::<u32>() };
        assert!(value == 1 || value == 2);
    });
}

/// A callback of an earlier suspension cannot complete a later one.
#[test]
fn loom_a_stale_callback_is_ignored_by_the_next_suspension() {
    loom::model(|| {
        let header = Arc::new(Header::new(crate::fiber::FiberId::UNNUMBERED, None));
        let first = header.begin_suspension();
        assert_eq!(header.claim(first), Claim::Won);
        assert_eq!(
            header.deliver(Ok(Value::unit())),
            TransitionToDelivered::FiberNotSuspended
        );
        header
            .take_result()
            .expect("delivered")
            .ok()
            .expect("a value");
        let second = header.begin_suspension();

        let stale = {
            let header = header.clone();
            thread::spawn(move || header.claim(first) == Claim::Won)
        };
        let current = {
            let header = header.clone();
            thread::spawn(move || {
                if header.claim(second) == Claim::Won {
                    let _ = header.deliver(Ok(Value::new(9u8)));
                    true
                } else {
                    false
                }
            })
        };
        assert!(!stale.join().unwrap(), "the stale callback never wins");
        assert!(current.join().unwrap(), "the current callback always wins");
        assert_eq!(header.suspend(true), TransitionToSuspended::ResultArrived);
        let value = header.take_result().expect("delivered").ok().unwrap();
        // SAFETY: the current completer delivered a `u8`.
        assert_eq!(unsafe { value.take::<u8>() }, 9);
    });
}

// ---------------------------------------------------------------------------
// Resume versus cancel, on the header
// ---------------------------------------------------------------------------

/// The header of a fiber and the state it saves before suspending.
struct Suspended {
    header: Header,
    saved: UnsafeCell<u32>,
}

/// What the fiber found when it was resumed: `Some(v)` a value, `None`
/// canceled.
type Resumed = Option<u32>;

impl Suspended {
    /// Starts a suspension (what the run-loop does before registering).
    fn new() -> (Arc<Suspended>, usize) {
        let s = Arc::new(Suspended {
            header: Header::new(crate::fiber::FiberId::UNNUMBERED, None),
            saved: UnsafeCell::new(0),
        });
        let generation = s.header.begin_suspension();
        (s, generation)
    }

    /// The fiber's side: save the state, then suspend. `Some` if the fiber
    /// continues itself.
    fn save_and_suspend(&self, interruptible: bool) -> Option<Resumed> {
        // SAFETY: only the fiber writes, before it publishes SUSPENDED.
        self.saved.with_mut(|s| unsafe { *s = 42 });
        match self.header.suspend(interruptible) {
            TransitionToSuspended::Suspended => None,
            TransitionToSuspended::ResultArrived
            | TransitionToSuspended::CanceledBeforeSuspending => Some(self.resume()),
        }
    }

    /// What the resumed fiber does first: read its saved state and take the
    /// result.
    fn resume(&self) -> Resumed {
        // SAFETY: the resumer alone touches the saved state; loom checks that
        // this read is ordered after the fiber's write.
        let saved = self.saved.with(|s| unsafe { *s });
        assert_eq!(saved, 42, "the resumed fiber sees the state it saved");
        self.header.take_result().map(|res| {
            let value = res.ok().expect("the completer delivers a value");
            // SAFETY: the completer delivers a `u32`.
            unsafe { value.take::<u32>() }
        })
    }

    /// A completer: claim, deliver, and resume the fiber if it had already
    /// suspended. Returns whether it won the claim and what the fiber found
    /// if this thread resumed it.
    fn complete(&self, generation: usize, value: u32) -> (bool, Option<Resumed>) {
        if self.header.claim(generation) == Claim::Lost {
            return (false, None);
        }
        let resumed = match self.header.deliver(Ok(Value::new(value))) {
            TransitionToDelivered::FiberNotSuspended => None,
            TransitionToDelivered::Schedule => Some(self.resume()),
        };
        (true, resumed)
    }

    /// A deadline region's timer (`region.rs`): claim, end the suspension
    /// without a result, and resume the fiber if it had already suspended.
    fn complete_empty(&self, generation: usize) -> (bool, Option<Resumed>) {
        if self.header.claim(generation) == Claim::Lost {
            return (false, None);
        }
        let resumed = match self.header.deliver_empty() {
            TransitionToDelivered::FiberNotSuspended => None,
            TransitionToDelivered::Schedule => Some(self.resume()),
        };
        (true, resumed)
    }

    /// A canceler: request cancellation, and resume the fiber if that ended
    /// its suspension.
    fn cancel(&self) -> Option<Resumed> {
        match self.header.request_cancel() {
            TransitionToCancelRequested::Requested => None,
            TransitionToCancelRequested::Schedule => Some(self.resume()),
        }
    }
}

/// Exactly one of the three resumed the fiber; returns what it found.
fn resumed_once(resumes: [Option<Resumed>; 3]) -> Resumed {
    let mut found = resumes.into_iter().flatten();
    let first = found.next().expect("the fiber is resumed");
    assert!(found.next().is_none(), "the fiber is resumed only once");
    first
}

/// A completer, a canceler and the fiber's interruptible suspension race:
/// the fiber is resumed exactly once (inline, by the completer or by the
/// canceler), and it finds the value exactly when the completer won the
/// claim, no value (cancellation) otherwise.
#[test]
fn loom_cancel_racing_a_completer_resumes_an_interruptible_suspension_exactly_once() {
    model(|| {
        let (fiber, generation) = Suspended::new();
        let completer = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.complete(generation, 7))
        };
        let canceler = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.cancel())
        };
        let inline = fiber.save_and_suspend(true);
        let (completer_won, by_completer) = completer.join().unwrap();
        let by_canceler = canceler.join().unwrap();

        let found = resumed_once([inline, by_completer, by_canceler]);
        if completer_won {
            assert_eq!(found, Some(7), "the winning completer's value arrives");
        } else {
            assert_eq!(found, None, "cancellation ended the suspension");
        }
    });
}

/// A completer and a deadline region's timer race a suspension that is
/// masked (the region's timer ends waits that cancellation cannot): the
/// fiber is resumed exactly once, and finds the value exactly when the
/// completer won, no result (the region's deadline) when the timer did.
#[test]
fn loom_a_region_timer_racing_a_completer_resumes_a_masked_suspension_exactly_once() {
    model(|| {
        let (fiber, generation) = Suspended::new();
        let completer = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.complete(generation, 7))
        };
        let timer = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.complete_empty(generation))
        };
        let inline = fiber.save_and_suspend(false);
        let (completer_won, by_completer) = completer.join().unwrap();
        let (timer_won, by_timer) = timer.join().unwrap();

        assert!(completer_won != timer_won, "exactly one claim wins");
        let found = resumed_once([inline, by_completer, by_timer]);
        if completer_won {
            assert_eq!(found, Some(7), "the winning completer's value arrives");
        } else {
            assert_eq!(found, None, "the region's timer ended the suspension");
        }
    });
}

/// Without a completer (`IO::never`), a cancel always ends an
/// interruptible suspension: either the canceler saw `SUSPENDED` and
/// claimed, or the fiber saw the request after suspending and claimed
/// itself. Neither misses the other.
#[test]
fn loom_cancel_always_ends_an_interruptible_suspension_without_a_completer() {
    model(|| {
        let (fiber, _generation) = Suspended::new();
        let canceler = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.cancel())
        };
        let inline = fiber.save_and_suspend(true);
        let by_canceler = canceler.join().unwrap();
        assert_eq!(resumed_once([inline, by_canceler, None]), None);
    });
}

/// A masked suspension (`suspend(false)`) is never claimed by a cancel: the
/// completer always wins and the fiber, resumed exactly once, finds its
/// value.
#[test]
fn loom_cancel_never_claims_a_masked_suspension() {
    model(|| {
        let (fiber, generation) = Suspended::new();
        let completer = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.complete(generation, 7))
        };
        let canceler = {
            let fiber = fiber.clone();
            thread::spawn(move || fiber.cancel())
        };
        let inline = fiber.save_and_suspend(false);
        let (completer_won, by_completer) = completer.join().unwrap();
        let by_canceler = canceler.join().unwrap();
        assert!(completer_won, "a cancel never claims a masked suspension");
        assert_eq!(by_canceler, None, "the canceler never resumes it");
        assert_eq!(resumed_once([inline, by_completer, by_canceler]), Some(7));
        assert!(fiber.header.is_cancel_requested(), "the request stays");
    });
}

/// Two cancels and a completer: at most one cancel claims, and the fiber
/// is still resumed exactly once.
#[test]
fn loom_two_cancels_claim_an_interruptible_suspension_at_most_once() {
    model(|| {
        let (fiber, _generation) = Suspended::new();
        let cancelers: Vec<_> = (0..2)
            .map(|_| {
                let fiber = fiber.clone();
                thread::spawn(move || fiber.cancel())
            })
            .collect();
        let inline = fiber.save_and_suspend(true);
        let mut resumes = cancelers.into_iter().map(|c| c.join().unwrap());
        let (a, b) = (resumes.next().unwrap(), resumes.next().unwrap());
        assert_eq!(resumed_once([inline, a, b]), None);
    });
}

// ---------------------------------------------------------------------------
// Resume versus cancel, on a whole fiber
// ---------------------------------------------------------------------------

/// An executor that runs a scheduled fiber at once, on the scheduling
/// thread (a worker pool with a worker on every thread). Only for models:
/// real executors queue (a resume inside a fiber's run would recurse).
#[derive(Clone)]
struct RunOnResume {
    schedules: Arc<AtomicUsize>,
    config: FiberConfig,
}

impl Executor for RunOnResume {
    type TimerKey = ();
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        self.schedules.fetch_add(1, Ordering::SeqCst);
        fiber.run();
    }

    fn reschedule_fiber(&self, _fiber: Fiber<Self>) {
        unreachable!("the model's programs never yield")
    }

    fn monotonic(&self) -> Duration {
        Duration::ZERO
    }

    fn set_timer(&self, _deadline: Duration, _callback: TimerCallback) {
        unreachable!("the model's programs never sleep")
    }

    fn cancel_timer(&self, _key: ()) {}

    fn config(&self) -> &FiberConfig {
        &self.config
    }
}

/// What one run of the whole-fiber model observed.
struct FiberRun {
    outcome: Option<Outcome<u32, ()>>,
    /// `Some(won)` if the registration ran and its completer thread called
    /// the callback.
    completer_won: Option<bool>,
    /// The program took its first step (a fiber canceled before it starts
    /// runs nothing, as in Cats Effect).
    started: bool,
    async_finalizers: usize,
    guarantee_finalizers: usize,
    schedules: usize,
}

/// Runs `(mark started *> from_callback(register: spawn a completer thread))
/// .guarantee(..)`, the wait masked or not, on the main thread while
/// another thread cancels the fiber.
fn fiber_race(masked: bool) -> FiberRun {
    let outcome = Arc::new(Mutex::new(None));
    let started = Arc::new(AtomicUsize::new(0));
    let completer: Arc<Mutex<Option<thread::JoinHandle<bool>>>> = Arc::new(Mutex::new(None));
    let async_finalizers = Arc::new(AtomicUsize::new(0));
    let guarantee_finalizers = Arc::new(AtomicUsize::new(0));
    let executor = RunOnResume {
        schedules: Arc::new(AtomicUsize::new(0)),
        config: FiberConfig::default(),
    };

    let wait: IO<u32, ()> = {
        let completer = completer.clone();
        let fin = async_finalizers.clone();
        IO::from_callback(move |cb| {
            let handle = thread::spawn(move || cb.succeed(7));
            *completer.lock().unwrap() = Some(handle);
            Some(IO::delay(move || {
                fin.fetch_add(1, Ordering::SeqCst);
            }))
        })
    };
    let wait = if masked {
        IO::uncancelable(move |_| wait)
    } else {
        wait
    };
    let mark = {
        let started = started.clone();
        IO::delay(move || {
            started.fetch_add(1, Ordering::SeqCst);
        })
    };
    let program = {
        let fin = guarantee_finalizers.clone();
        mark.product_r(wait).guarantee(IO::delay(move || {
            fin.fetch_add(1, Ordering::SeqCst);
        }))
    };
    let fiber = {
        let outcome = outcome.clone();
        Fiber::new(program, executor.clone(), move |o| {
            let previous = outcome.lock().unwrap().replace(o);
            assert!(previous.is_none(), "a fiber completes once");
        })
    };
    let canceler = {
        let fiber = fiber.raw_ref();
        thread::spawn(move || fiber.request_cancel())
    };
    fiber.run();
    canceler.join().unwrap();
    let completer = completer.lock().unwrap().take();
    let completer_won = completer.map(|c| c.join().unwrap());

    let outcome = outcome.lock().unwrap().take();
    FiberRun {
        outcome,
        completer_won,
        started: started.load(Ordering::SeqCst) == 1,
        async_finalizers: async_finalizers.load(Ordering::SeqCst),
        guarantee_finalizers: guarantee_finalizers.load(Ordering::SeqCst),
        schedules: executor.schedules.load(Ordering::SeqCst),
    }
}

/// A fiber suspended (unmasked) in `from_callback` while its callback arrives
/// from one thread and a cancel from another: it completes exactly once;
/// if the callback won, the registration's finalizer does not run and the
/// value arrives (or a cancel seen afterwards ends the fiber); if the
/// cancel won, the finalizer runs once and the late callback is ignored.
/// The guarantee's finalizer runs once either way, unless the cancel came
/// before the fiber's first step (then nothing runs).
#[test]
fn loom_a_fiber_canceled_while_its_callback_arrives_completes_once_and_finalizes_once() {
    model(|| {
        let run = fiber_race(false);
        let outcome = run.outcome.expect("the fiber completed");
        assert_eq!(run.guarantee_finalizers, run.started as usize);
        assert!(
            run.schedules <= 1,
            "resumed at most once through the executor"
        );
        match run.completer_won {
            // Canceled before the registration ran.
            None => {
                assert_eq!(outcome, Outcome::Canceled);
                assert_eq!(run.async_finalizers, 0);
            }
            Some(true) => {
                assert!(
                    outcome == Outcome::Succeeded(7) || outcome == Outcome::Canceled,
                    "{outcome:?}"
                );
                assert_eq!(run.async_finalizers, 0, "a completed wait is not finalized");
            }
            Some(false) => {
                assert_eq!(outcome, Outcome::Canceled);
                assert_eq!(run.async_finalizers, 1, "a canceled wait is finalized once");
            }
        }
    });
}

/// The same race, the wait masked (`uncancelable`): the callback always
/// wins, the registration's finalizer never runs, and the cancel is seen
/// when the region ends (or before the region starts).
#[test]
fn loom_a_fiber_canceled_while_masked_in_async_takes_the_callback_and_finalizes_once() {
    model(|| {
        let run = fiber_race(true);
        let outcome = run.outcome.expect("the fiber completed");
        assert_eq!(run.guarantee_finalizers, run.started as usize);
        assert_eq!(run.async_finalizers, 0);
        assert!(run.schedules <= 1);
        match run.completer_won {
            None => assert_eq!(outcome, Outcome::Canceled),
            Some(won) => {
                assert!(won, "a cancel never takes a masked wait");
                assert!(
                    outcome == Outcome::Succeeded(7) || outcome == Outcome::Canceled,
                    "{outcome:?}"
                );
            }
        }
    });
}
