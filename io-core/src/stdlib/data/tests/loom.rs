//! Loom model checks of `Deferred`'s cell (`fiber::join::JoinCell`): `complete`
//! racing `on_value` (a `get` registering its waiter), `remove_waiter` (a
//! canceled `get` leaving) and a second `complete`; and of a semaphore's
//! permit word (`data::permits`): takes and releases without the lock
//! racing waiters that queue and leave, and a grant that hands the waiter
//! a strong reference (`data::waiters::Ticket`) racing its cancellation;
//! and of `Signal`'s protocol (`data::signal::Core`): a signal racing a
//! wait's registration, its cancellation, a second signal, and a
//! cancellation that must pass the wake-up on.
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.
//!
//! Every waiter is a closure that counts its calls and the drops of what it
//! captures, so a model sees: called exactly once with the value, or
//! dropped without a call after being removed; never both, never twice,
//! never lost.

use alloc::boxed::Box;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use crate::stdlib::data::permits::{Permits, Waiting};
use crate::wait::list::{Claim, Ticket};
use crate::wait::{JoinCell as Cell, Waiter};

/// Counts a waiter's calls (and the values it saw) and its drop.
#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
    /// The sum of the values the waiter was called with.
    seen: AtomicUsize,
    drops: AtomicUsize,
}

/// Dropped with the waiter closure that captures it.
struct DropToken(Arc<Probe>);

impl Drop for DropToken {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}

