//! The errors of io-core's operations, in one place (as tokio keeps
//! `sync::mpsc::error`): each names what was wrong.
//!
//! | error | from |
//! |---|---|
//! | [`Failure`] | [`Outcome::into_result`](crate::Outcome::into_result): a fiber's error, cancellation or panic, as the `Err` of a `Result` |
//! | [`RunError`] | an executor's `block_on`, `try_block_on`, `spawn` (deadlock, shut down, nested) |
//! | [`ShutdownTimedOut`] | an executor's [`shutdown`](crate::IORuntime::shutdown): what was still running when the timeout passed |
//! | [`ConfigError`] | [`FiberConfig`](crate::FiberConfig)'s builder and `from_env`, wrapped by every executor's `BuildError` |
//! | [`TimeoutError`] | [`IO::timeout`](crate::IO::timeout): the program did not finish in time |
//! | [`AlreadyCompleted`] | [`Deferred::complete`](crate::Deferred::complete) on a completed deferred |
//! | [`InvalidCapacity`], [`QueueClosed`] | [`Queue`](crate::Queue)'s constructors; operations on a closed queue |
//! | [`InvalidPermits`], [`PermitOverflow`] | [`Semaphore`](crate::Semaphore)'s constructor and `release_n` |
//! | [`InvalidCount`] | [`CountDownLatch::new`](crate::CountDownLatch::new) |
//! | [`InvalidParties`] | [`CyclicBarrier::new`](crate::CyclicBarrier::new) |
//! | [`InvalidSchedule`] | [`Schedule`](crate::Schedule)'s and [`Jitter`](crate::Jitter)'s constructors |
//! | [`EmptyRange`] | [`Random`](crate::Random)'s ranged draws |
//! | [`DispatcherError`] | a [`Dispatcher`](crate::Dispatcher) whose scope has ended, `run_blocking` on the executor's own thread, an executor shut down |
//! | [`SupervisorClosed`] | a [`Supervisor`](crate::Supervisor) or [`JoinSet`](crate::JoinSet) whose scope has ended |

pub use crate::combinators::timeout::TimeoutError;
pub use crate::config::ConfigError;
pub use crate::executor::ShutdownTimedOut;
pub use crate::executor::support::RunError;
pub use crate::outcome::Failure;
pub use crate::stdlib::data::barrier::InvalidParties;
pub use crate::stdlib::data::deferred::AlreadyCompleted;
pub use crate::stdlib::data::latch::InvalidCount;
pub use crate::stdlib::data::queue::{InvalidCapacity, QueueClosed};
pub use crate::stdlib::data::semaphore::{InvalidPermits, PermitOverflow};
pub use crate::stdlib::dispatcher::DispatcherError;
pub use crate::stdlib::random::EmptyRange;
pub use crate::stdlib::retry::InvalidSchedule;
pub use crate::stdlib::supervisor::SupervisorClosed;
