//! # exec-single: a single-threaded executor for Spindle fibers
//!
//! One thread (the one that calls `block_on`) runs every fiber. It is the
//! executor for tests, for embedded targets (`#![no_std]` with `alloc`;
//! build with `default-features = false`) and for programs that want one
//! deterministic thread; an application has it as
//! `spindle_effect::single::SingleThreaded` (the entry crate's feature
//! `single`). With `std` on Unix it also runs spindle-net's sockets
//! ([Sockets](#sockets)).
//!
//! ```
//! # #[cfg(feature = "std")] { // The system clock needs `std`.
//! use std::time::Duration;
//!
//! use spindle_effect::prelude::*;
//! use spindle_effect::single::SingleThreaded;
//!
//! let rt = SingleThreaded::new()?;
//! let program: IO<&str, ()> = IO::sleep(Duration::from_millis(1)).map_to("done");
//! assert_eq!(rt.block_on(program)?, Outcome::Succeeded("done"));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The public surface
//!
//! Every Spindle executor has the same surface: io-core's [`IORuntime`]
//! (its documentation has the table: `block_on`, `try_block_on`, `spawn`,
//! `handle`, `metrics`, `fiber_dump`, `from_env`, `shutdown`; import the
//! trait) and [`RuntimeBuilder`] (the builder setters `fiber_config`,
//! `fiber_config_from_env`, `track_fibers`). Here: [`SingleThreaded`]
//! (`IORuntime` for every clock with a `Default`, and
//! [`SingleThreaded::from_env`] on the system clock; without `std`,
//! `from_env` is the default configuration), [`SingleThreaded::new`] and
//! [`SingleThreaded::builder`] on the system clock, [`Builder::with_clock`]
//! on another, and this executor's own setters
//! [`clock`](Builder::clock) and [`remote_capacity`](Builder::remote_capacity);
//! [`Handle`] (an [`Executor`]), [`Metrics`], [`BuildError`], and
//! io-core's [`RunError`], re-exported. `shutdown` frees everything at
//! once, as dropping the executor does: always `Ok`.
//!
//! # The loop
//!
//! Each turn of `block_on`:
//!
//! 1. moves fibers woken from elsewhere (other threads, interrupt handlers)
//!    from the *remote* queue to the end of the run queue;
//! 2. fires the timers whose deadline has passed, in deadline order (ties
//!    in the order they were set), which queues their fibers;
//! 3. runs the fibers that were queued at the start of this step, in FIFO
//!    order (a fiber that yields goes behind them);
//! 4. if fibers are still ready and some fiber waits for a socket, looks at
//!    the I/O poller without waiting, which queues the fibers whose sockets
//!    are ready: once per turn, so sockets, like timers and wake-ups, are
//!    looked at between two batches of step 3;
//! 5. if no fiber is ready, waits until the next timer's deadline or a
//!    wake-up: in the I/O poller (with `std` on Unix, on the system clock:
//!    readiness ends the wait too), by parking the thread (with `std`, on
//!    any other clock), or with [`Clock::wait`] (without `std`).
//!
//! Same program, same order of events, every run: nothing depends on
//! thread timing except when a wake-up from another thread, an interrupt or
//! a socket arrives.
//!
//! `try_block_on` reports [`RunError::Deadlock`] when the main fiber was
//! freed while suspended and nothing is left: no fiber ready, no timer, no
//! fiber waiting for a socket, no wake-up pending.
//!
//! # Sockets
//!
//! With `std` on Unix, an executor on the system clock
//! ([`StdClock`]: [`SingleThreaded::new`], [`SingleThreaded::builder`])
//! provides the I/O capability of spindle-net (its `driver` module): it
//! owns a mio reactor, and each `block_on` runs its fibers with that
//! reactor as the thread's driver, so the sockets they make
//! (`TcpListener::bind`, `TcpStream::connect`, `UdpSocket::bind`, ...)
//! register with it. The loop then waits in the reactor's poller instead
//! of parking its thread: readiness, the next timer and a wake-up from
//! another thread (which notifies the reactor: a system call only when the
//! loop sleeps) all end one wait. Between two `block_on`s nothing polls: a
//! wait that starts then fails with an error instead of hanging, while
//! fibers already waiting stay registered and resume in the next run.
//! Dropping the executor closes the reactor (later waits fail) and frees
//! the fibers waiting on it (their finalizers do not run: cancel fibers
//! first for that). Making the poller can fail (out of descriptors):
//! the builder then returns `BuildError::Poller`.
//!
//! Every other executor has no I/O capability and parks or waits as
//! described in [the loop](#the-loop): on another [`Clock`] (testkit's
//! [`VirtualClock`](testkit::VirtualClock) and
//! [`TestControl`](testkit::TestControl), whose time must never be real, or
//! a clock of the user's), without `std`, or off Unix. A socket made by one
//! of its fibers fails with an `io::Error` of kind `Unsupported`. Which
//! executors get a reactor is decided by the clock's type when the
//! executor is built; the loop's code is the same for all (`platform/`:
//! see the layout below).
//!
//! # Blocking work
//!
//! The same executors (the system clock, `std`, Unix) run `IO::blocking`
//! work on a blocking pool of their own (io-core's `BlockingPool`, as
//! exec-wstp and exec-batching: threads on demand up to 512, kept 10
//! seconds when idle): the loop keeps running the other fibers, timers
//! and sockets while a call blocks, and the fiber comes back through the
//! remote queue. Every other executor (another clock, no `std`, off
//! Unix) runs the call on the loop's thread, the executor contract's
//! default: a virtual clock must never wait for real time.
//!
//! # Wake-ups from other contexts
//!
//! [`Executor::schedule_fiber`] may be called from any thread and (without
//! `std`) from interrupt handlers: callbacks resume fibers that way. On the
//! loop's own thread it pushes to the run queue without a lock; from
//! anywhere else it pushes to the remote queue, behind a `std` mutex or a
//! `critical-section` (never picked by this library: the final binary
//! provides the implementation, for instance cortex-m's single-core one),
//! then wakes the loop: through its reactor, by unparking its thread, or
//! with [`Clock::notify`].
//!
//! For firmware, two guarantees make interrupt-driven fibers (for instance
//! a fiber waiting on a `spindle_effect::Signal` that a handler completes)
//! safe:
//!
//! * **No allocation in the handler.** The remote queue keeps its buffer
//!   once grown; [`Builder::remote_capacity`] reserves room up front for
//!   as many fibers as handlers may wake between two turns, and a push
//!   within that room never allocates.
//! * **No lost wake-up before `wfi`.** Without `std`, the loop checks
//!   "nothing pending" and calls [`Clock::wait`] inside one critical
//!   section (interrupts masked on a single core). `wfi` returns on a
//!   *pending* interrupt even while masked; the handler runs as the
//!   section ends and its wake-up is drained at the next turn. So
//!   `Clock::wait` should be just `wfi` (see its documentation).
//!
//! # Fiber dumps
//!
//! [`Executor::fiber_dump`] (also `IORuntime::fiber_dump`) lists
//! every live fiber with its state and trace, and the loop's state: the
//! ready queue, the remote queue, the timers and the fibers waiting for a
//! socket (`io waiters`). The executor lists its fibers (io-core's
//! `FiberRegistry`, filled from [`Executor::fiber_listed`]: fibers that
//! have waited or yielded once) while they
//! trace (io-core's `tracing` feature on and a mode other than `none`) or
//! when built with `track_fibers(true)` ([`RuntimeBuilder::track_fibers`]); otherwise it keeps nothing
//! per fiber and a dump lists no fiber. On the loop thread a dump reads the
//! ready queue and the timers exactly; elsewhere (another thread, an
//! interrupt handler, any caller without `std`) it reads their lengths as
//! of the end of the last turn, which the loop publishes with two relaxed
//! stores per turn.
//!
//! # Layout
//!
//! `builder.rs` ([`Builder`]), `error.rs` ([`BuildError`], [`RunError`]),
//! `handle.rs` ([`Handle`], the shared state and the [`Executor`]
//! implementation), `executor.rs` ([`SingleThreaded`] and its loop),
//! `platform/` (whole-file swaps: `hosted.rs` or `bare.rs`, the loop marker
//! and idle waiting; `io.rs` or `no_io.rs`, the I/O capability), `sync.rs`
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
use spindle_core::{Executor, IORuntime, RuntimeBuilder};

pub use builder::Builder;
pub use clock::Clock;
#[cfg(feature = "std")]
pub use clock::StdClock;
pub use error::{BuildError, RunError, ShutdownTimedOut};
pub use executor::SingleThreaded;
pub use handle::{Handle, Metrics};

/// The sockets (with `std`, on Unix): spindle-net, re-exported. An
/// executor on the system clock polls their readiness in its loop.
#[cfg(all(feature = "std", unix, not(loom)))]
pub use spindle_net as net;

/// Unit tests of the loop's `unsafe` paths (thread-confined state, the
/// remote queue, timers); they also run under Miri in CI.
#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use core::time::Duration;
    use spindle_core::{Executor, Fiber, IO, IORuntime, Outcome};

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
