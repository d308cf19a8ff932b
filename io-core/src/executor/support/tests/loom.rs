//! Loom model of the fiber registry and the dumps that read it
//! (`registry.rs`, `fiber/dump.rs`):
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p spindle-core --lib --release -- loom`.
//!
//! A fiber is listed by the run-loop when it first suspends
//! (`Executor::fiber_listed`, into a shard under its lock), then resumed and
//! completed, while another thread takes a dump (`live_fibers`: each shard
//! under its lock, each entry upgraded for a moment to read the fiber's
//! state word, its trace ring and its activity byte). The dump must see
//! the fiber whole or not at all: never another fiber, never a state that
//! contradicts its status; and once the fiber has completed, no dump lists
//! it. loom checks every read of the state word and the ring against the
//! writes of the running fiber.
//!
//! Under loom an entry is a strong reference (`sync::Weak`), and here the
//! fiber holds the registry through its executor: the model clears the
//! registry before it ends, as an executor does when it is dropped, and
//! loom checks that every `Arc` of the model is then freed.

use alloc::vec::Vec;
use core::time::Duration;
use loom::sync::{Arc, Mutex};
use loom::thread;

use super::FiberRegistry;
use crate::config::FiberConfig;
use crate::executor::{Executor, Fiber, TimerCallback};
use crate::fiber::{FiberInfo, FiberState, FiberStatus};
use crate::io::IO;
use crate::outcome::Outcome;

/// `loom::model` with at most 3 preemptions per execution (unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise), as the fiber models bound theirs.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// An executor that lists its fibers in a registry, as every executor
/// does, and runs a resumed fiber at once on the resuming thread (only for
/// models: real executors queue).
#[derive(Clone)]
struct Listing {
    registry: Arc<FiberRegistry>,
    config: FiberConfig,
}

impl Executor for Listing {
    type TimerKey = ();
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        fiber.run();
    }

    fn reschedule_fiber(&self, _fiber: Fiber<Self>) {
        unreachable!("the model's program never yields")
    }

    fn monotonic(&self) -> Duration {
        Duration::ZERO
    }

    fn set_timer(&self, _deadline: Duration, _callback: TimerCallback) {
        unreachable!("the model's program never sleeps")
    }

    fn cancel_timer(&self, _key: ()) {}

    fn config(&self) -> &FiberConfig {
        &self.config
    }

    fn fiber_listed(&self, fiber: &Fiber<Self>) {
        self.registry.register(0, fiber);
    }
}

/// What a dump may show of the model's fiber: an active fiber running or
/// queued, a suspended one waiting (its wait is cancelable).
fn consistent(info: &FiberInfo) -> bool {
    match info.status {
        FiberStatus::Active => matches!(info.state, FiberState::Running | FiberState::Queued),
        FiberStatus::Suspended => info.state == FiberState::Waiting,
        FiberStatus::SuspendedMasked => false,
    }
}

/// A fiber waits for a callback (and is listed as it suspends), then the
/// same thread calls the callback, which resumes and completes it, while
/// a dump reads the registry: the dump lists the fiber, in a state that
/// agrees with its status, or nothing; after the fiber completed it lists
/// nothing.
#[test]
fn loom_a_dump_racing_a_fiber_listed_resumed_and_completed_sees_it_whole_or_not_at_all() {
    model(|| {
        let config = FiberConfig::default();
        let registry = Arc::new(FiberRegistry::new(&config, true, 1));
        let executor = Listing {
            registry: registry.clone(),
            config,
        };
        let outcome = Arc::new(Mutex::new(None));
        let callback = Arc::new(Mutex::new(None));
        let program: IO<u32, ()> = {
            let callback = callback.clone();
            IO::from_callback(move |cb| {
                *callback.lock().unwrap() = Some(cb);
                None
            })
        };
        let fiber = {
            let outcome = outcome.clone();
            Fiber::new(program, executor, move |o| {
                let previous = outcome.lock().unwrap().replace(o);
                assert!(previous.is_none(), "a fiber completes once");
            })
        };
        let id = fiber.id();

        let runner = thread::spawn(move || {
            fiber.run();
            let cb = callback.lock().unwrap().take().expect("registered");
            assert!(cb.succeed(7), "the one callback resumes the fiber");
        });
        let dump: Vec<FiberInfo> = registry.live_fibers();
        assert!(dump.len() <= 1, "one fiber, listed once: {dump:?}");
        for info in &dump {
            assert_eq!(info.id, id);
            assert!(consistent(info), "{info:?}");
        }
        runner.join().unwrap();

        assert_eq!(outcome.lock().unwrap().take(), Some(Outcome::Succeeded(7)));
        assert!(
            registry.live_fibers().is_empty(),
            "a completed fiber is not listed"
        );
        // The entry holds the fiber, the fiber its executor, the executor
        // the registry (module doc).
        registry.clear();
    });
}
