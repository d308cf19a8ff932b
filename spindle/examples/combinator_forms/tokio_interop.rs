//! The combinator form of `examples/tokio_interop.rs`: the same program
//! with `flat_map` and no IO blocks (tokio futures become steps with
//! `IO::from_future_with` and `IO::from_try_future_with`), to compare the
//! two.
//!
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
//! cargo run -p spindle-effect --features tokio --example tokio_interop_combinators
//! ```

use std::error::Error;
use std::sync::Arc;
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

/// Step 1: a tokio timer between two reads of the fiber's clock.
fn measure_a_tokio_sleep() -> IO<Duration, InteropError> {
    IO::monotonic().flat_map(|start| {
        IO::from_future_with(|| tokio::time::sleep(Duration::from_millis(20)))
            .product_r(IO::monotonic())
            .map(move |end| end - start)
    })
}

/// Step 2: awaits the answer a tokio task sends through a oneshot.
fn receive(answer: oneshot::Receiver<u32>) -> IO<u32, InteropError> {
    IO::from_try_future_with(move || async move { answer.await.map_err(InteropError::from) })
        .map(|n| n + 1)
}

/// Step 3: fiber `i` waits `20 * i` ms on a tokio timer, then appends
/// itself under a tokio mutex.
fn in_order(i: u32, log: Arc<Mutex<Vec<u32>>>) -> IO<(), InteropError> {
    IO::from_future_with(move || tokio::time::sleep(Duration::from_millis(u64::from(i) * 20)))
        .product_r(IO::from_future_with(move || async move {
            log.lock().await.push(i);
        }))
}

/// Runs the four steps on the tokio runtime this is called from.
pub async fn run() -> Result<Summary, Box<dyn Error>> {
    // Fibers run as tasks of the calling tokio runtime.
    let executor = TokioExecutor::current()?;

    let slept = executor.run_async(measure_a_tokio_sleep()).await?;
    let slept = slept.succeeded().ok_or("the sleep step succeeds")?;

    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        tx.send(41).ok();
    });
    let answer = executor.run_async(receive(rx)).await?;
    let answer = answer.succeeded().ok_or("the oneshot step succeeds")?;
    let (tx, rx) = oneshot::channel::<u32>();
    drop(tx);
    let dropped_sender = executor.run_async(receive(rx).attempt()).await?;
    let dropped_sender = dropped_sender.succeeded().ok_or("the result is a value")?;

    let log = Arc::new(Mutex::new(Vec::new()));
    let shared = log.clone();
    let fibers = IO::par_traverse(vec![3, 1, 4, 2], move |i| in_order(i, shared.clone()));
    executor.run_async(fibers).await?;
    let order = log.lock().await.clone();

    let (tx, rx) = oneshot::channel::<u32>();
    let finalized = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = finalized.clone();
    let late = receive(rx)
        .guarantee(IO::delay(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }))
        .timeout(Duration::from_millis(10));
    let late = executor.run_async(late.attempt()).await?;
    let late = late.succeeded().ok_or("the result is a value")?;
    let receiver_dropped = tx.is_closed();
    let finalized = finalized.load(std::sync::atomic::Ordering::SeqCst);

    Ok(Summary {
        slept,
        answer,
        dropped_sender,
        order,
        deadline: (late, receiver_dropped, finalized),
    })
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
