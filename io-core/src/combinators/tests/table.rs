//! The outcome table's counts, arrivals and conditions, one thread, with a
//! waiter that counts its wake-ups.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::combinators::outcomes::{Arrival, Ended, Table, Until, Wake};
use crate::sync::Arc;

/// Counts its wake-ups (and is dropped without a wake-up when replaced).
struct Probe(Arc<AtomicUsize>);

impl Wake for Probe {
    fn wake(self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn probe() -> (Probe, Arc<AtomicUsize>) {
    let woken = Arc::new(AtomicUsize::new(0));
    (Probe(woken.clone()), woken)
}

/// A table of `n` children whose slots log every arrival, in order.
fn logging(n: usize) -> Table<Vec<Arrival>, Probe> {
    Table::new(n, Vec::new())
}

fn record(table: &Table<Vec<Arrival>, Probe>, ended: Ended) {
    table.record(ended, |log, arrival| log.push(arrival));
}

fn arrival(first: bool, winner: bool, failure: bool) -> Arrival {
    Arrival {
        first,
        winner,
        failure,
    }
}

#[test]
fn each_arrival_is_the_first_the_winner_and_the_failure_at_most_once() {
    let table = logging(4);
    record(&table, Ended::Canceled);
    record(&table, Ended::Succeeded);
    record(&table, Ended::Failed);
    record(&table, Ended::Succeeded);
    let log = table.slots(core::mem::take);
    assert_eq!(
        log,
        [
            // First, not a winner (canceled), the first failure.
            arrival(true, false, true),
            // The winner: the first not canceled.
            arrival(false, true, false),
            arrival(false, false, false),
            arrival(false, false, false),
        ]
    );
}

#[test]
fn a_wait_whose_condition_holds_is_woken_at_once() {
    let table = logging(2);
    record(&table, Ended::Succeeded);
    let (waiter, woken) = probe();
    table.register(waiter, Until::FirstEnded);
    assert_eq!(woken.load(Ordering::SeqCst), 1);
}

/// Registers a wait for `until` on a table of `ends.len()` children, then
/// records their ends one by one: the wake-ups counted after each.
fn wake_ups(until: Until, ends: &[Ended]) -> Vec<usize> {
    let table = logging(ends.len());
    let (waiter, woken) = probe();
    table.register(waiter, until);
    ends.iter()
        .map(|&ended| {
            record(&table, ended);
            woken.load(Ordering::SeqCst)
        })
        .collect()
}

#[test]
fn the_first_end_of_any_kind_wakes_a_wait_for_the_first() {
    assert_eq!(
        wake_ups(Until::FirstEnded, &[Ended::Canceled, Ended::Succeeded]),
        [1, 1]
    );
}

#[test]
fn a_race_is_decided_by_the_first_child_not_canceled_not_by_the_first_to_end() {
    // A canceled child decides nothing; an error wins, as a value does.
    assert_eq!(
        wake_ups(Until::Decided, &[Ended::Canceled, Ended::Failed]),
        [0, 1]
    );
}

#[test]
fn a_race_of_children_that_all_canceled_themselves_is_decided_when_the_last_ends() {
    assert_eq!(wake_ups(Until::Decided, &[Ended::Canceled; 3]), [0, 0, 1]);
}

#[test]
fn settled_waits_for_every_success_or_the_first_failure() {
    assert_eq!(wake_ups(Until::Settled, &[Ended::Succeeded; 2]), [0, 1]);
    // A cancellation is a failure; the wait is woken once.
    let ends = [Ended::Succeeded, Ended::Canceled, Ended::Failed];
    assert_eq!(wake_ups(Until::Settled, &ends), [0, 1, 1]);
}

#[test]
fn a_record_that_does_not_make_the_condition_hold_leaves_the_wait_registered() {
    let ends = [Ended::Succeeded, Ended::Failed, Ended::Canceled];
    assert_eq!(wake_ups(Until::AllEnded, &ends), [0, 0, 1]);
}

#[test]
fn a_registration_replaces_the_wait_of_an_earlier_one_that_ended_otherwise() {
    let table = logging(2);
    let (stale, stale_woken) = probe();
    table.register(stale, Until::Decided);
    // The parent's wait ended otherwise (canceled, or a deadline): it
    // waits again, for another condition.
    let (waiter, woken) = probe();
    table.register(waiter, Until::AllEnded);
    record(&table, Ended::Succeeded);
    assert_eq!(woken.load(Ordering::SeqCst), 0);
    record(&table, Ended::Succeeded);
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    assert_eq!(
        stale_woken.load(Ordering::SeqCst),
        0,
        "replaced, never woken"
    );
    assert_eq!(Arc::strong_count(&stale_woken), 1, "and dropped");
}

#[test]
fn what_a_record_does_not_keep_is_handed_back_and_dropped() {
    let table: Table<Option<Arc<AtomicUsize>>, Probe> = Table::new(2, None);
    let (kept, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let keep_winner = |slot: &mut Option<Arc<AtomicUsize>>, value, arrival: Arrival| {
        if arrival.winner {
            *slot = Some(value);
            None
        } else {
            Some(value)
        }
    };
    let value = kept.clone();
    table.record(Ended::Succeeded, move |slot, arrival| {
        keep_winner(slot, value, arrival)
    });
    let value = dropped.clone();
    table.record(Ended::Succeeded, move |slot, arrival| {
        keep_winner(slot, value, arrival)
    });
    assert_eq!(Arc::strong_count(&kept), 2, "the winner is kept");
    assert_eq!(Arc::strong_count(&dropped), 1, "the loser is dropped");
}
