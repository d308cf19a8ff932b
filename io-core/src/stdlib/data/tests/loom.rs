//! Loom model checks of a semaphore's permit word (`data::permits`):
//! takes and releases without the lock racing waiters that queue and
//! leave, and a grant that hands the waiter a strong reference (the
//! `Ticket` of `wait/list.rs`) racing its cancellation; and of `Signal`'s
//! protocol (`data::signal::Core`): a signal racing a wait's registration,
//! its cancellation, a second signal, and a cancellation that must pass
//! the wake-up on. (The join cell under `Deferred` has its models in
//! `wait/tests/loom.rs`.)
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use crate::stdlib::data::permits::{Permits, Waiting};
use crate::wait::list::{Claim, Ticket};

// ----- Semaphore permits ------------------------------------------------------

/// A waiter of the model: the flag a release sets (under the queue's lock,
/// as `Semaphore` marks its ticket) when it hands the waiter its permit.
#[derive(Clone)]
struct Granted(Arc<AtomicBool>);

impl Granted {
    fn new() -> Self {
        Granted(Arc::new(AtomicBool::new(false)))
    }

    fn load(&self, order: Ordering) -> bool {
        self.0.load(order)
    }
}

impl Waiting for Granted {
    fn missing(&self) -> usize {
        usize::from(!self.0.load(Ordering::SeqCst))
    }

