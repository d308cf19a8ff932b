//! Spindle inside a tokio application: a `#[tokio::main]` program runs
//! Spindle programs on exec-tokio (fibers as tokio tasks on the same
//! runtime) and awaits tokio futures inside IO blocks.
//!
//! 1. A block awaits a `tokio::time::sleep` between two `IO`s.
//! 2. A tokio task answers through a `tokio::sync::oneshot`, whose
//!    receiver a block awaits; a closed channel is a typed error.
//! 3. Fibers and tokio futures side by side: four fibers in parallel, each
//!    awaiting a tokio timer, then a tokio `Mutex` they share.
//! 4. A deadline on a tokio future: `timeout` cancels the fiber that
//!    awaits a oneshot nobody answers, which drops the receiver (the
//!    sender sees it closed), and the fiber's finalizer runs.
//!
//! ```text
//! cargo run -p spindle-effect --features tokio --example tokio_interop
//! ```
//!
//! Its combinator form, the same program with `flat_map` and no blocks,
//! is `examples/combinator_forms/tokio_interop.rs`.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use spindle_effect::error::TimeoutError;
use spindle_effect::prelude::*;
use spindle_effect::tokio::TokioExecutor;
use tokio::sync::{Mutex, oneshot};

/// The errors of these programs.
#[derive(Debug, Clone, PartialEq)]
pub enum InteropError {
    /// A oneshot's sender was dropped without sending.
    Closed,
    /// A deadline passed.
    Timeout,
}

impl From<oneshot::error::RecvError> for InteropError {
    fn from(_: oneshot::error::RecvError) -> Self {
        InteropError::Closed
    }
}

impl From<TimeoutError> for InteropError {
    fn from(_: TimeoutError) -> Self {
        InteropError::Timeout
    }
}

/// What the four steps observed.
#[derive(Debug, PartialEq)]
pub struct Summary {
    /// Step 1: the monotonic time the block measured around a 20 ms tokio sleep.
    pub slept: Duration,
    /// Step 2: the tokio task's answer, plus one; then the error of a dropped sender.
    pub answer: u32,
    /// Step 2: what awaiting a oneshot whose sender was dropped gave.
    pub dropped_sender: Result<u32, InteropError>,
    /// Step 3: the fibers' numbers, in the order they took the tokio mutex
    /// (the order of their timers, unless the machine is very busy).
    pub order: Vec<u32>,
    /// Step 4: the deadline's result, whether the sender saw its receiver
    /// dropped, and how many times the fiber's finalizer ran.
    pub deadline: (Result<u32, InteropError>, bool, usize),
}

/// Awaits the answer a tokio task sends through a oneshot, plus one.
fn receive(answer: oneshot::Receiver<u32>) -> IO<u32, InteropError> {
    // `?` converts the channel's `RecvError` with `From`.
    IO::block(async move { Ok(answer.await? + 1) })
}

/// Fiber `i` waits `20 * i` ms on a tokio timer, then appends itself
/// under a tokio mutex.
fn in_order(i: u32, log: Arc<Mutex<Vec<u32>>>) -> IO<(), InteropError> {
    IO::block(async move {
        tokio::time::sleep(Duration::from_millis(u64::from(i) * 20)).await;
        log.lock().await.push(i);
        Ok(())
    })
}

/// The four steps, one program: tokio futures and `IO`s awaited side by
/// side.
fn steps() -> IO<Summary, InteropError> {
    IO::block(async {
        // 1. A tokio timer between two reads of the fiber's clock.
        let start = IO::monotonic().value().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let slept = IO::monotonic().value().await - start;

        // 2. A tokio task answers through a oneshot; then a sender that
        // is dropped at once.
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            tx.send(41).ok();
        });
        let answer = receive(rx).await?;
        let (_, rx) = oneshot::channel(); // the sender is dropped here
        let dropped_sender = receive(rx).attempt().await?;

        // 3. Four fibers in parallel, each on a tokio timer, then a tokio
        // mutex they share.
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = log.clone();
        IO::par_traverse(vec![3, 1, 4, 2], move |i| in_order(i, shared.clone())).await?;
        let order = log.lock().await.clone();

        // 4. A deadline on a oneshot nobody answers: the receiver is
        // dropped, and the finalizer runs once.
        let (tx, rx) = oneshot::channel();
        let finalized = Arc::new(AtomicUsize::new(0));
        let counted = finalized.clone();
        let counting = IO::delay(move || counted.fetch_add(1, Ordering::SeqCst)).void();
        let late = receive(rx)
            .guarantee(counting)
            .timeout(Duration::from_millis(10));
        let late = late.attempt().await?;
        let deadline = (late, tx.is_closed(), finalized.load(Ordering::SeqCst));
        Ok(Summary {
            slept,
            answer,
            dropped_sender,
            order,
            deadline,
        })
    })
}

/// Runs the four steps on the tokio runtime this is called from.
pub async fn run() -> Result<Summary, Box<dyn Error>> {
    // Fibers run as tasks of the calling tokio runtime.
    let executor = TokioExecutor::current()?;
    let summary = executor.run_async(steps()).await?;
    Ok(summary.succeeded().ok_or("the steps succeed")?)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let summary = run().await?;
    println!(
        "1. measured a 20 ms tokio sleep between two IO steps: {:?}",
        summary.slept
    );
    println!(
        "2. a tokio task answered 41 through a oneshot; the program made it {}",
        summary.answer
    );
    println!(
        "   a oneshot whose sender was dropped: {:?}",
        summary.dropped_sender
    );
    println!(
        "3. fibers took a tokio mutex after tokio timers of 20 to 80 ms, in this order: {:?}",
        summary.order
    );
    let (outcome, dropped, finalized) = &summary.deadline;
    println!(
        "4. a 10 ms deadline on a oneshot nobody answers: {outcome:?}; receiver dropped: {dropped}; \
         finalizer ran {finalized} time(s)"
    );
    assert!(summary.slept >= Duration::from_millis(20));
    assert_eq!(summary.answer, 42);
    assert_eq!(summary.dropped_sender, Err(InteropError::Closed));
    let mut took = summary.order.clone();
    took.sort();
    assert_eq!(took, [1, 2, 3, 4], "every fiber took the mutex once");
    assert_eq!(summary.deadline, (Err(InteropError::Timeout), true, 1));
    Ok(())
}
