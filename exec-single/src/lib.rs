//! # exec-single: a single-threaded executor for Spindle fibers
//!
//! One thread (the one that calls [`SingleThreaded::block_on`]) runs every
//! fiber. It is the executor for tests, for embedded targets (`//!
//! # Layout
//!
//! `builder.rs` ([`Builder`]), `error.rs` ([`BuildError`], [`RunError`]),
//! `handle.rs` ([`Handle`], the shared state and the [`Executor`]
//! implementation), `executor.rs` ([`SingleThreaded`] and its loop),
//! `platform/` (hosted or bare: the loop marker and idle waiting), `sync.rs`
//! (the sync shim). What every executor shares (the main-fiber slot, the
//! remote queue, the fiber registry, the timer heap) is io-core's
//! `executor::support`.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod builder;
mod clock;
mod error;
mod executor;
mod handle;
mod platform;
mod sync;
pub mod testkit;

#[cfg(doc)]
use spindle_core::Executor;

pub use builder::Builder;
pub use clock::Clock;
#[cfg(feature = "std")]
pub use clock::StdClock;
pub use error::{BuildError, RunError};
pub use executor::SingleThreaded;
pub use handle::{Handle, Metrics};

/// Unit tests of the loop's `unsafe` paths (thread-confined state, the
/// remote queue, timers); they also run under Miri in CI.
#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use core::time::Duration;
    use spindle_core::{Executor, Fiber, IO, Outcome};

    #[test]
    fn a_program_with_binds_timers_and_a_remote_wake_up_runs_to_its_value() {
        let rt = SingleThreaded::new().unwrap();
        let io: IO<u32, ()> = IO::sleep(Duration::from_millis(1))
            .product_r(IO::from_callback(|cb| {
                std::thread::spawn(move || cb.succeed(20));
                None
            }))
            .flat_map(|x: u32| IO::delay(move || x + 1))
            .map(|x| x * 2);
        assert_eq!(rt.block_on(io), Ok(Outcome::Succeeded(42)));
        assert_eq!(
            rt.block_on(IO::<u8, ()>::pure(7)),
            Ok(Outcome::Succeeded(7))
        );
    }

    #[test]
    fn a_main_fiber_nothing_can_resume_is_reported_as_a_deadlock() {
        let rt = SingleThreaded::new().unwrap();
        assert_eq!(
            rt.try_block_on(IO::<u8, ()>::never()),
            Err(RunError::Deadlock)
        );
    }

    #[test]
    fn fibers_left_queued_are_freed_when_the_executor_is_dropped() {
        let rt = SingleThreaded::new().unwrap();
        let witness = alloc::sync::Arc::new(());
        let w = witness.clone();
        let fiber = Fiber::new(
            IO::<(), ()>::sleep(Duration::from_secs(3600)).map(move |_| drop(w)),
            rt.handle().clone(),
            |_| {},
        );
        rt.handle().schedule_fiber(fiber);
        drop(rt);
        assert_eq!(alloc::sync::Arc::strong_count(&witness), 1);
    }

    #[test]
    fn a_block_on_inside_one_of_its_own_fibers_is_refused_not_run() {
        let rt = SingleThreaded::new().unwrap();
        let inner = SingleThreaded::new().unwrap();
        // The executor cannot be captured (it is not `Sync`): a fiber
        // reaches it through a raw pointer only in this test, exactly what
        // the loop marker must catch.
        struct Ptr(*const SingleThreaded<StdClock>);
        // SAFETY: the pointer is only dereferenced on the loop thread, the
        // thread that owns `rt` (the fiber runs inside `rt.block_on`).
        unsafe impl Send for Ptr {}
        let ptr = Ptr(&rt);
        let io: IO<Result<Outcome<u8, ()>, RunError>, ()> = IO::delay(move || {
            let ptr = ptr;
            // SAFETY: `rt` outlives the `block_on` that runs this fiber, on
            // this thread, and `block_on` takes `&self`.
            let rt = unsafe { &*ptr.0 };
            rt.block_on(IO::pure(1))
        });
        assert_eq!(
            rt.block_on(io),
            Ok(Outcome::Succeeded(Err(RunError::Nested)))
        );
        // Another executor's loop may run inside a fiber.
        let other: IO<Result<Outcome<u8, ()>, RunError>, ()> =
            IO::delay(move || inner.block_on(IO::pure(2)));
        assert_eq!(
            rt.block_on(other),
            Ok(Outcome::Succeeded(Ok(Outcome::Succeeded(2))))
        );
    }

    #[test]
    fn a_block_on_nested_through_another_executors_loop_is_refused_too() {
        let rt = SingleThreaded::new().unwrap();
        let inner = SingleThreaded::new().unwrap();
        struct Ptr(*const SingleThreaded<StdClock>);
        // SAFETY: dereferenced only on this thread, inside `rt.block_on`.
        unsafe impl Send for Ptr {}
        let ptr = Ptr(&rt);
        type Nested = Result<Outcome<u8, ()>, RunError>;
        let io: IO<Result<Outcome<Nested, ()>, RunError>, ()> = IO::delay(move || {
            inner.block_on(IO::delay(move || {
                let ptr = &ptr;
                // SAFETY: `rt` outlives its `block_on`, which runs this
                // (through `inner`'s loop) on this thread.
                let rt = unsafe { &*ptr.0 };
                rt.block_on(IO::pure(1))
            }))
        });
        assert_eq!(
            rt.block_on(io),
            Ok(Outcome::Succeeded(Ok(Outcome::Succeeded(Err(
                RunError::Nested
            )))))
        );
    }

    #[test]
    fn spawning_on_a_handle_that_outlived_its_executor_reports_shut_down() {
        let rt = SingleThreaded::new().unwrap();
        let handle = rt.handle().clone();
        drop(rt);
        assert!(matches!(
            handle.spawn(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        ));
    }
}
