//! Shared pieces of the Spindle benchmarks; the workloads live in `benches/`.
//!
//! The `suite` bench target runs every Cats Effect JMH workload that has a
//! meaning in Spindle (ShallowBind, DeepBind, Attempt, HandleError, Redeem,
//! RedeemWith, MapCalls, MapStream, Async, Both, Race, Blocking, Deferred,
//! Ref, Queue, Mutex, Sleep, Parallel, WorkStealing) and tokio's scheduler
//! shapes, written once and run on each of Spindle's executors, with tokio
//! as the same-run reference (`benches/PORTS.md` explains each port). The
//! `tracing` bench target measures the cost of fiber tracing.
//!
//! Only what both sides share lives here: the sizes, the error value of the
//! error benchmarks, and a helper that reads a Spindle outcome. tokio and
//! criterion stay dev-dependencies of this crate.
//!
//! The tools that run and report these benchmarks (`bench-compare`,
//! `bench-report`, and the HTTP load generator `loadgen` with its runner
//! `http_compare`) are the `spindle-tools` crate (`tools/`), so that
//! `cargo bench` builds only the benchmarks.

#![deny(missing_docs)]

use core::fmt::Debug;

/// Chains of fiber operations shared by the callgrind harness
/// (`examples/prof.rs`) and the steady-state harness
/// (`examples/wstp_steady.rs`): `race`, `both` and a `Deferred` ping-pong,
/// `n` operations each, as `IO<i32, i32>` programs whose value is `n`.
pub mod fiber_loops {
    use core::ops::ControlFlow;

    use spindle_core::{Deferred, Either, IO};

    type P = IO<i32, i32>;

    /// `N` races of a value against `never` (the loser canceled), in a
    /// chain. (The count is a constant, so the closures capture nothing.)
    pub fn race<const N: i32>() -> P {
        fn go<const N: i32>(i: i32) -> P {
            if i < N {
                P::pure(i + 1).race(P::never()).flat_map(|won| {
                    go::<N>(match won {
                        Either::Left(v) => v,
                        Either::Right(v) => v,
                    })
                })
            } else {
                IO::pure(i)
            }
        }
        go::<N>(0)
    }

    /// `N` `both`s of two values, in a chain.
    pub fn both<const N: i32>() -> P {
        fn go<const N: i32>(i: i32) -> P {
            if i < N {
                P::pure(i + 1)
                    .both(P::pure(1))
                    .flat_map(|(a, b)| go::<N>(a + b - 1))
            } else {
                IO::pure(i)
            }
        }
        go::<N>(0)
    }

    /// `ROUNDS` round trips, each a fresh responder fiber and a fresh pair
    /// of `Deferred`s: the responder waits for the ping and answers.
    pub fn deferred_ping_pong<const ROUNDS: i32>() -> P {
        IO::tail_rec(0, |i| {
            if i == ROUNDS {
                return IO::pure(ControlFlow::Break(i));
            }
            let (ping, pong) = (Deferred::<i32>::new(), Deferred::<i32>::new());
            let (ping_rx, pong_tx) = (ping.clone(), pong.clone());
            let responder: P = ping_rx
                .get()
                .flat_map(move |x| pong_tx.complete(x + 1).map(move |_| x));
            responder.start().flat_map(move |_fiber| {
                ping.complete(i)
                    .flat_map(move |_| pong.get())
                    .map(ControlFlow::Continue)
            })
        })
    }
}

/// The `pure` bind loops of Cats Effect's `ShallowBindBenchmark` and
/// `DeepBindBenchmark` ([`SIZE`] steps), shared by the `suite` and
/// `tracing` bench targets.
pub mod bind_loops {
    use core::convert::Infallible;

    use spindle_core::IO;

    use crate::SIZE;

    /// `pure(i + 1).flatMap(loop)` until `SIZE`: each step's continuation
    /// is applied to an already-computed value.
    pub fn shallow_pure() -> IO<i32, Infallible> {
        fn go(i: i32) -> IO<i32, Infallible> {
            if i < SIZE {
                IO::pure(i + 1).flat_map(go)
            } else {
                IO::pure(i)
            }
        }
        IO::pure(0).flat_map(go)
    }

