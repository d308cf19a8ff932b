//! Spindle's fibers in the [`tracing`] ecosystem.
//!
//! A Rust service logs and traces through the `tracing` crate; this crate
//! makes Spindle's fibers fit it:
//!
//! - [`Instrument::instrument`]: `io.instrument(span)` enters `span`
//!   whenever the fiber runs `io` and exits it whenever the fiber suspends
//!   or yields, as `tracing::Instrument` does for a future. Fibers started
//!   inside it (by `start`, `both`, `race`, `par_traverse`, a stream's
//!   concurrent combinators...) carry the span too: every log line of every
//!   fiber a request starts shows the request's span.
//! - Fiber lifecycle events at `TRACE` level, target `spindle::fiber`:
//!   `fiber started` (in the parent's context, with where it was started),
//!   `fiber resumed`, `fiber suspended`, `fiber yielded` and `fiber ended`
//!   (with `outcome` = `succeeded`, `errored`, `canceled` or `panicked`).
//! - tokio-console: each fiber is a task (a `runtime.spawn` span at
//!   `TRACE` level with the fields tokio gives its tasks: `kind`,
//!   `task.name`, `task.id`, `loc.file`, `loc.line`, `loc.col`), entered
//!   for each run (console's polls, busy and idle time), with a
//!   `waker.wake` event when a wait ends and `waker.wake_by_ref` when the
//!   fiber yields (console's wakes and self-wakes). A program that already
//!   runs `console_subscriber::init()` sees Spindle's fibers in
//!   tokio-console with nothing else to do than [`install`]
//!   (`examples/console.rs`, feature `console`).
//!
//! ```
//! use spindle_core::{IO, IORuntime};
//! use spindle_tracing::Instrument;
//!
//! spindle_tracing::install().expect("no other fiber observer");
//! let request = tracing::info_span!("request", id = 7);
//! let handle: IO<u32, String> = IO::delay(|| {
//!     tracing::info!("inside the request's span");
//!     41
//! })
//! .flat_map(|n| spindle_core::sleep(std::time::Duration::from_millis(1)).map(move |_| n + 1));
//! let rt = spindle_exec_wstp::Runtime::new().unwrap();
//! let outcome = rt.block_on(handle.instrument(request)).unwrap();
//! assert_eq!(outcome.succeeded(), Some(42));
//! ```
//!
//! # How it works
//!
//! [`install`] sets io-core's process-wide fiber observer
//! (`spindle_core::observe`): from then on every fiber made is observed,
//! and the observer is told when each of its runs begins and ends. The
//! spans a fiber is inside of are a fiber-local value (an `IOLocal`): a
//! stack, outermost first, which a child copies when it starts. At the
//! start of each run the observer enters the fiber's task span and then
//! its stack; at the end of the run it exits them in reverse order.
//! `instrument` pushes its span on the stack and enters it in one step,
//! and pops and exits it in one step when its program ends, however it
//! ends (a finalizer, masked). The invariant: while a fiber runs, exactly
//! the spans of its stack are entered on its thread, besides its task
//! span.
//!
//! # Cost
//!
//! With no subscriber interested in a span, `instrument` returns the
//! program unchanged, and the task spans and lifecycle events are
//! disabled callsites (a cached check each). Installing the observer costs
//! every fiber a small allocation for its task span and a call at each
//! run; programs that do not install it pay one flag test per run (see
//! BENCHMARKS.md, "Spans, lifecycle events and tokio-console").
//!
//! The model is `tracing::Instrument` and tokio's task instrumentation
//! (the `runtime.spawn` span and `runtime::waker` events tokio-console
//! reads); the code is Spindle's own.

use std::fmt;
use std::panic::Location;
use std::sync::{Arc, LazyLock};

use spindle_core::observe::{self, Ending, FiberObserver, Observation, ObservedFiber, RunEnd};
use spindle_core::{FiberId, IO, IOLocal};
use tracing::Span;

/// The target of the fiber lifecycle events and task spans.
pub const TARGET: &str = "spindle::fiber";

/// The target of the wake events tokio-console counts.
pub const WAKER_TARGET: &str = "runtime::waker";

/// The spans a fiber is inside of, outermost first; `None` for none.
type Stack = Option<Arc<Vec<Span>>>;

/// Each fiber's [`Stack`], copied by the children it starts.
static SPANS: LazyLock<IOLocal<Stack>> = LazyLock::new(|| IOLocal::new(None));

/// The observer this crate installs.
struct Observer;