    fn give(&mut self, n: usize) {
        if n > 0 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// A waiter of the model for several permits: what it gathered so far,
/// and the flag set once it has all of them.
struct Gathering {
    wanted: usize,
    got: usize,
    done: Arc<AtomicBool>,
}

impl Waiting for Gathering {
    fn missing(&self) -> usize {
        self.wanted - self.got
    }

    fn give(&mut self, n: usize) {
        self.got += n;
        if self.got == self.wanted {
            self.done.store(true, Ordering::SeqCst);
        }
    }
}

/// Takes a permit as `Semaphore` does: without the lock if one is free;
/// otherwise under the lock, taking one freed meanwhile or queueing; then
/// waits until a release hands it over.
fn acquire(permits: &Permits<Granted>) {
    if permits.try_take() {
        return;
    }
    let granted = Granted::new();
    {
        let mut queue = permits.queue();
        if queue.take_or_wait_n(1) == 1 {
            return;
        }
        queue.push(granted.clone());
    }
    while !granted.load(Ordering::SeqCst) {
        thread::yield_now();
    }
}

/// Gives a permit back as `Semaphore` does.
fn release(permits: &Permits<Granted>) {
    permits.release(drop).expect("no overflow in the model");
}

/// Two threads take the only permit and give it back, each through the
/// lock-free path or the queue, whatever the interleaving: never both
/// inside at once, nobody waits forever (a release never misses a queued
/// waiter), and the permit is back, with nobody queued, at the end.
#[test]
fn loom_permits_exclude_each_other_and_come_back() {
    loom::model(|| {
        let permits = Arc::new(Permits::<Granted>::new(1));
        let inside = Arc::new(AtomicUsize::new(0));
        let use_permit = |permits: &Permits<Granted>, inside: &AtomicUsize| {
            acquire(permits);
            assert_eq!(
                inside.fetch_add(1, Ordering::SeqCst),
                0,
                "one holder at a time"
            );
            inside.fetch_sub(1, Ordering::SeqCst);
            release(permits);
        };
        let other = {
            let (permits, inside) = (permits.clone(), inside.clone());
            thread::spawn(move || use_permit(&permits, &inside))
        };
        use_permit(&permits, &inside);
        other.join().unwrap();

        assert_eq!(permits.available(), 1);
        assert_eq!(permits.queue().len(), 0);
        assert!(
            permits.try_take(),
            "the flag is clear: the permit can be taken"
        );
    });
}

/// A queued waiter leaves (its fiber was canceled) while the holder gives
/// the permit back: it is either removed before the release (the permit
/// goes to the count) or was handed the permit first (then it gives it
/// back). Either way the permit is back, once, and nobody is queued.
#[test]
fn loom_a_waiter_leaving_as_the_permit_is_released_gives_no_permit_away() {
    loom::model(|| {
        // The only permit is held by this thread.
        let permits = Arc::new(Permits::<Granted>::new(0));
        let leaving = {
            let permits = permits.clone();
            thread::spawn(move || {
                let granted = Granted::new();
                let id = {
                    let mut queue = permits.queue();
                    if queue.take_or_wait_n(1) == 1 {
                        // The permit was already back: take it, give it back.
                        drop(queue);
                        release(&permits);
                        return;
                    }
                    queue.push(granted.clone())
                };
                // Canceled: leave the queue, or give back what was granted
                // (read under the lock, as the cleanup reads its ticket).
                let removed = permits.queue().remove(id).is_some();
                if !removed {
                    assert!(granted.load(Ordering::SeqCst), "popped means granted");
                    release(&permits);
                }
            })
        };
        release(&permits);
        leaving.join().unwrap();

        assert_eq!(permits.available(), 1);
        assert_eq!(permits.queue().len(), 0);
        assert!(
            permits.try_take(),
            "the flag is clear: the permit can be taken"
        );
    });
}

/// A waiter for two permits of a semaphore that has none, and two threads
/// that each release one, while the waiter may leave (canceled): the
/// waiter gets both or gives back what it gathered, so both permits end up
/// either with it or in the count, never lost or doubled, and nobody is
/// queued at the end.
#[test]
fn loom_a_waiter_for_two_permits_gathers_them_from_two_releases_or_gives_them_back() {
    loom::model(|| {
        let permits = Arc::new(Permits::<Gathering>::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let id = {
            let mut queue = permits.queue();
            assert_eq!(queue.take_or_wait_n(2), 0);
            queue.push(Gathering {
                wanted: 2,
                got: 0,
                done: done.clone(),
            })
        };
        let releasers: alloc::vec::Vec<_> = (0..2)
            .map(|_| {
                let permits = permits.clone();
                thread::spawn(move || permits.release(drop).expect("no overflow"))
            })
            .collect();
        // Canceled: leave with what was gathered, or, granted, give both.
        let held = {
            let mut queue = permits.queue();
            match queue.remove(id) {
                Some(waiter) => waiter.got,
                None => {
                    assert!(done.load(Ordering::SeqCst), "popped means granted");
                    2
                }
            }
        };
        permits.release_n(held, drop).expect("no overflow");
        for releaser in releasers {
            releaser.join().unwrap();
        }
        assert_eq!(permits.available(), 2);
        assert_eq!(permits.queue().len(), 0);
        assert!(
            permits.try_take_n(2),
            "the flag is clear: both can be taken"
        );
    });
}

/// The count never passes `MAX_PERMITS`: a release onto a full count is
/// refused and changes nothing, also racing a take.
#[test]
fn loom_a_release_onto_a_full_count_is_refused_and_changes_nothing() {
    use crate::stdlib::data::permits::MAX_PERMITS;
    loom::model(|| {
        let permits = Arc::new(Permits::<Granted>::new(MAX_PERMITS));
        let taker = {
            let permits = permits.clone();
            thread::spawn(move || permits.try_take())
        };
        let released = permits.release(drop).is_ok();
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

// ----- Handing the semaphore over with its permit (`wait/list.rs`) --------------

/// A waiter of the model as `Semaphore` queues it: a [`Ticket`] that the
/// release that completes it grants, under the queue's lock, with a strong
/// reference to the permits.
struct Ticketed {
    got: bool,
    ticket: Arc<Ticket<Permits<Ticketed>>>,
}

impl Waiting for Ticketed {
    fn missing(&self) -> usize {
        usize::from(!self.got)
    }

    fn give(&mut self, n: usize) {
        self.got |= n > 0;
    }
}

/// A release as `Semaphore`'s: the waiter it completes is granted, with a
/// strong reference, while the queue is still locked.
fn release_granting(permits: &Arc<Permits<Ticketed>>) {
    permits
        .release(|waiter| waiter.ticket.grant(permits))
        .expect("no overflow in the model");
}

/// A queued waiter is canceled while the holder releases the only permit
/// and then lets go of its handle: the cleanup either removes the waiter
/// (the permit went to the count) or finds it granted, and then gives the
/// permit back through the reference the grant handed it. The permit is
/// back exactly once, nobody is queued, and the ticket is taken once.
#[test]
fn loom_a_waiter_canceled_as_it_is_granted_gives_the_permit_back_through_its_grant() {
    loom::model(|| {
        // The only permit is held by this thread.
        let permits = Arc::new(Permits::<Ticketed>::new(0));
        let ticket = Arc::new(Ticket::new());
        {
            let mut queue = permits.queue();
            assert_eq!(queue.take_or_wait_n(1), 0);
            let id = queue.push(Ticketed {
                got: false,
                ticket: ticket.clone(),
            });
            ticket.waiting(id);
        }
        // The cleanup holds the permits weakly (strongly under loom).
        let weak = crate::sync::downgrade(&permits);
        let cleanup = {
            let ticket = ticket.clone();
            thread::spawn(move || {
                let Some(permits) = weak.upgrade() else {
                    return;
                };
                let claim = {
                    let mut queue = permits.queue();
                    match ticket.take() {
                        Claim::Waiting(id) => {
                            assert!(queue.remove(id).is_some(), "waiting means queued");
                            None
                        }
                        Claim::Granted(owner) => Some(owner),
                        Claim::Unasked | Claim::Ended => panic!("the ticket is taken once"),
                    }
                };
                if let Some(owner) = claim {
                    release_granting(&owner);
                }
            })
        };
        release_granting(&permits);
        cleanup.join().unwrap();

        assert!(matches!(ticket.take(), Claim::Ended));
        assert_eq!(permits.available(), 1);
        assert_eq!(permits.queue().len(), 0);
        assert!(permits.try_take(), "the permit can be taken");
    });
}
