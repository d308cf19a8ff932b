//! The `tracing` crate integration (`spindle-tracing`), on every executor:
//! a request's span is on every log line of every fiber it starts and on
//! no other; spans are exited when a fiber suspends, fails or is canceled;
//! fibers are tokio-console tasks (a `runtime.spawn` span entered for each
//! run, `runtime::waker` events when a wait ends or the fiber yields,
//! closed when it ends) with lifecycle events at TRACE level.
//!
//! One subscriber serves the whole test binary (fibers run on executor
//! threads, so it is the global default): a `fmt` layer at INFO writing
//! into a buffer, as an application's logs, and a layer recording every
//! span and event. The tests take a lock and clear both first, so that
//! each sees only its own.

mod common;

use std::collections::HashMap;
use std::fmt::Debug;
use std::io::Write;
use std::sync::{LazyLock, Mutex, MutexGuard, Once, PoisonError};
use std::time::Duration;

use common::rt_test;
use spindle_core::{IO, Outcome, cede, never, sleep};
use spindle_tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber, info, info_span};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

type E = String;

/// A span as recorded: its name, target and fields, how often it was
/// entered and exited, and whether it closed.
#[derive(Debug, Clone, Default)]
struct SpanRecord {
    name: String,
    fields: HashMap<String, String>,
    enters: usize,
    exits: usize,
    closed: bool,
}

/// An event as recorded: its target, its fields (the message under
/// `message`), and the names of the spans it happened in, outermost first.
#[derive(Debug, Clone)]
struct EventRecord {
    target: String,
    fields: HashMap<String, String>,
    scope: Vec<String>,
}

#[derive(Default)]
struct Recorded {
    spans: HashMap<u64, SpanRecord>,
    events: Vec<EventRecord>,
}

static RECORDED: LazyLock<Mutex<Recorded>> = LazyLock::new(Mutex::default);
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// One test at a time: the subscriber is the process's.
static SERIAL: Mutex<()> = Mutex::new(());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

/// Records every span and event.
struct Recorder;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut span = SpanRecord {
            name: attrs.metadata().name().to_owned(),
            ..SpanRecord::default()
        };
        attrs.record(&mut Fields(&mut span.fields));
        span.fields
            .insert("target".into(), attrs.metadata().target().into());
        lock(&RECORDED).spans.insert(id.into_u64(), span);
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| span.name().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        lock(&RECORDED).events.push(EventRecord {
            target: event.metadata().target().to_owned(),
            fields,
            scope,
        });
    }
    fn on_enter(&self, id: &Id, _: Context<'_, S>) {
        if let Some(span) = lock(&RECORDED).spans.get_mut(&id.into_u64()) {
            span.enters += 1;
        }
    }
    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        if let Some(span) = lock(&RECORDED).spans.get_mut(&id.into_u64()) {
            span.exits += 1;
        }
    }
    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(span) = lock(&RECORDED).spans.get_mut(&id.into_u64()) {
            span.closed = true;
        }
    }
}

/// The `fmt` layer's output, into [`LOG`].
struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&LOG).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the subscriber and Spindle's observer (once), takes the test
/// lock and clears what earlier tests recorded.
fn setup() -> MutexGuard<'static, ()> {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let logs = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(|| LogWriter)
            .with_filter(LevelFilter::INFO);
        let subscriber = tracing_subscriber::registry().with(logs).with(Recorder);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        spindle_tracing::install().expect("the only fiber observer");
    });
    let guard = lock(&SERIAL);
    *lock(&RECORDED) = Recorded::default();
    lock(&LOG).clear();
    guard
}

/// The log lines written since [`setup`].
fn log_lines() -> Vec<String> {
    String::from_utf8_lossy(&lock(&LOG))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A program that logs `what`, waits a moment (a suspension), and logs again.
fn logs_around_a_wait(what: &'static str) -> IO<(), E> {
    IO::delay(move || info!("{what} before the wait"))
        .product_r(sleep(Duration::from_millis(2)))
        .product_r(IO::delay(move || info!("{what} after the wait")))
}

/// The recorded console task span of the fiber numbered `fiber` (one
/// executor per test, so the number is unique); with fiber tracing
/// compiled in, its location is `line` of this file (the `start`).
fn task_of(
    fiber: u32,
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))] line: u32,
) -> (u64, SpanRecord) {
    let recorded = lock(&RECORDED);
    let found: Vec<_> = recorded
        .spans
        .iter()
        .filter(|(_, s)| {
            s.name == "runtime.spawn" && s.fields.get("task.id") == Some(&fiber.to_string())
        })
        .map(|(id, s)| (*id, s.clone()))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one task span for fiber #{fiber}: {found:?}"
    );
    let (id, span) = found.into_iter().next().unwrap();
    // Where a fiber was started is a call site, kept only with tracing.
    #[cfg(feature = "tracing")]
    {
        assert_eq!(
            span.fields.get("loc.line"),
            Some(&line.to_string()),
            "{span:?}"
        );
        assert!(
            span.fields
                .get("loc.file")
                .is_some_and(|f| f.ends_with("tracing_spans.rs")),
            "{span:?}"
        );
    }
    (id, span)
}