static OBSERVER: Observer = Observer;

/// Why [`install`] could not install this crate's observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstallError;

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "spindle-tracing: another fiber observer is installed for this process \
             (spindle_core::observe::set_observer); spans cannot follow fibers",
        )
    }
}

impl std::error::Error for InstallError {}

/// Installs this crate's fiber observer for the process: fibers made from
/// now on have task spans and lifecycle events, and carry the spans of
/// [`Instrument::instrument`] across their suspensions. Call it once at
/// the start of `main`, before building an executor (fibers made earlier
/// are observed only from their first `instrument`). Calling it again is
/// fine; it fails only if another observer was installed.
pub fn install() -> Result<(), InstallError> {
    match observe::set_observer(&OBSERVER) {
        Ok(()) => Ok(()),
        Err(_) if is_installed() => Ok(()),
        Err(_) => Err(InstallError),
    }
}

/// Whether this crate's observer is the process's fiber observer.
pub fn is_installed() -> bool {
    observe::observer().is_some_and(|installed| {
        std::ptr::addr_eq(
            installed as *const dyn FiberObserver,
            &OBSERVER as *const Observer,
        )
    })
}

/// The target of [`log_starvation`]'s warnings.
pub const STARVATION_TARGET: &str = "spindle::starvation";

/// A starvation watchdog handler that reports through `tracing`: a `WARN`
/// event, target `spindle::starvation`, with the fiber's number, the
/// worker, how long the run had lasted and the threshold (in
/// milliseconds), and the fiber's trace (or why there is none). Give it to
/// the executor's builder:
///
/// ```
/// use std::time::Duration;
/// use spindle_core::RuntimeBuilder;
///
/// let rt = spindle_exec_wstp::Runtime::builder()
///     .starvation_threshold(Duration::from_millis(100))
///     .on_starvation(spindle_tracing::log_starvation)
///     .build()?;
/// # drop(rt);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn log_starvation(report: &spindle_core::executor::support::StarvationReport) {
    let trace = match &report.trace {
        Ok(trace) => trace.to_string(),
        Err(why) => format!("no trace: {why}"),
    };
    tracing::warn!(
        target: STARVATION_TARGET,
        fiber = u64::from(report.fiber.get()),
        worker = report.worker as u64,
        running_for_ms = report.running_for.as_millis() as u64,
        threshold_ms = report.threshold.as_millis() as u64,
        trace = %trace,
        "a fiber keeps its worker busy without yielding"
    );
}

/// `tracing` spans for `IO` programs.
pub trait Instrument<A, E>: Sized {
    /// The program, run inside `span`: the span is entered whenever the
    /// fiber runs it and exited whenever the fiber suspends or yields, and
    /// fibers it starts run inside it too. A disabled span (no subscriber
    /// wants it) gives the program back unchanged. Installs this crate's
    /// observer if none is installed; if another observer is, the program
    /// is given back unchanged too (see [`install`]).
    fn instrument(self, span: Span) -> IO<A, E>;

    /// [`instrument`](Instrument::instrument) with the span current where
    /// this is called (where the program is built, not where it runs).
    fn in_current_span(self) -> IO<A, E> {
        self.instrument(Span::current())
    }
}

impl<A: Send + 'static, E: Send + 'static> Instrument<A, E> for IO<A, E> {
    fn instrument(self, span: Span) -> IO<A, E> {
        if span.is_disabled() || install().is_err() {
            return self;
        }
        let popped = span.clone();
        IO::uncancelable(move |poll| {
            observe::observe_current()
                .product_r(SPANS.update(move |stack| {
                    enter(&span);
                    let mut spans = stack.map_or_else(Vec::new, |spans| spans.as_ref().clone());
                    spans.push(span);
                    Some(Arc::new(spans))
                }))
                .flat_map(move |()| {
                    poll.apply(self).guarantee(SPANS.update(move |stack| {
                        let mut spans = stack.map_or_else(Vec::new, |spans| spans.as_ref().clone());
                        // The innermost entry of this span: the top, as
                        // `instrument`s nest.
                        if let Some(at) = spans.iter().rposition(|s| s.id() == popped.id()) {
                            exit(&spans.remove(at));
                        }
                        (!spans.is_empty()).then(|| Arc::new(spans))
                    }))
                })
        })
    }
}

/// Enters `span` on this thread (nothing for a disabled span).
fn enter(span: &Span) {
    span.with_subscriber(|(id, dispatch)| dispatch.enter(id));
}

/// Exits `span` on this thread.
fn exit(span: &Span) {
    span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
}