    /// `pure(i).flatMap(j => loop(j + 1))` until past `SIZE`: each step
    /// nests one more bind.
    pub fn deep_pure() -> IO<i32, Infallible> {
        fn go(i: i32) -> IO<i32, Infallible> {
            IO::pure(i).flat_map(|j| if j > SIZE { IO::pure(j) } else { go(j + 1) })
        }
        go(0)
    }
}

/// The writer of the socket-lines rows (`benches/stream.rs`,
/// `Stream/socket_lines`) and of their callgrind program
/// (`examples/socket_lines.rs`): a plain std thread that writes the same
/// text, lines of [`LINE`](socket_lines::LINE) bytes, into every
/// connection it accepts on loopback, as fast as the socket takes them,
/// then closes it. Both sides of a comparison read from this one writer.
pub mod socket_lines {
    use std::io::Write;
    use std::net::{Shutdown, SocketAddr, TcpListener};

    /// Bytes of one line, its `\n` included.
    pub const LINE: usize = 80;
    /// Lines of one block (the unit the writer writes: 80 KiB).
    const BLOCK_LINES: usize = 1024;
    /// The longest line the readers accept (above [`LINE`]).
    pub const LIMIT: usize = 1024;

    /// The lines of a connection of `bytes` bytes (a multiple of
    /// `LINE * 1024`; rounded down to one).
    pub fn lines_in(bytes: usize) -> u64 {
        (bytes / (LINE * BLOCK_LINES) * BLOCK_LINES) as u64
    }

    /// The text of a line, without its line break: `LINE - 1` ASCII bytes
    /// (its number, then letters that vary with it).
    fn line(i: usize) -> String {
        let mut text = format!("{i:07} ");
        let letters = b"abcdefghijklmnopqrstuvwxyz";
        while text.len() < LINE - 1 {
            text.push(char::from(letters[(i + text.len()) % letters.len()]));
        }
        text
    }

    /// Starts the writer: every connection accepted gets [`lines_in`]`(bytes)`
    /// lines, then its write side shut down. The thread lives as long as
    /// the process. Returns the address to connect to.
    pub fn start_writer(bytes: usize) -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the line writer");
        let addr = listener.local_addr().expect("the writer's address");
        let mut block = Vec::with_capacity(LINE * BLOCK_LINES);
        for i in 0..BLOCK_LINES {
            block.extend_from_slice(line(i).as_bytes());
            block.push(b'\n');
        }
        assert_eq!(block.len(), LINE * BLOCK_LINES, "lines of LINE bytes");
        let blocks = bytes / block.len();
        std::thread::Builder::new()
            .name("line-writer".into())
            .spawn(move || {
                for connection in listener.incoming() {
                    let Ok(mut connection) = connection else {
                        continue;
                    };
                    for _ in 0..blocks {
                        if connection.write_all(&block).is_err() {
                            break;
                        }
                    }
                    let _ = connection.shutdown(Shutdown::Write);
                }
            })
            .expect("start the line writer");
        addr
    }

    /// Spindle's read size.
    pub const READ: usize = 64 * 1024;

    /// Lines and their bytes (line breaks not counted) read from `addr`
    /// by Spindle: `reads`, `utf8_decode`, `lines`, a fold (exec-single's
    /// socket, which every std executor's driver serves).
    pub fn spindle_lines(addr: SocketAddr) -> spindle_core::IO<(u64, u64), std::io::Error> {
        use spindle_stream::text::{lines, utf8_decode};
        spindle_exec_single::net::TcpStream::connect(addr).flat_map(|socket| {
            socket
                .reads(READ)
                .expect("64 KiB > 0")
                .through(utf8_decode)
                .through(|text| lines(text, LIMIT))
                .compile()
                .fold((0u64, 0u64), |(n, bytes), line| {
                    (n + 1, bytes + line.len() as u64)
                })
        })
    }
}

