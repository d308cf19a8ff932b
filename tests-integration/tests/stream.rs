//! Streams on every executor: the stages against their meaning on plain
//! vectors, resource safety (finalizers counted, in order, exactly once),
//! the concurrent stages (bounds on concurrency, nothing left running when
//! a stream stops early or fails) and the channels.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{HANG_LIMIT, eventually, rt_test, within};
use spindle_core::{Deferred, IO, Outcome, Queue, Resource};
use spindle_stream::{Channel, Chunk, SignallingRef, Stream, Topic};

type E = String;

/// Every element of `stream`, run with `run`.
fn values<A: Send + 'static>(
    run: impl Fn(IO<Vec<A>, String>) -> Outcome<Vec<A>, String>,
    stream: Stream<A, String>,
) -> Vec<A> {
    match run(stream.compile().to_vec()) {
        Outcome::Succeeded(values) => values,
        other => panic!("the stream did not succeed: {:?}", other.map(|_| ())),
    }
}

type Log = Arc<Mutex<Vec<String>>>;

/// Runs `stream` to its end noting each element it gives in `log`; the
/// message of the panic it ended with (it must end with one, and not
/// hang: a stage that lost the panic may wait forever).
fn panic_message(
    run: impl Fn(IO<(), String>) -> Outcome<(), String> + Send + 'static,
    stream: Stream<u64, String>,
    log: &Log,
) -> String {
    let log = log.clone();
    let program = stream
        .eval_map(move |n| note(&log, n.to_string()))
        .compile()
        .drain();
    match within(HANG_LIMIT, move || run(program)) {
        Some(Outcome::Panicked(panic)) => panic.message().to_string(),
        Some(other) => panic!("the stream did not panic: {other:?}"),
        None => panic!("the stream hung"),
    }
}

/// A program that panics with "boom" after a turn of the executor.
fn boom() -> IO<u64, String> {
    IO::cede().map(|()| -> u64 { panic!("boom") })
}

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

