//! Tracing overhead: the bind and async workloads of the suite under each
//! tracing mode, on exec-single (one thread, so the numbers are the
//! run-loop's own).
//!
//! Three builds of this file: without the `tracing` feature (compiled
//! out), with it (the run-time modes `none` and `cached`), and with
//! `tracing-full` (mode `full`, whose feature also adds a check where
//! programs are built). `benches/tracing_overhead.sh` builds and runs all
//! three, alternately, and prints the matrix with the ratios to compiled
//! out.
//!
//! Workloads (one operation = one program of [`SIZE`] or [`ASYNC_SIZE`]
//! steps, built inside the timed closure):
//!
//! * `shallow_bind`, `deep_bind`: Cats Effect's ShallowBind/DeepBind with
//!   `pure` (`benches::bind_loops`): one `flat_map` event per step.
//! * `delay_bind`: ShallowBind with `delay`: two events per step (`delay`,
//!   `flat_map`).
//! * `async`: AsyncBenchmark's `async` (a callback completed during
//!   registration): `async` and `flat_map` events per step.
//! * `map_calls`: a chain of [`SIZE`] `map`s built ahead, then run: one
//!   `map` event per step.
//! * `attempt`: `pure(i).attempt().flat_map(..)`: `attempt` and `flat_map`
//!   events per step.
//! * `start_join`: [`START_JOIN`] rounds of starting a fiber of one
//!   `delay` and joining it: the parent records `start`, `flat_map` and
//!   the join's events, the child its `delay`, and every child is a fiber
//!   that traces (its ring, its registration for dumps).
//! * `cede`: [`CEDES`] `cede`s, each a new run of the fiber: `cede` and
//!   `flat_map` events per step, and the ring's per-run bracket.
//! * `spawn`: the main fiber starts [`SPAWN`] fibers of one `delay` each,
//!   then joins them all (one step per fiber).
//! * `bind_capture`: `pure(0).flat_map(..)` whose continuation captures the
//!   step number: the shape of the two `IOLocal` rows, with a plain value.
//! * `local_get`, `local_set`: that shape with an `IOLocal` `get` (of the
//!   default) or `set` in place of the `pure`: read against
//!   `bind_capture`, a step's extra time is what the operation costs
//!   beyond a bind's `pure` ("a `get` or `set` costs at most one bind").
//!   `benches/examples/prof.rs` has the same loops for callgrind, kept in
//!   that file so that it builds alone against older revisions.
//!
//! Full mode also captures a backtrace where each traced node is built: it
//! is reported, not held to a budget (it is a debugging mode, as in Cats
//! Effect).

use core::convert::Infallible;

use benches::{ASYNC_SIZE, SIZE, bind_loops, succeeded};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use spindle_core::{FiberConfig, IO, IOLocal, IORuntime, RuntimeBuilder, TracingMode};
use spindle_exec_single::SingleThreaded;

type Io<A> = IO<A, Infallible>;

/// A workload: its name, how to build one operation's program, its steps.
type Workload = (&'static str, fn() -> Io<i32>, i32);

/// Rounds of `start_join`.
const START_JOIN: i32 = 1_000;
/// Steps of `cede`.
const CEDES: i32 = 1_000;
/// Fibers of `spawn`.
const SPAWN: i32 = 10_000;

fn map_calls() -> Io<i32> {
    (0..SIZE).fold(IO::pure(0), |io, _| io.map(|x| x + 1))
}

fn attempt() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < SIZE {
            IO::pure(i).attempt().flat_map(|r| go(r.unwrap_or(0) + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn start_join() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < START_JOIN {
            IO::delay(move || i + 1)
                .start()
                .flat_map(|h| h.join_with_never())
                .flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn cede() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < CEDES {
            IO::cede().flat_map(move |()| go(i + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn spawn() -> Io<i32> {
    IO::traverse((0..SPAWN).collect(), |i| IO::delay(move || i).start())
        .flat_map(|handles| IO::traverse(handles, |h| h.join_with_never()))
        .map(|values| values.len() as i32)
}

fn delay_bind() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < SIZE {
            IO::delay(move || i + 1).flat_map(go)
        } else {
            IO::pure(i)
        }
    }
    IO::pure(0).flat_map(go)
}

fn async_chain() -> Io<i32> {
    fn eval_async(n: i32) -> Io<i32> {
        IO::from_callback(move |cb| {
            cb.succeed(n);
            None
        })
    }
    fn go(i: i32) -> Io<i32> {
        if i < ASYNC_SIZE {
            eval_async(i + 1).flat_map(go)
        } else {
            eval_async(i)
        }
    }
    IO::delay(|| 0).flat_map(go)
}

/// The local of `local_get` and `local_set`.
static LOCAL: std::sync::LazyLock<IOLocal<i32>> = std::sync::LazyLock::new(|| IOLocal::new(0));

fn bind_capture() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < SIZE {
            IO::pure(core::hint::black_box(0)).flat_map(move |v: i32| {
                core::hint::black_box(v);
                go(i + 1)
            })
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn local_get() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < SIZE {
            LOCAL.get().flat_map(move |v| {
                core::hint::black_box(v);
                go(i + 1)
            })
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

fn local_set() -> Io<i32> {
    fn go(i: i32) -> Io<i32> {
        if i < SIZE {
            LOCAL.set(i).flat_map(move |()| go(i + 1))
        } else {
            IO::pure(i)
        }
    }
    go(0)
}

/// The variants this build measures: the run-time modes with tracing
/// compiled in, or only `compiled_out`.
fn variants() -> Vec<(&'static str, TracingMode)> {
    if cfg!(feature = "tracing-full") {
        vec![("full", TracingMode::Full)]
    } else if cfg!(feature = "tracing") {
        vec![("none", TracingMode::None), ("cached", TracingMode::Cached)]
    } else {
        vec![("compiled_out", TracingMode::None)]
    }
}

fn tracing(c: &mut Criterion) {
    let workloads: [Workload; 12] = [
        ("shallow_bind", bind_loops::shallow_pure, SIZE),
        ("deep_bind", bind_loops::deep_pure, SIZE),
        ("delay_bind", delay_bind, SIZE),
        ("async", async_chain, ASYNC_SIZE),
        ("map_calls", map_calls, SIZE),
        ("attempt", attempt, SIZE),
        ("start_join", start_join, START_JOIN),
        ("cede", cede, CEDES),
        ("spawn", spawn, SPAWN),
        ("bind_capture", bind_capture, SIZE),
        ("local_get", local_get, SIZE),
        ("local_set", local_set, SIZE),
    ];
    for (name, build, steps) in workloads {
        let mut group = c.benchmark_group(format!("Tracing/{name}"));
        group.throughput(Throughput::Elements(steps as u64));
        for (variant, mode) in variants() {
            // The configuration is built inside the benchmark's closure,
            // which criterion calls only for the benchmarks a filter keeps:
            // `tracing_overhead.sh` runs each mode in a process of its own,
            // since building a tracing configuration changes what programs
            // built afterwards keep (`spindle_trace::call_sites_for`), and full mode
            // switches on backtrace capture for the process.
            group.bench_function(variant, |b| {
                let config = FiberConfig::builder()
                    .tracing(mode)
                    .build()
                    .expect("a valid configuration");
                let rt = SingleThreaded::builder()
                    .fiber_config(config)
                    .build()
                    .expect("an executor");
                assert!(succeeded(rt.block_on(build()).expect("block_on")) >= steps);
                b.iter(|| succeeded(rt.block_on(build()).expect("block_on")))
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = tracing
}
criterion_main!(benches);
