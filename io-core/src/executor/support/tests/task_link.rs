//! [`TaskLink`](super::TaskLink)'s sequential behaviour, each state
//! transition once, with a waker that counts its wakes and items that
//! count their drops (also under Miri); the interleavings are the loom
//! model's (`task_link_loom.rs`).

#![cfg(not(loom))]

use alloc::sync::Arc;
use alloc::task::Wake;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::Waker;

use super::super::{Parked, Taken, TaskLink};

/// Counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn waker() -> (Arc<CountingWaker>, Waker) {
    let count = Arc::new(CountingWaker::default());
    (count.clone(), Waker::from(count))
}

/// Counts its drops.
struct Item(Arc<AtomicUsize>);

impl Drop for Item {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_delivery_to_a_parked_task_wakes_it_once_and_the_task_takes_the_item() {
    let link = TaskLink::new();
    let (wakes, waker) = waker();
    assert!(matches!(link.park(&waker), Parked::Parked));
    // SAFETY: one delivery, nothing in the link.
    assert!(unsafe { link.deliver(7) }.is_ok());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    assert!(matches!(link.take(), Taken::Item(7)));
    assert!(matches!(link.take(), Taken::Empty));
    // The clone the task left was consumed by the wake: only ours is left.
    assert_eq!(Arc::strong_count(&wakes), 2);
}

#[test]
fn a_delivery_while_the_task_runs_wakes_nobody_and_its_park_takes_the_item() {
    let link = TaskLink::new();
    let (wakes, waker) = waker();
    // SAFETY: one delivery, nothing in the link.
    assert!(unsafe { link.deliver(1) }.is_ok());
    assert!(matches!(link.park(&waker), Parked::Item(1)));
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    // No clone of the waker stayed in the link.
    assert_eq!(Arc::strong_count(&wakes), 2);
}

#[test]
fn closing_a_parked_link_wakes_the_task_which_then_finds_it_closed() {
    let link = TaskLink::<u8>::new();
    let (wakes, waker) = waker();
    assert!(matches!(link.park(&waker), Parked::Parked));
    assert!(link.close().is_none());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    assert!(matches!(link.take(), Taken::Closed));
    assert!(matches!(link.park(&waker), Parked::Closed));
    assert!(link.is_closed());
    assert_eq!(Arc::strong_count(&wakes), 2);
}

#[test]
fn a_delivery_to_a_closed_link_gives_the_item_back() {
    let link = TaskLink::new();
    assert!(link.close().is_none());
    // SAFETY: one delivery, nothing in the link.
    assert_eq!(unsafe { link.deliver(5) }, Err(5));
}

#[test]
fn closing_a_link_with_an_item_waiting_hands_the_item_to_the_closer_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let link = TaskLink::new();
    // SAFETY: one delivery, nothing in the link.
    assert!(unsafe { link.deliver(Item(drops.clone())) }.is_ok());
    let item = link.close();
    assert!(item.is_some());
    drop(item);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(link.close().is_none());
    drop(link);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_link_dropped_with_an_item_in_it_drops_the_item() {
    let drops = Arc::new(AtomicUsize::new(0));
    let link = TaskLink::new();
    // SAFETY: one delivery, nothing in the link.
    assert!(unsafe { link.deliver(Item(drops.clone())) }.is_ok());
    drop(link);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_poll_nobody_asked_for_takes_the_old_waker_back_and_parks_with_the_new_one() {
    let link = TaskLink::new();
    let (old_wakes, old) = waker();
    let (new_wakes, new) = waker();
    assert!(matches!(link.park(&old), Parked::Parked));
    assert!(matches!(link.take(), Taken::Empty));
    assert_eq!(
        Arc::strong_count(&old_wakes),
        2,
        "the old clone was dropped"
    );
    assert!(matches!(link.park(&new), Parked::Parked));
    // SAFETY: one delivery, nothing in the link.
    assert!(unsafe { link.deliver(3) }.is_ok());
    assert_eq!(old_wakes.0.load(Ordering::SeqCst), 0);
    assert_eq!(new_wakes.0.load(Ordering::SeqCst), 1);
    assert!(matches!(link.take(), Taken::Item(3)));
}

#[test]
fn a_link_goes_through_many_rounds_of_park_deliver_take() {
    let link = TaskLink::new();
    let (wakes, waker) = waker();
    for round in 0..1_000u32 {
        assert!(matches!(link.park(&waker), Parked::Parked));
        // SAFETY: the previous item was taken.
        assert!(unsafe { link.deliver(round) }.is_ok());
        assert!(matches!(link.take(), Taken::Item(r) if r == round));
    }
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1_000);
    assert_eq!(Arc::strong_count(&wakes), 2);
}