impl Probe {
    fn waiter(probe: &Arc<Probe>) -> Waiter<usize> {
        let token = DropToken(probe.clone());
        Waiter::call(Box::new(move |value: &usize| {
            token.0.calls.fetch_add(1, Ordering::SeqCst);
            token.0.seen.fetch_add(*value, Ordering::SeqCst);
            None
        }))
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    fn drops(&self) -> usize {
        self.drops.load(Ordering::SeqCst)
    }
}

/// A `get` registering while another thread completes: the waiter is
/// called exactly once with the value, either at once by `on_value` (the
/// value was there) or later by `complete`; no waiter stays registered.
#[test]
fn loom_a_waiter_registered_while_the_cell_completes_is_called_exactly_once() {
    loom::model(|| {
        let cell = Arc::new(Cell::<usize>::new());
        let probe = Arc::new(Probe::default());
        let completer = {
            let cell = cell.clone();
            thread::spawn(move || cell.complete(5))
        };
        let registered = cell.on_value(Probe::waiter(&probe));
        assert_eq!(completer.join().unwrap(), Ok(()));

        assert_eq!(probe.calls(), 1, "called exactly once");
        assert_eq!(probe.seen(), 5, "with the value");
        assert_eq!(probe.drops(), 1, "and then dropped");
        assert_eq!(cell.waiter_count(), 0);
        // Registered only if the value was not there yet; the id is unique
        // and a stale removal changes nothing.
        if let Some(id) = registered {
            cell.remove_waiter(id);
        }
        assert_eq!(probe.calls(), 1);
    });
}

/// A `get` that registers and is canceled (removes its waiter) while
/// another thread completes: the waiter is either called once with the
/// value (the completion took it first) or removed and never called; in
/// both cases it is dropped exactly once and nothing stays registered.
#[test]
fn loom_a_removed_waiter_is_called_at_most_once_and_dropped_exactly_once() {
    loom::model(|| {
        let cell = Arc::new(Cell::<usize>::new());
        let probe = Arc::new(Probe::default());
        let completer = {
            let cell = cell.clone();
            thread::spawn(move || cell.complete(5))
        };
        if let Some(id) = cell.on_value(Probe::waiter(&probe)) {
            cell.remove_waiter(id);
        }
        assert_eq!(completer.join().unwrap(), Ok(()));

        assert!(probe.calls() <= 1, "never called twice");
        assert_eq!(
            probe.seen(),
            5 * probe.calls(),
            "called only with the value"
        );
        assert_eq!(probe.drops(), 1, "dropped exactly once: called or removed");
        assert_eq!(cell.waiter_count(), 0, "nothing stays registered");
    });
}

/// A `get`'s wait as `wait_for` leaves it: registered, its strong
/// reference given up for a weak one (its cleanup's). Another thread drops
/// the last handle while the wait is canceled: the cleanup either reaches
/// the cell and removes the waiter, or finds it gone with its waiter list;
/// either way the waiter is dropped exactly once and never called. (Under
/// loom the shim's `Weak` is strong, `sync.rs`: this checks the cleanup's
/// lock against the handle's drop, not a failed upgrade, which only means
/// that the list, and the waiter with it, was dropped.)
#[test]
fn loom_a_waiter_whose_cell_is_dropped_while_it_is_canceled_is_dropped_once_never_called() {
    loom::model(|| {
        let handle = Arc::new(Cell::<usize>::new());
        let probe = Arc::new(Probe::default());
        let waiting = handle.clone();
        let id = waiting.on_value(Probe::waiter(&probe));
        let cleanup_ref = crate::sync::downgrade(&waiting);
        drop(waiting);
        let dropper = thread::spawn(move || drop(handle));
        if let (Some(id), Some(cell)) = (id, cleanup_ref.upgrade()) {
            cell.remove_waiter(id);
        }
        dropper.join().unwrap();
        drop(cleanup_ref);
        assert_eq!(probe.calls(), 0, "never called");
        assert_eq!(probe.drops(), 1, "dropped exactly once");
    });
}

/// Two waiters on two threads, one of them canceled, and a completion: the
/// waiter that stays is called exactly once; the canceled one at most once;
/// each is dropped exactly once.
#[test]
fn loom_a_cancel_does_not_disturb_the_other_waiters() {
    loom::model(|| {
        let cell = Arc::new(Cell::<usize>::new());
        let (stays, leaves) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
        let leaving = {
            let (cell, leaves) = (cell.clone(), leaves.clone());
            thread::spawn(move || {
                if let Some(id) = cell.on_value(Probe::waiter(&leaves)) {
                    cell.remove_waiter(id);
                }
            })
        };
        let completer = {
            let cell = cell.clone();
            thread::spawn(move || cell.complete(3))
        };
        cell.on_value(Probe::waiter(&stays));
        leaving.join().unwrap();
        assert_eq!(completer.join().unwrap(), Ok(()));

        assert_eq!((stays.calls(), stays.seen(), stays.drops()), (1, 3, 1));
        assert!(leaves.calls() <= 1);
        assert_eq!(leaves.seen(), 3 * leaves.calls());
        assert_eq!(leaves.drops(), 1);
        assert_eq!(cell.waiter_count(), 0);
    });
}

/// Two completions race with a waiter: exactly one wins, the other gets its
/// own value back, and the waiter is called exactly once with the winner's
/// value, which the cell then keeps.
#[test]
fn loom_completing_twice_gives_the_second_value_back() {
    loom::model(|| {
        let cell = Arc::new(Cell::<usize>::new());
        let probe = Arc::new(Probe::default());
        let completers: [_; 2] = [1usize, 2].map(|value| {
            let cell = cell.clone();
            thread::spawn(move || (value, cell.complete(value)))
        });
        cell.on_value(Probe::waiter(&probe));
        let results = completers.map(|c| c.join().unwrap());

        let winners: alloc::vec::Vec<usize> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(v, _)| *v)
            .collect();
        assert_eq!(winners.len(), 1, "exactly one completion wins");
        let winner = winners[0];
        for (value, result) in results {
            if value != winner {
                assert_eq!(result, Err(value), "the loser gets its value back");
            }
        }
        assert_eq!((probe.calls(), probe.seen(), probe.drops()), (1, winner, 1));
        assert_eq!(
            cell.with_value(|v| v.copied()),
            Some(winner),
            "the first value stays"
        );
    });
}

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
