//! The runtimes of the suite and the registration of one workload on each.
//!
//! [`BenchRt`] is the one seam between a workload and an executor: a
//! workload is written once against it ([`Workload::run`] is generic over
//! `R: BenchRt`), and [`Group::spindle_all`] monomorphizes it for
//! exec-single, exec-wstp, exec-batching and exec-tokio (static dispatch:
//! no `dyn`, no branch on the executor inside the measured loop). Running
//! a program is io-core's `IORuntime::block_on`, the one shape of every
//! executor; `BenchRt` adds only the benchmark's name for the executor and
//! how the suite builds it.
//!
//! Each runtime (and each tokio reference runtime) is built lazily, inside
//! its criterion function, the first time criterion calls it, then runs the
//! workload once and checks the result before anything is measured; it is
//! dropped when its function is done. So a benchmark that the command
//! line's filter skips builds nothing and runs nothing, and no idle worker
//! pool shares the machine with the runtime being measured.

use std::fmt::Debug;
use std::future::Future;
use std::hint::black_box;

use benches::succeeded;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use spindle_core::{IO, IORuntime};
use spindle_exec_batching::EventLoop;
use spindle_exec_single::{SingleThreaded, StdClock};
use tokio::runtime::Runtime as Tokio;

/// Worker threads of exec-wstp, of exec-tokio's owned multi-thread
/// runtime and of tokio's multi-thread runtime.
pub const WORKERS: usize = 2;

/// An executor the suite measures: its name, how the suite builds one, and
/// (provided, through `IORuntime::block_on`) how a program runs on it to
/// its value (a failed, canceled or panicked program is a bug of the
/// benchmark and panics).
pub trait BenchRt: IORuntime {
    /// The runtime part of the benchmark id (`single`, `wstp`, `batching`,
    /// `spindle_tokio`).
    const NAME: &'static str;
    /// Whether it runs fibers on more than one thread (the WorkStealing
    /// workloads are registered only on those).
    const MULTI_THREADED: bool;
    /// A fresh runtime.
    fn new() -> Self;
    /// Runs `io` as the main fiber and returns its value.
    #[inline]
    fn run<A: Send + 'static, E: Send + 'static + Debug>(&mut self, io: IO<A, E>) -> A {
        match self.block_on(io) {
            Ok(outcome) => succeeded(outcome),
            Err(e) => panic!("{} block_on: {e}", Self::NAME),
        }
    }
}

impl BenchRt for SingleThreaded<StdClock> {
    const NAME: &'static str = "single";
    const MULTI_THREADED: bool = false;
    fn new() -> Self {
        SingleThreaded::new().expect("exec-single executor")
    }
}

impl BenchRt for spindle_exec_wstp::Runtime {
    const NAME: &'static str = "wstp";
    const MULTI_THREADED: bool = true;
    fn new() -> Self {
        spindle_exec_wstp::Runtime::builder()
            .worker_threads(WORKERS)
            .build()
            .expect("exec-wstp runtime")
    }
}

impl BenchRt for EventLoop {
    const NAME: &'static str = "batching";
    const MULTI_THREADED: bool = false;
    fn new() -> Self {
        EventLoop::new().expect("exec-batching event loop")
    }
}

/// exec-tokio on an owned tokio multi-thread runtime with [`WORKERS`]
/// workers: Spindle's fibers as tokio tasks, beside `tokio_mt` (the same
/// tokio runtime running plain futures) and `wstp` (the same fibers on
/// Spindle's own pool).
impl BenchRt for spindle_exec_tokio::TokioExecutor {
    const NAME: &'static str = "spindle_tokio";
    const MULTI_THREADED: bool = true;
    fn new() -> Self {
        spindle_exec_tokio::TokioExecutor::builder()
            .multi_thread(WORKERS)
            .build()
            .expect("exec-tokio executor")
    }
}

/// One operation of a benchmark, written once for every executor.
pub trait Workload {
    /// What one operation computes (checked before measuring).
    type Out: PartialEq + Debug;
    /// Runs one operation on `rt`.
    fn run<R: BenchRt>(&self, rt: &mut R) -> Self::Out;
}

/// The common case: one operation is one program, built by the closure
/// (inside the timed loop, as Cats Effect builds it inside its
/// `@Benchmark` method) and run as the main fiber.
pub struct Program<F>(pub F);

impl<F, A, E> Workload for Program<F>
where
    F: Fn() -> IO<A, E>,
    A: PartialEq + Debug + Send + 'static,
    E: Debug + Send + 'static,
{
    type Out = A;
    #[inline]
    fn run<R: BenchRt>(&self, rt: &mut R) -> A {
        rt.run((self.0)())
    }
}

/// tokio's current-thread runtime: the reference of the single-threaded
/// executors (`tokio`).
pub fn tokio_current() -> Tokio {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime")
}

