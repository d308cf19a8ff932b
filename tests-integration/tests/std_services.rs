//! The services `Clock` (the executor's clocks), `Random` (a seeded,
//! shared, splittable generator) and `Console` (input and output through
//! blocking work).

mod common;

use common::rt_test;
use spindle_core::error::EmptyRange;
use spindle_core::{Clock, Console, IO, Random};
use std::io::{self, Cursor, Write};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type E = String;

/// A writer whose bytes a test can read afterwards.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer that always fails.
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `n` numbers drawn from `random` with `next_u64`.
fn draws(random: &Random, n: usize) -> IO<Vec<u64>, E> {
    let random = random.clone();
    IO::replicate(n, move || random.next_u64())
}

rt_test! {
    // ----- Clock ----------------------------------------------------------------

    fn the_monotonic_clock_moves_on_by_at_least_a_sleep() {
        let clock = Clock;
        let io: IO<(Duration, Duration, Duration), E> = clock.monotonic().flat_map(move |a| {
            IO::sleep(Duration::from_millis(10))
                .product_r(clock.monotonic())
                .flat_map(move |b| clock.timed(IO::sleep(Duration::from_millis(5))).map(move |(t, ())| (a, b, t)))
        });
        let (a, b, took) = run(io).succeeded().unwrap();
        assert!(b - a >= Duration::from_millis(10), "{a:?} then {b:?}");
        assert!(took >= Duration::from_millis(5));
    }

    fn the_real_time_clock_reads_time_since_the_unix_epoch() {
        let io: IO<Duration, E> = Clock.real_time();
        let now = run(io).succeeded().unwrap();
        // After 2020-01-01.
        assert!(now > Duration::from_secs(1_577_836_800), "{now:?}");
    }

    // ----- Random ---------------------------------------------------------------

    fn generators_with_the_same_seed_draw_the_same_numbers() {
        let io = draws(&Random::seeded(5), 16)
            .flat_map(|a| draws(&Random::seeded(5), 16).map(move |b| (a, b)));
        let (a, b) = run(io).succeeded().unwrap();
        assert_eq!(a, b);
        let c = run(draws(&Random::seeded(6), 16)).succeeded().unwrap();
        assert_ne!(a, c);
    }

    fn fibers_sharing_a_generator_never_draw_the_same_number_twice() {
        let random = Random::seeded(1);
        let r = random.clone();
        let io: IO<Vec<Vec<u64>>, E> = IO::par_traverse(vec![(); 4], move |()| draws(&r, 50));
        let mut all: Vec<u64> = run(io).succeeded().unwrap().concat();
        all.sort_unstable();
        // The 200 draws are the generator's first 200 outputs, in some order.
        let mut expected = run(draws(&Random::seeded(1), 200)).succeeded().unwrap();
        expected.sort_unstable();
        assert_eq!(all, expected);
    }

    fn a_split_generator_is_reproducible_and_independent_of_its_parent() {
        let io = Random::seeded(9).split().flat_map(|child| draws(&child, 8));
        let a = run(io).succeeded().unwrap();
        let io = Random::seeded(9).split().flat_map(|child| draws(&child, 8));
        let b = run(io).succeeded().unwrap();
        assert_eq!(a, b);
        let parent = run(draws(&Random::seeded(9), 9)).succeeded().unwrap();
        assert!(a.iter().all(|x| !parent.contains(x)));
    }

    fn random_numbers_stay_in_their_ranges() {
        let random = Random::seeded(77);
        let r = random.clone();
        let io: IO<Vec<(u64, u64, f64)>, E> = IO::replicate(500, move || {
            let (r1, r2) = (r.clone(), r.clone());
            r.range(10..13)
                .unwrap()
                .flat_map(move |a| r1.below(NonZeroU64::new(1).unwrap()).map(move |b| (a, b)))
                .flat_map(move |(a, b)| r2.next_f64().map(move |c| (a, b, c)))
        });
        let samples = run(io).succeeded().unwrap();
        assert!(samples.iter().all(|(a, b, c)| (10..13).contains(a) && *b == 0 && (0.0..1.0).contains(c)));
        for v in 10..13 {
            assert!(samples.iter().any(|(a, _, _)| *a == v), "{v} never drawn");
        }
        assert!(samples.iter().any(|(_, _, c)| *c < 0.5) && samples.iter().any(|(_, _, c)| *c >= 0.5));
    }

    fn shuffle_produces_a_permutation_and_moves_things() {
        let items: Vec<u32> = (0..50).collect();
        let io: IO<Vec<u32>, E> = Random::seeded(3).shuffle(items.clone());
        let shuffled = run(io).succeeded().unwrap();
        assert_ne!(shuffled, items);
        let mut sorted = shuffled.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, items);
    }

    // ----- Console --------------------------------------------------------------

    fn console_writes_lines_to_its_outputs_in_order() {
        let (out, err) = (Captured::default(), Captured::default());
        let console = Console::from_parts(Cursor::new(""), out.clone(), err.clone());
        let io = console
            .print("a")
            .product_r(console.println(1))
            .product_r(console.error("oops"))
            .product_r(console.errorln("!"))
            .product_r(console.println("b"));
        assert!(run(io).is_succeeded());
        assert_eq!(out.text(), "a1\nb\n");
        assert_eq!(err.text(), "oops!\n");
    }

    fn console_reads_lines_without_their_endings_and_fails_at_the_end_of_input() {
        let console = Console::from_parts(Cursor::new("one\r\ntwo\nlast"), io::sink(), io::sink());
        let c = console.clone();
        let io = IO::replicate(3, move || c.read_line()).flat_map(move |lines| {
            console.read_line().attempt().map(move |end| (lines, end.map_err(|e| e.kind())))
        });
        assert_eq!(
            run(io).succeeded(),
            Some((
                vec!["one".to_string(), "two".to_string(), "last".to_string()],
                Err(io::ErrorKind::UnexpectedEof)
            ))
        );
    }

    fn a_failing_console_output_is_an_error_value_not_a_panic() {
        let console = Console::from_parts(Cursor::new(""), Broken, io::sink());
        let io = console.println("lost").attempt().map(|r| r.map_err(|e| e.kind()));
        assert_eq!(run(io).succeeded(), Some(Err(io::ErrorKind::BrokenPipe)));
    }
}

#[test]
fn an_empty_range_is_refused_when_the_program_is_built() {
    let random = Random::seeded(0);
    assert_eq!(random.range::<E>(5..5).err(), Some(EmptyRange));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 6..5;
    assert_eq!(random.range::<E>(reversed).err(), Some(EmptyRange));
    assert!(random.range::<E>(0..u64::MAX).is_ok());
}
