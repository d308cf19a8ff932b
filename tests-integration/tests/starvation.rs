//! The starvation watchdog on every executor: a fiber that keeps its
//! thread busy without yielding for longer than the threshold is reported
//! once per such run, with its number and (when it is listed) its trace; a
//! program that yields often or blocks through `IO::blocking` is never
//! reported; the watchdog is off unless configured, and its thread ends
//! with the executor.
//!
//! The blocking fibers here block *until they have been reported* (with a
//! generous deadline), and then on for several thresholds more, so that no
//! assertion depends on how fast the watchdog's thread is scheduled on a
//! loaded machine; the thresholds of the tests that expect no report are
//! far above an ordinary run, so that a thread the system preempts is not
//! taken for a starving one.

mod common;

use std::error::Error as _;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{TestRuntime, rt_test};
use spindle_core::error::ConfigError;
use spindle_core::executor::support::{NoTrace, StarvationReport};
use spindle_core::{FiberConfig, FiberId, IO, IORuntime, Outcome, RuntimeBuilder, TracingMode};

type E = ();

/// The threshold of the tests that expect a report.
const THRESHOLD: Duration = Duration::from_millis(50);
/// The threshold of the tests that expect none: far above any ordinary run
/// of their fibers (a few milliseconds), so that a preempted thread is not
/// reported.
const QUIET_THRESHOLD: Duration = Duration::from_millis(200);
/// How long a blocking fiber waits for its report before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// The reports an executor's watchdog made, in order.
#[derive(Clone, Default)]
struct Reports(Arc<(Mutex<Vec<StarvationReport>>, Condvar)>);

impl Reports {
    fn handler(&self) -> impl Fn(&StarvationReport) + Send + Sync + 'static {
        let reports = self.clone();
        move |report| {
            let (list, changed) = &*reports.0;
            list.lock().unwrap().push(report.clone());
            changed.notify_all();
        }
    }

    fn all(&self) -> Vec<StarvationReport> {
        self.0.0.lock().unwrap().clone()
    }

    fn of(&self, fiber: FiberId) -> Vec<StarvationReport> {
        self.all()
            .into_iter()
            .filter(|r| r.fiber == fiber)
            .collect()
    }

    /// Waits (at most [`PATIENCE`]) until `fiber` has been reported; whether
    /// it was.
    fn wait_for(&self, fiber: FiberId) -> bool {
        let (list, changed) = &*self.0;
        let deadline = Instant::now() + PATIENCE;
        let mut reports = list.lock().unwrap();
        loop {
            if reports.iter().any(|r| r.fiber == fiber) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            reports = changed.wait_timeout(reports, deadline - now).unwrap().0;
        }
    }
}

/// What a report handler is.
trait Handler: Fn(&StarvationReport) + Send + Sync + 'static {}
impl<F: Fn(&StarvationReport) + Send + Sync + 'static> Handler for F {}

/// A test executor with the watchdog on.
trait Watched: TestRuntime {
    /// Built with the watchdog on at `threshold`, reports going to `handler`.
    fn try_watched(
        config: FiberConfig,
        threshold: Duration,
        handler: impl Handler,
    ) -> Result<Self, Self::BuildError>;

    /// The test executor with only a handler (no threshold).
    fn handler_only(handler: impl Handler) -> Self;

    /// The default fiber configuration, the reports going to `reports`.
    fn watched(threshold: Duration, reports: &Reports) -> Self {
        Self::watched_with(FiberConfig::default(), threshold, reports)
    }

    fn watched_with(config: FiberConfig, threshold: Duration, reports: &Reports) -> Self {
        Self::try_watched(config, threshold, reports.handler())
            .unwrap_or_else(|e| panic!("build the watched executor: {e}"))
    }
}

macro_rules! watched {
    ($rt:ty, $builder:expr, $wrap:expr) => {
        impl Watched for $rt {
            fn try_watched(
                config: FiberConfig,
                threshold: Duration,
                handler: impl Handler,
            ) -> Result<Self, Self::BuildError> {
                $builder
                    .fiber_config(config)
                    .starvation_threshold(threshold)
                    .on_starvation(handler)
                    .build()
                    .map($wrap)
            }

            fn handler_only(handler: impl Handler) -> Self {
                $builder
                    .on_starvation(handler)
                    .build()
                    .map($wrap)
                    .expect("build the test executor")
            }
        }
    };
}

