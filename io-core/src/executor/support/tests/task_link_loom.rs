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

/// The task's side of a model: the link, its waker (counting wakes) and
/// the drop counter of the items delivered through it.
struct Task {
    link: Arc<TaskLink<Item>>,
    drops: Arc<AtomicUsize>,
    wakes: StdArc<CountingWaker>,
    waker: Waker,
}

impl Task {
    fn new() -> Self {
        let wakes = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        Task {
            link: Arc::new(TaskLink::new()),
            drops: Arc::new(AtomicUsize::new(0)),
            waker: Waker::from(wakes.clone()),
            wakes,
        }
    }

    /// A completer thread that delivers one item (the model's only
    /// delivery) and drops it if the link hands it back; it ends with
    /// whether the link took the item.
    fn deliver_on_a_thread(&self) -> thread::JoinHandle<bool> {
        let (link, drops) = (self.link.clone(), self.drops.clone());
        thread::spawn(move || {
            // SAFETY: the only delivery of the model.
            match unsafe { link.deliver(Item(drops)) } {
                Ok(()) => true,
                Err(item) => {
                    drop(item);
                    false
                }
            }
        })
    }

    fn wakes(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }

    fn drops(&self) -> usize {
        self.drops.load(Ordering::SeqCst)
    }

    /// Drops the task's waker and asserts that the link kept no clone.
    fn assert_no_waker_left(self) {
        drop(self.waker);
        assert_eq!(
            StdArc::strong_count(&self.wakes),
            1,
            "no waker clone left behind"
        );
    }
}

#[test]
fn loom_a_delivery_racing_a_park_is_run_or_wakes_the_parked_task() {
    model(|| {
        let task = Task::new();
        let completer = task.deliver_on_a_thread();
        let ran = match task.link.park(&task.waker) {
            Parked::Item(item) => {
                drop(item);
                true
            }
            Parked::Parked => false,
            Parked::Closed => panic!("nobody closed the link"),
        };
        assert!(completer.join().unwrap(), "an open link takes the item");
        if !ran {
            // Parked before the delivery: woken exactly once, and the
            // item is there for the poll the wake brings.
            assert_eq!(task.wakes(), 1);
            match task.link.take() {
                Taken::Item(item) => drop(item),
                other => panic!("the woken task found {other:?}"),
            }
        } else {
            assert_eq!(task.wakes(), 0);
        }
        assert_eq!(task.drops(), 1);
        task.assert_no_waker_left();
    });
}

#[test]
fn loom_a_close_racing_a_park_wakes_the_parked_task_or_stops_it_parking() {
    model(|| {
        let task = Task::new();
        let slot = {
            let link = task.link.clone();
            // The fiber was freed: its slot closes the link.
            thread::spawn(move || assert!(link.close().is_none()))
        };
        let parked = match task.link.park(&task.waker) {
            Parked::Parked => true,
            Parked::Closed => false,
            Parked::Item(_) => panic!("nothing was delivered"),
        };
        slot.join().unwrap();
        if parked {
            assert_eq!(task.wakes(), 1);
        }
        assert!(matches!(task.link.take(), Taken::Closed));
        task.assert_no_waker_left();
    });
}

#[test]
fn loom_a_task_dropped_while_a_delivery_races_its_park_frees_the_item_once() {
    model(|| {
        let task = Task::new();
        let completer = task.deliver_on_a_thread();
        // The task parks, then the runtime drops it: its drop closes the
        // link and frees what was waiting.
        if let Parked::Item(item) = task.link.park(&task.waker) {
            drop(item);
        }
        drop(task.link.close());
        // Taken or handed back: either way the item is freed once.
        completer.join().unwrap();
        assert_eq!(task.drops(), 1);
        task.assert_no_waker_left();
    });
}

#[test]
fn loom_a_poll_nobody_asked_for_racing_a_delivery_loses_no_wake() {
    model(|| {
        let task = Task::new();
        assert!(matches!(task.link.park(&task.waker), Parked::Parked));
        let completer = task.deliver_on_a_thread();
        // A spurious poll: look, and park again if nothing came.
        let mut got = match task.link.take() {
            Taken::Item(item) => Some(item),
            Taken::Empty => match task.link.park(&task.waker) {
                Parked::Item(item) => Some(item),
                Parked::Parked => None,
                Parked::Closed => panic!("nobody closed the link"),
            },
            Taken::Waking => None,
            Taken::Closed => panic!("nobody closed the link"),
        };
        assert!(completer.join().unwrap(), "an open link takes the item");
        if got.is_none() {
            // Still parked (or a wake on its way): the wake came.
            assert!(task.wakes() >= 1);
            match task.link.take() {
                Taken::Item(item) => got = Some(item),
                other => panic!("the woken task found {other:?}"),
            }
        }
        drop(got);
        assert_eq!(task.drops(), 1);
        task.assert_no_waker_left();
    });
}
