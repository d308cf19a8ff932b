//! The tokio references of the suite: the same workloads as `async` Rust
//! (`benches/PORTS.md` says why each is the counterpart it is). Every
//! future here is `Send`, so the same program
//! runs on the current-thread runtime (`tokio`) and, as a task on a worker,
//! on the multi-thread runtime (`tokio_mt`).

use std::future::{Future, pending};
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use benches::{
    ASYNC_SIZE, DEFERRED_ROUNDS, DUMMY, Dummy, MAP_CALLS_TOTAL, MUTEX_ITERATIONS, PAR_SIZE,
    QUEUE_SIZE, REF_ITERATIONS, SIZE, SLEEP_FIBERS, SLEEP_LOOP_UNTIL,
};
use tokio::sync::{Mutex, Notify, mpsc, oneshot, watch};
use tokio::task::{JoinHandle, yield_now};

use crate::programs::{
    ALLOC_FIBERS, ALLOC_LIMIT, BLOCKING_SIZE, CHAIN, CPU_TOKENS, NANO, NUM_PINGS, NUM_SPAWN,
    NUM_YIELD, ROUND_TRIPS, SCHED_FIBERS, SCHED_LIMIT, YIELD_TASKS, address_sum, allocation,
    consume_cpu, countdown,
};

/// A boxed future that may move between workers: the unit of recursion.
pub type BoxedSend<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The counterpart of `IO::delay`: a plain call.
#[inline]
fn delay<T>(thunk: impl FnOnce() -> T) -> T {
    thunk()
}

/// Aborts its task when dropped (an aborted race level aborts its children).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// --- ShallowBind, DeepBind -------------------------------------------------

pub fn shallow_pure() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move { if i < SIZE { go(i + 1).await } else { i } })
    }
    Box::pin(async { go(0).await })
}

pub fn shallow_delay() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move {
            if i < SIZE {
                let j = delay(move || i + 1);
                go(j).await
            } else {
                delay(move || i)
            }
        })
    }
    Box::pin(async { go(delay(|| 0)).await })
}

pub fn shallow_async() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move {
            yield_now().await;
            if i < SIZE { go(i + 1).await } else { i }
        })
    }
    Box::pin(async { go(delay(|| 0)).await })
}

pub fn deep_pure() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move {
            let j = i;
            if j > SIZE { j } else { go(j + 1).await }
        })
    }
    go(0)
}

pub fn deep_delay() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move {
            let j = delay(move || i);
            if j > SIZE { j } else { go(j + 1).await }
        })
    }
    go(0)
}

pub fn deep_async() -> BoxedSend<i32> {
    fn go(i: i32) -> BoxedSend<i32> {
        Box::pin(async move {
            let j = delay(move || i);
            yield_now().await;
            if j > SIZE { j } else { go(j + 1).await }
        })
    }
    go(0)
}

// --- Attempt, HandleError, Redeem, RedeemWith --------------------------------

type Fut = BoxedSend<Result<i32, Dummy>>;

fn raise<T>(e: Dummy) -> Result<T, Dummy> {
    Err(e)
}

pub fn attempt_happy_path() -> Fut {
    fn go(i: i32) -> Fut {
        Box::pin(async move {
            if i < SIZE {
                let attempted: Result<i32, Dummy> = Ok(i + 1);
                match attempted {
                    Ok(j) => go(j).await,
                    Err(e) => Err(e),
                }
            } else {
                Ok(i)
            }
        })
    }
    go(0)
}

/// Also `HandleError.errorRaised`'s and `RedeemWith.errorRaised`'s
/// counterpart: on tokio, recovering an error into the loop is one `match`.
pub fn attempt_error_raised() -> Fut {
    fn go(i: i32) -> Fut {
        Box::pin(async move {
            if i < SIZE {
                let attempted = async {
                    let x: i32 = raise(DUMMY)?;
                    Ok::<i32, Dummy>(x + 1)
                }
                .await;
                match attempted {
                    Err(_) => go(i + 1).await,
                    Ok(x) => Ok(x),
                }
            } else {
                Ok(i)
            }
        })
    }
    go(0)
}

/// Also `Redeem.happyPath`'s and `RedeemWith.happyPath`'s counterpart.
pub fn handle_error_happy_path() -> Fut {
    fn go(i: i32) -> Fut {
        Box::pin(async move {
            if i < SIZE {
                let handled: Result<i32, Dummy> = match Ok(i + 1) {
                    Ok(j) => Ok(j),
                    Err(e) => raise(e),
                };
                go(handled?).await
            } else {
                Ok(i)
            }
        })
    }
    go(0)
}