/// The stream programs of the stream bench (`benches/stream.rs`) and of
/// its callgrind harness (`examples/stream_prof.rs`), over `n` elements
/// (the bench and the harness differ only in `n`). Each program's value is
/// the wrapping sum of what reaches its end. The tokio reference of
/// [`par_eval_map8`](stream_programs::par_eval_map8) is
/// `examples/support/tokio_buffered.rs` (tokio is a dev-dependency).
/// Each function is `#[inline]`, so that it is compiled into the bench or
/// example that runs it, as when it was written there: the harness's
/// callgrind counts stay those of that code (a call into this crate's own
/// copy cost `eval_map` 7 instructions an element more).
pub mod stream_programs {
    use core::convert::Infallible;
    use core::ops::ControlFlow;

    use spindle_core::IO;
    use spindle_stream::Stream;

    /// A program of the stream rows.
    pub type P = IO<u64, Infallible>;

    /// The wrapping sum of `stream`'s elements (`compile().fold`).
    #[inline]
    pub fn sum(stream: Stream<u64, Infallible>) -> P {
        stream.compile().fold(0u64, |acc, x| acc.wrapping_add(x))
    }

    /// `map(x * 3)` and `filter(even)` over `0..n`, summed: no effect per
    /// element.
    #[inline]
    pub fn map_filter_fold(n: u64) -> P {
        sum(Stream::range(0..n).map(|x| x * 3).filter(|x| x % 2 == 0))
    }

    /// `eval_map` of a `delay` step per element over `0..n` (one element a
    /// step), summed.
    #[inline]
    pub fn eval_map(n: u64) -> P {
        sum(Stream::range(0..n).eval_map(|x| IO::delay(move || x + 1)))
    }

    /// `eval_map_chunk` of a `delay` step per element over `0..n` (a chunk
    /// a step), summed.
    #[inline]
    pub fn eval_map_chunk(n: u64) -> P {
        sum(Stream::range(0..n).eval_map_chunk(|x| IO::delay(move || x + 1)))
    }

    /// The steps of [`eval_map`] without a stream: `N` `delay` steps bound
    /// one after the other in a `tail_rec` loop, summed. (The count is a
    /// constant, so the loop's closure captures nothing.)
    #[inline]
    pub fn bind<const N: u64>() -> P {
        IO::tail_rec((0u64, 0u64), |(i, acc)| {
            if i == N {
                IO::pure(ControlFlow::Break(acc))
            } else {
                IO::delay(move || i + 1)
                    .map(move |x| ControlFlow::Continue((i + 1, acc.wrapping_add(x))))
            }
        })
    }

    /// `par_eval_map(8)` of a `cede`-once program per element over `0..n`
    /// (eight at once, in order), summed.
    #[inline]
    pub fn par_eval_map8(n: u64) -> P {
        sum(Stream::range(0..n)
            .par_eval_map(8, |x| IO::cede().map(move |()| x + 1))
            .expect("8 > 0"))
    }

    /// Rounds of [`cpu_work`]: a few microseconds of computation.
    pub const CPU_ROUNDS: u64 = 4_000;

    /// A computation the optimizer cannot fold away: [`CPU_ROUNDS`] rounds
    /// of a multiply-xorshift mix of `x` (a few microseconds).
    #[inline(never)]
    pub fn cpu_work(x: u64) -> u64 {
        let mut h = core::hint::black_box(x) | 1;
        for _ in 0..CPU_ROUNDS {
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 29;
        }
        h
    }

    /// `par_eval_map(8)` of a program that computes [`cpu_work`] per
    /// element over `0..n` (eight at once, in order), summed.
    #[inline]
    pub fn par_eval_map8_cpu(n: u64) -> P {
        sum(Stream::range(0..n)
            .par_eval_map(8, |x| IO::delay(move || cpu_work(x)))
            .expect("8 > 0"))
    }
}

use spindle_core::Outcome;

/// The loop size of ShallowBind, DeepBind, Attempt and HandleError (Cats
/// Effect's `@Param(Array("10000"))`).
pub const SIZE: i32 = 10_000;