watched!(common::Single, common::Single::builder(), |rt| rt);
watched!(
    common::Wstp,
    common::Wstp::builder().worker_threads(common::WSTP_WORKERS),
    |rt| rt
);
watched!(common::Batching, common::Batching::builder(), |rt| rt);
watched!(
    common::Tokio,
    common::Tokio::builder().multi_thread(common::TOKIO_WORKERS),
    |rt| rt
);
watched!(
    common::TokioCurrent,
    common::Tokio::builder().current_thread(),
    common::TokioCurrent
);

/// A fiber that blocks its thread (a `std::thread::sleep` inside
/// `IO::delay`) until the watchdog has reported it (its number is set in
/// `me` once it is spawned), then on for `after` more; whether it was
/// reported. With `cede_first`, it yields once before, so that it is
/// listed (and has a trace) when it blocks.
fn blocker(
    reports: &Reports,
    me: Arc<OnceLock<FiberId>>,
    cede_first: bool,
    after: Duration,
) -> IO<bool, E> {
    let reports = reports.clone();
    let block = IO::delay(move || {
        let fiber = number_of(&me);
        let reported = reports.wait_for(fiber);
        std::thread::sleep(after);
        reported
    });
    if cede_first {
        IO::cede().product_r(block)
    } else {
        block
    }
}

