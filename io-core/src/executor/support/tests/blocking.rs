//! The blocking pool (`blocking.rs`) with plain closures as work: the
//! bound, hand-off to idle threads, refused threads, keep-alive and
//! shutdown.

use std::boxed::Box;
use std::num::NonZeroUsize;
use std::string::String;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::executor::support::{
    BlockingCounts, BlockingPool, BlockingWork, DEFAULT_BLOCKING_KEEP_ALIVE,
};

struct Job(Box<dyn FnOnce() + Send>);

impl BlockingWork for Job {
    fn run(self) {
        (self.0)()
    }
}

fn pool(max: usize, keep_alive: Duration) -> Arc<BlockingPool<Job>> {
    Arc::new(BlockingPool::new(
        NonZeroUsize::new(max).unwrap(),
        keep_alive,
        String::from("test-blocking"),
    ))
}

/// Joins the threads `shutdown` returned (they exit once idle).
fn join(threads: Vec<JoinHandle<()>>) {
    for thread in threads {
        thread.join().unwrap();
    }
}

fn job(f: impl FnOnce() + Send + 'static) -> Job {
    Job(Box::new(f))
}

/// Waits (at most 10 s) until `done` holds.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn no_more_than_max_threads_calls_run_at_once_and_every_call_runs() {
    const CALLS: usize = if cfg!(miri) { 8 } else { 64 };
    let pool = pool(3, DEFAULT_BLOCKING_KEEP_ALIVE);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (done, finished) = mpsc::channel();
    for _ in 0..CALLS {
        let (running, most, done) = (running.clone(), most.clone(), done.clone());
        BlockingPool::spawn(
            &pool,
            job(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Stay until the pool was full once, whatever the
                // machine's load (or Miri's scheduling).
                assert!(eventually(|| most.load(Ordering::SeqCst) >= 3));
                running.fetch_sub(1, Ordering::SeqCst);
                done.send(()).unwrap();
            }),
        );
        assert!(pool.counts().threads <= 3);
    }
    for _ in 0..CALLS {
        finished.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 3);
    join(pool.shutdown());
    assert_eq!(pool.counts().threads, 0);
}

#[test]
fn a_call_the_os_refuses_a_thread_for_waits_for_the_next_call_that_starts_one() {
    let pool = pool(2, DEFAULT_BLOCKING_KEEP_ALIVE);
    pool.refuse_threads(true);
    let (sender, receiver) = mpsc::channel();
    let first = sender.clone();
    BlockingPool::spawn(&pool, job(move || first.send("first").unwrap()));
    // Not run on the caller's thread, not lost: queued, no thread.
    assert_eq!(receiver.try_recv(), Err(mpsc::TryRecvError::Empty));
    let counts = pool.counts();
    assert_eq!((counts.threads, counts.queued), (0, 1));
    pool.refuse_threads(false);
    BlockingPool::spawn(&pool, job(move || sender.send("second").unwrap()));
    let order: Vec<_> = (0..2)
        .map(|_| receiver.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    assert!(order.contains(&"first") && order.contains(&"second"));
    join(pool.shutdown());
}

#[test]
fn a_call_the_os_refuses_a_thread_for_is_run_by_a_busy_thread_once_it_is_free() {
    let pool = pool(2, DEFAULT_BLOCKING_KEEP_ALIVE);
    let (release, released) = mpsc::channel::<()>();
    let (sender, receiver) = mpsc::channel();
    let first = sender.clone();
    let (started, first_thread) = mpsc::channel();
    BlockingPool::spawn(
        &pool,
        job(move || {
            started.send(std::thread::current().id()).unwrap();
            released.recv().unwrap();
            first.send(std::thread::current().id()).unwrap();
        }),
    );
    // The one thread is busy with the first call.
    let first_thread = first_thread.recv_timeout(Duration::from_secs(10)).unwrap();
    pool.refuse_threads(true);
    BlockingPool::spawn(
        &pool,
        job(move || sender.send(std::thread::current().id()).unwrap()),
    );
    assert_eq!(pool.counts().threads, 1);
    assert_eq!(pool.counts().queued, 1);
    release.send(()).unwrap();
    let a = receiver.recv_timeout(Duration::from_secs(10)).unwrap();
    let b = receiver.recv_timeout(Duration::from_secs(10)).unwrap();
    // The one thread ran both.
    assert_eq!(a, b);
    assert_eq!(first_thread, a);
    assert_ne!(a, std::thread::current().id());
    join(pool.shutdown());
}

#[test]
fn a_call_goes_to_an_idle_thread_instead_of_starting_another() {
    let pool = pool(4, DEFAULT_BLOCKING_KEEP_ALIVE);
    let (sender, receiver) = mpsc::channel();
    for _ in 0..3 {
        let sender = sender.clone();
        BlockingPool::spawn(
            &pool,
            job(move || sender.send(std::thread::current().id()).unwrap()),
        );
        receiver.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(eventually(|| pool.counts().idle == 1));
    }
    assert_eq!(pool.counts().threads, 1);
    join(pool.shutdown());
}

#[test]
fn an_idle_thread_exits_after_the_keep_alive() {
    let pool = pool(2, Duration::from_millis(5));
    let (sender, receiver) = mpsc::channel();
    BlockingPool::spawn(&pool, job(move || sender.send(()).unwrap()));
    receiver.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(eventually(|| pool.counts().threads == 0));
    join(pool.shutdown());
}

#[test]
fn shutdown_drops_queued_calls_and_later_ones() {
    let pool = pool(1, DEFAULT_BLOCKING_KEEP_ALIVE);
    let (release, released) = mpsc::channel::<()>();
    BlockingPool::spawn(&pool, job(move || released.recv().unwrap_or(())));
    let ran = Arc::new(AtomicUsize::new(0));
    let (queued, later) = (ran.clone(), ran.clone());
    BlockingPool::spawn(
        &pool,
        job(move || {
            queued.fetch_add(1, Ordering::SeqCst);
        }),
    );
    let threads = pool.shutdown();
    BlockingPool::spawn(
        &pool,
        job(move || {
            later.fetch_add(1, Ordering::SeqCst);
        }),
    );
    // (The first call may have been dropped by the shutdown, before its
    // thread took it.)
    let _ = release.send(());
    join(threads);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(pool.counts(), BlockingCounts::default());
}
