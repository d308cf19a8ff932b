//! Callgrind harness: the exec-single run-loop workloads, 10,000 steps each.
//!
//! ```text
//! cargo build --release -p benches --example prof
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*prof*run_workload*' \
//!     target/release/examples/prof shallow_pure [batching|wstp|tokio|tokio_current]
//! ```
//!
//! The second argument picks the executor: exec-single without one,
//! `batching`, `wstp`, or exec-tokio on an owned runtime: `tokio` (the
//! multi-thread runtime with 2 workers, as the suite's `spindle_tokio`) or
//! `tokio_current` (the current-thread one). A workload named `tokio_...`
//! is a plain tokio reference (see `run_tokio`), on the current-thread
//! runtime, or with the second argument `mt` on the multi-thread one with
//! 2 workers, as a task on a worker (the suite's `tokio_mt`).
//! `<executor>_block_on` (`single`, `wstp`, `exec_tokio`,
//! `exec_tokio_current`) runs `N` `block_on`s of a one-map program, and
//! `tokio_block_on` `N` of tokio's own `block_on` of a ready future.
//!
//! exec-tokio and tokio's multi-thread runtime run their tasks on threads
//! other than the one in `run_workload`: to count those instructions too,
//! add `--toggle-collect='*blocking*pool*Inner*run*'` (tokio's workers)
//! and `--toggle-collect='*start_current_thread*'` (exec-tokio's
//! current-thread driver); idle workers' searches are then counted too.
//!
//! `prof W [EXECUTOR] RUNS` runs the workload `RUNS` times and prints the
//! median wall time of one run.
//!
//! The executors read the tracing mode from `SPINDLE_TRACING` (`from_env`).
//!
//! Each workload runs twice in `run_workload` (instructions are counted
//! inside it only, so process start-up is left out). BENCHMARKS.md has
//! the current counts; `benches/HISTORY.md` the earlier ones.

use std::hint::black_box;

use spindle_core::{IO, IOLocal, IORuntime};
use spindle_exec_single::SingleThreaded;

/// The executor-specific lines, as macros so that the same workloads build
/// against older revisions of the API for before/after comparisons.
macro_rules! CALLBACK { ($($t:tt)*) => { IO::from_callback($($t)*) } }
macro_rules! NEW_BATCHING {
    () => {
        spindle_exec_batching::EventLoop::new().expect("an event loop")
    };
}
macro_rules! NEW_RT {
    () => {
        SingleThreaded::<spindle_exec_single::StdClock>::from_env().expect("an executor")
    };
}
macro_rules! BLOCK_ON {
    ($rt:expr, $io:expr) => {{ $rt.block_on($io).expect("runs") }};
}

const N: i32 = 10_000;

type P = IO<i32, i32>;

fn shallow_pure() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::pure(i + 1).flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    IO::pure(0).flat_map(go)
}

fn shallow_delay() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::delay(move || i + 1).flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    IO::pure(0).flat_map(go)
}

/// The local of `local_get` and `local_set` (one, so that building a step
/// clones nothing but what `get` and `set` do).
static LOCAL: std::sync::LazyLock<IOLocal<i32>> = std::sync::LazyLock::new(|| IOLocal::new(0));

/// Steps `i..N`, each an `IOLocal` read (`get` then a bind): the loop of
/// `local_get` and `local_get_held`.
fn get_steps(i: i32) -> P {
    if i < N {
        LOCAL.get().flat_map(move |v| {
            black_box(v);
            get_steps(i + 1)
        })
    } else {
        IO::pure(i)
    }
}

/// `shallow_delay`'s shape with an `IOLocal` read per step (`get` then a
/// bind), against which a step's cost is read: "a get costs at most one
/// bind".
fn local_get() -> P {
    get_steps(0)
}

