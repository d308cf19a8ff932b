//! # exec-tokio: Spindle fibers on a tokio runtime
//!
//! Every fiber runs as a tokio task, so Spindle lives inside a tokio
//! application: fibers share the runtime (and its workers, timers and
//! blocking pool) with the application's own tasks, and `IO::sleep` runs
//! on `tokio::time`, so a paused test clock drives it. Attach to the
//! runtime you have, or let the executor own one. An application has it as
//! `spindle_effect::tokio::TokioExecutor` (the entry crate's feature
//! `tokio`).
//!
//! From async code, attach and await a program:
//!
//! ```
//! use std::time::Duration;
//!
//! use spindle_effect::prelude::*;
//! use spindle_effect::tokio::TokioExecutor;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let executor = TokioExecutor::current()?;
//!     let program: IO<u32, ()> = IO::sleep(Duration::from_millis(1)).map_to(42);
//!     assert_eq!(executor.run_async(program).await?, Outcome::Succeeded(42));
//!     Ok(())
//! }
//! ```
//!
//! From a plain thread, own a runtime and block on a program, as with
//! every Spindle executor:
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::tokio::TokioExecutor;
//!
//! let executor = TokioExecutor::builder().multi_thread(2).build()?;
//! let work = (0..100u64).map(|i| IO::<u64, ()>::delay(move || i * i)).collect::<Vec<_>>();
//! let sum = IO::par_sequence(work).map(|squares| squares.iter().sum::<u64>());
//! assert_eq!(executor.block_on(sum)?, Outcome::Succeeded(328_350));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The public surface
//!
//! Every Spindle executor has the same surface: io-core's
//! [`IORuntime`](spindle_core::IORuntime) (its documentation has the
//! table: `block_on`, `try_block_on`, `spawn`, `handle`, `metrics`,
//! `fiber_dump`, `from_env`, `shutdown`; import the trait) and
//! [`RuntimeBuilder`](spindle_core::RuntimeBuilder) (the builder setters
//! `fiber_config`, `fiber_config_from_env`, `track_fibers`). Here:
//! [`TokioExecutor`] (whose `block_on` returns [`RunError::Nested`] inside
//! a fiber or a tokio context, whose `from_env` owns a multi-thread
//! runtime, and whose `shutdown(timeout)` is tokio's `shutdown_timeout` for
//! an owned runtime, reporting the `IO::blocking` calls left running),
//! [`TokioExecutor::new`], [`TokioExecutor::builder`],
//! [`TokioExecutor::current`] (attach to the calling code's runtime) and
//! [`run_async`](TokioExecutor::run_async) for async code; this
//! executor's own setters [`handle`](Builder::handle),
//! [`multi_thread`](Builder::multi_thread),
//! [`current_thread`](Builder::current_thread),
//! [`thread_name`](Builder::thread_name) and
//! [`max_blocking_threads`](Builder::max_blocking_threads); [`Handle`] (an
//! `Executor`, and io-core's `ParkedBlockOn`: `block_on` and
//! `try_block_on` for other threads; with [`Handle::run_async`] and
//! [`Handle::tokio_handle`]), [`Metrics`] and
//! [`BuildError`].
//!
//! [`RunError`], [`ShutdownTimedOut`] and [`FiberInfo`] are io-core's,
//! re-exported: one type for every executor. Layout: `builder.rs`, `error.rs`, `executor.rs` (the
//! owner and its shutdown), `handle.rs` (the shared state and the
//! `Executor` implementation), `task.rs` (a fiber's one tokio task, its
//! link and slot, blocking calls), `io.rs` (sockets on tokio's driver), `timer.rs`, `metrics.rs`,
//! `sync.rs` (the sync shim).
//!
//! # Sockets
//!
//! [`net`] (spindle-net, re-exported) has TCP listeners and streams, UDP
//! sockets, Unix domain listeners and streams and a buffered line reader,
//! the same on every Spindle executor; their operations are
//! `IO<_, std::io::Error>` values. On this executor a socket made by a
//! fiber is watched by tokio's own I/O driver through
//! `tokio::io::unix::AsyncFd`, next to the application's tokio sockets:
//! no poller of Spindle's runs. A wait on a socket whose runtime is shut
//! down (an owned runtime dropped with its executor) fails with an
//! `io::Error` instead of hanging, and one on a runtime built without I/O
//! (`enable_io`) fails when the socket is made. Unix only, as spindle-net
//! (elsewhere the module is empty).
//!
//! ```
//! use std::time::Duration;
//!
//! use spindle_effect::net::{TcpListener, TcpStream};
//! use spindle_effect::prelude::*;
//! use spindle_effect::tokio::TokioExecutor;
//!
//! let executor = TokioExecutor::builder().current_thread().build()?;
//! let echo = TcpListener::bind("127.0.0.1:0".parse()?).flat_map(|listener| {
//!     listener.local_addr().flat_map(move |addr| {
//!         let server = listener.accept().flat_map(|(stream, _peer)| {
//!             stream.read(1024).flat_map(move |bytes| stream.write_all(bytes))
//!         });
//!         let client = TcpStream::connect(addr)
//!             .flat_map(|stream| stream.write_all(b"hello").product_r(stream.read(1024)));
//!         server.both(client).map(|((), echoed)| echoed)
//!     })
//! });
//! let outcome = executor.block_on(echo.timeout(Duration::from_secs(10)))?;
//! assert_eq!(outcome.succeeded(), Some(b"hello".to_vec()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! tokio is the engine: this crate adds no queue, no parker and no timer
//! structure of its own, only the mapping of io-core's `Executor`
//! contract onto tokio's public API.
//!
//! | contract | on tokio | why |
//! |---|---|---|
//! | `schedule_fiber` (start) | `spawn` of the fiber's task, which keeps the fiber for its whole life | one task per fiber, as tokio runs futures; on a worker, tokio's LIFO slot runs the new fiber next |
//! | `schedule_fiber` (resume: a callback, a timer, a blocking call, a cancel; any thread) | the fiber goes back to its own task through the link in its slot (io-core's `Executor::FiberSlot` and `support::TaskLink`), and the task is woken through its `Waker` | no spawn, no allocation per resumption; while it waits the task is parked (`Pending`) and holds only the link, so a fiber whose wakers are all gone is still freed, and its task ends with it; woken from a worker, tokio's LIFO slot runs it next |
//! | a yield (cede, auto-yield: `Fiber::run_with`'s requeue, or `reschedule_fiber`) | the running task keeps the fiber, wakes itself and returns `Pending` | tokio reschedules a self-woken task as a *yield*, to the back of the run queue, never to the LIFO slot; a `spawn` from the worker would take the LIFO slot and run the fiber before the work already waiting (the `task` module has the detail) |
//! | `set_timer` / `cancel_timer`, `monotonic` | a task per timer on `tokio::time::sleep_until`, cancelled through its `AbortHandle`; `tokio::time::Instant` since build | tokio's timer wheel and its paused test clock, not a second timer structure |
//! | `spawn_blocking` | tokio's `spawn_blocking` | tokio's blocking pool, shared with the application |
//! | `block_on` / `try_block_on` | io-core's `MainFiber`; the main fiber runs on the calling thread (in the runtime's context) until it first waits, then in its own task, the caller parked until it completes or is abandoned | a program that never waits costs no task and no thread hop (about 0.14 µs against 6 to 10 µs when the main fiber was spawned); the same deadlock detection as every executor |
//! | `fiber_dump` | io-core's `FiberRegistry` | the same dumps as every executor |
//! | spindle-net's I/O capability | each fiber run inside `with_driver` with a stateless driver; a socket is an `AsyncFd` on the runtime's I/O driver | tokio's driver, not a second poller; no cost per poll beyond two thread-local writes |
//!
//! An owned current-thread runtime is driven by one thread the executor
//! starts (tokio's current-thread runtime runs tasks only inside its
//! `block_on`), so `spawn` runs fibers in the background and `block_on`
//! works from any thread, like the other executors. Every fiber runs on
//! that thread, except the first run of `block_on`'s main fiber (until it
//! first waits), which runs on the thread that called `block_on`, as
//! tokio's own `block_on` polls its future on the calling thread.
//!
//! # Invariants
//!
//! * A fiber is in at most one tokio task, the same one from its first
//!   run (or, for `block_on`'s main fiber, its first wait) to its end,
//!   and runs on one thread at a time (io-core's `Fiber` handle is
//!   unique; the link hands it back to its task, never to another).
//! * A task holds its fiber only while it runs it or between a yield and
//!   the next poll, never while the fiber waits: a fiber whose wakers are
//!   all gone is freed, and its task, woken by the link's close, ends.
//! * After shutdown nothing new starts: `spawn`, `block_on` and `run_async`
//!   answer [`RunError::ShutDown`], a fiber scheduled afterwards is
//!   dropped, and a task finds the flag before it runs its fiber.
//! * No library code panics: building outside a runtime, on one without
//!   timers, or with an option that an attached runtime cannot take is a
//!   [`BuildError`]; a `block_on` where it would block tokio is
//!   [`RunError::Nested`]; dropping the executor inside a tokio context
//!   shuts an owned runtime down in the background.
//!
//! Design credits: tokio's scheduler (its LIFO slot and yield path are
//! what the two scheduling calls map to), tokio's task and waker design
//! (a fiber's task parks and is woken by value through its `Waker`, the
//! `task` module), tokio's `AsyncFd` and its
//! tick-based readiness (what the sockets wait on) and tokio's `rt_test!`
//! habit for the shared tests; no code is copied.

#![deny(missing_docs)]

mod builder;
mod error;
mod executor;
mod handle;
#[cfg(unix)]
mod io;
mod metrics;
mod sync;
mod task;
mod timer;

pub use crate::builder::{Builder, DEFAULT_THREAD_NAME};
pub use crate::error::{BuildError, RunError, ShutdownTimedOut};
pub use crate::executor::TokioExecutor;
pub use crate::handle::Handle;
pub use crate::metrics::{Flavor, Metrics};
pub use crate::timer::TimerKey;
pub use spindle_core::{FiberInfo, FiberStatus};

/// The sockets: spindle-net, re-exported. Sockets made by this executor's
/// fibers are watched by tokio's own I/O driver (through `AsyncFd`), next
/// to the application's tokio sockets; see [the crate doc](crate#sockets).
pub use spindle_net as net;