/// What the observer keeps per fiber.
struct FiberSpans {
    /// The fiber's task span (tokio-console's task); disabled when no
    /// subscriber wants it, and closed when the fiber ends.
    task: Span,
}

impl FiberSpans {
    /// The task span's id as tokio-console's wake events name it.
    fn task_id(&self) -> Option<u64> {
        self.task.id().map(|id| id.into_u64())
    }
}

/// The fiber's stack, as its run sees it.
fn stack_of(fiber: &ObservedFiber<'_>) -> Stack {
    fiber.local(&SPANS).flatten()
}

/// Exits the fiber's stack and then its task span.
fn exit_run(fiber: &mut ObservedFiber<'_>) {
    if let Some(spans) = stack_of(fiber) {
        spans.iter().rev().for_each(exit);
    }
    if let Some(state) = fiber.state::<FiberSpans>() {
        exit(&state.task);
    }
}

impl FiberObserver for Observer {
    fn created(
        &self,
        fiber: FiberId,
        spawned_at: Option<&'static Location<'static>>,
        parent_observed: bool,
    ) -> Observation {
        let number = u64::from(fiber.get());
        // The location fields are recorded only when the site is known
        // (`Option` values record nothing for `None`).
        let (file, line, col) = (
            spawned_at.map(Location::file),
            spawned_at.map(Location::line),
            spawned_at.map(Location::column),
        );
        let task = tracing::trace_span!(
            target: TARGET,
            parent: None,
            "runtime.spawn",
            kind = "task",
            task.name = %fiber,
            task.id = number,
            loc.file = file,
            loc.line = line,
            loc.col = col,
        );
        if task.is_disabled() {
            // No subscriber wants fibers as tasks (nor, at the same level
            // and target, their lifecycle events): only a fiber that may
            // carry spans needs its runs reported (a parent's `instrument`
            // hands its spans to the fibers it starts; a fiber's own
            // `instrument` makes it observed then).
            return if parent_observed {
                Observation::Observe(None)
            } else {
                Observation::Ignore
            };
        }
        tracing::trace!(
            target: TARGET,
            fiber = number,
            loc.file = file,
            loc.line = line,
            "fiber started"
        );
        Observation::Observe(Some(Box::new(FiberSpans { task })))
    }

    fn run_begins(&self, fiber: &mut ObservedFiber<'_>, resumed: bool) {
        let number = u64::from(fiber.id().get());
        let stack = stack_of(fiber);
        if let Some(state) = fiber.state::<FiberSpans>() {
            if resumed && let Some(id) = state.task_id() {
                tracing::trace!(target: WAKER_TARGET, op = "waker.wake", task.id = id);
            }
            enter(&state.task);
        }
        if let Some(spans) = stack {
            spans.iter().for_each(enter);
        }
        if resumed {
            tracing::trace!(target: TARGET, fiber = number, "fiber resumed");
        }
    }

    fn run_ends(&self, fiber: &mut ObservedFiber<'_>, end: RunEnd) {
        let number = u64::from(fiber.id().get());
        match end {
            RunEnd::Suspended => {
                tracing::trace!(target: TARGET, fiber = number, "fiber suspended");
                // What resumes the fiber holds a way to wake it (console
                // counts wakers: a clone now, the wake when it ends).
                if let Some(id) = fiber.state::<FiberSpans>().and_then(|s| s.task_id()) {
                    tracing::trace!(target: WAKER_TARGET, op = "waker.clone", task.id = id);
                }
            }
            RunEnd::Yielded => {
                tracing::trace!(target: TARGET, fiber = number, "fiber yielded");
                if let Some(id) = fiber.state::<FiberSpans>().and_then(|s| s.task_id()) {
                    tracing::trace!(target: WAKER_TARGET, op = "waker.wake_by_ref", task.id = id);
                }
            }
        }
        exit_run(fiber);
    }

    fn ended(&self, fiber: &mut ObservedFiber<'_>, ending: Ending) {
        let number = u64::from(fiber.id().get());
        let outcome = match ending {
            Ending::Succeeded => "succeeded",
            Ending::Errored => "errored",
            Ending::Canceled => "canceled",
            Ending::Panicked => "panicked",
        };
        tracing::trace!(target: TARGET, fiber = number, outcome, "fiber ended");
        exit_run(fiber);
        // The task span closes now, not when the fiber is freed.
        if let Some(state) = fiber.state::<FiberSpans>() {
            state.task = Span::none();
        }
    }
}