/// The lifecycle events recorded for the fiber numbered `fiber`, by message.
fn lifecycle(fiber: u32) -> Vec<EventRecord> {
    lock(&RECORDED)
        .events
        .iter()
        .filter(|e| {
            e.target == "spindle::fiber" && e.fields.get("fiber") == Some(&fiber.to_string())
        })
        .cloned()
        .collect()
}

fn messages(events: &[EventRecord]) -> Vec<String> {
    events.iter().map(|e| e.fields["message"].clone()).collect()
}

/// Waker events (`op`) recorded for the task span `span`.
fn waker_ops(span: u64) -> Vec<String> {
    lock(&RECORDED)
        .events
        .iter()
        .filter(|e| {
            e.target == "runtime::waker" && e.fields.get("task.id") == Some(&span.to_string())
        })
        .map(|e| e.fields["op"].clone())
        .collect()
}

rt_test! {
    fn every_log_line_of_every_fiber_a_request_starts_shows_the_request_span_and_no_other() {
        let _serial = setup();
        let request = logs_around_a_wait("parent")
            .product_r(logs_around_a_wait("child one").start::<E>())
            .flat_map(|one| {
                logs_around_a_wait("child two")
                    .both(logs_around_a_wait("child three"))
                    .product_r(one.join())
            })
            .map(|_| ())
            .instrument(info_span!("request", id = 7));
        // Another request at the same time, on the same threads.
        let other = logs_around_a_wait("other").instrument(info_span!("request", id = 8));
        let program = request
            .both(other)
            .product_r(IO::delay(|| info!("after both requests")));
        assert!(matches!(run(program), Outcome::Succeeded(())));
        let lines = log_lines();
        for who in ["parent", "child one", "child two", "child three"] {
            for when in ["before", "after"] {
                let line = lines
                    .iter()
                    .find(|l| l.contains(&format!("{who} {when} the wait")))
                    .unwrap_or_else(|| panic!("no line for {who} {when}: {lines:#?}"));
                assert!(line.contains("request{id=7}"), "{line}");
                assert!(!line.contains("request{id=8}"), "{line}");
            }
        }
        for when in ["before", "after"] {
            let line = lines.iter().find(|l| l.contains(&format!("other {when} the wait"))).unwrap();
            assert!(line.contains("request{id=8}") && !line.contains("request{id=7}"), "{line}");
        }
        let after = lines.iter().find(|l| l.contains("after both requests")).unwrap();
        assert!(!after.contains("request{"), "{after}");
        // Each request span was exited as often as it was entered, and
        // closed once every fiber holding it ended.
        let recorded = lock(&RECORDED);
        let requests: Vec<_> = recorded.spans.values().filter(|s| s.name == "request").collect();
        assert_eq!(requests.len(), 2);
        for span in requests {
            assert!(span.enters >= 2, "{span:?}");
            assert_eq!(span.enters, span.exits, "{span:?}");
        }
    }

    fn a_span_is_exited_when_its_program_fails_or_is_canceled() {
        let _serial = setup();
        let fails: IO<(), E> = IO::delay(|| info!("failing"))
            .product_r(sleep(Duration::from_millis(1)))
            .product_r(IO::raise_error(String::from("boom")))
            .instrument(info_span!("fails"));
        let canceled: IO<(), E> = IO::delay(|| info!("waiting for ever"))
            .product_r(never())
            .instrument(info_span!("canceled"));
        let program = fails
            .attempt()
            .flat_map(move |failed| {
                canceled.start::<E>().flat_map(move |fiber| {
                    sleep(Duration::from_millis(5))
                        .product_r(fiber.cancel())
                        .product_r(fiber.join())
                        .map(move |outcome| (failed, outcome))
                })
            })
            .flat_map(|r| IO::delay(|| info!("afterwards")).map(move |()| r));
        let (failed, canceled) = match run(program) {
            Outcome::Succeeded(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(failed, Err(String::from("boom")));
        assert!(matches!(canceled, Outcome::Canceled));
        let lines = log_lines();
        let afterwards = lines.iter().find(|l| l.contains("afterwards")).unwrap();
        assert!(!afterwards.contains("fails") && !afterwards.contains("canceled"), "{afterwards}");
        let recorded = lock(&RECORDED);
        for name in ["fails", "canceled"] {
            let span = recorded.spans.values().find(|s| s.name == name).unwrap();
            assert!(span.enters >= 1, "{span:?}");
            assert_eq!(span.enters, span.exits, "{span:?}");
        }
    }

    fn a_fiber_is_a_console_task_entered_for_each_run_and_woken_when_its_wait_ends() {
        let _serial = setup();
        let line = line!() + 1;
        let program = sleep::<E>(Duration::from_millis(2)).map(|()| 5u32).start::<E>()
            .flat_map(|fiber| {
                let id = fiber.id();
                fiber.join().map(move |outcome| (id, outcome))
            });
        let (id, outcome) = match run(program) {
            Outcome::Succeeded(r) => r,
            other => panic!("{other:?}"),
        };
        assert!(matches!(outcome, Outcome::Succeeded(5)));
        let (span_id, task) = task_of(id.get(), line);
        assert_eq!(task.fields["kind"], "task");
        assert_eq!(task.fields["target"], "spindle::fiber");
        // Its first run and the run after the sleep.
        assert!(task.enters >= 2, "{task:?}");
        assert_eq!(task.enters, task.exits, "{task:?}");
        assert!(task.closed, "the task span closes when the fiber ends");
        let ops = waker_ops(span_id);
        assert!(ops.contains(&"waker.clone".to_owned()), "{ops:?}");
        assert!(ops.contains(&"waker.wake".to_owned()), "{ops:?}");
        let events = lifecycle(id.get());
        let seen = messages(&events);
        assert_eq!(seen.first().map(String::as_str), Some("fiber started"), "{seen:?}");
        assert!(seen.contains(&"fiber suspended".to_owned()), "{seen:?}");
        assert!(seen.contains(&"fiber resumed".to_owned()), "{seen:?}");
        let ended = events.last().unwrap();
        assert_eq!(ended.fields["message"], "fiber ended");
        assert_eq!(ended.fields["outcome"], "succeeded");
        // Inside the fiber's task span.
        assert!(ended.scope.contains(&"runtime.spawn".to_owned()), "{ended:?}");
    }

    fn a_fiber_that_yields_wakes_itself_and_a_canceled_one_ends_canceled() {
        let _serial = setup();
        let line = line!() + 1;
        let yields = cede::<E>().product_r(cede()).start::<E>();
        let program = yields.flat_map(|yielder| {
            let yielder_id = yielder.id();
            never::<(), E>().start::<E>().flat_map(move |waiter| {
                let waiter_id = waiter.id();
                yielder
                    .join()
                    .product_r(sleep(Duration::from_millis(2)))
                    .product_r(waiter.cancel())
                    .product_r(waiter.join())
                    .map(move |outcome| (yielder_id, waiter_id, outcome))
            })
        });
        let (yielder, waiter, outcome) = match run(program) {
            Outcome::Succeeded(r) => r,
            other => panic!("{other:?}"),
        };
        assert!(matches!(outcome, Outcome::Canceled));
        let (span_id, task) = task_of(yielder.get(), line);
        assert_eq!(task.fields["kind"], "task");
        let ops = waker_ops(span_id);
        assert_eq!(ops.iter().filter(|op| *op == "waker.wake_by_ref").count(), 2, "{ops:?}");
        assert!(messages(&lifecycle(yielder.get())).contains(&"fiber yielded".to_owned()));
        let ended = lifecycle(waiter.get()).pop().unwrap();
        assert_eq!(ended.fields["message"], "fiber ended");
        assert_eq!(ended.fields["outcome"], "canceled");
    }
}

#[test]
fn a_starvation_report_is_a_warning_naming_the_fiber_the_worker_and_the_durations() {
    use spindle_core::{IORuntime, RuntimeBuilder};
    use std::time::Instant;
    let _serial = setup();
    let rt = spindle_exec_wstp::Runtime::builder()
        .starvation_threshold(Duration::from_millis(50))
        .on_starvation(spindle_tracing::log_starvation)
        .build()
        .expect("a pool");
    let warned = || {
        lock(&RECORDED)
            .events
            .iter()
            .find(|e| e.target == "spindle::starvation")
            .cloned()
    };
    // Blocks its worker (no `IO::blocking`) until the warning is there.
    let blocker: IO<u32, E> = IO::delay(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while warned().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        1
    });
    let program = blocker.start::<E>().flat_map(|fiber| {
        let id = fiber.id();
        fiber.join_with_never().map(move |_| id)
    });
    let id = match rt.block_on(program).expect("runs") {
        Outcome::Succeeded(id) => id,
        other => panic!("{other:?}"),
    };
    let warning = warned().expect("a warning within 30 s");
    assert_eq!(warning.fields["fiber"], id.get().to_string());
    assert!(
        warning.fields["worker"].parse::<u64>().unwrap() < 2,
        "{warning:?}"
    );
    assert!(
        warning.fields["running_for_ms"].parse::<u64>().unwrap() >= 50,
        "{warning:?}"
    );
    assert_eq!(warning.fields["threshold_ms"], "50");
    assert!(!warning.fields["trace"].is_empty(), "{warning:?}");
    assert!(
        log_lines()
            .iter()
            .any(|l| l.contains("WARN") && l.contains("keeps its worker busy"))
    );
}
