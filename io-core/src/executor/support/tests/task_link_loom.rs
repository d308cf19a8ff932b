//! Loom model of [`TaskLink`](super::TaskLink) (`task_link.rs`):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.
//!
//! The task parks while a completer delivers the fiber, or while the
//! fiber's slot closes the link (the fiber was freed), or the task is
//! dropped (closes) while a completer delivers. In every interleaving: a
//! delivered item is run by the task or handed back exactly once (its
//! drop counted once, never lost, never twice), a parked task is woken
//! whenever something for it happened after it parked (it never sleeps
//! through a delivery or a close), and no waker clone is left behind.

use alloc::sync::Arc as StdArc;
use alloc::task::Wake;
use core::task::Waker;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use super::super::{Parked, Taken, TaskLink};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Counts its wakes (a loom atomic, so that loom orders them).
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counts its drops.
#[derive(Debug)]
struct Item(Arc<AtomicUsize>);

impl Drop for Item {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn loom_a_delivery_racing_a_park_is_run_or_wakes_the_parked_task() {
    model(|| {
        let link = Arc::new(TaskLink::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let wakes = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let completer = {
            let (link, drops) = (link.clone(), drops.clone());
            // SAFETY: the only delivery of the model.
            thread::spawn(move || assert!(unsafe { link.deliver(Item(drops)) }.is_ok()))
        };
        let ran = match link.park(&waker) {
            Parked::Item(item) => {
                drop(item);
                true
            }
            Parked::Parked => false,
            Parked::Closed => panic!("nobody closed the link"),
        };
        completer.join().unwrap();
        if !ran {
            // Parked before the delivery: woken exactly once, and the
            // item is there for the poll the wake brings.
            assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
            match link.take() {
                Taken::Item(item) => drop(item),
                other => panic!("the woken task found {other:?}"),
            }
        } else {
            assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(waker);
        assert_eq!(
            StdArc::strong_count(&wakes),
            1,
            "no waker clone left behind"
        );
    });
}

#[test]
fn loom_a_close_racing_a_park_wakes_the_parked_task_or_stops_it_parking() {
    model(|| {
        let link = Arc::new(TaskLink::<Item>::new());
        let wakes = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let slot = {
            let link = link.clone();
            // The fiber was freed: its slot closes the link.
            thread::spawn(move || assert!(link.close().is_none()))
        };
        let parked = match link.park(&waker) {
            Parked::Parked => true,
            Parked::Closed => false,
            Parked::Item(_) => panic!("nothing was delivered"),
        };
        slot.join().unwrap();
        if parked {
            assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        }
        assert!(matches!(link.take(), Taken::Closed));
        drop(waker);
        assert_eq!(
            StdArc::strong_count(&wakes),
            1,
            "no waker clone left behind"
        );
    });
}

#[test]
fn loom_a_task_dropped_while_a_delivery_races_its_park_frees_the_item_once() {
    model(|| {
        let link = Arc::new(TaskLink::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let wakes = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let completer = {
            let (link, drops) = (link.clone(), drops.clone());
            thread::spawn(move || {
                // SAFETY: the only delivery of the model.
                if let Err(item) = unsafe { link.deliver(Item(drops)) } {
                    drop(item);
                }
            })
        };
        // The task parks, then the runtime drops it: its drop closes the
        // link and frees what was waiting.
        if let Parked::Item(item) = link.park(&waker) {
            drop(item);
        }
        drop(link.close());
        completer.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(waker);
        assert_eq!(
            StdArc::strong_count(&wakes),
            1,
            "no waker clone left behind"
        );
    });
}

#[test]
fn loom_a_poll_nobody_asked_for_racing_a_delivery_loses_no_wake() {
    model(|| {
        let link = Arc::new(TaskLink::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let wakes = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        assert!(matches!(link.park(&waker), Parked::Parked));
        let completer = {
            let (link, drops) = (link.clone(), drops.clone());
            // SAFETY: the only delivery of the model.
            thread::spawn(move || assert!(unsafe { link.deliver(Item(drops)) }.is_ok()))
        };
        // A spurious poll: look, and park again if nothing came.
        let mut got = match link.take() {
            Taken::Item(item) => Some(item),
            Taken::Empty => match link.park(&waker) {
                Parked::Item(item) => Some(item),
                Parked::Parked => None,
                Parked::Closed => panic!("nobody closed the link"),
            },
            Taken::Waking => None,
            Taken::Closed => panic!("nobody closed the link"),
        };
        completer.join().unwrap();
        if got.is_none() {
            // Still parked (or a wake on its way): the wake came.
            assert!(wakes.0.load(Ordering::SeqCst) >= 1);
            match link.take() {
                Taken::Item(item) => got = Some(item),
                other => panic!("the woken task found {other:?}"),
            }
        }
        drop(got);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(waker);
        assert_eq!(
            StdArc::strong_count(&wakes),
            1,
            "no waker clone left behind"
        );
    });
}