/// tokio's multi-thread runtime with [`WORKERS`] workers (`tokio_mt`).
pub fn tokio_multi() -> Tokio {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .expect("tokio multi-thread runtime")
}

/// A current-thread runtime whose clock is paused (SleepBenchmark's
/// reference; see the suite's header).
pub fn tokio_paused_clock() -> Tokio {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("tokio current-thread runtime with a paused clock")
}

/// Runs `fut` as a task on one of tokio's workers and waits for it (on the
/// multi-thread runtime, `block_on` alone would poll it on the calling
/// thread, outside the pool).
pub fn on_worker<T: Send + 'static>(
    rt: &Tokio,
    fut: impl Future<Output = T> + Send + 'static,
) -> T {
    rt.block_on(rt.spawn(fut)).expect("tokio task")
}

/// One criterion group `suite.<Workload>.<variant>` at one size.
pub struct Group<'a> {
    group: BenchmarkGroup<'a, WallTime>,
    name: String,
    size: u64,
}

impl<'a> Group<'a> {
    /// The group `suite.<workload>.<variant>`, whose functions are
    /// `<runtime>/<size>`, each declaring `elements` per operation.
    pub fn new(
        c: &'a mut Criterion,
        workload: &str,
        variant: &str,
        size: u64,
        elements: u64,
    ) -> Self {
        let name = format!("suite.{workload}.{variant}");
        let mut group = c.benchmark_group(&name);
        group.throughput(Throughput::Elements(elements));
        Group { group, name, size }
    }

    /// For operations of a large fraction of a second: criterion's minimum
    /// of 10 samples, each one operation per iteration count step (flat).
    pub fn long(mut self) -> Self {
        self.group.sample_size(10);
        self.group.sampling_mode(SamplingMode::Flat);
        self
    }

    /// Registers `workload` on the executor `R`, as `R::NAME/<size>`.
    pub fn spindle<R: BenchRt, W: Workload>(&mut self, workload: &W, expected: &W::Out) {
        let name = &self.name;
        let mut rt: Option<R> = None;
        self.group
            .bench_function(BenchmarkId::new(R::NAME, self.size), |b| {
                let rt = rt.get_or_insert_with(|| {
                    let mut rt = R::new();
                    assert_eq!(
                        &workload.run(&mut rt),
                        expected,
                        "{name}: {} result",
                        R::NAME
                    );
                    rt
                });
                b.iter(|| black_box(workload.run(rt)));
            });
    }

    /// Registers `workload` on the four Spindle executors: `single`,
    /// `wstp` (2 workers), `batching` and `spindle_tokio` (2 workers).
    pub fn spindle_all<W: Workload>(&mut self, workload: W, expected: W::Out) -> &mut Self {
        self.spindle::<SingleThreaded<StdClock>, W>(&workload, &expected);
        self.spindle::<spindle_exec_wstp::Runtime, W>(&workload, &expected);
        self.spindle::<EventLoop, W>(&workload, &expected);
        self.spindle::<spindle_exec_tokio::TokioExecutor, W>(&workload, &expected);
        self
    }

    /// Registers a tokio reference as `<runtime>/<size>` on the runtime
    /// `build` makes; `run` runs one operation on it.
    pub fn tokio_on<T: PartialEq + Debug>(
        &mut self,
        runtime: &str,
        build: fn() -> Tokio,
        expected: T,
        mut run: impl FnMut(&Tokio) -> T,
    ) -> &mut Self {
        let name = &self.name;
        let mut rt: Option<Tokio> = None;
        self.group
            .bench_function(BenchmarkId::new(runtime, self.size), |b| {
                let rt = rt.get_or_insert_with(|| {
                    let rt = build();
                    assert_eq!(run(&rt), expected, "{name}: {runtime} result");
                    rt
                });
                b.iter(|| black_box(run(rt)));
            });
        self
    }

    /// The reference on tokio's current-thread runtime (`tokio/<size>`):
    /// `fut()` run with `block_on`.
    pub fn tokio<T, F>(&mut self, expected: T, fut: impl Fn() -> F) -> &mut Self
    where
        T: PartialEq + Debug,
        F: Future<Output = T>,
    {
        self.tokio_on("tokio", tokio_current, expected, |rt| rt.block_on(fut()))
    }

    /// The reference on tokio's multi-thread runtime, 2 workers
    /// (`tokio_mt/<size>`): `fut()` run as a task on a worker.
    pub fn tokio_mt<T, F>(&mut self, expected: T, fut: impl Fn() -> F) -> &mut Self
    where
        T: PartialEq + Debug + Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        self.tokio_on("tokio_mt", tokio_multi, expected, |rt| on_worker(rt, fut()))
    }
}