pub fn handle_error_error_raised() -> Fut {
    fn go(i: i32) -> Fut {
        Box::pin(async move {
            if i < SIZE {
                let attempted = async {
                    let x: i32 = raise(DUMMY)?;
                    let x = x + 1;
                    Ok::<i32, Dummy>(x + 1)
                }
                .await;
                match attempted {
                    Ok(x) => Ok(x),
                    Err(_) => go(i + 1).await,
                }
            } else {
                Ok(i)
            }
        })
    }
    go(0)
}

/// `Redeem.errorRaised`: the error folded into `i + 1`, then the loop.
pub fn redeem_error_raised() -> Fut {
    fn go(i: i32) -> Fut {
        Box::pin(async move {
            if i < SIZE {
                let attempted = async {
                    let x: i32 = raise(DUMMY)?;
                    Ok::<i32, Dummy>(x + 1)
                }
                .await;
                let j = match attempted {
                    Ok(x) => x,
                    Err(_) => i + 1,
                };
                go(j).await
            } else {
                Ok(i)
            }
        })
    }
    go(0)
}

// --- MapCalls ----------------------------------------------------------------

/// One MapCalls operation: `12000 / batch` chains of `batch` nested
/// boxed futures, each run with `block_on`.
pub fn map_calls(rt: &tokio::runtime::Runtime, batch: usize) -> i64 {
    let f = |x: i32| x + 1;
    let mut sum = 0i64;
    for _ in 0..MAP_CALLS_TOTAL / batch {
        let mut fut: BoxedSend<i32> = Box::pin(async { delay(|| 0) });
        for _ in 0..batch {
            let inner = fut;
            fut = Box::pin(async move { f(inner.await) });
        }
        sum += i64::from(rt.block_on(fut));
    }
    sum
}

// --- Async -------------------------------------------------------------------

async fn ready_via_oneshot<T>(value: T) -> T {
    let (tx, rx) = oneshot::channel();
    if tx.send(value).is_err() {
        unreachable!("the receiver is alive");
    }
    rx.await.expect("the value was sent")
}

struct OnCancel<F: FnMut()> {
    armed: bool,
    finalizer: F,
}

impl<F: FnMut()> Drop for OnCancel<F> {
    fn drop(&mut self) {
        if self.armed {
            (self.finalizer)();
        }
    }
}

async fn ready_cancelable<T>(value: T) -> T {
    let mut guard = OnCancel {
        armed: true,
        finalizer: || {},
    };
    let value = ready_via_oneshot(value).await;
    guard.armed = false;
    value
}

async fn shifted(value: i32) -> i32 {
    yield_now().await;
    delay(move || value)
}

pub async fn async_async() -> i32 {
    let mut i = delay(|| 0);
    while i < ASYNC_SIZE {
        i = ready_via_oneshot(i + 1).await;
    }
    i
}

pub async fn async_cancelable() -> i32 {
    let mut i = delay(|| 0);
    while i < ASYNC_SIZE {
        i = ready_cancelable(i + 1).await;
    }
    i
}

pub async fn async_cancel_boundary() -> i32 {
    let mut i = delay(|| 0);
    while i < ASYNC_SIZE {
        i = shifted(i + 1).await;
    }
    i
}

pub async fn async_start() -> i32 {
    let mut i = delay(|| 0);
    while i < ASYNC_SIZE {
        i = tokio::spawn(shifted(i + 1)).await.expect("the task ran");
    }
    i
}

pub fn async_par_map2() -> BoxedSend<i32> {
    (0..ASYNC_SIZE).fold(Box::pin(async { delay(|| 0) }), |acc, i| {
        Box::pin(async move {
            let (a, b) = tokio::join!(acc, shifted(i));
            a + b
        })
    })
}

pub fn async_race() -> BoxedSend<i32> {
    (0..ASYNC_SIZE).fold(Box::pin(pending()), |acc, _| {
        Box::pin(async move {
            tokio::select! {
                biased;
                i = acc => i,
                i = shifted(1) => i,
            }
        })
    })
}

pub fn async_race_pair() -> BoxedSend<i32> {
    (0..ASYNC_SIZE).fold(Box::pin(pending()), |acc, _| {
        Box::pin(async move {
            let mut left = AbortOnDrop(tokio::spawn(acc));
            let mut right = AbortOnDrop(tokio::spawn(shifted(1)));
            tokio::select! {
                biased;
                won = &mut left.0 => {
                    right.0.abort();
                    let _ = (&mut right.0).await;
                    won.expect("the left task ran")
                }
                won = &mut right.0 => {
                    left.0.abort();
                    let _ = (&mut left.0).await;
                    won.expect("the right task ran")
                }
            }
        })
    })
}