rt_test! {
    fn pure_stages_give_what_the_same_stages_give_on_a_vector() {
        let got = values(run,
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

    fn an_endless_source_ends_where_a_downstream_take_stops() {
        assert_eq!(
            values(run, Stream::iterate(1u64, |n| n * 2).take(10)),
            (0..10).map(|i| 1u64 << i).collect::<Vec<_>>()
        );
        assert_eq!(
            values(run, Stream::iter(0u32..).take_while(|n| *n < 5)),
            vec![0, 1, 2, 3, 4]
        );
    }

    fn take_through_keeps_the_first_refused_element_and_releases_the_input_before_the_rest_runs() {
        assert_eq!(
            values(run, Stream::iter(0u32..).take_through(|n| *n < 5)),
            vec![0, 1, 2, 3, 4, 5]
        );
        assert_eq!(
            values(run, Stream::range(0u32..3).take_through(|n| *n < 10)),
            vec![0, 1, 2],
            "an input that ends first is taken whole"
        );
        let log = log();
        let after = note(&log, "after");
        let stream = resource(&log, "a")
            .flat_map(|_| Stream::iter(["GET", "QUIT", "GET"]))
            .take_through(|command| *command != "QUIT")
            .append(Stream::eval(after.map(|()| "after")));
        assert_eq!(values(run, stream), vec!["GET", "QUIT", "after"]);
        assert_eq!(
            lines(&log),
            ["open a", "close a Succeeded", "after"],
            "released once, before the stream after it"
        );
    }

    fn rechunking_never_changes_what_a_stream_yields() {
        for n in [1usize, 2, 3, 7, 256, 1_000] {
            let got = values(run,
                Stream::range(0u32..1_000)
                    .rechunk(n)
                    .expect("n > 0")
                    .map(|x| x + 1),
            );
            assert_eq!(got, (1u32..=1_000).collect::<Vec<_>>(), "rechunk({n})");
        }
    }

    fn chunk_n_groups_elements_with_a_short_last_group() {
        let got = values(run,
            Stream::range(0u32..10)
                .chunk_n(4)
                .expect("n > 0")
                .map(Chunk::into_vec),
        );
        assert_eq!(got, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    }

    fn sliding_gives_a_window_per_element_from_the_nth_and_one_short_window_for_a_short_input() {
        let got = values(run,
            Stream::range(1u32..5).sliding(2).expect("n > 0").map(Chunk::into_vec),
        );
        assert_eq!(got, vec![vec![1, 2], vec![2, 3], vec![3, 4]]);
        let short = values(run,
            Stream::range(1u32..3).sliding(5).expect("n > 0").map(Chunk::into_vec),
        );
        assert_eq!(short, vec![vec![1, 2]]);
        let none = values(run, Stream::<u32, String>::empty().sliding(3).expect("n > 0"));
        assert!(none.is_empty());
        assert!(Stream::<u32, String>::range(0..3).sliding(0).is_err());
    }

    fn buffer_lets_the_producer_run_up_to_n_elements_ahead_of_a_waiting_consumer() {
        let pulled = Arc::new(AtomicUsize::new(0));
        let (p, seen) = (pulled.clone(), pulled.clone());
        let gate = spindle_core::Deferred::<()>::new();
        let open = gate.clone();
        // The consumer waits at its first element (the first chunk of 4
        // taken); meanwhile the producer fills the buffer: the next 4 ready
        // and 4 more waiting to be handed over, then it waits too.
        let stream = Stream::<u32, String>::iter(0..100)
            .rechunk(1)
            .expect("n > 0")
            .map(move |x| {
                p.fetch_add(1, Ordering::SeqCst);
                x
            })
            .buffer(4)
            .expect("n > 0")
            .eval_map(move |x| open.get().map(move |()| x));
        let filled = eventually(move || seen.load(Ordering::SeqCst) >= 12)
            .product_r(IO::sleep(Duration::from_millis(5)));
        let (count, gate_count) = (pulled.clone(), pulled.clone());
        let opener = filled
            .map(move |()| gate_count.load(Ordering::SeqCst))
            .flat_map(move |ahead| gate.complete(()).map(move |_| ahead));
        let (got, ahead) = run(stream.take(3).compile().to_vec().both(opener))
            .succeeded()
            .expect("a value");
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(ahead, 12, "the producer stops 8 elements past the consumer's chunk");
        assert_eq!(count.load(Ordering::SeqCst), 12);
        assert!(Stream::<u32, String>::range(0..3).buffer(0).is_err());
    }

    fn a_compiled_stream_of_many_one_element_steps_runs_in_constant_stack() {
        // 200,000 pulls of one element each: the compiled loop recurses
        // through `flat_map`, which the run loop keeps flat.
        let stream = Stream::<u64, String>::range(0..200_000).eval_map(IO::pure);
        assert_eq!(
            run(stream.compile().fold(0u64, |acc, x| acc + x)),
            Outcome::Succeeded(199_999 * 200_000 / 2)
        );
    }

    fn par_eval_maps_workers_run_many_elements_in_constant_stack() {
        // Each worker's loop recurses through `redeem_with` into its next
        // turn; programs that finish at once never suspend the worker.
        for ordered in [true, false] {
            let input = Stream::<u64, String>::range(0..200_000);
            let stream = if ordered {
                input.par_eval_map(2, IO::pure)
            } else {
                input.par_eval_map_unordered(2, IO::pure)
            };
            assert_eq!(
                run(stream.expect("n > 0").compile().fold(0u64, |acc, x| acc + x)),
                Outcome::Succeeded(199_999 * 200_000 / 2),
                "ordered: {ordered}"
            );
        }
    }

    fn a_chunk_size_of_zero_is_refused_with_an_error_naming_the_operation() {
        let error = Stream::<u32, String>::range(0..10)
            .chunk_n(0)
            .expect_err("0 is refused");
        assert_eq!(error.operation, "chunk_n");
        assert!(error.to_string().contains("chunk size above 0"), "{error}");
        assert!(Stream::<u32, String>::iter_chunked(0..3, 0).is_err());
        assert!(Stream::<u32, String>::range(0..3).rechunk(0).is_err());
    }

    fn scan_emits_the_initial_state_then_each_running_state() {
        assert_eq!(
            values(run, Stream::range(1u32..5).scan(0, |acc, n| acc + n)),
            vec![0, 1, 3, 6, 10]
        );
    }

    fn flat_map_concatenates_the_inner_streams_in_order() {
        let got = values(run, Stream::range(0u32..4).flat_map(|n| Stream::range(0..n)));
        assert_eq!(got, vec![0, 0, 1, 0, 1, 2]);
    }

    fn a_million_empty_inner_streams_run_in_constant_stack() {
        let got = run(Stream::range(0u32..1_000_000)
            .flat_map(|_| Stream::<u32, String>::empty())
            .compile()
            .count());
        assert_eq!(got.succeeded(), Some(0));
    }

    fn zip_pairs_elements_until_the_shorter_input_ends() {
        let got = values(run,
            Stream::range(0u32..5).zip(Stream::iter(vec!['a', 'b', 'c']).rechunk(2).expect("n > 0")),
        );
        assert_eq!(got, vec![(0, 'a'), (1, 'b'), (2, 'c')]);
        assert_eq!(
            values(run, Stream::range(0u32..3).interleave(Stream::range(10u32..20))),
            vec![0, 10, 1, 11, 2, 12]
        );
    }

    fn intersperse_changes_and_zip_with_index_follow_their_definitions() {
        assert_eq!(
            values(run, Stream::range(1u32..4).intersperse(0)),
            vec![1, 0, 2, 0, 3]
        );
        assert_eq!(
            values(run,
                Stream::emits(vec![1, 1, 2, 2, 2, 1, 3, 3])
                    .rechunk(3)
                    .expect("n > 0")
                    .changes()
            ),
            vec![1, 2, 1, 3]
        );
        assert_eq!(
            values(run, Stream::emits(vec!['x', 'y']).zip_with_index()),
            vec![('x', 0), ('y', 1)]
        );
    }

    fn eval_map_runs_each_program_in_order() {
        let log = log();
        let l = log.clone();
        let got = values(run,
            Stream::range(0u32..5).eval_map(move |n| note(&l, format!("saw {n}")).map(move |()| n * n)),
        );
        assert_eq!(got, vec![0, 1, 4, 9, 16]);
        assert_eq!(lines(&log), ["saw 0", "saw 1", "saw 2", "saw 3", "saw 4"]);
    }

    fn compile_folds_counts_and_takes_the_last_element() {
        assert_eq!(
            run(Stream::<u64, E>::range(1u64..=100).compile().fold(0, |a, n| a + n)).succeeded(),
            Some(5050)
        );
        assert_eq!(
            run(Stream::<u64, E>::range(0u64..1234).compile().count()).succeeded(),
            Some(1234)
        );
        assert_eq!(
            run(Stream::<u64, E>::range(0u64..1234).compile().last()).succeeded(),
            Some(Some(1233))
        );
        assert_eq!(
            run(Stream::<u64, String>::empty().compile().last()).succeeded(),
            Some(None)
        );
    }

    fn a_resource_is_released_before_the_stream_appended_after_it_starts() {
        let log = log();
        let after = note(&log, "after");
        let stream = resource(&log, "a")
            .flat_map({
                let log = log.clone();
                move |name| Stream::exec(note(&log, format!("use {name}")))
            })
            .append(Stream::exec(after));
        let _: Vec<()> = values(run, stream);
        assert_eq!(
            lines(&log),
            ["open a", "use a", "close a Succeeded", "after"]
        );
    }

    fn resources_are_released_in_reverse_order_of_acquisition_exactly_once() {
        let log = log();
        let l = log.clone();
        let stream = resource(&log, "a").flat_map(move |a| {
            let l2 = l.clone();
            resource(&l, "b").flat_map(move |b| Stream::exec(note(&l2, format!("use {a}{b}"))))
        });
        let _: Vec<()> = values(run, stream);
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

    fn a_take_that_stops_early_releases_the_input_before_the_rest_runs() {
        let log = log();
        let l = log.clone();
        let stream = resource(&log, "a")
            .flat_map(|_| Stream::iter(0u32..))
            .take(3)
            .append(Stream::exec(note(&l, "after")).map(|()| 99));
        assert_eq!(values(run, stream), vec![0, 1, 2]);
        assert_eq!(lines(&log), ["open a", "close a Succeeded", "after"]);
    }

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

    fn handle_error_with_releases_the_failed_part_then_goes_on_with_the_handler() {
        let log = log();
        let stream = resource(&log, "a")
            .flat_map(|_| Stream::emit(1u32).append(Stream::raise_error("boom".to_string())))
            .handle_error_with(|e| Stream::emit(e.len() as u32));
        assert_eq!(values(run, stream), vec![1, 4]);
        assert_eq!(lines(&log), ["open a", "close a Errored"]);
        let attempted = values(run,
            Stream::emit(1u32)
                .append(Stream::raise_error("x".to_string()))
                .attempt(),
        );
        assert_eq!(attempted, vec![Ok(1), Err("x".to_string())]);
    }

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

    fn on_finalize_runs_once_when_its_stream_ends_and_a_failing_release_fails_the_run() {
        let log = log();
        let stream = Stream::range(0u32..3).on_finalize(note(&log, "done"));
        assert_eq!(values(run, stream), vec![0, 1, 2]);
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

    fn a_resource_value_is_emitted_and_released_with_the_resource() {
        let log = log();
        let (o, c) = (log.clone(), log.clone());
        let r = Resource::make(note(&o, "acquire").map(|()| 7u32), move |_| {
            note(&c, "release")
        });
        let l = log.clone();
        let stream = Stream::resource(r).flat_map(move |v| Stream::exec(note(&l, format!("use {v}"))));
        let _: Vec<()> = values(run, stream);
        assert_eq!(lines(&log), ["acquire", "use 7", "release"]);
    }

    fn par_eval_map_keeps_input_order_and_runs_at_most_n_at_once() {
        let gauge = Gauge::default();
        let g = gauge.clone();
        // Later elements finish first: order must still be the input's.
        let stream = Stream::range(0u64..12)
            .par_eval_map(3, move |i| g.hold(12 - i, i * 10))
            .expect("n > 0");
        assert_eq!(values(run, stream), (0..12).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(gauge.most.load(Ordering::SeqCst), 3);
        assert_eq!(gauge.ended.load(Ordering::SeqCst), 12);
    }

    fn par_eval_map_unordered_gives_every_value_and_runs_at_most_n_at_once() {
        let gauge = Gauge::default();
        let g = gauge.clone();
        let stream = Stream::range(0u64..12)
            .par_eval_map_unordered(4, move |i| g.hold(1 + (i * 7) % 5, i))
            .expect("n > 0");
        let mut got = values(run, stream);
        got.sort_unstable();
        assert_eq!(got, (0..12).collect::<Vec<_>>());
        assert_eq!(gauge.most.load(Ordering::SeqCst), 4);
    }

    fn par_eval_map_emits_the_values_before_a_failed_element_then_its_error() {
        let stream = Stream::range(0u64..10)
            .par_eval_map(3, |i| {
                if i == 4 {
                    IO::cede().flat_map(move |()| IO::raise_error(format!("bad {i}")))
                } else {
                    IO::cede().map(move |()| i)
                }
            })
            .expect("n > 0")
            .attempt();
        let want: Vec<Result<u64, String>> =
            vec![Ok(0), Ok(1), Ok(2), Ok(3), Err("bad 4".to_string())];
        assert_eq!(values(run, stream), want);
    }

    fn par_eval_map_gives_every_value_of_a_failing_input_before_the_inputs_error() {
        let input = Stream::range(0u64..5).append(Stream::raise_error("input failed".to_string()));
        let stream = input
            .par_eval_map(2, |i| IO::cede().map(move |()| i * 2))
            .expect("n > 0")
            .attempt();
        let want: Vec<Result<u64, String>> = vec![
            Ok(0),
            Ok(2),
            Ok(4),
            Ok(6),
            Ok(8),
            Err("input failed".to_string()),
        ];
        assert_eq!(values(run, stream), want);
    }

    fn par_eval_map_holds_at_most_n_finished_values_for_a_consumer_that_has_not_pulled() {
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        // The first element never finishes: the next ones finish and wait
        // for it, one at a time beside it, until 2 finished values are
        // held; then nothing more starts (1 stuck + 2 finished).
        let stream = Stream::<u64, String>::range(0..100)
            .par_eval_map(2, move |i| {
                s.fetch_add(1, Ordering::SeqCst);
                if i == 0 { IO::never() } else { IO::pure(i) }
            })
            .expect("n > 0");
        let program = stream
            .compile()
            .drain()
            .timeout_to(Duration::from_millis(20), IO::unit());
        assert_eq!(run(program), Outcome::Succeeded(()));
        assert_eq!(started.load(Ordering::SeqCst), 3);
    }

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

    fn a_panic_in_a_par_eval_map_element_reaches_the_consumer_after_the_values_before_it() {
        for ordered in [true, false] {
            let log = log();
            let f = |i: u64| if i == 3 { boom() } else { IO::cede().map(move |()| i) };
            // One worker: 0, 1 and 2 are finished and taken before 3 runs.
            let stream = Stream::range(0u64..6);
            let stream = if ordered {
                stream.par_eval_map(1, f)
            } else {
                stream.par_eval_map_unordered(1, f)
            };
            let message = panic_message(run, stream.expect("n > 0"), &log);
            assert!(message.contains("boom"), "{message}");
            assert_eq!(lines(&log), ["0", "1", "2"], "ordered: {ordered}");
        }
    }

    fn a_panic_in_one_of_several_par_eval_map_workers_stops_the_stream_with_that_panic() {
        let log = log();
        let gauge = Gauge::default();
        let counting = gauge.clone();
        let stream = Stream::range(0u64..1_000)
            .par_eval_map(4, move |i| if i == 10 { boom() } else { counting.hold(1, i) })
            .expect("n > 0");
        let message = panic_message(run, stream, &log);
        assert!(message.contains("boom"), "{message}");
        let got = lines(&log);
        let want: Vec<String> = (0..got.len()).map(|n| n.to_string()).collect();
        assert_eq!(got, want, "the values before the panic, in order");
        assert!(got.len() <= 10, "nothing after the panicked element: {got:?}");
        let (entered, ended) = (gauge.entered.load(Ordering::SeqCst), gauge.ended.load(Ordering::SeqCst));
        assert_eq!(entered, ended, "no element program left running");
    }

    fn a_panic_in_a_prefetched_input_reaches_the_consumer_after_its_chunks_and_finalizers_run_once() {
        let log = log();
        let input = resource(&log, "r")
            .flat_map(|_| Stream::range(0u64..3).append(Stream::eval(boom())));
        let message = panic_message(run, input.prefetch(), &log);
        assert!(message.contains("boom"), "{message}");
        let got = lines(&log);
        assert_eq!(got[..4], ["open r", "0", "1", "2"]);
        assert_eq!(got.iter().filter(|l| l.starts_with("close r")).count(), 1, "{got:?}");
    }

    fn a_panic_in_one_input_of_merge_panics_the_consumer() {
        let log = log();
        let merged = Stream::range(0u64..3).merge(Stream::eval(boom()));
        let message = panic_message(run, merged, &log);
        assert!(message.contains("boom"), "merge: {message}");
    }

    fn a_panic_in_one_inner_stream_of_par_join_panics_the_consumer() {
        let log = log();
        let joined = Stream::emits(vec![
            Stream::range(0u64..3),
            Stream::eval(boom()),
            Stream::eval(IO::never()),
        ])
        .par_join(3)
        .expect("n > 0");
        let message = panic_message(run, joined, &log);
        assert!(message.contains("boom"), "par_join: {message}");
    }

    fn merge_gives_the_elements_of_both_inputs() {
        let stream = Stream::range(0u32..500).merge(Stream::range(1_000u32..1_300));
        let mut got = values(run, stream);
        got.sort_unstable();
        let want: Vec<u32> = (0..500).chain(1_000..1_300).collect();
        assert_eq!(got, want);
    }

    fn par_join_runs_inner_streams_at_most_n_at_once() {
        let gauge = Gauge::default();
        let g = gauge.clone();
        let outer = Stream::range(0u64..6)
            .map(move |i| Stream::eval(g.hold(5, i)).append(Stream::emit(100 + i)));
        let mut got = values(run, outer.par_join(2).expect("n > 0"));
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105]);
        assert_eq!(gauge.most.load(Ordering::SeqCst), 2);
    }

    fn a_take_after_par_join_cancels_inner_streams_that_never_end_once_the_outer_one_ended() {
        let log = log();
        let (a, b) = (log.clone(), log.clone());
        let acquired = Deferred::<()>::new();
        let (signal, wait) = (acquired.clone(), acquired);
        // The outer stream ends at once; one inner stream never ends: the
        // take must still stop it (and run its finalizer) and end. The
        // other gives its values once the first acquired its resource.
        let outer = Stream::emits(vec![
            Stream::eval(wait.get()).flat_map(|()| Stream::range(0u64..3)),
            Stream::bracket(signal.complete(()).void(), move |()| note(&a, "released"))
                .flat_map(|()| Stream::eval(IO::never())),
        ]);
        let stream = outer.par_join(2).expect("n > 0").take(3);
        let program = stream.compile().to_vec();
        let mut got = match within(HANG_LIMIT, move || run(program)) {
            Some(Outcome::Succeeded(values)) => values,
            Some(other) => panic!("the stream did not succeed: {:?}", other.map(|_| ())),
            None => panic!("the stream hung"),
        };
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(lines(&b), ["released"]);
    }

    fn a_take_after_par_eval_map_cancels_the_programs_still_running() {
        let gauge = Gauge::default();
        let g = gauge.clone();
        let stream = Stream::iter(0u64..)
            .par_eval_map(4, move |i| g.hold(if i == 0 { 1 } else { 10_000 }, i))
            .expect("n > 0")
            .take(1);
        assert_eq!(values(run, stream), vec![0]);
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

    fn resources_of_a_merged_input_are_released_once_when_the_merge_is_cut_short() {
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let (open, close) = (log.clone(), log.clone());
        let opened = spindle_core::Deferred::<()>::new();
        let signal = opened.clone();
        let left = Stream::bracket(
            IO::delay(move || open.lock().unwrap().push("open".into()))
                .product_r(signal.complete(()).void()),
            move |()| IO::delay(move || close.lock().unwrap().push("close".into())),
        )
        .flat_map(|()| Stream::iter(0u32..));
        // The right input starts once the left one holds its resource.
        let right = Stream::eval(opened.get()).flat_map(|()| Stream::iter(1_000_000u32..));
        let stream = left.merge(right).take(100);
        assert_eq!(values(run, stream).len(), 100);
        assert_eq!(*log.lock().unwrap(), ["open", "close"]);
    }

    fn readers_of_a_channel_share_its_elements_and_end_after_it_closes() {
        let channel = Channel::<u32>::bounded(3).expect("a capacity");
        let (w, r1, r2) = (channel.clone(), channel.clone(), channel.clone());
        let writer = Stream::<u32, E>::range(0u32..100)
            .through(move |s| w.sends(s))
            .compile()
            .drain();
        let program = writer
            .both(r1.stream().compile().to_vec())
            .both(r2.stream().compile().to_vec())
            .map(|(((), a), b)| (a, b));
        let (a, b) = run(program).succeeded().expect("a success");
        let mut all: Vec<u32> = a.into_iter().chain(b).collect();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        assert!(channel.is_closed());
    }

    fn a_closed_channel_gives_a_sent_element_back() {
        let channel = Channel::<u32>::unbounded();
        let c = channel.clone();
        let outcome = run(channel.close::<E>().product_r(c.send(7)));
        assert_eq!(
            outcome.succeeded().map(|r| r.map_err(|e| e.0)),
            Some(Err(7))
        );
    }

    fn a_capacity_of_zero_is_refused() {
        assert!(Channel::<u32>::bounded(0).is_err());
        assert!(Topic::<u32>::new().subscribe::<String>(0).is_err());
    }

    fn a_slow_reader_of_discrete_skips_to_the_latest_value() {
        let signal = SignallingRef::new(0u32);
        let (reader, writer) = (signal.clone(), signal.clone());
        // Three changes in a row, then the reader looks.
        let program = writer
            .set::<E>(1)
            .product_r(writer.set(2))
            .product_r(writer.set(3))
            .product_r(reader.discrete().take(1).compile().to_vec());
        assert_eq!(run(program), Outcome::Succeeded(vec![3]));
    }

    fn from_queue_ends_when_the_queue_is_closed_and_drained() {
        let queue = Queue::<u32>::unbounded();
        let (q, closing) = (queue.clone(), queue.clone());
        let program = IO::traverse(vec![1u32, 2, 3], move |v| q.offer::<E>(v))
            .product_r(closing.close())
            .product_r(Stream::from_queue(queue).compile().to_vec());
        assert_eq!(run(program), Outcome::Succeeded(vec![1, 2, 3]));
    }

    fn an_async_stream_becomes_a_stream_whose_ready_items_move_in_chunks() {
        let s = Stream::<u32, E>::from_futures(futures::stream::iter(0..1_000u32));
        assert_eq!(values(run, s), (0..1_000).collect::<Vec<_>>());
        let chunks = Stream::<u32, E>::from_futures(futures::stream::iter(0..1_000u32))
            .chunks()
            .map(|c| c.len());
        // Every item was ready: one chunk (below the default size).
        assert_eq!(values(run, chunks), vec![1_000]);
        let long = Stream::<u32, E>::from_futures(futures::stream::iter(0..10_000u32))
            .chunks()
            .map(|c| c.len());
        assert_eq!(values(run, long), vec![4_096, 4_096, 1_808]);
    }

    fn a_stream_becomes_an_async_stream_whose_last_item_is_its_error() {
        let rt = rt();
        let handle = rt.handle().clone();
        let program = IO::defer(move || {
            let items = Stream::range(0u32..3)
                .append(Stream::raise_error("late".to_string()))
                .into_futures_on(&handle);
            IO::<_, E>::from_future(futures::StreamExt::collect::<Vec<_>>(items))
        });
        assert_eq!(
            rt.run(program),
            Outcome::Succeeded(vec![Ok(0), Ok(1), Ok(2), Err("late".to_string())])
        );
    }

    fn dropping_the_async_stream_cancels_its_run_wherever_it_waits_and_releases_what_it_holds() {
        let rt = rt();
        let handle = rt.handle().clone();
        let log = log();
        let (l, check) = (log.clone(), log.clone());
        let program = IO::defer(move || {
            // After its three elements the stream waits forever: only the
            // drop's cancellation can end it.
            let items = resource(&l, "a")
                .flat_map(|_| Stream::range(0u32..3).append(Stream::eval(IO::never())))
                .into_futures_on(&handle);
            IO::<_, E>::from_future(futures::StreamExt::collect::<Vec<_>>(futures::StreamExt::take(items, 3)))
        })
        .flat_map(move |got| {
            eventually(move || check.lock().unwrap().len() == 2).map(move |()| got)
        });
        assert_eq!(rt.run(program), Outcome::Succeeded(vec![Ok(0), Ok(1), Ok(2)]));
        assert_eq!(lines(&log), ["open a", "close a Canceled"]);
    }

    fn an_io_block_emits_a_stream_and_its_error_ends_it() {
        let stream: Stream<u32, E> = Stream::block(|out| async move {
            for n in 0..5u32 {
                out.emit(n).await?;
            }
            out.emit_chunk(Chunk::from(vec![10, 11])).await?;
            Err("done badly".to_string())
        });
        let got = run(stream.attempt().compile().to_vec());
        assert_eq!(
            got,
            Outcome::Succeeded(vec![
                Ok(0), Ok(1), Ok(2), Ok(3), Ok(4), Ok(10), Ok(11),
                Err("done badly".to_string())
            ])
        );
    }

    fn a_consumer_that_stops_early_cancels_the_emitting_block_and_its_finalizers_run() {
        let log = log();
        let l = log.clone();
        let stream: Stream<u32, E> = Stream::block(move |out| async move {
            let guard = note(&l, "released");
            let body = async move {
                let mut n = 0u32;
                loop {
                    out.emit(n).await?;
                    n += 1;
                }
            };
            IO::<(), E>::block(body).guarantee(guard).await
        });
        assert_eq!(values(run, stream.take(3)), vec![0, 1, 2]);
        assert_eq!(lines(&log), ["released"]);
    }
}
