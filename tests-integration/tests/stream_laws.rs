//! Stream laws and text pipes on random input (proptest), on every
//! executor: the monad laws of `flat_map`, chunking invariance (how a
//! stream is cut into chunks never changes what the stages yield), a
//! reference model of resource order under early termination and errors,
//! and the text pipes over random cuts of their input.

mod common;

use std::sync::{Arc, Mutex};

use common::rt_test;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use spindle_core::{IO, Outcome};
use spindle_stream::text::{self, TextError};
use spindle_stream::{Chunk, Stream};

#[derive(Debug, Clone, PartialEq)]
enum Failure {
    Text(TextError),
    Boom(u32),
}

impl From<TextError> for Failure {
    fn from(e: TextError) -> Self {
        Failure::Text(e)
    }
}

type E = Failure;

/// Checks `test` on 64 generated cases (see `common::props`).
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    common::props::check_cases(64, strategy, test);
}

/// The lines `lines` makes of `s`: every piece before a `\n` (a `\r`
/// before the `\n` dropped), then what follows the last `\n`, if
/// anything, as it is.
fn lines_model(s: &str) -> Vec<String> {
    let mut pieces: Vec<&str> = s.split('\n').collect();
    let last = pieces.pop().unwrap_or("");
    let mut lines: Vec<String> = pieces
        .iter()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    if !last.is_empty() {
        lines.push(last.to_string());
    }
    lines
}

/// `items` cut into chunks of the given sizes (cycled; 0 read as 1).
fn chunked<A: Clone + Send + 'static>(items: &[A], cuts: &[usize]) -> Stream<A, E> {
    let mut chunks = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < items.len() {
        let n = cuts.get(i % cuts.len().max(1)).copied().unwrap_or(1).max(1);
        let end = (at + n).min(items.len());
        chunks.push(Chunk::from(items[at..end].to_vec()));
        at = end;
        i += 1;
    }
    Stream::iter(chunks).flat_map(Stream::chunk)
}

fn items() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(0u32..100, 0..60)
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..9, 1..6)
}

/// Runs `program` with `run` and gives its value (panics otherwise).
fn value<A: Send + 'static>(outcome: Outcome<A, E>) -> Result<A, TestCaseError> {
    match outcome {
        Outcome::Succeeded(v) => Ok(v),
        other => Err(TestCaseError::fail(format!(
            "not a success: {:?}",
            other.map(|_| ())
        ))),
    }
}

/// The stages under test, applied the same way to a stream and a vector.
fn pipeline(s: Stream<u32, E>, take: u64, drop: u64) -> Stream<u32, E> {
    s.map(|x| x * 3)
        .filter(|x| x % 2 == 0)
        .scan(0u32, |acc, x| acc.wrapping_add(x))
        .drop(drop)
        .take(take)
        .flat_map(|x| Stream::emits(vec![x, x + 1]))
        .changes()
}

fn pipeline_on_vec(v: &[u32], take: u64, drop: u64) -> Vec<u32> {
    let mut scanned = vec![0u32];
    let mut acc = 0u32;
    for x in v.iter().map(|x| x * 3).filter(|x| x % 2 == 0) {
        acc = acc.wrapping_add(x);
        scanned.push(acc);
    }
    let mut out: Vec<u32> = Vec::new();
    for x in scanned.into_iter().skip(drop as usize).take(take as usize) {
        for y in [x, x + 1] {
            if out.last() != Some(&y) {
                out.push(y);
            }
        }
    }
    out
}

/// A log of what the resource model did.
type Log = Arc<Mutex<Vec<String>>>;

