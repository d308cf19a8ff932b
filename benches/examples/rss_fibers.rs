//! Peak memory of suspended fibers: exec-wstp against tokio's multi-thread
//! runtime (2 workers each), in bytes per fiber (task).
//!
//! ```text
//! cargo run --release -p benches --example rss_fibers -- spindle gate
//! cargo run --release -p benches --example rss_fibers -- tokio gate [N]
//! ```
//!
//! The calling thread starts `N` (default 1,000,000) fibers from outside the
//! pool (`rt.spawn`), each of which bumps a counter and then suspends; once
//! every one has, it reads `VmRSS` and `VmHWM` from `/proc/self/status`
//! and prints their growth over the baseline (read after the runtime has
//! started), divided by `N`. Then it releases them (where the mode allows)
//! and waits for all to end. One runtime per process, so that each number
//! starts from a fresh heap.
//!
//! Modes (how each fiber waits):
//!
//! * `gate`: on one shared gate. Spindle: `Deferred::get` on one
//!   `Deferred<()>` (each waiter is an entry in the deferred's waiter map
//!   and a boxed callback); tokio: `Notify::notified` on one shared
//!   `Notify` (an intrusive waiter inside the task). Released at the end.
//! * `own`: on a signal of its own, whose sending side the calling thread
//!   keeps in a `Vec`. Spindle: one `Deferred<()>` per fiber; tokio: one
//!   `oneshot` channel per task. Released at the end.
//! * `never`: forever. Spindle: `IO::never()`; tokio:
//!   `std::future::pending()`. The calling thread keeps every handle
//!   (`FiberHandle`, 16 bytes; `JoinHandle`, 8 bytes), since a Spindle
//!   fiber suspended in `never` with no handle left is freed at once;
//!   the bytes of that `Vec` are included in the numbers and also printed.
//! * `sleep`: a one-hour sleep (a timer entry). Not released: the runtime
//!   is dropped with them.
//!
//! The glibc allocator's per-thread arenas and its thresholds make RSS a
//! coarse measure; run each mode a few times and read the spread.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use spindle_core::{Deferred, FiberHandle, IO};

type Io<A> = IO<A, Infallible>;

const WORKERS: usize = 2;
const DEFAULT_FIBERS: usize = 1_000_000;
const SLEEP: Duration = Duration::from_secs(3600);
/// How long `wait_for` waits after the counter is reached.
const SETTLE: Duration = Duration::from_millis(200);

/// `VmRSS` and `VmHWM` of this process, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Waits until `counter` reaches `n`, then a little longer (the last
/// fibers bump the counter just before they suspend).
fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Relaxed) < n {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(SETTLE);
}

struct Report {
    side: &'static str,
    mode: String,
    fibers: usize,
    baseline: (u64, u64),
    suspended: (u64, u64),
    kept_bytes: usize,
    spawn_time: Duration,
    release_time: Option<Duration>,
}

impl Report {
    fn print(&self) {
        let n = self.fibers as f64;
        let rss = self.suspended.0.saturating_sub(self.baseline.0) as f64;
        let hwm = self.suspended.1.saturating_sub(self.baseline.0) as f64;
        println!(
            "{} {} fibers={} baseline_rss={} KiB rss={} KiB hwm={} KiB",
            self.side,
            self.mode,
            self.fibers,
            self.baseline.0 / 1024,
            self.suspended.0 / 1024,
            self.suspended.1 / 1024,
        );
        println!(
            "  per fiber: rss_delta={:.0} B  hwm_delta={:.0} B  (of which kept by the caller: {:.0} B)",
            rss / n,
            hwm / n,
            self.kept_bytes as f64 / n,
        );
        print!(
            "  spawn+suspend: {:.0} ms",
            self.spawn_time.as_secs_f64() * 1e3
        );
        if let Some(release) = self.release_time {
            print!("  release+end: {:.0} ms", release.as_secs_f64() * 1e3);
        }
        println!();
    }
}

/// What the calling thread keeps to release Spindle's fibers later.
enum SpindleRelease {
    Gate(Deferred<()>),
    Own(Vec<Deferred<()>>),
    Handles(
        #[allow(dead_code, reason = "kept alive, then dropped")] Vec<FiberHandle<(), Infallible>>,
    ),
    Nothing,
}

