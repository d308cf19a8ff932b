//! Loom model checks of a semaphore's permit word and wake-ups
//! (`data::permits`): takes without the lock (barging) racing waiters that
//! list themselves, are woken, retry and leave; a wake-up whose waiter is
//! canceled, passed on; and of `Signal`'s protocol (`data::signal::Core`):
//! a signal racing a wait's registration, its cancellation, a second
//! signal, and a cancellation that must pass the wake-up on. (The join
//! cell under `Deferred` has its models in `wait/tests/loom.rs`.)
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::stdlib::data::permits::{Permits, Registered, Waiting};

// ----- Semaphore permits ------------------------------------------------------

/// Where a waiter of the model stands: listed (or not yet), woken, or
/// canceled first; a fiber's suspension, which exactly one of a wake-up and
/// a cancellation claims.
const WAITING: usize = 0;
const WOKEN: usize = 1;
const CANCELED: usize = 2;

/// A waiter of the model: what it wants, and its suspension.
#[derive(Clone)]
struct Probe {
    wants: usize,
    state: Arc<AtomicUsize>,
}

impl Probe {
    fn new(wants: usize) -> Self {
        Probe {
            wants,
            state: Arc::new(AtomicUsize::new(WAITING)),
        }
    }

    /// A wake-up, as `RawCallback::complete_or_give_back`: `false` if the
    /// cancellation claimed the suspension first.
    fn wake(self) -> bool {
        self.state
            .compare_exchange(WAITING, WOKEN, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// The cancellation: `true` if it claimed the suspension (the waiter
    /// was not woken), `false` if a wake-up did first (the waiter then
    /// holds a wake-up, and drops it: `Permits::pass_on`).
    fn cancel(&self) -> bool {
        self.state
            .compare_exchange(WAITING, CANCELED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn woken(&self) -> bool {
        self.state.load(Ordering::SeqCst) == WOKEN
    }
}

impl Waiting for Probe {
    fn wants(&self) -> usize {
        self.wants
    }
}

/// Takes `wants` permits as `Semaphore` does: without the lock if they are
/// free; otherwise lists a waiter (or is resumed at once), waits until it
/// is woken, and retries, waiting again if a thread that ran first took
/// them.
fn acquire(permits: &Permits<Probe>, wants: usize) {
    loop {
        if permits.try_take_n(wants) {
            return;
        }
        let probe = Probe::new(wants);
        let registered = permits.queue().register(probe.clone());
        match registered {
            Registered::Now(waiter) => assert!(waiter.wake(), "not canceled"),
            Registered::Listed(_) => {
                while !probe.woken() {
                    thread::yield_now();
                }
            }
        }
        if permits.retry(wants, Probe::wake) {
            return;
        }
    }
}

/// Gives `n` permits back as `Semaphore` does.
fn release(permits: &Permits<Probe>, n: usize) {
    permits
        .release(n, Probe::wake)
        .expect("no overflow in the model");
}

/// `loom::model` with at most 3 preemptions per execution (unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise), for the three-thread model,
/// whose waits spin: seconds instead of many minutes.
fn bounded_model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Nothing is left over: the permits are all in the count, nobody is
/// listed, no wake-up is outstanding, and the flag is clear.
fn assert_settled(permits: &Permits<Probe>, count: usize) {
    assert_eq!(permits.available(), count);
    assert_eq!(permits.queue().len(), 0);
    assert_eq!(permits.pending(), 0);
    assert!(
        permits.try_take_n(count),
        "the flag is clear: the permits can be taken"
    );
}

/// Two threads take the only permit and give it back, each through the
/// lock-free path or a wait, whatever the interleaving: never both inside
/// at once, nobody waits forever (a release never misses a listed waiter,
/// and a woken waiter overtaken by the other thread waits again), and the
/// permit is back, with nobody listed, at the end.
#[test]
fn loom_permits_exclude_each_other_and_come_back() {
    loom::model(|| {
        let permits = Arc::new(Permits::<Probe>::new(1));
        let inside = Arc::new(AtomicUsize::new(0));
        let use_permit = |permits: &Permits<Probe>, inside: &AtomicUsize| {
            acquire(permits, 1);
            assert_eq!(
                inside.fetch_add(1, Ordering::SeqCst),
                0,
                "one holder at a time"
            );
            inside.fetch_sub(1, Ordering::SeqCst);
            release(permits, 1);
        };
        let other = {
            let (permits, inside) = (permits.clone(), inside.clone());
            thread::spawn(move || use_permit(&permits, &inside))
        };
        use_permit(&permits, &inside);
        other.join().unwrap();
        assert_settled(&permits, 1);
    });
}

/// A listed waiter is canceled while the holder gives the permit back: it
/// leaves the list before the release (the permit stays in the count), or
/// the release's wake-up fails to reach it (and is taken back), or it
/// reached it (and the canceled waiter drops it, passing it on). Either
/// way the permit is back, once, and nothing is left over.
#[test]
fn loom_a_waiter_canceled_as_the_permit_is_released_takes_nothing() {
    loom::model(|| {
        // The only permit is held by this thread.
        let permits = Arc::new(Permits::<Probe>::new(0));
        let probe = Probe::new(1);
        let Registered::Listed(id) = permits.queue().register(probe.clone()) else {
            panic!("no permit is free");
        };
        let leaving = {
            let permits = permits.clone();
            thread::spawn(move || {
                if probe.cancel() {
                    // Its cleanup: leave the list, if still listed.
                    drop(permits.leave(id, Probe::wake));
                } else {
                    // Woken first: the wake-up is dropped unused.
                    permits.pass_on(1, Probe::wake);
                }
            })
        };
        release(&permits, 1);
        leaving.join().unwrap();
        assert_settled(&permits, 1);
    });
}

/// Two listed waiters; the release wakes the first, which is canceled at
/// the same time. Whether the wake-up fails to reach it or reaches it and
/// is dropped, the second waiter is woken: no wake-up is lost. It then
/// takes the permit.
#[test]
fn loom_the_wake_up_of_a_canceled_waiter_goes_to_the_next_one() {
    loom::model(|| {
        let permits = Arc::new(Permits::<Probe>::new(0));
        let (first, second) = (Probe::new(1), Probe::new(1));
        let Registered::Listed(id) = permits.queue().register(first.clone()) else {
            panic!("no permit is free");
        };
        assert!(matches!(
            permits.queue().register(second.clone()),
            Registered::Listed(_)
        ));
        let canceling = {
            let permits = permits.clone();
            thread::spawn(move || {
                if first.cancel() {
                    drop(permits.leave(id, Probe::wake));
                } else {
                    permits.pass_on(1, Probe::wake);
                }
            })
        };
        release(&permits, 1);
        canceling.join().unwrap();
        assert!(second.woken(), "the wake-up went on to the second waiter");
        assert!(permits.retry(1, Probe::wake), "and it takes the permit");
        assert_settled(&permits, 0);
    });
}

/// A waiter for two permits of a semaphore that has one free, a thread
/// that releases another, and a thread that takes one without waiting if
/// it can (barging) and gives it back: the waiter is woken only once two
/// are free (beyond what woken waiters want), and either takes both or,
/// overtaken, waits again and is woken by the barger's release. Nothing is
/// lost or doubled.
#[test]
fn loom_a_waiter_for_two_permits_is_woken_once_both_are_free() {
    bounded_model(|| {
        let permits = Arc::new(Permits::<Probe>::new(1));
        let releaser = {
            let permits = permits.clone();
            thread::spawn(move || release(&permits, 1))
        };
        let barger = {
            let permits = permits.clone();
            thread::spawn(move || {
                if permits.try_take() {
                    release(&permits, 1);
                }
            })
        };
        acquire(&permits, 2);
        releaser.join().unwrap();
        barger.join().unwrap();
        assert_settled(&permits, 0);
        release(&permits, 2);
        assert_settled(&permits, 2);
    });
}

/// The count never passes `MAX_PERMITS`: a release onto a full count is
/// refused and changes nothing, also racing a take.
#[test]
fn loom_a_release_onto_a_full_count_is_refused_and_changes_nothing() {
    use crate::stdlib::data::permits::MAX_PERMITS;
    loom::model(|| {
        let permits = Arc::new(Permits::<Probe>::new(MAX_PERMITS));
        let taker = {
            let permits = permits.clone();
            thread::spawn(move || permits.try_take())
        };
        let released = permits.release(1, Probe::wake).is_ok();
        let took = taker.join().unwrap();
        assert!(took);
        // The release fits only after the take.
        assert_eq!(permits.available(), MAX_PERMITS - 1 + usize::from(released));
    });
}

// ----- Signal ----------------------------------------------------------------

mod signal {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    use crate::stdlib::data::signal::{Core, Wake};

    /// A fiber's wait as the protocol sees it: its state word claimed
    /// once, by a wake-up (1) or a cancellation (2); 0 while it waits.
    #[derive(Default)]
    struct Waiter(AtomicUsize);

    impl Wake for Arc<Waiter> {
        fn wake(&self) -> bool {
            self.0
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        }
    }

    impl Waiter {
        fn cancel(&self) -> bool {
            self.0
                .compare_exchange(0, 2, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        }
        fn woken(&self) -> bool {
            self.0.load(Ordering::SeqCst) == 1
        }
    }

    type SignalCore = Core<usize, Arc<Waiter>>;

    /// The interrupt handler signals while the fiber registers: the fiber
    /// either sees the value and resumes at once, or is listed and woken.
    /// Never both, never neither (no lost wake-up); the value is there for
    /// its next step.
    #[test]
    fn loom_a_signal_racing_a_registration_is_never_lost() {
        loom::model(|| {
            let core = Arc::new(SignalCore::new());
            let waiter = Arc::new(Waiter::default());
            let handler = {
                let core = core.clone();
                thread::spawn(move || core.signal(5))
            };
            let registered = core.register(waiter.clone());
            handler.join().unwrap();
            match registered {
                Err(_) => assert!(!waiter.woken(), "resumed at once, not also woken"),
                Ok(_) => assert!(waiter.woken(), "listed: the signal woke it"),
            }
            assert_eq!(
                core.take_and_sweep(),
                Some(5),
                "the value waits for its step"
            );
            assert_eq!(core.waiters(), 0);
            assert_eq!(core.entries(), 0, "the fiber side swept the woken entry");
        });
    }

    /// The handler signals while the listed wait is canceled (its claim,
    /// then its removal): either the wake-up won (the fiber takes the
    /// value) or the cancellation did (the value stays for the next wait);
    /// in both cases the value is there once and nothing stays listed.
    #[test]
    fn loom_a_signal_racing_a_cancellation_leaves_the_value_and_no_waiter() {
        loom::model(|| {
            let core = Arc::new(SignalCore::new());
            let waiter = Arc::new(Waiter::default());
            let id = core.register(waiter.clone()).ok().expect("empty: listed");
            let handler = {
                let core = core.clone();
                thread::spawn(move || core.signal(5))
            };
            if waiter.cancel() {
                // The wait's finalizer, then `wait`'s on_cancel.
                let _ = core.deregister(id);
                core.wake_one();
            }
            handler.join().unwrap();
            assert_eq!(core.take_and_sweep(), Some(5));
            assert_eq!(core.waiters(), 0);
            assert_eq!(core.entries(), 0, "removed, or woken and swept");
            assert_eq!(core.overwritten(), 0);
        });
    }

    /// Two signals race a wait that takes as soon as it can: every value
    /// is taken or counted as overwritten, and the latest is never lost.
    #[test]
    fn loom_two_signals_racing_a_wait_lose_nothing_uncounted() {
        loom::model(|| {
            let core = Arc::new(SignalCore::new());
            let waiter = Arc::new(Waiter::default());
            let handler = {
                let core = core.clone();
                thread::spawn(move || {
                    core.signal(1);
                    core.signal(2);
                })
            };
            // The fiber's step: take now if it can, else wait listed.
            let first = match core.register(waiter.clone()) {
                Err(_) => core.take(),
                Ok(_) => None,
            };
            handler.join().unwrap();
            let rest = core.take();
            let taken: usize = [first, rest].iter().flatten().count();
            assert_eq!(taken as u64 + core.overwritten(), 2, "taken or counted");
            assert!(
                first == Some(2) || rest == Some(2),
                "the latest value stays until taken"
            );
            assert_eq!(core.signaled(), 2);
        });
    }

    /// Two waiters; a signal races the cancellation of the first. The
    /// canceled wait's finalizer passes the wake-up on, so the value always
    /// ends with a woken, uncanceled waiter (no hang).
    #[test]
    fn loom_a_canceled_first_waiter_passes_the_wake_up_to_the_second() {
        loom::model(|| {
            let core = Arc::new(SignalCore::new());
            let (a, b) = (Arc::new(Waiter::default()), Arc::new(Waiter::default()));
            let id = core.register(a.clone()).ok().expect("listed");
            core.register(b.clone()).ok().expect("listed");
            let handler = {
                let core = core.clone();
                thread::spawn(move || core.signal(7))
            };
            let a_canceled = a.cancel();
            if a_canceled {
                let _ = core.deregister(id);
                core.wake_one();
            }
            handler.join().unwrap();
            if a_canceled {
                assert!(b.woken(), "the wake-up went on to the second waiter");
            } else {
                assert!(a.woken() && !b.woken(), "one wake-up per value");
            }
            assert_eq!(core.take_and_sweep(), Some(7));
            assert_eq!(
                core.entries(),
                usize::from(!a_canceled),
                "the second still waits"
            );
        });
    }
}