// --- Both, Race (each side a task, as each side is a fiber in Spindle) ------

pub async fn both() -> i32 {
    let mut i = 0;
    while i < PAR_SIZE {
        let left = tokio::spawn(async move { i + 1 });
        let right = tokio::spawn(async move { i + 1 });
        let a = left.await.expect("the left task ran");
        let _ = right.await.expect("the right task ran");
        i = a;
    }
    i
}

pub async fn race() -> i32 {
    let mut i = 0;
    while i < PAR_SIZE {
        let mut left = AbortOnDrop(tokio::spawn(async move { i + 1 }));
        let mut right = AbortOnDrop(tokio::spawn(async move { i + 1 }));
        i = tokio::select! {
            biased;
            won = &mut left.0 => {
                right.0.abort();
                let _ = (&mut right.0).await;
                won.expect("the left task ran")
            }
            won = &mut right.0 => {
                left.0.abort();
                let _ = (&mut left.0).await;
                won.expect("the right task ran")
            }
        };
    }
    i
}

// --- Blocking ---------------------------------------------------------------

pub async fn blocking_fine() -> i32 {
    let mut n = BLOCKING_SIZE;
    loop {
        let m = tokio::task::spawn_blocking(move || n)
            .await
            .expect("the blocking task ran");
        if m > 0 {
            n = m - 1;
        } else {
            return m;
        }
    }
}

pub async fn blocking_coarse() -> i32 {
    tokio::task::spawn_blocking(|| countdown(BLOCKING_SIZE))
        .await
        .expect("the blocking task ran")
}

// --- Deferred, Ref, Queue, Mutex --------------------------------------------

fn spawn_get(rx: &watch::Receiver<bool>) -> JoinHandle<()> {
    let mut rx = rx.clone();
    tokio::spawn(async move {
        rx.wait_for(|complete| *complete)
            .await
            .map(|_| ())
            .expect("the deferred is completed while the sender lives");
    })
}

pub async fn deferred_get(count: usize) -> usize {
    let mut gets = 0;
    for _ in 0..DEFERRED_ROUNDS {
        let (tx, mut rx) = watch::channel(false);
        tx.send_replace(true);
        for _ in 0..count {
            rx.wait_for(|complete| *complete)
                .await
                .map(|_| ())
                .expect("completed");
            gets += 1;
        }
    }
    gets
}

pub async fn deferred_complete(count: usize) -> usize {
    let mut gets = 0;
    for _ in 0..DEFERRED_ROUNDS {
        let (tx, rx) = watch::channel(false);
        let getters = async {
            let handles: Vec<_> = (0..count).map(|_| spawn_get(&rx)).collect();
            let mut done = 0;
            for handle in handles {
                handle.await.expect("the getter ran");
                done += 1;
            }
            done
        };
        let complete = async {
            tx.send_replace(true);
        };
        let (done, ()) = tokio::join!(getters, complete);
        gets += done;
    }
    gets
}

pub async fn deferred_cancel(count: usize) -> usize {
    let mut cancels = 0;
    for _ in 0..DEFERRED_ROUNDS {
        let (tx, rx) = watch::channel(false);
        let handles: Vec<_> = (0..count).map(|_| spawn_get(&rx)).collect();
        for handle in handles {
            handle.abort();
            let _ = handle.await;
            cancels += 1;
        }
        drop(tx);
    }
    cancels
}

/// Both Ref rows: a `std::sync::Mutex<i64>` locked per update.
pub async fn ref_update() -> i64 {
    let cell = std::sync::Mutex::new(0i64);
    let mut acc = 0;
    for _ in 0..REF_ITERATIONS {
        let before = {
            let mut n = cell.lock().expect("not poisoned");
            let before = *n;
            *n += 1;
            before
        };
        acc += before;
    }
    acc
}

pub async fn bounded_one() -> usize {
    let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE);
    let mut done = 0;
    for _ in 0..QUEUE_SIZE {
        tx.send(()).await.expect("the receiver lives");
        rx.recv().await.expect("an element was sent");
        done += 1;
    }
    done
}

pub async fn unbounded_one() -> usize {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut done = 0;
    for _ in 0..QUEUE_SIZE {
        tx.send(()).expect("the receiver lives");
        rx.recv().await.expect("an element was sent");
        done += 1;
    }
    done
}

pub async fn bounded_many() -> usize {
    let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE);
    for _ in 0..QUEUE_SIZE {
        tx.send(()).await.expect("the receiver lives");
    }
    let mut done = 0;
    for _ in 0..QUEUE_SIZE {
        rx.recv().await.expect("an element was sent");
        done += 1;
    }
    done
}

