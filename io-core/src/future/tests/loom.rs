//! Loom model checks of the wake cell (`cell.rs`):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom_wake`.
//!
//! The fiber side polls (reads a flag the waker side sets before waking),
//! registers a probe callback, and polls again whenever the probe was
//! resumed; the waker side sets the flag and wakes. Whatever the
//! interleaving, the fiber ends up seeing the flag (no wake is lost), no
//! lock bit is left set, and every probe is dropped exactly once (loom
//! checks that every `Arc` of the model is freed), and the future is polled
//! at most once per wake after its first poll. Each waker thread owns
//! one counted waker (`waker_made` before, `waker_dropped` after, as the
//! vtable's `wake` does); the last model checks that the last waker's drop
//! lets go of the callback however it races the registration.

use alloc::vec;
use alloc::vec::Vec;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use crate::future::cell::{Resume, WakeCell};

/// A callback that records that it resumed the fiber.
struct Probe(Arc<AtomicUsize>);

impl Resume for Probe {
    fn resume(self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    builder.check(f);
}

/// The fiber's loop: poll; if not ready, register and wait (here: until
/// the probe was resumed, joining the wakers first if it was not). Returns
/// how many polls it took.
fn fiber_side(
    cell: &WakeCell<Probe>,
    ready: &AtomicBool,
    wakers: Vec<thread::JoinHandle<()>>,
) -> usize {
    let mut wakers = Some(wakers);
    let mut polls = 0;
    loop {
        if polls > 0 {
            // A fiber that registered while a waker held the slot resumed
            // itself and polls again until that waker is done: a spin loop
            // over the waker's few instructions, which loom can only
            // explore if the loop yields (the real fiber goes through its
            // run-loop, whose auto-yield bounds it).
            thread::yield_now();
        }
        cell.begin_poll();
        polls += 1;
        if ready.load(Ordering::Acquire) {
            return polls;
        }
        if cell.notified() {
            continue;
        }
        loop {
            let resumed = Arc::new(AtomicUsize::new(0));
            cell.register(Probe(resumed.clone()));
            if resumed.load(Ordering::SeqCst) == 0 {
                // Suspended: only a waker can resume it now. Once every
                // waker has finished, it must have been resumed (or the
                // flag must have been seen already).
                for waker in wakers.take().into_iter().flatten() {
                    waker.join().unwrap();
                }
                assert_eq!(
                    resumed.load(Ordering::SeqCst),
                    1,
                    "a wake after the poll must resume the registered callback"
                );
            }
            if !cell.take_busy() {
                break;
            }
            // The slot was held with no wake to answer: the driver
            // registers again after a cede, without a poll.
            thread::yield_now();
        }
    }
}

#[test]
fn loom_wake_cell_a_wake_racing_the_poll_and_the_registration_is_never_lost() {
    model(|| {
        let cell = Arc::new(WakeCell::new());
        let ready = Arc::new(AtomicBool::new(false));
        // An owned waker (a clone made during the first poll), consumed
        // by `wake` on another thread.
        cell.waker_made();
        let waker = {
            let (cell, ready) = (cell.clone(), ready.clone());
            thread::spawn(move || {
                ready.store(true, Ordering::Release);
                cell.wake();
                cell.waker_dropped();
            })
        };
        fiber_side(&cell, &ready, vec![waker]);
        cell.close();
    });
}

#[test]
fn loom_wake_cell_two_wakers_racing_each_other_resume_the_fiber() {
    model(|| {
        let cell = Arc::new(WakeCell::new());
        let ready = Arc::new(AtomicBool::new(false));
        let wakers = (0..2)
            .map(|i| {
                let (cell, ready) = (cell.clone(), ready.clone());
                cell.waker_made();
                thread::spawn(move || {
                    if i == 0 {
                        ready.store(true, Ordering::Release);
                    }
                    cell.wake();
                    cell.waker_dropped();
                })
            })
            .collect();
        let polls = fiber_side(&cell, &ready, wakers);
        // The first poll, then at most one per wake, however long a waker
        // held the slot.
        assert!(polls <= 3, "{polls} polls for two wakes");
        cell.close();
    });
}

#[test]
fn loom_wake_cell_close_racing_a_wake_drops_the_callback_once() {
    model(|| {
        let cell = Arc::new(WakeCell::new());
        let resumed = Arc::new(AtomicUsize::new(0));
        cell.begin_poll();
        cell.waker_made();
        cell.register(Probe(resumed.clone()));
        let waker = {
            let cell = cell.clone();
            thread::spawn(move || {
                cell.wake();
                cell.waker_dropped();
            })
        };
        // The fiber completes for another reason and closes the cell.
        cell.close();
        waker.join().unwrap();
        // A wake after the close does nothing.
        cell.wake();
        assert!(resumed.load(Ordering::SeqCst) <= 1);
    });
}

#[test]
fn loom_wake_cell_the_last_waker_dropped_racing_the_registration_lets_go_of_the_callback() {
    model(|| {
        let cell = Arc::new(WakeCell::new());
        // A waker cloned during the poll, dropped on another thread while
        // the fiber registers.
        cell.begin_poll();
        cell.waker_made();
        let mut dropper = Some({
            let cell = cell.clone();
            thread::spawn(move || cell.waker_dropped())
        });
        loop {
            let resumed = Arc::new(AtomicUsize::new(0));
            cell.register(Probe(resumed.clone()));
            if resumed.load(Ordering::SeqCst) == 0 {
                if let Some(dropper) = dropper.take() {
                    dropper.join().unwrap();
                }
                // No waker is left: the callback (here the probe's `Arc`)
                // is gone, not resumed.
                assert_eq!(resumed.load(Ordering::SeqCst), 0);
                assert_eq!(Arc::strong_count(&resumed), 1, "the callback was dropped");
                break;
            }
            // A spurious resume (the dropper held the slot): poll again.
            thread::yield_now();
            cell.begin_poll();
        }
        cell.close();
    });
}

/// The first poll's lazy waker target (`LazyWake`): a wake by reference
/// racing the clone that installs the cell is seen by the driver after the
/// poll, as the woken flag or as the cell's notification, and the cell is
/// freed once (loom checks every `Arc`).
#[test]
fn loom_lazy_wake_a_wake_racing_the_first_clone_is_never_lost() {
    use crate::future::cell::LazyWake;
    model(|| {
        let lazy = Arc::new(LazyWake::new());
        let waking = lazy.clone();
        let waker = thread::spawn(move || waking.wake_by_ref());
        // SAFETY: `clone_waker` returns an owned waker over the cell, whose
        // count the `Waker` takes over.
        let owned = unsafe { core::task::Waker::from_raw(lazy.clone_waker()) };
        waker.join().unwrap();
        let mut lazy = Arc::try_unwrap(lazy)
            .ok()
            .expect("the waker thread is done");
        let (cell, woken) = lazy.finish();
        let cell = cell.expect("the clone installed a cell");
        assert!(woken || cell.notified(), "the wake is seen after the poll");
        drop(owned);
    });
}

/// Two clones racing to install the cell: one cell wins, both wakers point
/// at it, and the loser's cell is freed.
#[test]
fn loom_lazy_wake_two_first_clones_racing_share_one_cell() {
    use crate::future::cell::LazyWake;
    model(|| {
        let lazy = Arc::new(LazyWake::new());
        let cloning = lazy.clone();
        let other = thread::spawn(move || {
            // SAFETY: as above.
            let waker = unsafe { core::task::Waker::from_raw(cloning.clone_waker()) };
            waker.data() as usize
        });
        // SAFETY: as above.
        let mine = unsafe { core::task::Waker::from_raw(lazy.clone_waker()) };
        let theirs = other.join().unwrap();
        assert_eq!(
            mine.data() as usize,
            theirs,
            "both wakers share the one installed cell"
        );
        let mut lazy = Arc::try_unwrap(lazy)
            .ok()
            .expect("the other thread is done");
        let (cell, woken) = lazy.finish();
        assert!(cell.is_some() && !woken);
        drop(mine);
    });
}
