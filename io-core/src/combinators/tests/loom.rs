//! Loom models of the outcome table's protocol (`outcomes.rs`, "Why no
//! wake-up is lost"): two children record from two threads while the
//! parent registers its wait. Every interleaving must wake the parent
//! exactly once, only once its condition holds, outside the lock (the
//! waiter locks the table to check: woken under the lock, the model would
//! deadlock), and drop every waiter it does not wake.
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.

use alloc::boxed::Box;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::combinators::outcomes::{Ended, Table, Until, Wake};

/// Which children have recorded (bit `i` for child `i`).
type Recorded = usize;

/// A waiter that checks the table when it is woken, counts its wake-ups,
/// and counts its drop.
struct Probe {
    woken: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    check: Option<Box<dyn FnOnce() + Send>>,
}

impl Wake for Probe {
    fn wake(mut self) {
        if let Some(check) = self.check.take() {
            check();
        }
        self.woken.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

type Log = Table<Recorded, Probe>;

/// A waiter that asserts, when woken, that the children in `must` have
/// recorded; and its wake-up and drop counts.
fn probe(table: &Arc<Log>, must: Recorded) -> (Probe, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (woken, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let table = table.clone();
    let check = move || {
        let recorded = table.slots(|recorded| *recorded);
        assert_eq!(recorded & must, must, "woken before its condition held");
    };
    let probe = Probe {
        woken: woken.clone(),
        dropped: dropped.clone(),
        check: Some(Box::new(check)),
    };
    (probe, woken, dropped)
}

/// Child `index` records that it ended as `ended`, on a thread of its own.
fn child(table: &Arc<Log>, index: usize, ended: Ended) -> thread::JoinHandle<()> {
    let table = table.clone();
    thread::spawn(move || table.record(ended, move |recorded, _| *recorded |= 1 << index))
}

/// Two children record, ending as `ended`, while the parent waits until
/// `until`, which holds once the children in `must` have recorded: the
/// parent is woken exactly once, then, and its waiter dropped.
fn woken_exactly_once(ended: [Ended; 2], until: Until, must: Recorded) {
    let table = Arc::new(Log::new(2, 0));
    let left = child(&table, 0, ended[0]);
    let right = child(&table, 1, ended[1]);
    let (waiter, woken, dropped) = probe(&table, must);
    table.register(waiter, until);
    left.join().unwrap();
    right.join().unwrap();

    assert_eq!(woken.load(Ordering::SeqCst), 1, "woken exactly once");
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "and the waiter dropped");
}

/// `race`'s wait: child 0 cancels itself, child 1 succeeds; the parent
/// waits until decided, which only child 1's record makes hold.
#[test]
fn loom_a_race_is_woken_exactly_once_by_the_winner_however_the_records_interleave() {
    loom::model(|| woken_exactly_once([Ended::Canceled, Ended::Succeeded], Until::Decided, 0b10));
}

/// `both`'s wait: both children succeed; the parent waits until settled,
/// which only the second record makes hold.
#[test]
fn loom_both_is_woken_exactly_once_when_the_last_child_succeeds() {
    loom::model(|| woken_exactly_once([Ended::Succeeded; 2], Until::Settled, 0b11));
}

/// A wait that ended otherwise (a deadline, a cancellation) is replaced by
/// the next one: the first waiter is woken at most once (a stale
/// callback, which its fiber ignores) and only once a child has ended;
/// the second exactly once, once both have; each is dropped exactly once.
#[test]
fn loom_a_replaced_wait_is_dropped_and_the_new_one_woken_exactly_once() {
    loom::model(|| {
        let table = Arc::new(Log::new(2, 0));
        let left = child(&table, 0, Ended::Failed);
        let right = child(&table, 1, Ended::Succeeded);
        let (stale, stale_woken, stale_dropped) = probe(&table, 0);
        table.register(stale, Until::FirstEnded);
        let (waiter, woken, dropped) = probe(&table, 0b11);
        table.register(waiter, Until::AllEnded);
        left.join().unwrap();
        right.join().unwrap();

        assert!(stale_woken.load(Ordering::SeqCst) <= 1, "never woken twice");
        assert_eq!(
            stale_dropped.load(Ordering::SeqCst),
            1,
            "dropped exactly once"
        );
        assert_eq!(woken.load(Ordering::SeqCst), 1, "woken exactly once");
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "and dropped");
    });
}