pub async fn unbounded_many() -> usize {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    for _ in 0..QUEUE_SIZE {
        tx.send(()).expect("the receiver lives");
    }
    let mut done = 0;
    for _ in 0..QUEUE_SIZE {
        rx.recv().await.expect("an element was sent");
        done += 1;
    }
    done
}

fn par_send(tx: mpsc::Sender<()>, num: usize) -> BoxedSend<usize> {
    Box::pin(async move {
        if num <= 10 {
            for _ in 0..num {
                tx.send(()).await.expect("the receiver lives");
            }
            num
        } else {
            let left = tokio::spawn(par_send(tx.clone(), num / 2));
            let right = tokio::spawn(par_send(tx, num / 2));
            left.await.expect("the task ran") + right.await.expect("the task ran")
        }
    })
}

pub async fn bounded_contended_single_consumer() -> usize {
    let (tx, mut rx) = mpsc::channel::<()>(QUEUE_SIZE / 8);
    let taker = async move {
        let mut done = 0;
        for _ in 0..QUEUE_SIZE / 4 {
            rx.recv().await.expect("an element was sent");
            done += 1;
        }
        done
    };
    let (_, taken) = tokio::join!(par_send(tx, QUEUE_SIZE / 4), taker);
    taken
}

pub async fn mutex_happy_path(fibers: usize) -> usize {
    let m = Mutex::new(());
    let mut uses = 0;
    for _ in 0..fibers * MUTEX_ITERATIONS {
        drop(m.lock().await);
        uses += 1;
    }
    uses
}

pub async fn mutex_high_contention(fibers: usize) -> usize {
    let mut uses = 0;
    for _ in 0..MUTEX_ITERATIONS {
        let m = Arc::new(Mutex::new(()));
        let handles: Vec<_> = (0..fibers)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move { drop(m.lock().await) })
            })
            .collect();
        for handle in handles {
            handle.await.expect("the locker ran");
            uses += 1;
        }
    }
    uses
}

pub async fn mutex_cancellation(fibers: usize) -> usize {
    let mut cancels = 0;
    for _ in 0..MUTEX_ITERATIONS {
        let m = Arc::new(Mutex::new(()));
        let held = m.lock().await;
        let handles: Vec<_> = (0..fibers)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move {
                    let locker = tokio::spawn(async move { drop(m.lock().await) });
                    yield_now().await;
                    locker.abort();
                    let _ = locker.await;
                })
            })
            .collect();
        for handle in handles {
            handle.await.expect("the canceler ran");
            cancels += 1;
        }
        drop(held);
    }
    cancels
}

// --- Sleep (on a paused clock) ----------------------------------------------

pub async fn sleep() -> i64 {
    async fn fiber(i: i32) -> i32 {
        use tokio::time::sleep;
        let mut next = i;
        loop {
            sleep(NANO).await;
            let j = delay(move || next);
            sleep(NANO).await;
            if j > SLEEP_LOOP_UNTIL {
                sleep(NANO).await;
                return j;
            }
            sleep(NANO).await;
            next = j + 1;
        }
    }
    let handles: Vec<_> = (0..SLEEP_FIBERS).map(|i| tokio::spawn(fiber(i))).collect();
    let mut sum = 0;
    for handle in handles {
        sum += i64::from(handle.await.expect("the fiber ran"));
    }
    sum
}

// --- Parallel, WorkStealing ---------------------------------------------------

pub async fn par_traverse(size: usize) -> usize {
    let handles: Vec<_> = (0..size)
        .map(|_| tokio::spawn(async move { black_box(consume_cpu(CPU_TOKENS)) }))
        .collect();
    let mut values = Vec::with_capacity(size);
    for handle in handles {
        values.push(handle.await.expect("task"));
    }
    values.len()
}

pub async fn ws_scheduling() -> i64 {
    async fn task(mut i: i64) -> i64 {
        loop {
            yield_now().await;
            let j = black_box(i);
            yield_now().await;
            if j > SCHED_LIMIT {
                yield_now().await;
                return j;
            }
            yield_now().await;
            i = j + 1;
        }
    }
    let handles: Vec<_> = (0..SCHED_FIBERS).map(|i| tokio::spawn(task(i))).collect();
    let mut sum = 0;
    for handle in handles {
        sum += handle.await.expect("task");
    }
    sum
}

