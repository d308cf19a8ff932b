//! Concurrent stages on exec-single: results, bounds on concurrency, and
//! that no fiber or finalizer is left behind when the stream stops early
//! or fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_single::SingleThreaded;
use spindle_stream::Stream;

fn run<A: Send + 'static>(program: IO<A, String>) -> Outcome<A, String> {
    SingleThreaded::new()
        .expect("a runtime")
        .block_on(program)
        .expect("the run")
}

fn values<A: Send + 'static>(stream: Stream<A, String>) -> Vec<A> {
    match run(stream.compile().to_vec()) {
        Outcome::Succeeded(values) => values,
        other => panic!("the stream did not succeed: {:?}", other.map(|_| ())),
    }
}

/// Counts programs running at once, and the most that ever did.
#[derive(Clone, Default)]
struct Gauge {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    entered: Arc<AtomicUsize>,
    ended: Arc<AtomicUsize>,
}

impl Gauge {
    /// A program that holds a place for `ms` milliseconds, then gives `v`.
    fn hold<A: Send + 'static>(&self, ms: u64, v: A) -> IO<A, String> {
        let (enter, leave) = (self.clone(), self.clone());
        IO::delay(move || {
            enter.entered.fetch_add(1, Ordering::SeqCst);
            let now = enter.now.fetch_add(1, Ordering::SeqCst) + 1;
            enter.most.fetch_max(now, Ordering::SeqCst);
        })
        .flat_map(move |()| IO::sleep(Duration::from_millis(ms)))
        .guarantee(IO::delay(move || {
            leave.now.fetch_sub(1, Ordering::SeqCst);
            leave.ended.fetch_add(1, Ordering::SeqCst);
        }))
        .map(move |()| v)
    }
}

#[test]
fn par_eval_map_keeps_input_order_and_runs_at_most_n_at_once() {
    let gauge = Gauge::default();
    let g = gauge.clone();
    // Later elements finish first: order must still be the input's.
    let stream = Stream::range(0u64..12)
        .par_eval_map(3, move |i| g.hold(12 - i, i * 10))
        .expect("n > 0");
    assert_eq!(values(stream), (0..12).map(|i| i * 10).collect::<Vec<_>>());
    assert_eq!(gauge.most.load(Ordering::SeqCst), 3);
    assert_eq!(gauge.ended.load(Ordering::SeqCst), 12);
}

#[test]
fn par_eval_map_unordered_gives_every_value_and_runs_at_most_n_at_once() {
    let gauge = Gauge::default();
    let g = gauge.clone();
    let stream = Stream::range(0u64..12)
        .par_eval_map_unordered(4, move |i| g.hold(1 + (i * 7) % 5, i))
        .expect("n > 0");
    let mut got = values(stream);
    got.sort_unstable();
    assert_eq!(got, (0..12).collect::<Vec<_>>());
    assert_eq!(gauge.most.load(Ordering::SeqCst), 4);
}

#[test]
fn a_parallelism_of_zero_is_refused() {
    let error = Stream::<u32, String>::range(0..3)
        .par_eval_map(0, IO::pure)
        .expect_err("0 is refused");
    assert_eq!(error.operation, "par_eval_map");
    assert!(error.to_string().contains("parallelism above 0"), "{error}");
    assert!(
        Stream::<u32, String>::range(0..3)
            .par_eval_map_unordered(0, IO::pure)
            .is_err()
    );
    assert!(Stream::<u32, String>::range(0..3).prefetch_n(0).is_err());
}

#[test]
fn merge_gives_the_elements_of_both_inputs() {
    let stream = Stream::range(0u32..500).merge(Stream::range(1_000u32..1_300));
    let mut got = values(stream);
    got.sort_unstable();
    let want: Vec<u32> = (0..500).chain(1_000..1_300).collect();
    assert_eq!(got, want);
}

#[test]
fn par_join_runs_inner_streams_at_most_n_at_once() {
    let gauge = Gauge::default();
    let g = gauge.clone();
    let outer = Stream::range(0u64..6)
        .map(move |i| Stream::eval(g.hold(5, i)).append(Stream::emit(100 + i)));
    let mut got = values(outer.par_join(2).expect("n > 0"));
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105]);
    assert_eq!(gauge.most.load(Ordering::SeqCst), 2);
}

#[test]
fn a_take_after_par_eval_map_cancels_the_programs_still_running() {
    let gauge = Gauge::default();
    let g = gauge.clone();
    let stream = Stream::iter(0u64..)
        .par_eval_map(4, move |i| g.hold(if i == 0 { 1 } else { 10_000 }, i))
        .expect("n > 0")
        .take(1);
    assert_eq!(values(stream), vec![0]);
    // Every program that started has ended (finished or canceled), once;
    // the three long ones were running when the take stopped.
    assert_eq!(gauge.now.load(Ordering::SeqCst), 0);
    assert!(
        gauge.entered.load(Ordering::SeqCst) >= 4,
        "{}",
        gauge.entered.load(Ordering::SeqCst)
    );
    assert_eq!(
        gauge.ended.load(Ordering::SeqCst),
        gauge.entered.load(Ordering::SeqCst)
    );
}

#[test]
fn an_error_in_one_element_fails_the_stream_and_cancels_the_others() {
    let gauge = Gauge::default();
    let g = gauge.clone();
    let stream = Stream::range(0u64..8).par_eval_map_unordered(4, move |i| {
        if i == 2 {
            IO::sleep(Duration::from_millis(2)).flat_map(|()| IO::raise_error("bad 2".to_string()))
        } else {
            g.hold(10_000, i)
        }
    });
    let outcome = run(stream.expect("n > 0").compile().to_vec());
    assert_eq!(outcome, Outcome::Errored("bad 2".to_string()));
    assert_eq!(gauge.now.load(Ordering::SeqCst), 0);
}

#[test]
fn resources_of_a_merged_input_are_released_once_when_the_merge_is_cut_short() {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let (open, close) = (log.clone(), log.clone());
    let left = Stream::bracket(
        IO::delay(move || open.lock().unwrap().push("open".into())),
        move |()| IO::delay(move || close.lock().unwrap().push("close".into())),
    )
    .flat_map(|()| Stream::iter(0u32..));
    let stream = left.merge(Stream::iter(1_000_000u32..)).take(100);
    assert_eq!(values(stream).len(), 100);
    assert_eq!(*log.lock().unwrap(), ["open", "close"]);
}
