//! The stream's stages against their meaning on plain vectors, and its
//! resource safety (finalizers counted), on exec-single.

use std::sync::{Arc, Mutex};

use spindle_core::IORuntime;
use spindle_core::{ExitCase, IO, Outcome, Resource};
use spindle_exec_single::SingleThreaded;
use spindle_stream::{Chunk, Stream};

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

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn note(log: &Log, line: impl Into<String>) -> IO<(), String> {
    let (log, line) = (log.clone(), line.into());
    IO::delay(move || log.lock().unwrap().push(line))
}

fn lines(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// A stream that acquires `name` (noting "open name") and releases it
/// (noting "close name" and the exit case).
fn resource(log: &Log, name: &'static str) -> Stream<&'static str, String> {
    let (open, close) = (log.clone(), log.clone());
    Stream::bracket_case(
        note(&open, format!("open {name}")).map(move |()| name),
        move |name, exit| note(&close, format!("close {name} {exit:?}")),
    )
}

#[test]
fn pure_stages_give_what_the_same_stages_give_on_a_vector() {
    let got = values(
        Stream::range(0u64..1_000)
            .filter(|n| n % 3 != 0)
            .map(|n| n * 2)
            .filter_map(|n| (n % 5 != 0).then_some(n + 1))
            .drop(7)
            .take(400),
    );
    let want: Vec<u64> = (0u64..1_000)
        .filter(|n| n % 3 != 0)
        .map(|n| n * 2)
        .filter_map(|n| (n % 5 != 0).then_some(n + 1))
        .skip(7)
        .take(400)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn an_endless_source_ends_where_a_downstream_take_stops() {
    assert_eq!(
        values(Stream::iterate(1u64, |n| n * 2).take(10)),
        (0..10).map(|i| 1u64 << i).collect::<Vec<_>>()
    );
    assert_eq!(
        values(Stream::iter(0u32..).take_while(|n| *n < 5)),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn rechunking_never_changes_what_a_stream_yields() {
    for n in [1usize, 2, 3, 7, 256, 1_000] {
        let got = values(
            Stream::range(0u32..1_000)
                .rechunk(n)
                .expect("n > 0")
                .map(|x| x + 1),
        );
        assert_eq!(got, (1u32..=1_000).collect::<Vec<_>>(), "rechunk({n})");
    }
}

#[test]
fn chunk_n_groups_elements_with_a_short_last_group() {
    let got = values(
        Stream::range(0u32..10)
            .chunk_n(4)
            .expect("n > 0")
            .map(Chunk::into_vec),
    );
    assert_eq!(got, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
}

#[test]
fn a_chunk_size_of_zero_is_refused_with_an_error_naming_the_operation() {
    let error = Stream::<u32, String>::range(0..10)
        .chunk_n(0)
        .expect_err("0 is refused");
    assert_eq!(error.operation, "chunk_n");
    assert!(error.to_string().contains("chunk size above 0"), "{error}");
    assert!(Stream::<u32, String>::iter_chunked(0..3, 0).is_err());
    assert!(Stream::<u32, String>::range(0..3).rechunk(0).is_err());
}

#[test]
fn scan_emits_the_initial_state_then_each_running_state() {
    assert_eq!(
        values(Stream::range(1u32..5).scan(0, |acc, n| acc + n)),
        vec![0, 1, 3, 6, 10]
    );
}

#[test]
fn flat_map_concatenates_the_inner_streams_in_order() {
    let got = values(Stream::range(0u32..4).flat_map(|n| Stream::range(0..n)));
    assert_eq!(got, vec![0, 0, 1, 0, 1, 2]);
}

#[test]
fn a_million_empty_inner_streams_run_in_constant_stack() {
    let got = run(Stream::range(0u32..1_000_000)
        .flat_map(|_| Stream::<u32, String>::empty())
        .compile()
        .count());
    assert_eq!(got.succeeded(), Some(0));
}

#[test]
fn zip_pairs_elements_until_the_shorter_input_ends() {
    let got = values(
        Stream::range(0u32..5).zip(Stream::iter(vec!['a', 'b', 'c']).rechunk(2).expect("n > 0")),
    );
    assert_eq!(got, vec![(0, 'a'), (1, 'b'), (2, 'c')]);
    assert_eq!(
        values(Stream::range(0u32..3).interleave(Stream::range(10u32..20))),
        vec![0, 10, 1, 11, 2, 12]
    );
}

#[test]
fn intersperse_changes_and_zip_with_index_follow_their_definitions() {
    assert_eq!(
        values(Stream::range(1u32..4).intersperse(0)),
        vec![1, 0, 2, 0, 3]
    );
    assert_eq!(
        values(
            Stream::emits(vec![1, 1, 2, 2, 2, 1, 3, 3])
                .rechunk(3)
                .expect("n > 0")
                .changes()
        ),
        vec![1, 2, 1, 3]
    );
    assert_eq!(
        values(Stream::emits(vec!['x', 'y']).zip_with_index()),
        vec![('x', 0), ('y', 1)]
    );
}

#[test]
fn eval_map_runs_each_program_in_order() {
    let log = log();
    let l = log.clone();
    let got = values(
        Stream::range(0u32..5).eval_map(move |n| note(&l, format!("saw {n}")).map(move |()| n * n)),
    );
    assert_eq!(got, vec![0, 1, 4, 9, 16]);
    assert_eq!(lines(&log), ["saw 0", "saw 1", "saw 2", "saw 3", "saw 4"]);
}

#[test]
fn compile_folds_counts_and_takes_the_last_element() {
    assert_eq!(
        run(Stream::range(1u64..=100).compile().fold(0, |a, n| a + n)).succeeded(),
        Some(5050)
    );
    assert_eq!(
        run(Stream::range(0u64..1234).compile().count()).succeeded(),
        Some(1234)
    );
    assert_eq!(
        run(Stream::range(0u64..1234).compile().last()).succeeded(),
        Some(Some(1233))
    );
    assert_eq!(
        run(Stream::<u64, String>::empty().compile().last()).succeeded(),
        Some(None)
    );
}

#[test]
fn a_resource_is_released_before_the_stream_appended_after_it_starts() {
    let log = log();
    let after = note(&log, "after");
    let stream = resource(&log, "a")
        .flat_map({
            let log = log.clone();
            move |name| Stream::exec(note(&log, format!("use {name}")))
        })
        .append(Stream::exec(after));
    let _: Vec<()> = values(stream);
    assert_eq!(
        lines(&log),
        ["open a", "use a", "close a Succeeded", "after"]
    );
}

#[test]
fn resources_are_released_in_reverse_order_of_acquisition_exactly_once() {
    let log = log();
    let l = log.clone();
    let stream = resource(&log, "a").flat_map(move |a| {
        let l2 = l.clone();
        resource(&l, "b").flat_map(move |b| Stream::exec(note(&l2, format!("use {a}{b}"))))
    });
    let _: Vec<()> = values(stream);
    assert_eq!(
        lines(&log),
        [
            "open a",
            "open b",
            "use ab",
            "close b Succeeded",
            "close a Succeeded"
        ]
    );
}

#[test]
fn a_take_that_stops_early_releases_the_input_before_the_rest_runs() {
    let log = log();
    let l = log.clone();
    let stream = resource(&log, "a")
        .flat_map(|_| Stream::iter(0u32..))
        .take(3)
        .append(Stream::exec(note(&l, "after")).map(|()| 99));
    assert_eq!(values(stream), vec![0, 1, 2]);
    assert_eq!(lines(&log), ["open a", "close a Succeeded", "after"]);
}

#[test]
fn an_error_releases_every_resource_once_and_ends_the_run_with_the_error() {
    let log = log();
    let stream = resource(&log, "a").flat_map(|_| {
        Stream::range(0u32..10).eval_map(|n| {
            if n == 3 {
                IO::raise_error(format!("bad {n}"))
            } else {
                IO::pure(n)
            }
        })
    });
    assert_eq!(
        run(stream.compile().to_vec()),
        Outcome::Errored("bad 3".to_string())
    );
    assert_eq!(lines(&log), ["open a", "close a Errored"]);
}

#[test]
fn handle_error_with_releases_the_failed_part_then_goes_on_with_the_handler() {
    let log = log();
    let stream = resource(&log, "a")
        .flat_map(|_| Stream::emit(1u32).append(Stream::raise_error("boom".to_string())))
        .handle_error_with(|e| Stream::emit(e.len() as u32));
    assert_eq!(values(stream), vec![1, 4]);
    assert_eq!(lines(&log), ["open a", "close a Errored"]);
    let attempted = values(
        Stream::emit(1u32)
            .append(Stream::raise_error("x".to_string()))
            .attempt(),
    );
    assert_eq!(attempted, vec![Ok(1), Err("x".to_string())]);
}

#[test]
fn a_canceled_run_releases_what_the_stream_holds() {
    let log = log();
    let stream = resource(&log, "a").flat_map(|_| Stream::eval(IO::<u32, String>::never()));
    let program = stream
        .compile()
        .drain()
        .timeout_to(std::time::Duration::from_millis(20), IO::unit());
    assert_eq!(run(program), Outcome::Succeeded(()));
    assert_eq!(lines(&log), ["open a", "close a Canceled"]);
}

#[test]
fn on_finalize_runs_once_when_its_stream_ends_and_a_failing_release_fails_the_run() {
    let log = log();
    let stream = Stream::range(0u32..3).on_finalize(note(&log, "done"));
    assert_eq!(values(stream), vec![0, 1, 2]);
    assert_eq!(lines(&log), ["done"]);
    let failing = Stream::<u32, String>::range(0..3)
        .on_finalize(IO::raise_error("release failed".to_string()))
        .on_finalize(note(&log, "outer"));
    assert_eq!(
        run(failing.compile().count()),
        Outcome::Errored("release failed".to_string())
    );
    assert_eq!(lines(&log), ["done", "outer"]);
}

#[test]
fn a_resource_value_is_emitted_and_released_with_the_resource() {
    let log = log();
    let (o, c) = (log.clone(), log.clone());
    let r = Resource::make(note(&o, "acquire").map(|()| 7u32), move |_| {
        note(&c, "release")
    });
    let l = log.clone();
    let stream = Stream::resource(r).flat_map(move |v| Stream::exec(note(&l, format!("use {v}"))));
    let _: Vec<()> = values(stream);
    assert_eq!(lines(&log), ["acquire", "use 7", "release"]);
    let _ = ExitCase::Succeeded;
}
