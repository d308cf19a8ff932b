//! Loom model checks of the join cell (`cell.rs`, the cell of `Deferred`
//! and of a fiber's join state): `complete` racing `on_value` (a `get`
//! registering its waiter), `remove_waiter` (a canceled `get` leaving), a
//! cell dropped while a waiter leaves, and a second `complete`.
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.
//!
//! Every waiter is a closure that counts its calls and the drops of what it
//! captures, so a model sees: called exactly once with the value, or
//! dropped without a call after being removed; never both, never twice,
//! never lost. (The ticket of `list.rs` is modelled with the semaphore's
//! permits it hands over, in `stdlib/data/tests/loom.rs`: this layer does
//! not know the data types.)

use alloc::boxed::Box;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::wait::JoinCell as Cell;
use crate::wait::cell::Waiter;

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