/// The number set in `me` once the fiber is spawned (waiting for it at
/// most [`PATIENCE`]).
fn number_of(me: &OnceLock<FiberId>) -> FiberId {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(id) = me.get() {
            return *id;
        }
        assert!(
            Instant::now() < deadline,
            "the fiber's number was never set"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Spawns `io` on `rt` (on a pool, it runs on a worker, not on the caller),
/// and runs until it ends; its number and outcome.
fn spawn_and_join<R: IORuntime, A: Send + 'static>(
    rt: &R,
    me: &OnceLock<FiberId>,
    io: IO<A, E>,
) -> (FiberId, Outcome<A, E>) {
    let fiber = rt.spawn(io).expect("spawn");
    let id = fiber.id();
    me.set(id).expect("set once");
    let outcome = rt
        .block_on(fiber.join::<E>())
        .expect("block_on")
        .succeeded()
        .expect("the join succeeds");
    (id, outcome)
}

rt_test! {
    fn a_fiber_that_blocks_its_thread_is_reported_exactly_once_with_its_number_and_trace() {
        let reports = Reports::default();
        let rt = Rt::watched(THRESHOLD, &reports);
        let me = Arc::new(OnceLock::new());
        // On for 8 thresholds after the report: the same run is not
        // reported again.
        let io = blocker(&reports, me.clone(), true, THRESHOLD * 8);
        let (id, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(true), "reported within {PATIENCE:?}");
        let mine = reports.of(id);
        assert_eq!(mine.len(), 1, "one report per run: {mine:#?}");
        let report = &mine[0];
        assert_eq!(report.fiber, id);
        assert_eq!(report.threshold, THRESHOLD);
        assert!(report.running_for >= THRESHOLD, "{report:?}");
        // exec-tokio numbers each thread as it first runs a fiber, and
        // this test's thread runs the main fiber of its `block_on` until
        // it first waits: one more than tokio's workers.
        let threads = common::WSTP_WORKERS.max(common::TOKIO_WORKERS + 1);
        assert!(report.worker < threads, "{report:?}");
        if cfg!(feature = "tracing") {
            // Listed since its cede: the trace shows this file's lines.
            let trace = report.trace.as_ref().expect("a listed fiber's trace");
            assert!(trace.to_string().contains("starvation.rs"), "{trace}");
        } else {
            assert_eq!(report.trace.as_ref().err(), Some(&NoTrace::NotListed));
        }
        assert!(report.to_string().contains(&format!("fiber {id}")), "{report}");
    }

    fn a_fiber_blocked_in_its_first_run_is_reported_without_a_trace_saying_why() {
        let reports = Reports::default();
        let rt = Rt::watched(THRESHOLD, &reports);
        let me = Arc::new(OnceLock::new());
        let io = blocker(&reports, me.clone(), false, Duration::ZERO);
        let (id, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(true), "reported within {PATIENCE:?}");
        let mine = reports.of(id);
        assert_eq!(mine.len(), 1, "{mine:#?}");
        let why = if cfg!(feature = "tracing") { NoTrace::NotYetListed } else { NoTrace::NotListed };
        assert_eq!(mine[0].trace.as_ref().err(), Some(&why));
    }

    fn an_executor_that_lists_no_fibers_reports_without_a_trace_saying_so() {
        let reports = Reports::default();
        let untraced = FiberConfig::builder().tracing(TracingMode::None).build().unwrap();
        let rt = Rt::watched_with(untraced, THRESHOLD, &reports);
        let me = Arc::new(OnceLock::new());
        let io = blocker(&reports, me.clone(), true, Duration::ZERO);
        let (id, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(true), "reported within {PATIENCE:?}");
        let mine = reports.of(id);
        assert_eq!(mine.len(), 1, "{mine:#?}");
        assert_eq!(mine[0].trace.as_ref().err(), Some(&NoTrace::NotListed));
    }

    fn each_blocking_run_of_a_fiber_is_reported_once() {
        let reports = Reports::default();
        let rt = Rt::watched(THRESHOLD, &reports);
        let me = Arc::new(OnceLock::new());
        let first = blocker(&reports, me.clone(), true, Duration::ZERO);
        let again = me.clone();
        let reports_again = reports.clone();
        // A second run (after a cede) blocks until there are two reports.
        let io = first.flat_map(move |_| {
            IO::cede().product_r(IO::delay(move || {
                let fiber = number_of(&again);
                let deadline = Instant::now() + PATIENCE;
                while reports_again.of(fiber).len() < 2 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                reports_again.of(fiber).len()
            }))
        });
        let (id, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(2));
        assert_eq!(reports.of(id).len(), 2);
    }

    fn a_program_that_yields_often_or_blocks_through_io_blocking_is_never_reported() {
        let reports = Reports::default();
        let rt = Rt::watched(QUIET_THRESHOLD, &reports);
        // Runs of a millisecond each, for well over the threshold in all,
        // and a blocking call of four thresholds on a blocking thread.
        let steps = IO::<(), E>::traverse((0..300).collect::<Vec<u32>>(), |_| {
            IO::delay(|| std::thread::sleep(Duration::from_millis(1))).product_r(IO::cede())
        });
        let blocking = IO::<(), E>::blocking(|| std::thread::sleep(QUIET_THRESHOLD * 4));
        let quiet = steps.product_r(blocking);
        let me = Arc::new(OnceLock::new());
        let (_, outcome) = spawn_and_join(&rt, &me, quiet);
        assert_eq!(outcome, Outcome::Succeeded(()));
        assert_eq!(reports.all().len(), 0, "{:#?}", reports.all());
        // The watchdog was on all along: a blocker is reported.
        let me = Arc::new(OnceLock::new());
        let io = blocker(&reports, me.clone(), true, Duration::ZERO);
        let (id, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(true));
        assert_eq!(reports.all().iter().map(|r| r.fiber).collect::<Vec<_>>(), vec![id]);
    }

    fn the_watchdog_is_off_unless_a_threshold_is_configured() {
        // A handler alone turns nothing on.
        let reports = Reports::default();
        let rt = Rt::handler_only(reports.handler());
        let io = IO::<(), E>::cede().product_r(IO::delay(|| std::thread::sleep(THRESHOLD * 8)));
        let me = Arc::new(OnceLock::new());
        let (_, outcome) = spawn_and_join(&rt, &me, io);
        assert_eq!(outcome, Outcome::Succeeded(()));
        assert_eq!(reports.all().len(), 0, "{:#?}", reports.all());
    }

    fn a_zero_threshold_is_a_build_error_naming_the_setting() {
        let error = match Rt::try_watched(FiberConfig::default(), Duration::ZERO, |_: &StarvationReport| {}) {
            Ok(_) => panic!("a zero threshold was accepted"),
            Err(error) => error,
        };
        assert!(error.to_string().contains("starvation_threshold"), "{error}");
        let source = error.source().and_then(|e| e.downcast_ref::<ConfigError>());
        assert_eq!(source, Some(&ConfigError::StarvationThresholdZero));
    }

    fn dropping_or_shutting_down_the_executor_ends_the_watchdog_thread() {
        // The handler lives in the watchdog's thread, and nowhere else once
        // the executor is built: it is dropped when the thread ends, which
        // the executor's drop and shutdown wait for.
        for shut_down in [false, true] {
            let alive = Arc::new(());
            let seen = Arc::downgrade(&alive);
            let rt = Rt::try_watched(FiberConfig::default(), THRESHOLD, move |_: &StarvationReport| {
                let _ = &alive;
            })
            .expect("build the watched executor");
            assert!(seen.upgrade().is_some(), "the watchdog holds its handler");
            assert_eq!(rt.run(IO::<u32, E>::pure(1)), Outcome::Succeeded(1));
            if shut_down {
                rt.shutdown(Duration::from_secs(30)).expect("shut down in time");
            } else {
                drop(rt);
            }
            assert!(
                seen.upgrade().is_none(),
                "the watchdog thread outlived the executor (shut down: {shut_down})"
            );
        }
    }
}