/// `local_get`'s shape with a plain value in place of the `get` (a bind
/// whose continuation captures the step number and calls the next step,
/// as `local_get`'s does): the control against which a `get`'s own cost
/// is read in the same shape.
fn bind_capture() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::pure(black_box(0)).flat_map(move |v: i32| {
                black_box(v);
                go(i + 1)
            })
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `local_get` in a fiber that holds a value of the local (set once
/// before the loop): each `get` finds it in the fiber's map and clones it
/// out, where `local_get` reads the default.
fn local_get_held() -> P {
    LOCAL.set(1).flat_map(|()| get_steps(0))
}

/// `local_get`'s shape with an `IOLocal` set per step.
fn local_set() -> P {
    fn go(i: i32) -> P {
        if i < N {
            LOCAL.set(i).flat_map(move |()| go(i + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn deep_pure() -> P {
    fn go(i: i32) -> P {
        IO::pure(i).flat_map(|j| if j > N { IO::pure(j) } else { go(j + 1) })
    }
    go(0)
}

fn block_pure() -> P {
    IO::block(async {
        let mut i = 0;
        while i < N {
            i = IO::<i32, i32>::pure(i + 1).await?;
        }
        Ok(i)
    })
}

fn block_ready() -> P {
    IO::block(async {
        let mut i = 0;
        while i < N {
            i = black_box(core::future::ready(i + 1)).await;
        }
        Ok(i)
    })
}

fn block_delay() -> P {
    IO::block(async {
        let mut i = 0;
        while i < N {
            i = IO::<i32, i32>::delay(move || i + 1).await?;
        }
        Ok(i)
    })
}

fn deep_block_nested() -> P {
    fn go(i: i32) -> P {
        IO::block(async move {
            let j = IO::<i32, i32>::pure(i).await?;
            if j > N { Ok(j) } else { go(j + 1).await }
        })
    }
    go(0)
}

fn deep_block_tail() -> P {
    fn go(i: i32) -> P {
        IO::block(async move {
            let j = IO::<i32, i32>::pure(i).await?;
            Ok(if j > N { IO::pure(j) } else { go(j + 1) })
        })
        .flatten()
    }
    go(0)
}

fn map_calls() -> P {
    (0..N).fold(IO::pure(0), |io, _| io.map(|x| x + 1))
}

fn attempt_happy() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::pure(i).attempt().flat_map(|r| go(r.unwrap_or(0) + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn handle_error_happy() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::pure(i + 1)
                .handle_error_with(|_| IO::pure(0))
                .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn attempt_error() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::raise_error(i).attempt().flat_map(|r| match r {
                Ok(v) | Err(v) => go(v + 1),
            })
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// The suite's `Attempt.errorRaised`: a two-word error raised, a bind it
/// skips, `attempt`, and the bind of the loop.
fn attempt_error_bind() -> P {
    fn go(i: i32) -> IO<i32, &'static str> {
        if i < N {
            IO::<i32, &'static str>::raise_error("dummy")
                .flat_map(|x| IO::pure(x + 1))
                .attempt()
                .flat_map(move |r| match r {
                    Err(_) => go(i + 1),
                    Ok(x) => IO::pure(x),
                })
        } else {
            IO::pure(i)
        }
    }
    go(0).map_err(|e| e.len() as i32)
}

fn shallow_async() -> P {
    fn go(i: i32) -> P {
        if i < N {
            CALLBACK!(move |cb| {
                cb.succeed(i + 1);
                None
            })
            .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    IO::pure(0).flat_map(go)
}

fn start_join() -> P {
    fn go(i: i32) -> P {
        if i < N / 10 {
            P::pure(i + 1)
                .start()
                .flat_map(|h| h.join())
                .flat_map(|o| go(o.succeeded().unwrap_or(0)))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `race_all` of `width` programs: one that wins at once, the others
/// `never` (canceled), `N / 10` times (compare with `race`, width 2).
fn race_all(width: usize) -> P {
    fn go(i: i32, width: usize) -> P {
        if i < N / 10 {
            let mut programs = vec![P::pure(i + 1)];
            programs.extend((1..width).map(|_| P::never()));
            IO::race_all(programs).flat_map(move |v| go(v, width))
        } else {
            IO::pure(i)
        }
    }
    go(0, width)
}

/// `N` reads of a memoized value (evaluated by the first read).
fn memoize_get() -> P {
    P::delay(|| 1)
        .memoize()
        .flat_map(|memo| steps(move |i| memo.get().map(move |one| i + one - 1)))
}

fn timeout() -> P {
    fn go(i: i32) -> P {
        if i < N / 10 {
            P::pure(i + 1)
                .timeout_to(std::time::Duration::from_secs(3600), P::pure(0))
                .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// `timeout` with a body that is not a value already (a `delay`, as a
/// request handler's): the deadline is in force while the body runs.
fn timeout_delay() -> P {
    fn go(i: i32) -> P {
        if i < N / 10 {
            IO::delay(move || i + 1)
                .timeout_to(std::time::Duration::from_secs(3600), P::pure(0))
                .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// Round trips of the two ping-pong workloads.
const ROUNDS: i32 = N / 10;

fn queue_ping_pong() -> P {
    use spindle_core::Queue;
    let (ping, pong) = (
        Queue::<i32>::bounded(1).expect("capacity 1"),
        Queue::<i32>::bounded(1).expect("capacity 1"),
    );
    let (ping_rx, pong_tx) = (ping.clone(), pong.clone());
    let responder: P = IO::tail_rec(0, move |n| {
        if n == ROUNDS {
            return IO::pure(core::ops::ControlFlow::Break(n));
        }
        let pong_tx = pong_tx.clone();
        ping_rx
            .take()
            .flat_map(move |x| pong_tx.offer(x))
            .map(move |()| core::ops::ControlFlow::Continue(n + 1))
    });
    responder.start().flat_map(move |fiber| {
        let pinger: P = IO::tail_rec(0, move |n| {
            if n == ROUNDS {
                return IO::pure(core::ops::ControlFlow::Break(n));
            }
            let pong = pong.clone();
            ping.offer(n)
                .flat_map(move |()| pong.take())
                .map(move |x| core::ops::ControlFlow::Continue(x + 1))
        });
        pinger.flat_map(move |n| fiber.join().map(move |_| n))
    })
}

/// `N` steps, each `op(i)` then a bind to the next step: subtract
/// `shallow_pure` (one `pure` and one bind per step) for the cost of `op`.
fn steps(op: impl Fn(i32) -> P + Send + Sync + 'static) -> P {
    fn go(i: i32, op: std::sync::Arc<dyn Fn(i32) -> P + Send + Sync>) -> P {
        if i < N {
            op(i).flat_map(move |j| go(j + 1, op))
        } else {
            IO::pure(i)
        }
    }
    go(0, std::sync::Arc::new(op))
}

fn ref_modify() -> P {
    let r = spindle_core::Ref::new(0i32);
    steps(move |i| {
        r.modify(move |v| {
            *v += 1;
            i
        })
    })
}

fn mutex_lock() -> P {
    let m = spindle_core::Mutex::new();
    steps(move |i| m.with_lock(IO::pure(i)))
}

fn mutex_resource() -> P {
    let m = spindle_core::Mutex::new();
    steps(move |i| m.lock().use_with(move |()| IO::pure(i)))
}

/// `N` fibers that each take the lock once and cede while holding it: all
/// but the first wait (the contended path: queue, grant, hand-over).
fn mutex_contended() -> P {
    let m = spindle_core::Mutex::new();
    IO::par_sequence(
        (0..N)
            .map(|i| m.with_lock(IO::cede().map(move |()| i)))
            .collect(),
    )
    .map(|v| v.len() as i32)
}

/// `mutex_contended` through `lock().use_with`.
fn mutex_resource_contended() -> P {
    let m = spindle_core::Mutex::new();
    IO::par_sequence(
        (0..N)
            .map(|i| m.lock().use_with(move |()| IO::cede().map(move |()| i)))
            .collect(),
    )
    .map(|v| v.len() as i32)
}

/// The suite's `Mutex.cancellation` shape: a holder keeps the lock while
/// `N / 100` rounds of 100 fibers each start to wait for it and are
/// canceled (the waiting path's registration and cleanup).
fn mutex_cancellation() -> P {
    let m = spindle_core::Mutex::new();
    steps(move |i| {
        if i % 100 != 0 {
            return IO::pure(i);
        }
        let lockers = m.clone();
        m.with_lock(IO::defer(move || {
            let cancels = (0..100)
                .map(|_| {
                    lockers
                        .with_lock(IO::<(), i32>::unit())
                        .start()
                        .flat_map(|fiber| IO::cede().product_r(fiber.cancel()))
                })
                .collect();
            IO::par_sequence(cancels).map(move |_| i)
        }))
    })
}

fn deferred_get_done() -> P {
    let d = spindle_core::Deferred::<i32>::new();
    IO::defer(move || {
        let _ = d.clone();
        d.complete(0)
            .flat_map(move |_| steps(move |i| d.get().map(move |_| i)))
    })
}

fn queue_offer_take() -> P {
    let q = spindle_core::Queue::<i32>::bounded(1).expect("capacity 1");
    steps(move |i| {
        let q2 = q.clone();
        q.offer(i).flat_map(move |()| q2.take())
    })
}

/// 10,000 fibers of one `delay` each, started, then joined.
fn spawn() -> P {
    IO::traverse((0..N).collect(), |i| IO::delay(move || i).start())
        .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
        .map(|values| values.len() as i32)
}

fn cede() -> P {
    fn go(i: i32) -> P {
        if i < N {
            IO::cede().flat_map(move |_| go(i + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// exec-tokio on an owned runtime: multi-thread with 2 workers (the
/// suite's `spindle_tokio`), or current-thread.
fn new_tokio_executor(current_thread: bool) -> spindle_exec_tokio::TokioExecutor {
    use spindle_core::RuntimeBuilder;
    let builder = spindle_exec_tokio::TokioExecutor::builder().fiber_config_from_env();
    let builder = if current_thread {
        builder.current_thread()
    } else {
        builder.multi_thread(2)
    };
    builder.build().expect("exec-tokio")
}

/// The tokio counterparts, for instruction counts side by side:
/// `tokio_queue_ping_pong` (two `mpsc::channel(1)`),
/// `tokio_deferred_ping_pong` (a fresh pair of `oneshot`s and a
/// spawned responder per round, as `deferred_ping_pong`),
/// `tokio_mutex_lock` (`N` uncontended locks, as `mutex_lock`),
/// `tokio_start_join` (`N / 10` tasks spawned and awaited one after the
/// other, as `start_join`), `tokio_spawn` (`N` tasks spawned, then
/// awaited, as `spawn`), `tokio_race` and `tokio_both` (`N / 10` rounds of
/// two spawned tasks, the loser aborted or both awaited, as the suite's
/// tokio rows of Race and Both) and `tokio_block_on` (`N` `block_on`s of a
/// ready future). On the current-thread runtime, or with the second
/// argument `mt` as a task on a worker of the multi-thread runtime with 2
/// workers.
fn run_tokio(name: &str) -> i32 {
    let multi_thread = std::env::args().nth(2).as_deref() == Some("mt");
    let rt = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread().build()
    }
    .expect("a runtime");
    if name == "tokio_block_on" {
        let mut total = 0;
        for _ in 0..N {
            total += rt.block_on(async { black_box(0) + 1 });
        }
        return total;
    }
    let fut = tokio_reference(name);
    if multi_thread {
        rt.block_on(rt.spawn(fut)).expect("the task")
    } else {
        rt.block_on(fut)
    }
}

/// The future of a tokio reference (see `run_tokio`).
fn tokio_reference(
    name: &str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = i32> + Send + 'static>> {
    use tokio::sync::{mpsc, oneshot};
    /// Aborts the task when dropped (the loser of a race).
    struct AbortOnDrop(tokio::task::JoinHandle<i32>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    match name {
        "tokio_start_join" => Box::pin(async {
            let mut i = 0;
            while i < N / 10 {
                i = tokio::spawn(async move { i + 1 }).await.expect("the task");
            }
            i
        }),
        "tokio_spawn" => Box::pin(async {
            let handles: Vec<_> = (0..N)
                .map(|i| tokio::spawn(async move { black_box(i) }))
                .collect();
            let mut joined = 0;
            for handle in handles {
                handle.await.expect("the task");
                joined += 1;
            }
            joined
        }),
        "tokio_both" => Box::pin(async {
            let mut i = 0;
            while i < N / 10 {
                let left = tokio::spawn(async move { i + 1 });
                let right = tokio::spawn(async move { 1 });
                let (a, b) = (left.await.expect("left"), right.await.expect("right"));
                i = a + b - 1;
            }
            i
        }),
        "tokio_race" => Box::pin(async {
            let mut i = 0;
            while i < N / 10 {
                let mut left = AbortOnDrop(tokio::spawn(async move { i + 1 }));
                let mut right = AbortOnDrop(tokio::spawn(std::future::pending::<i32>()));
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
        }),
        "tokio_queue_ping_pong" => Box::pin(async {
            let (ping_tx, mut ping_rx) = mpsc::channel::<i32>(1);
            let (pong_tx, mut pong_rx) = mpsc::channel::<i32>(1);
            let responder = tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let x = ping_rx.recv().await.expect("a ping");
                    pong_tx.send(x).await.expect("a pinger");
                }
            });
            let mut n = 0;
            while n < ROUNDS {
                ping_tx.send(n).await.expect("a responder");
                n = pong_rx.recv().await.expect("a pong") + 1;
            }
            responder.await.expect("the responder");
            n
        }),
        "tokio_deferred_ping_pong" => Box::pin(async {
            let mut n = 0;
            while n < ROUNDS {
                let (ping_tx, ping_rx) = oneshot::channel::<i32>();
                let (pong_tx, pong_rx) = oneshot::channel::<i32>();
                tokio::spawn(async move {
                    let x = ping_rx.await.expect("a ping");
                    pong_tx.send(x + 1).expect("a pinger");
                });
                ping_tx.send(n).expect("a responder");
                n = pong_rx.await.expect("a pong");
            }
            n
        }),
        // `N` uncontended `Mutex::lock().await` and drops: the suite's
        // Mutex.happyPath reference, against `mutex_lock`/`mutex_resource`.
        "tokio_mutex_lock" => Box::pin(async {
            let m = tokio::sync::Mutex::new(());
            let mut n = 0;
            while n < N {
                drop(black_box(&m).lock().await);
                n += 1;
            }
            n
        }),
        // `N` updates of a `std::sync::Mutex` locked per update: the
        // suite's Ref reference, against `ref_modify`.
        "tokio_ref_update" => Box::pin(async {
            let cell = std::sync::Mutex::new(0i32);
            let mut acc = 0i32;
            for _ in 0..N {
                let before = {
                    let mut n = black_box(&cell).lock().expect("not poisoned");
                    let before = *n;
                    *n += 1;
                    before
                };
                acc = acc.wrapping_add(before);
            }
            black_box(acc);
            N
        }),
        other => panic!("unknown workload {other}"),
    }
}

#[inline(never)]
fn run_workload(name: &str) -> i32 {
    if name.starts_with("tokio_") {
        return run_tokio(name) + run_tokio(name);
    }
    if let Some(executor) = name.strip_suffix("_block_on") {
        // `N` block_ons of a one-map program, as the suite's MapCalls.one.
        let program = || IO::<i32, i32>::delay(|| 0).map(|x| x + 1);
        let mut total = 0;
        match executor {
            "wstp" => {
                let rt = spindle_exec_wstp::Runtime::new().expect("exec-wstp");
                for _ in 0..N {
                    total += BLOCK_ON!(rt, program()).succeeded().expect("a value");
                }
            }
            "single" => {
                let rt = NEW_RT!();
                for _ in 0..N {
                    total += BLOCK_ON!(rt, program()).succeeded().expect("a value");
                }
            }
            "exec_tokio" | "exec_tokio_current" => {
                let rt = new_tokio_executor(executor == "exec_tokio_current");
                for _ in 0..N {
                    total += BLOCK_ON!(rt, program()).succeeded().expect("a value");
                }
            }
            other => panic!("unknown executor {other}"),
        }
        return total;
    }
    let build: fn() -> P = match name {
        "shallow_pure" => shallow_pure,
        "shallow_delay" => shallow_delay,
        "local_get" => local_get,
        "local_set" => local_set,
        "local_get_held" => local_get_held,
        "bind_capture" => bind_capture,
        "deep_pure" => deep_pure,
        "map_calls" => map_calls,
        "block_pure" => block_pure,
        "block_delay" => block_delay,
        "block_ready" => block_ready,
        "deep_block_nested" => deep_block_nested,
        "deep_block_tail" => deep_block_tail,
        "attempt_happy" => attempt_happy,
        "handle_error_happy" => handle_error_happy,
        "attempt_error" => attempt_error,
        "attempt_error_bind" => attempt_error_bind,
        "shallow_async" => shallow_async,
        "start_join" => start_join,
        "cede" => cede,
        "spawn" => spawn,
        "race" => benches::fiber_loops::race::<{ N / 10 }>,
        "both" => benches::fiber_loops::both::<{ N / 10 }>,
        "race_all2" => || race_all(2),
        "race_all3" => || race_all(3),
        "memoize_get" => memoize_get,
        "timeout" => timeout,
        "timeout_delay" => timeout_delay,
        "queue_ping_pong" => queue_ping_pong,
        "deferred_ping_pong" => benches::fiber_loops::deferred_ping_pong::<ROUNDS>,
        "ref_modify" => ref_modify,
        "mutex_lock" => mutex_lock,
        "mutex_resource" => mutex_resource,
        "mutex_contended" => mutex_contended,
        "mutex_cancellation" => mutex_cancellation,
        "mutex_resource_contended" => mutex_resource_contended,
        "deferred_get_done" => deferred_get_done,
        "queue_offer_take" => queue_offer_take,
        "steps_pure" => || steps(IO::pure),
        other => panic!("unknown workload {other}"),
    };
    let second = std::env::args().nth(2);
    let batching = second.as_deref() == Some("batching");
    let wstp = second.as_deref() == Some("wstp");
    let exec_tokio = match second.as_deref() {
        Some("tokio") => Some(false),
        Some("tokio_current") => Some(true),
        _ => None,
    };
    let mut total = 0;
    for _ in 0..2 {
        total += if let Some(current_thread) = exec_tokio {
            let rt = new_tokio_executor(current_thread);
            BLOCK_ON!(rt, build())
        } else if batching {
            let rt = NEW_BATCHING!();
            BLOCK_ON!(rt, build())
        } else if wstp {
            let rt = spindle_exec_wstp::Runtime::from_env().expect("exec-wstp");
            BLOCK_ON!(rt, build())
        } else {
            let rt = NEW_RT!();
            BLOCK_ON!(rt, build())
        }
        .succeeded()
        .expect("a value");
    }
    total
}

fn main() {
    #[cfg(feature = "observe")]
    if std::env::var_os("SPINDLE_PROF_OBSERVE").is_some_and(|v| v == "1") {
        spindle_tracing::install().expect("the only fiber observer");
    }
    let name = std::env::args().nth(1).expect("a workload name");
    // `prof W N`: run the workload N times and print the median wall time
    // of one run (a quick check beside callgrind's counts; the criterion
    // suite is the measurement).
    // The run count is the last argument, after the executor if any.
    let runs = std::env::args()
        .skip(2)
        .last()
        .and_then(|n| n.parse::<usize>().ok());
    match runs {
        None => println!("{name}: {}", black_box(run_workload(&name))),
        Some(runs) => {
            let mut times: Vec<u128> = (0..runs)
                .map(|_| {
                    let start = std::time::Instant::now();
                    black_box(run_workload(&name));
                    start.elapsed().as_nanos()
                })
                .collect();
            times.sort_unstable();
            println!("{name}: median {} ns over {runs} runs", times[runs / 2]);
        }
    }
}
