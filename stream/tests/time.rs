//! Time stages on virtual time (exec-single's `TestControl`): exact
//! instants, no real waiting.

use std::time::Duration;

use spindle_core::error::TimeoutError;
use spindle_core::{IO, Outcome};
use spindle_exec_single::testkit::TestControl;
use spindle_stream::{Chunk, Stream};

const MS: Duration = Duration::from_millis(1);

fn on_virtual_time<A: Send + 'static>(program: IO<A, String>) -> (Outcome<A, String>, Duration) {
    let mut control = TestControl::execute(program);
    control.tick_all();
    let now = control.now();
    (control.take_results().expect("the program completes"), now)
}

/// Each element with the virtual time it was emitted at.
fn timed<A: Send + 'static>(stream: Stream<A, String>) -> Vec<(A, Duration)> {
    let program = stream
        .eval_map(|item| IO::monotonic().map(move |now| (item, now)))
        .compile()
        .to_vec();
    match on_virtual_time(program).0 {
        Outcome::Succeeded(values) => values,
        other => panic!("not a success: {:?}", other.map(|_| ())),
    }
}

#[test]
fn awake_every_ticks_without_drift_even_when_the_consumer_is_slow() {
    // The consumer spends 3 ms on each tick of a 10 ms period: ticks stay
    // at 10, 20, 30 ms.
    let stream = Stream::<Duration, String>::awake_every(10 * MS)
        .expect("a period")
        .eval_map(|elapsed| IO::sleep(3 * MS).map(move |()| elapsed))
        .take(3);
    let got = timed(stream);
    let elapsed: Vec<Duration> = got.iter().map(|(e, _)| *e).collect();
    assert_eq!(elapsed, [10 * MS, 20 * MS, 30 * MS]);
    let at: Vec<Duration> = got.iter().map(|(_, t)| *t).collect();
    assert_eq!(at, [13 * MS, 23 * MS, 33 * MS]);
}

#[test]
fn a_zero_period_is_refused() {
    assert!(Stream::<(), String>::fixed_rate(Duration::ZERO).is_err());
    let error = Stream::<u32, String>::range(0..3)
        .debounce(Duration::ZERO)
        .expect_err("refused");
    assert_eq!(error.operation, "debounce");
    assert!(
        Stream::<u32, String>::range(0..3)
            .group_within(0, MS)
            .is_err()
    );
}

#[test]
fn metered_emits_one_element_per_period() {
    let got = timed(Stream::range(0u32..4).metered(5 * MS).expect("a period"));
    assert_eq!(
        got,
        vec![(0, 5 * MS), (1, 10 * MS), (2, 15 * MS), (3, 20 * MS)]
    );
}

#[test]
fn delay_by_starts_the_stream_after_the_pause() {
    assert_eq!(
        timed(Stream::emit(1u32).delay_by(7 * MS)),
        vec![(1, 7 * MS)]
    );
}

#[test]
fn debounce_keeps_the_last_element_of_each_burst() {
    // Bursts at 0-2 ms and 50-51 ms; quiet 10 ms.
    let at = [0u64, 1, 2, 50, 51];
    let source = Stream::iter(at.iter().copied().enumerate().collect::<Vec<_>>())
        .rechunk(1)
        .expect("n > 0")
        .eval_map(|(i, t)| {
            IO::monotonic().flat_map(move |now| {
                IO::sleep(
                    (t * 1_000_000)
                        .checked_sub(now.as_nanos() as u64)
                        .map_or(Duration::ZERO, Duration::from_nanos),
                )
                .map(move |()| i)
            })
        });
    let got = timed(source.debounce(10 * MS).expect("a quiet time"));
    assert_eq!(got, vec![(2, 12 * MS), (4, 51 * MS)]);
}

#[test]
fn group_within_emits_full_groups_at_once_and_partial_ones_at_the_window() {
    let source = Stream::range(0u32..5)
        .rechunk(1)
        .expect("n > 0")
        .append(Stream::exec(IO::sleep(100 * MS)))
        .append(Stream::range(5u32..7));
    let got = timed(
        source
            .group_within(3, 20 * MS)
            .expect("valid")
            .map(Chunk::into_vec),
    );
    assert_eq!(
        got,
        vec![
            (vec![0, 1, 2], Duration::ZERO),
            (vec![3, 4], 20 * MS),
            (vec![5, 6], 100 * MS)
        ]
    );
}