pub async fn ws_alloc() -> usize {
    async fn task(mut i: usize) -> usize {
        loop {
            yield_now().await;
            let objects = allocation(i);
            yield_now().await;
            black_box(address_sum(&objects));
            drop(objects);
            if i > ALLOC_LIMIT {
                yield_now().await;
                return i;
            }
            yield_now().await;
            i += 1;
        }
    }
    let handles: Vec<_> = (0..ALLOC_FIBERS).map(|_| tokio::spawn(task(0))).collect();
    let mut sum = 0;
    for handle in handles {
        sum += handle.await.expect("task");
    }
    sum
}

/// `runnableScheduling`: each runnable a spawned task that spawns the next;
/// the latch is a counter and a `Notify`.
pub async fn ws_runnable_scheduling() -> i64 {
    fn execute(j: i64, remaining: Arc<AtomicI64>, done: Arc<Notify>) {
        tokio::spawn(async move {
            if j > SCHED_LIMIT {
                if remaining.fetch_sub(1, Relaxed) == 1 {
                    done.notify_one();
                }
            } else {
                execute(j + 1, remaining, done);
            }
        });
    }
    let remaining = Arc::new(AtomicI64::new(SCHED_FIBERS));
    let done = Arc::new(Notify::new());
    for i in 0..SCHED_FIBERS {
        execute(i, remaining.clone(), done.clone());
    }
    done.notified().await;
    SCHED_FIBERS
}

// --- tokio's runtime shapes ----------------------------------------------------

pub async fn spawn_many() -> usize {
    let handles: Vec<_> = (0..NUM_SPAWN).map(|_| tokio::spawn(async {})).collect();
    let mut joined = 0;
    for handle in handles {
        handle.await.expect("task");
        joined += 1;
    }
    joined
}

pub async fn yield_many() -> usize {
    let handles: Vec<_> = (0..YIELD_TASKS)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..NUM_YIELD {
                    yield_now().await;
                }
            })
        })
        .collect();
    let mut joined = 0;
    for handle in handles {
        handle.await.expect("task");
        joined += 1;
    }
    joined
}

pub async fn ping_pong() -> usize {
    let handles: Vec<_> = (0..NUM_PINGS)
        .map(|_| {
            tokio::spawn(async {
                let (tx1, rx1) = oneshot::channel::<()>();
                let (tx2, rx2) = oneshot::channel::<()>();
                tokio::spawn(async move {
                    rx1.await.expect("ping");
                    tx2.send(()).expect("pong receiver");
                });
                tx1.send(()).expect("ping receiver");
                rx2.await.expect("pong");
            })
        })
        .collect();
    let mut joined = 0;
    for handle in handles {
        handle.await.expect("round");
        joined += 1;
    }
    joined
}

pub async fn chained_spawn() -> usize {
    fn chain(done: oneshot::Sender<usize>, n: usize) {
        if n == 0 {
            done.send(CHAIN).expect("receiver alive");
        } else {
            tokio::spawn(async move { chain(done, n - 1) });
        }
    }
    let (tx, rx) = oneshot::channel();
    chain(tx, CHAIN);
    rx.await.expect("the chain ended")
}

/// `PingPong.queue`: two tasks pass a number back and forth through two
/// `mpsc::channel(1)`.
pub async fn ping_pong_queue() -> u32 {
    let (ping_tx, mut ping_rx) = mpsc::channel::<u32>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<u32>(1);
    let responder = tokio::spawn(async move {
        for _ in 0..ROUND_TRIPS {
            let x = ping_rx.recv().await.expect("a ping");
            pong_tx.send(x + 1).await.expect("the pinger listens");
        }
    });
    let mut n = 0;
    while n < ROUND_TRIPS {
        ping_tx.send(n).await.expect("the responder listens");
        n = pong_rx.recv().await.expect("a pong");
    }
    responder.await.expect("the responder");
    n
}

/// `PingPong.deferred`: the same two tasks, each message through a fresh
/// `oneshot` (made up front, two per round trip).
pub async fn ping_pong_deferred() -> u32 {
    let (ping_tx, ping_rx): (Vec<_>, Vec<_>) =
        (0..ROUND_TRIPS).map(|_| oneshot::channel::<u32>()).unzip();
    let (pong_tx, pong_rx): (Vec<_>, Vec<_>) =
        (0..ROUND_TRIPS).map(|_| oneshot::channel::<u32>()).unzip();
    let responder = tokio::spawn(async move {
        for (rx, tx) in ping_rx.into_iter().zip(pong_tx) {
            let x = rx.await.expect("a ping");
            tx.send(x + 1).expect("the pinger listens");
        }
    });
    let mut n = 0;
    for (tx, rx) in ping_tx.into_iter().zip(pong_rx) {
        tx.send(n).expect("the responder listens");
        n = rx.await.expect("a pong");
    }
    responder.await.expect("the responder");
    n
}