fn spindle(mode: &str, n: usize) -> Report {
    let rt = spindle_exec_wstp::Runtime::builder()
        .worker_threads(WORKERS)
        .build()
        .expect("exec-wstp runtime");
    // Starts the workers' loops (and their thread-locals) before the baseline.
    assert!(rt.block_on(Io::<()>::unit()).is_ok());
    let baseline = memory();
    let suspended_count = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let bump = |counter: &Arc<AtomicUsize>| {
        let counter = counter.clone();
        Io::<()>::delay(move || {
            counter.fetch_add(1, Relaxed);
        })
    };
    let started = Instant::now();
    let mut kept_bytes = 0;
    let release = match mode {
        "gate" => {
            let gate = Deferred::<()>::new();
            for _ in 0..n {
                let fiber = bump(&suspended_count)
                    .product_r(gate.get())
                    .product_r(bump(&ended));
                drop(rt.spawn(fiber).expect("spawn"));
            }
            SpindleRelease::Gate(gate)
        }
        "own" => {
            let mut signals = Vec::with_capacity(n);
            for _ in 0..n {
                let signal = Deferred::<()>::new();
                let fiber = bump(&suspended_count)
                    .product_r(signal.get())
                    .product_r(bump(&ended));
                drop(rt.spawn(fiber).expect("spawn"));
                signals.push(signal);
            }
            kept_bytes = signals.capacity() * size_of::<Deferred<()>>();
            SpindleRelease::Own(signals)
        }
        "never" => {
            let mut handles = Vec::with_capacity(n);
            for _ in 0..n {
                let fiber = bump(&suspended_count).product_r(Io::<()>::never());
                handles.push(rt.spawn(fiber).expect("spawn"));
            }
            kept_bytes = handles.capacity() * size_of::<FiberHandle<(), Infallible>>();
            SpindleRelease::Handles(handles)
        }
        "sleep" => {
            for _ in 0..n {
                let fiber = bump(&suspended_count).product_r(Io::<()>::sleep(SLEEP));
                drop(rt.spawn(fiber).expect("spawn"));
            }
            SpindleRelease::Nothing
        }
        other => panic!("unknown mode {other:?} (gate, own, never, sleep)"),
    };
    wait_for(&suspended_count, n);
    let spawn_time = started.elapsed() - SETTLE;
    let suspended = memory();
    let t = Instant::now();
    let release_time = match release {
        SpindleRelease::Gate(gate) => {
            assert!(rt.block_on(gate.complete::<Infallible>(())).is_ok());
            wait_for(&ended, n);
            Some(t.elapsed() - SETTLE)
        }
        SpindleRelease::Own(signals) => {
            let all = IO::traverse(signals, |s| s.complete::<Infallible>(()));
            assert!(rt.block_on(all).is_ok());
            wait_for(&ended, n);
            Some(t.elapsed() - SETTLE)
        }
        SpindleRelease::Handles(_) | SpindleRelease::Nothing => None,
    };
    Report {
        side: "spindle",
        mode: mode.to_owned(),
        fibers: n,
        baseline,
        suspended,
        kept_bytes,
        spawn_time,
        release_time,
    }
}

/// What the calling thread keeps to release tokio's tasks later.
enum TokioRelease {
    Gate(Arc<tokio::sync::Notify>),
    Own(Vec<tokio::sync::oneshot::Sender<()>>),
    Handles(
        #[allow(dead_code, reason = "kept alive, then dropped")] Vec<tokio::task::JoinHandle<()>>,
    ),
    Nothing,
}

fn tokio(mode: &str, n: usize) -> Report {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_time()
        .build()
        .expect("tokio multi-thread runtime");
    rt.block_on(rt.spawn(async {})).expect("task");
    let baseline = memory();
    let suspended_count = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut kept_bytes = 0;
    let release = match mode {
        "gate" => {
            let gate = Arc::new(tokio::sync::Notify::new());
            for _ in 0..n {
                let (gate, suspended_count, ended) =
                    (gate.clone(), suspended_count.clone(), ended.clone());
                rt.spawn(async move {
                    let notified = gate.notified();
                    tokio::pin!(notified);
                    // Registered before the count, so that `notify_waiters`
                    // wakes every task counted.
                    notified.as_mut().enable();
                    suspended_count.fetch_add(1, Relaxed);
                    notified.await;
                    ended.fetch_add(1, Relaxed);
                });
            }
            TokioRelease::Gate(gate)
        }
        "own" => {
            let mut senders = Vec::with_capacity(n);
            for _ in 0..n {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let (suspended_count, ended) = (suspended_count.clone(), ended.clone());
                rt.spawn(async move {
                    suspended_count.fetch_add(1, Relaxed);
                    rx.await.expect("sender kept");
                    ended.fetch_add(1, Relaxed);
                });
                senders.push(tx);
            }
            kept_bytes = senders.capacity() * size_of::<tokio::sync::oneshot::Sender<()>>();
            TokioRelease::Own(senders)
        }
        "never" => {
            let mut handles = Vec::with_capacity(n);
            for _ in 0..n {
                let suspended_count = suspended_count.clone();
                handles.push(rt.spawn(async move {
                    suspended_count.fetch_add(1, Relaxed);
                    std::future::pending::<()>().await;
                }));
            }
            kept_bytes = handles.capacity() * size_of::<tokio::task::JoinHandle<()>>();
            TokioRelease::Handles(handles)
        }
        "sleep" => {
            for _ in 0..n {
                let suspended_count = suspended_count.clone();
                rt.spawn(async move {
                    suspended_count.fetch_add(1, Relaxed);
                    tokio::time::sleep(SLEEP).await;
                });
            }
            TokioRelease::Nothing
        }
        other => panic!("unknown mode {other:?} (gate, own, never, sleep)"),
    };
    wait_for(&suspended_count, n);
    let spawn_time = started.elapsed() - SETTLE;
    let suspended = memory();
    let t = Instant::now();
    let release_time = match release {
        TokioRelease::Gate(gate) => {
            gate.notify_waiters();
            wait_for(&ended, n);
            Some(t.elapsed() - SETTLE)
        }
        TokioRelease::Own(senders) => {
            for tx in senders {
                tx.send(()).expect("receiver alive");
            }
            wait_for(&ended, n);
            Some(t.elapsed() - SETTLE)
        }
        TokioRelease::Handles(_) | TokioRelease::Nothing => None,
    };
    Report {
        side: "tokio",
        mode: mode.to_owned(),
        fibers: n,
        baseline,
        suspended,
        kept_bytes,
        spawn_time,
        release_time,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let side = args.first().map(String::as_str).unwrap_or("spindle");
    let mode = args.get(1).map(String::as_str).unwrap_or("gate");
    let n = args
        .get(2)
        .map(|s| s.parse::<usize>().expect("N: a number of fibers"))
        .unwrap_or(DEFAULT_FIBERS);
    let report = match side {
        "spindle" => spindle(mode, n),
        "tokio" => tokio(mode, n),
        other => panic!("unknown side {other:?} (spindle, tokio)"),
    };
    report.print();
}