/// `depth` nested resources around `m` elements, the element at `fail_at`
/// (if any) an error.
fn nested(log: &Log, depth: u32, m: u32, fail_at: Option<u32>) -> Stream<u32, E> {
    if depth == 0 {
        return Stream::range(0..m).eval_map(move |i| {
            if Some(i) == fail_at {
                IO::raise_error(Failure::Boom(i))
            } else {
                IO::pure(i)
            }
        });
    }
    let (open, close, inner) = (log.clone(), log.clone(), log.clone());
    Stream::bracket(
        IO::delay(move || open.lock().unwrap().push(format!("open {depth}"))),
        move |()| IO::delay(move || close.lock().unwrap().push(format!("close {depth}"))),
    )
    .flat_map(move |()| nested(&inner, depth - 1, m, fail_at))
}

rt_test! {
    fn flat_map_obeys_the_monad_laws_whatever_the_chunks() {
        let rt = rt();
        check((items(), cuts()), |(v, c)| {
            let f = |x: u32| Stream::<u32, E>::emits(vec![x, x + 1]);
            let g = |x: u32| Stream::<u32, E>::range(0..x % 3);
            // Left identity: emit(a).flat_map(f) == f(a).
            for &a in v.iter().take(3) {
                let left = value(rt.run(Stream::emit(a).flat_map(f).compile().to_vec()))?;
                prop_assert_eq!(left, value(rt.run(f(a).compile().to_vec()))?);
            }
            // Right identity: s.flat_map(emit) == s.
            let right = value(rt.run(chunked(&v, &c).flat_map(Stream::emit).compile().to_vec()))?;
            prop_assert_eq!(&right, &v);
            // Associativity.
            let a = value(rt.run(chunked(&v, &c).flat_map(f).flat_map(g).compile().to_vec()))?;
            let b = value(rt.run(chunked(&v, &c).flat_map(move |x| f(x).flat_map(g)).compile().to_vec()))?;
            prop_assert_eq!(a, b);
            Ok(())
        });
    }

    fn stages_give_the_same_elements_however_the_input_is_chunked() {
        let rt = rt();
        check((items(), cuts(), cuts(), 0u64..40, 0u64..10), |(v, c1, c2, take, drop)| {
            let want = pipeline_on_vec(&v, take, drop);
            let a = value(rt.run(pipeline(chunked(&v, &c1), take, drop).compile().to_vec()))?;
            let b = value(rt.run(pipeline(chunked(&v, &c2), take, drop).compile().to_vec()))?;
            prop_assert_eq!(&a, &want);
            prop_assert_eq!(&b, &want);
            let n = c1[0].max(1);
            let rechunked = value(rt.run(chunked(&v, &c2).rechunk(n).unwrap().compile().to_vec()))?;
            prop_assert_eq!(&rechunked, &v);
            let groups = value(rt.run(chunked(&v, &c1).chunk_n(n).unwrap().compile().to_vec()))?;
            let regrouped: Vec<Vec<u32>> = v.chunks(n).map(|g| g.to_vec()).collect();
            prop_assert_eq!(groups.into_iter().map(Chunk::into_vec).collect::<Vec<_>>(), regrouped);
            let windows = value(rt.run(chunked(&v, &c2).sliding(n).unwrap().compile().to_vec()))?;
            let mut want_windows: Vec<Vec<u32>> = v.windows(n).map(|w| w.to_vec()).collect();
            if want_windows.is_empty() && !v.is_empty() {
                want_windows.push(v.clone());
            }
            prop_assert_eq!(windows.into_iter().map(Chunk::into_vec).collect::<Vec<_>>(), want_windows);
            let buffered = value(rt.run(chunked(&v, &c1).buffer(n).unwrap().compile().to_vec()))?;
            prop_assert_eq!(&buffered, &v);
            Ok(())
        });
    }

    fn resources_open_in_order_and_close_once_in_reverse_under_early_stops_and_errors() {
        let rt = rt();
        check((1u32..5, 0u32..5, 0u64..8, proptest::option::of(0u32..5)), |(depth, m, take, fail_at)| {
            let log: Log = Arc::new(Mutex::new(Vec::new()));
            let outcome = rt.run(nested(&log, depth, m, fail_at).take(take).compile().to_vec());
            // The model: nothing is pulled by take(0); otherwise every
            // resource opens, outermost first, and closes once, innermost
            // first; the elements are those before the error, up to `take`.
            let opened = take > 0;
            let fails = fail_at.filter(|&f| f < m && (f as u64) < take);
            let elements: Vec<u32> = (0..m).take(take as usize).take_while(|i| Some(*i) != fails).collect();
            let mut want: Vec<String> = Vec::new();
            if opened {
                want.extend((1..=depth).rev().map(|d| format!("open {d}")));
                want.extend((1..=depth).map(|d| format!("close {d}")));
            }
            prop_assert_eq!(&*log.lock().unwrap(), &want);
            match fails {
                Some(f) => prop_assert_eq!(outcome, Outcome::Errored(Failure::Boom(f))),
                None => prop_assert_eq!(outcome, Outcome::Succeeded(elements)),
            }
            Ok(())
        });
    }

    fn utf8_decode_gives_back_the_text_however_its_bytes_are_cut() {
        let rt = rt();
        check((".{0,40}", cuts()), |(s, c)| {
            let bytes = chunked(s.as_bytes(), &c);
            let got = value(rt.run(bytes.through(text::utf8_decode).compile().to_vec()))?;
            prop_assert_eq!(got.concat(), s);
            Ok(())
        });
    }

    fn invalid_utf8_fails_with_its_byte_offset() {
        let rt = rt();
        let mut bytes = "héllo".as_bytes().to_vec();
        bytes.push(0xff);
        bytes.extend_from_slice(b"rest");
        let offset = 6;
        for cuts in [vec![1], vec![2, 3], vec![100]] {
            let got = rt.run(chunked(&bytes, &cuts).through(text::utf8_decode).compile().to_vec());
            assert_eq!(got, Outcome::Errored(Failure::Text(TextError::InvalidUtf8 { offset })), "{cuts:?}");
        }
        let truncated = rt.run(chunked("é".as_bytes(), &[1]).take(1).through(text::utf8_decode).compile().to_vec());
        assert_eq!(truncated, Outcome::Errored(Failure::Text(TextError::TruncatedUtf8 { offset: 0 })));
        assert!(TextError::InvalidUtf8 { offset }.to_string().contains("byte offset 6"));
    }

    fn lines_split_text_at_line_breaks_however_it_is_cut() {
        let rt = rt();
        check(("[a-c\\r\\n]{0,60}", cuts()), |(s, c)| {
            let strings: Vec<String> = s.chars().map(String::from).collect();
            let want = lines_model(&s);
            let got = value(rt.run(chunked(&strings, &c).through(|t| text::lines(t, 1_000)).compile().to_vec()))?;
            prop_assert_eq!(got, want);
            Ok(())
        });
    }

    fn lines_split_text_at_line_breaks_however_the_strings_are_cut() {
        let rt = rt();
        // Strings of several characters (lines whole inside one string,
        // and lines across strings), each cut at random places.
        check(("[a-c\\r\\n]{0,60}", cuts(), cuts()), |(s, at, c)| {
            let mut strings = Vec::new();
            let mut rest = s.as_str();
            for n in at.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let n = (*n).clamp(1, rest.len());
                strings.push(rest[..n].to_string());
                rest = &rest[n..];
            }
            let want = lines_model(&s);
            let got = value(rt.run(chunked(&strings, &c).through(|t| text::lines(t, 1_000)).compile().to_vec()))?;
            prop_assert_eq!(got, want);
            Ok(())
        });
    }

    fn lines_of_strings_holding_many_lines_come_whole_in_chunks_of_at_most_the_batch() {
        let rt = rt();
        // Strings of up to 600 characters, a third of them line breaks: a
        // string may hold several batches of lines.
        check(("[ab\\n]{0,600}", cuts(), proptest::collection::vec(1usize..400, 1..4)), |(s, c, at)| {
            let mut strings = Vec::new();
            let mut rest = s.as_str();
            for n in at.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let n = (*n).min(rest.len());
                strings.push(rest[..n].to_string());
                rest = &rest[n..];
            }
            let chunks = value(rt.run(chunked(&strings, &c).through(|t| text::lines(t, 1_000)).chunks().compile().to_vec()))?;
            prop_assert!(chunks.iter().all(|chunk| chunk.len() <= text::LINES_PER_CHUNK), "a chunk of more than {} lines", text::LINES_PER_CHUNK);
            let got: Vec<String> = chunks.into_iter().flat_map(Chunk::into_vec).collect();
            prop_assert_eq!(got, lines_model(&s));
            Ok(())
        });
        // One string of three and a half batches: full batches, then the rest.
        let many: String = (0..text::LINES_PER_CHUNK * 7 / 2).map(|i| format!("line {i}\n")).collect();
        let sizes = rt.run(Stream::<String, E>::emit(many).through(|t| text::lines(t, 100)).chunks().map(|c| c.len()).compile().to_vec());
        let n = text::LINES_PER_CHUNK;
        assert_eq!(sizes, Outcome::Succeeded(vec![n, n, n, n / 2]));
        // Empty strings inside a chunk are stepped over, not taken for its end.
        let strings = Stream::<String, E>::chunk(Chunk::from(vec!["a\nb".to_string(), String::new(), "c\n".to_string(), String::new(), "d".to_string()]));
        let got = rt.run(strings.through(|t| text::lines(t, 100)).compile().to_vec());
        assert_eq!(got, Outcome::Succeeded(vec!["a".to_string(), "bc".to_string(), "d".to_string()]));
    }

    fn a_line_over_the_limit_after_several_batches_fails_after_every_line_before_it() {
        let rt = rt();
        let before = text::LINES_PER_CHUNK * 2 + 5;
        let mut input: String = (0..before).map(|i| format!("{i}\n")).collect();
        input.push_str("this line is long\nnever read\n");
        let got = rt.run(Stream::<String, E>::emit(input).through(|t| text::lines(t, 5)).attempt().compile().to_vec());
        let Outcome::Succeeded(got) = got else { panic!("attempt does not fail") };
        let expected: Vec<Result<String, E>> = (0..before)
            .map(|i| Ok(i.to_string()))
            .chain([Err(Failure::Text(TextError::LineTooLong { limit: 5, line: before as u64 + 1 }))])
            .collect();
        assert_eq!(got, expected);
    }

    fn a_line_at_the_limit_passes_and_one_byte_more_fails_wherever_it_lies() {
        let rt = rt();
        // Five bytes and a `\r\n` inside one string: the `\r` is not counted.
        let at_limit = Stream::<String, E>::emits(vec!["abcde\r\nfghij\n".to_string()]);
        let got = rt.run(at_limit.through(|t| text::lines(t, 5)).compile().to_vec());
        assert_eq!(got, Outcome::Succeeded(vec!["abcde".to_string(), "fghij".to_string()]));
        // Six bytes, whole inside one string after a first line.
        let inside = Stream::<String, E>::emits(vec!["ok\nabcdef\r\n".to_string()]);
        let got = rt.run(inside.through(|t| text::lines(t, 5)).compile().to_vec());
        assert_eq!(got, Outcome::Errored(Failure::Text(TextError::LineTooLong { limit: 5, line: 2 })));
        // Six bytes across two strings.
        let across = Stream::<String, E>::emits(vec!["abc".to_string(), "def\n".to_string()]);
        let got = rt.run(across.through(|t| text::lines(t, 5)).compile().to_vec());
        assert_eq!(got, Outcome::Errored(Failure::Text(TextError::LineTooLong { limit: 5, line: 1 })));
    }

    fn a_line_over_the_limit_fails_with_its_number_and_the_limit() {
        let rt = rt();
        let input = Stream::emits(vec!["ok\nthis line is long\nx".to_string()]);
        let got = rt.run(input.through(|t| text::lines(t, 5)).compile().to_vec());
        assert_eq!(got, Outcome::Errored(Failure::Text(TextError::LineTooLong { limit: 5, line: 2 })));
        // Found before the line ends: an endless line fails, not hangs.
        let endless = Stream::iter(std::iter::repeat("a".to_string())).through(|t| text::lines(t, 100));
        let got = rt.run(endless.compile().drain());
        assert_eq!(got, Outcome::Errored(Failure::Text(TextError::LineTooLong { limit: 100, line: 1 })));
    }

    fn length_delimited_frames_come_back_whole_however_the_bytes_are_cut() {
        let rt = rt();
        check((proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..6), cuts()), |(frames, c)| {
            let mut bytes = Vec::new();
            for f in &frames {
                bytes.extend_from_slice(&(f.len() as u32).to_be_bytes());
                bytes.extend_from_slice(f);
            }
            let got = value(rt.run(chunked(&bytes, &c).through(|b| text::length_delimited(b, 64)).compile().to_vec()))?;
            prop_assert_eq!(got, frames);
            Ok(())
        });
        let too_long = rt.run(Stream::emits(vec![0, 0, 1, 0]).through(|b| text::length_delimited(b, 64)).compile().to_vec());
        assert_eq!(too_long, Outcome::Errored(Failure::Text(TextError::FrameTooLong { limit: 64, length: 256 })));
        let cut = rt.run(Stream::emits(vec![0, 0, 0, 3, 1]).through(|b| text::length_delimited(b, 64)).compile().to_vec());
        assert_eq!(cut, Outcome::Errored(Failure::Text(TextError::TruncatedFrame { received: 5 })));
    }

    fn length_delimited_frames_come_whole_in_chunks_of_at_most_the_batch() {
        let rt = rt();
        // Up to 100 frames of up to 12 bytes: a chunk of input may hold
        // several batches of frames.
        let frames = proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..100);
        check((frames, proptest::collection::vec(1usize..700, 1..4)), |(frames, c)| {
            let mut bytes = Vec::new();
            for f in &frames {
                bytes.extend_from_slice(&(f.len() as u32).to_be_bytes());
                bytes.extend_from_slice(f);
            }
            let chunks = value(rt.run(chunked(&bytes, &c).through(|b| text::length_delimited(b, 64)).chunks().compile().to_vec()))?;
            prop_assert!(chunks.iter().all(|chunk| chunk.len() <= text::FRAMES_PER_CHUNK), "a chunk of more than {} frames", text::FRAMES_PER_CHUNK);
            let got: Vec<Vec<u8>> = chunks.into_iter().flat_map(Chunk::into_vec).collect();
            prop_assert_eq!(got, frames);
            Ok(())
        });
        // Frames too long after two batches: every frame before them first.
        let before = text::FRAMES_PER_CHUNK * 2 + 3;
        let mut bytes = Vec::new();
        for i in 0..before {
            bytes.extend_from_slice(&[0, 0, 0, 1, i as u8]);
        }
        bytes.extend_from_slice(&[0, 0, 1, 0]);
        let got = rt.run(Stream::<u8, E>::chunk(Chunk::from(bytes)).through(|b| text::length_delimited(b, 64)).attempt().compile().to_vec());
        let expected: Vec<Result<Vec<u8>, E>> = (0..before)
            .map(|i| Ok(vec![i as u8]))
            .chain([Err(Failure::Text(TextError::FrameTooLong { limit: 64, length: 256 }))])
            .collect();
        assert_eq!(got, Outcome::Succeeded(expected));
        // A prefix cut after two of its bytes at the end: truncated, with the bytes received.
        let cut = rt.run(Stream::<u8, E>::emits(vec![0, 0, 0, 0, 0, 0]).through(|b| text::length_delimited(b, 64)).compile().to_vec());
        assert_eq!(cut, Outcome::Errored(Failure::Text(TextError::TruncatedFrame { received: 2 })));
    }

    fn what_comes_before_bad_input_is_emitted_before_the_error_however_the_input_is_cut() {
        let rt = rt();
        // Each pipe's elements as `Ok`s, then its error as an `Err`.
        let attempted = |stream: Stream<String, E>| rt.run(stream.attempt().compile().to_vec());
        let mut bytes = "one\ntwo ".as_bytes().to_vec();
        bytes.push(0xff);
        bytes.extend_from_slice(b"\nthree\n");
        for cuts in [vec![1], vec![3, 5], vec![100]] {
            let Outcome::Succeeded(got) = attempted(chunked(&bytes, &cuts).through(text::utf8_decode)) else {
                panic!("attempt does not fail ({cuts:?})");
            };
            let (text, error): (Vec<_>, Vec<_>) = got.into_iter().partition(Result::is_ok);
            let text: String = text.into_iter().map(Result::unwrap).collect();
            assert_eq!(text, "one\ntwo ", "{cuts:?}");
            assert_eq!(error, [Err(Failure::Text(TextError::InvalidUtf8 { offset: 8 }))], "{cuts:?}");
        }
        for cuts in [vec![1], vec![4, 7], vec![100]] {
            let text: Vec<String> = "ok\nfine\nthis line is long\nx".chars().map(String::from).collect();
            let got = attempted(chunked(&text, &cuts).through(|t| text::lines(t, 5)));
            assert_eq!(
                got,
                Outcome::Succeeded(vec![
                    Ok("ok".to_string()),
                    Ok("fine".to_string()),
                    Err(Failure::Text(TextError::LineTooLong { limit: 5, line: 3 })),
                ]),
                "{cuts:?}"
            );
        }
        let frames = rt.run(
            Stream::emits(vec![0, 0, 0, 1, 7, 0, 0, 1, 0])
                .through(|b| text::length_delimited(b, 64))
                .attempt()
                .compile()
                .to_vec(),
        );
        assert_eq!(
            frames,
            Outcome::Succeeded(vec![Ok(vec![7]), Err(Failure::Text(TextError::FrameTooLong { limit: 64, length: 256 }))])
        );
    }

    fn split_gives_the_runs_between_delimiters() {
        let rt = rt();
        let got = rt.run(
            chunked(&[1u32, 2, 0, 3, 0, 0, 4], &[2])
                .split(|x| *x == 0)
                .map(Chunk::into_vec)
                .compile()
                .to_vec(),
        );
        assert_eq!(got, Outcome::Succeeded(vec![vec![1, 2], vec![3], vec![], vec![4]]));
    }

    fn map_err_maps_the_streams_errors_and_its_releases_run_once() {
        let rt = rt();
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let failing = nested(&log, 2, 3, Some(1)).map_err(|e| format!("{e:?}"));
        let got = rt.run(failing.compile().to_vec());
        assert_eq!(got, Outcome::Errored("Boom(1)".to_string()));
        assert_eq!(*log.lock().unwrap(), ["open 2", "open 1", "close 1", "close 2"]);
    }

    fn retrying_restarts_a_failed_stream_while_the_schedule_allows() {
        let rt = rt();
        let attempts = Arc::new(Mutex::new(0u32));
        let a = attempts.clone();
        let schedule = spindle_core::Schedule::fixed(std::time::Duration::from_millis(1)).limit(3);
        let stream = Stream::retrying(&schedule, move || {
            let n = {
                let mut n = a.lock().unwrap();
                *n += 1;
                *n
            };
            Stream::emit(n * 10).append(if n < 3 { Stream::raise_error(Failure::Boom(n)) } else { Stream::empty() })
        });
        assert_eq!(rt.run(stream.compile().to_vec()), Outcome::Succeeded(vec![10, 20, 30]));
        let always = Stream::<u32, E>::retrying(&schedule, || Stream::raise_error(Failure::Boom(9)));
        assert_eq!(rt.run(always.compile().to_vec()), Outcome::Errored(Failure::Boom(9)));
    }
}