#[derive(Debug, PartialEq)]
enum Failure {
    TimedOut(Duration),
}

impl From<TimeoutError> for Failure {
    fn from(e: TimeoutError) -> Self {
        Failure::TimedOut(e.after)
    }
}

#[test]
fn timeout_fails_a_stream_that_has_not_ended_in_time() {
    let slow = Stream::<u32, Failure>::iter(0..)
        .eval_map(|i| IO::sleep(10 * MS).map(move |()| i))
        .timeout(35 * MS);
    let mut control = TestControl::execute(slow.compile().to_vec());
    control.tick_all();
    assert_eq!(
        control.take_results(),
        Some(Outcome::Errored(Failure::TimedOut(35 * MS)))
    );
    assert_eq!(control.now(), 35 * MS);
}

#[test]
fn interrupt_when_ends_the_stream_when_the_signal_fires() {
    let (outcome, now) = on_virtual_time(
        Stream::<(), String>::fixed_rate(10 * MS)
            .expect("a period")
            .interrupt_when(IO::sleep(45 * MS))
            .compile()
            .count(),
    );
    assert_eq!(outcome, Outcome::Succeeded(4));
    assert_eq!(now, 45 * MS);
}

#[test]
fn concurrently_stops_the_background_when_the_foreground_ends_and_fails_with_its_error() {
    let (outcome, _) = on_virtual_time(
        Stream::range(0u32..3)
            .concurrently(Stream::<(), String>::fixed_rate(MS).expect("a period"))
            .compile()
            .to_vec(),
    );
    assert_eq!(outcome, Outcome::Succeeded(vec![0, 1, 2]));
    let failing = Stream::<(), String>::fixed_rate(10 * MS)
        .expect("a period")
        .concurrently(
            Stream::<u32, String>::exec(IO::sleep(25 * MS))
                .append(Stream::raise_error("bg".into())),
        );
    let (outcome, now) = on_virtual_time(failing.compile().drain());
    assert_eq!(outcome, Outcome::Errored("bg".to_string()));
    assert_eq!(now, 25 * MS);
}

#[test]
fn timeout_on_pull_to_goes_on_with_the_fallback_after_a_quiet_input_and_not_a_slow_consumer() {
    // The input's elements come 10, 20, 40 ms after each pull; the
    // consumer spends 50 ms on each. The deadline (30 ms) bounds only the
    // wait for the input: the third wait passes it.
    let input = Stream::<u32, String>::iter([10u32, 20, 40])
        .eval_map(|ms| IO::sleep(ms * MS).map(move |()| ms));
    let got = timed(
        input
            .timeout_on_pull_to(30 * MS, Stream::emit(0))
            .eval_map(|ms| IO::sleep(50 * MS).map(move |()| ms)),
    );
    // Pulled at 0, emitted at 10 + 50; pulled at 60, at 80 + 50; pulled at
    // 130, the deadline at 160 gives the fallback's element, + 50.
    assert_eq!(got, vec![(10, 60 * MS), (20, 130 * MS), (0, 210 * MS)]);
}

#[test]
fn timeout_on_pull_to_releases_what_the_input_holds_once_when_the_deadline_passes() {
    let released = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = released.clone();
    let input = Stream::<(), String>::bracket(IO::unit(), move |()| {
        IO::delay(move || {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
    })
    .flat_map(|()| Stream::emit(1u32).append(Stream::exec(IO::never())));
    let (outcome, now) = on_virtual_time(
        input
            .timeout_on_pull_to(5 * MS, Stream::emit(2))
            .compile()
            .to_vec(),
    );
    assert_eq!(outcome, Outcome::Succeeded(vec![1, 2]));
    assert_eq!(now, 5 * MS);
    assert_eq!(released.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn timeout_on_pull_to_leaves_an_input_that_keeps_up_alone() {
    let got = timed(
        Stream::<u32, String>::range(0..4)
            .eval_map(|n| IO::sleep(9 * MS).map(move |()| n))
            .timeout_on_pull_to(10 * MS, Stream::emit(99)),
    );
    assert_eq!(
        got,
        vec![(0, 9 * MS), (1, 18 * MS), (2, 27 * MS), (3, 36 * MS)]
    );
}