/// How many `map` calls one MapCalls operation runs in total (Cats Effect's
/// `12000`): `MAP_CALLS_TOTAL / batch` runs of a chain of `batch` maps.
pub const MAP_CALLS_TOTAL: usize = 12_000;

/// The loop size of every AsyncBenchmark workload (`@Param(Array("100"))`).
pub const ASYNC_SIZE: i32 = 100;

/// The loop size of BothBenchmark and RaceBenchmark (`@Param(Array("10000"))`).
pub const PAR_SIZE: i32 = 10_000;

/// DeferredBenchmark's `count` parameter: the gets (or waiting fibers) per
/// deferred (`@Param(Array("10", "100", "1000"))`).
pub const DEFERRED_COUNTS: [usize; 3] = [10, 100, 1000];

/// How many deferreds one DeferredBenchmark operation goes through (its
/// `replicateA_(1000)`).
pub const DEFERRED_ROUNDS: usize = 1000;

/// The updates of one RefBenchmark operation (`RefBenchmark.modify(10000)`).
pub const REF_ITERATIONS: i64 = 10_000;

/// QueueBenchmark's `size` (`@Param(Array("32768"))`, a power of 2): the
/// capacity of the bounded queues and the elements of `One` and `Many`.
pub const QUEUE_SIZE: usize = 32_768;

/// MutexBenchmark's `fibers` parameter (`@Param(Array("10", "50", "100"))`).
pub const MUTEX_FIBERS: [usize; 3] = [10, 50, 100];

/// MutexBenchmark's `iterations` (`@Param(Array("1000"))`).
pub const MUTEX_ITERATIONS: usize = 1000;

/// SleepBenchmark's `size` (`@Param(Array("10000"))`): the fibers started.
pub const SLEEP_FIBERS: i32 = 10_000;

/// In SleepBenchmark, a fiber started with `i` loops until its counter
/// passes this value (Cats Effect's `j > 1000`).
pub const SLEEP_LOOP_UNTIL: i32 = 1000;

/// SleepBenchmark's totals for `fibers` fibers: (sleeps, sum of results).
///
/// Each call of the fiber's body sleeps three times; a fiber started with
/// `i <= SLEEP_LOOP_UNTIL` calls it `SLEEP_LOOP_UNTIL + 2 - i` times and
/// returns `SLEEP_LOOP_UNTIL + 1`, one started above calls it once and
/// returns `i`.
pub fn sleep_totals(fibers: i32) -> (u64, i64) {
    let (mut sleeps, mut sum) = (0u64, 0i64);
    for i in 0..fibers {
        if i <= SLEEP_LOOP_UNTIL {
            sleeps += 3 * (SLEEP_LOOP_UNTIL + 2 - i) as u64;
            sum += i64::from(SLEEP_LOOP_UNTIL + 1);
        } else {
            sleeps += 3;
            sum += i64::from(i);
        }
    }
    (sleeps, sum)
}

/// The error the error benchmarks raise: the counterpart of the single
/// `RuntimeException("dummy")` that Cats Effect allocates once per run and
/// raises at every step. It is a reference to static data, so raising it
/// allocates nothing, as in Cats Effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dummy(pub &'static str);

/// The one error value every error benchmark raises.
pub const DUMMY: Dummy = Dummy("dummy");

/// The value of a Spindle outcome that must have succeeded (a benchmark that
/// fails, panics or is canceled is a bug of the benchmark, not a result).
#[inline]
#[track_caller]
pub fn succeeded<A, E: Debug>(outcome: Outcome<A, E>) -> A {
    match outcome {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("benchmark program failed with {e:?}"),
        Outcome::Canceled => panic!("benchmark program was canceled"),
        Outcome::Panicked(p) => panic!("benchmark program panicked: {p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_totals_count_three_sleeps_per_call_of_the_fiber_body() {
        // One fiber started at 0 runs its body 1002 times (0..=1001).
        assert_eq!(sleep_totals(1), (3 * 1002, 1001));
        // Cats Effect's size: 511,501 calls of the body.
        assert_eq!(sleep_totals(SLEEP_FIBERS), (1_534_503, 50_496_501));
    }
}
