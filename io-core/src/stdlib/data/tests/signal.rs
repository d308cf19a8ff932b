//! Unit tests of `Signal`'s protocol (`signal.rs`) alone, with probes for
//! waiters (the fiber paths are in tests-integration's `data_signal`, on
//! every executor).

use crate::stdlib::data::signal::{Core, Wake};
use crate::sync::Arc;
use portable_atomic::{AtomicUsize, Ordering};

/// A waiter: 0 while waiting, 1 once woken, 2 once canceled.
#[derive(Default)]
struct Probe(AtomicUsize);

impl Wake for Arc<Probe> {
    fn wake(&self) -> bool {
        self.0
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

impl Probe {
    fn cancel(&self) -> bool {
        self.0
            .compare_exchange(0, 2, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
    fn state(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

type TestCore = Core<u32, Arc<Probe>>;

#[test]
fn a_value_signaled_before_any_wait_is_kept_and_a_registration_is_refused() {
    let core = TestCore::new();
    core.signal(5);
    let probe = Arc::new(Probe::default());
    assert!(
        core.register(probe.clone()).is_err(),
        "resume at once instead"
    );
    assert_eq!(core.take(), Some(5));
    assert_eq!(core.take(), None);
    assert_eq!((core.overwritten(), core.signaled()), (0, 1));
}

#[test]
fn the_latest_of_several_signals_wins_and_the_others_are_counted() {
    let core = TestCore::new();
    for v in 1..=4 {
        core.signal(v);
    }
    assert_eq!(core.take(), Some(4));
    assert_eq!((core.overwritten(), core.signaled()), (3, 4));
}

#[test]
fn a_signal_wakes_the_oldest_waiter_only_and_leaves_the_value_for_it() {
    let core = TestCore::new();
    let (a, b) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
    assert!(core.register(a.clone()).is_ok());
    assert!(core.register(b.clone()).is_ok());
    core.signal(7);
    assert_eq!((a.state(), b.state()), (1, 0));
    assert_eq!(core.waiters(), 1);
    assert!(core.is_signaled(), "the woken waiter takes it in its step");
    assert_eq!(core.take(), Some(7));
    core.signal(8);
    assert_eq!(b.state(), 1);
    assert_eq!(core.waiters(), 0);
}

#[test]
fn a_signal_after_a_canceled_wait_stays_for_the_next_wait() {
    let core = TestCore::new();
    let a = Arc::new(Probe::default());
    let id = core.register(a.clone()).ok().expect("registered");
    assert!(a.cancel());
    assert!(core.deregister(id), "still listed: removed");
    core.signal(3);
    assert_eq!(a.state(), 2, "never woken");
    assert_eq!(core.waiters(), 0);
    assert_eq!(core.take(), Some(3));
}

#[test]
fn a_signal_skips_a_waiter_canceled_but_still_listed_and_wakes_the_next() {
    let core = TestCore::new();
    let (a, b) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
    let _id = core.register(a.clone()).ok().expect("registered");
    assert!(core.register(b.clone()).is_ok());
    // Canceled (claimed) but its finalizer has not removed it yet.
    assert!(a.cancel());
    core.signal(9);
    assert_eq!((a.state(), b.state()), (2, 1));
    assert_eq!(core.take(), Some(9));
}

#[test]
fn wake_one_passes_a_wake_up_on_only_while_a_value_is_there() {
    let core = TestCore::new();
    let a = Arc::new(Probe::default());
    assert!(core.register(a.clone()).is_ok());
    core.wake_one();
    assert_eq!(a.state(), 0, "no value: nobody woken");
    core.signal(1);
    assert_eq!(a.state(), 1);
}

#[test]
fn a_signal_drops_no_waiter_and_the_fiber_side_sweeps_the_woken_one() {
    let core = TestCore::new();
    let a = Arc::new(Probe::default());
    assert!(core.register(a.clone()).is_ok());
    core.signal(1);
    assert_eq!(a.state(), 1);
    assert_eq!(
        Arc::strong_count(&a),
        2,
        "still listed: the handler dropped nothing"
    );
    assert_eq!((core.waiters(), core.entries()), (0, 1));
    assert_eq!(core.take_and_sweep(), Some(1));
    assert_eq!(Arc::strong_count(&a), 1, "dropped by the fiber side");
    assert_eq!(core.entries(), 0);
}

#[test]
fn a_canceled_wait_removes_its_entry_even_after_a_signal_spent_it() {
    let core = TestCore::new();
    let a = Arc::new(Probe::default());
    let id = core.register(a.clone()).ok().expect("registered");
    assert!(a.cancel());
    core.signal(1);
    assert_eq!(a.state(), 2, "the wake-up lost to the cancellation");
    assert!(core.deregister(id));
    assert_eq!((core.entries(), Arc::strong_count(&a)), (0, 1));
    assert_eq!(core.take(), Some(1), "the value stays");
}
