//! Streams in time: ticks without drift, pauses, element rates, quiet
//! periods and time windows, on the executor's clock (virtual time under
//! a test clock).
//!
//! A tick source computes each deadline from the first (`start + k ×
//! period`), so the time a consumer spends between ticks never shifts the
//! ones after it. The windowed stages (`debounce`, `group_within`) read
//! their input on a producer fiber (`concurrent.rs`) and wait for "the
//! next element or the deadline" with a deadline region (`timeout_option`),
//! which starts no fiber.

use alloc::vec::Vec;
use core::time::Duration;

use spindle_core::error::TimeoutError;
use spindle_core::{IO, Queue};

use crate::chunk::Chunk;
use crate::concurrent::produced_by;
use crate::scope::Scope;
use crate::stream::{InvalidArgument, Step, Stream};

/// A checked period.
fn period(operation: &'static str, d: Duration) -> Result<Duration, InvalidArgument> {
    if d.is_zero() {
        Err(InvalidArgument {
            operation,
            requirement: "a period above zero",
        })
    } else {
        Ok(d)
    }
}

impl<E: Send + 'static> Stream<Duration, E> {
    /// The time since the stream started, at `period`, `2 × period`, ...
    /// without drift (a late consumer gets the ticks it missed at once, one
    /// per pull, each with its scheduled time); `period` must be above zero.
    pub fn awake_every(every: Duration) -> Result<Self, InvalidArgument> {
        let every = period("awake_every", every)?;
        Ok(Stream::suspend(move || {
            Stream::eval(IO::monotonic()).flat_map(move |start| ticks(start, every, 1))
        }))
    }
}

/// The tick `k` (scheduled at `start + k × every`) and those after it.
fn ticks<E: Send + 'static>(start: Duration, every: Duration, k: u32) -> Stream<Duration, E> {
    Stream::from_pull(move |_| {
        let due = start + every * k;
        IO::monotonic().flat_map(move |now| {
            let wait = due.saturating_sub(now);
            let tick =
                move || Step::Emit(Chunk::singleton(due - start), ticks(start, every, k + 1));
            if wait.is_zero() {
                IO::pure(tick())
            } else {
                IO::sleep(wait).map(move |()| tick())
            }
        })
    })
}

impl<E: Send + 'static> Stream<(), E> {
    /// A unit at `period`, `2 × period`, ... without drift; `period` must
    /// be above zero.
    pub fn fixed_rate(every: Duration) -> Result<Self, InvalidArgument> {
        let every = period("fixed_rate", every)?;
        Ok(Stream::<Duration, E>::awake_every(every)?.map(|_| ()))
    }

    /// A unit after every pause of `delay` (the pause starts when the
    /// consumer pulls: drift is the consumer's time).
    pub fn fixed_delay(delay: Duration) -> Self {
        Stream::repeat_eval(move || IO::sleep(delay))
    }
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// The stream, started after a pause of `delay`.
    pub fn delay_by(self, delay: Duration) -> Self {
        Stream::exec(IO::sleep(delay)).append(self)
    }

    /// At most one element per `period`, without drift (elements wait for
    /// their tick); `period` must be above zero.
    pub fn metered(self, every: Duration) -> Result<Self, InvalidArgument> {
        let every = period("metered", every)?;
        Ok(self
            .rechunk(1)?
            .zip_with(Stream::<(), E>::fixed_rate(every)?, |a, ()| a))
    }

    /// Fails the stream with the error `E::from(TimeoutError)` if it has
    /// not ended `limit` after it was first pulled (the stream is stopped
    /// and released first).
    pub fn timeout(self, limit: Duration) -> Self
    where
        E: From<TimeoutError>,
    {
        produced_by(1, move |sender, scope| {
            sender.drain(self, scope).timeout_to(
                limit,
                IO::raise_error(E::from(TimeoutError { after: limit })),
            )
        })
    }

    /// The stream, with a deadline on each pull of its input: when the
    /// next chunk has not arrived `limit` after it was asked for, the
    /// pull is canceled (what it was waiting on is withdrawn) and the
    /// stream goes on with `fallback` instead (ZIO's `timeoutTo`, fs2's
    /// `Pull.timed`). The time the consumer spends between pulls is not
    /// counted: this bounds a quiet input (an idle connection), where
    /// [`Stream::timeout`] bounds the whole run.
    ///
    /// Each pull is a deadline region on the puller's own fiber (no fiber
    /// is started; a timer is armed only while the pull waits). What the
    /// input acquired stays in the stream's scope and is released when
    /// the stream ends, as without the deadline.
    pub fn timeout_on_pull_to(self, limit: Duration, fallback: Stream<A, E>) -> Self {
        Stream::from_pull(move |scope: &Scope<E>| {
            let scope = scope.clone();
            self.step(&scope)
                .timeout_option(limit)
                .flat_map(move |step| match step {
                    Some(Step::Emit(chunk, rest)) => {
                        IO::pure(Step::Emit(chunk, rest.timeout_on_pull_to(limit, fallback)))
                    }
                    Some(Step::Done) => IO::pure(Step::Done),
                    None => fallback.step(&scope),
                })
        })
    }

    /// The stream until `halt` completes: then it ends (its input is
    /// stopped and released); an error of `halt` fails it.
    pub fn interrupt_when(self, halt: IO<(), E>) -> Self {
        produced_by(1, move |sender, scope| {
            sender.drain(self, scope).race(halt).void()
        })
    }

    /// The stream, with `background` drained on a fiber of its own while
    /// this stream runs: `background` is stopped when this stream ends, and
    /// an error of `background` fails this stream. A `background` that
    /// ends leaves this stream running.
    pub fn concurrently<B: Send + 'static>(self, background: Stream<B, E>) -> Self {
        crate::concurrent::produced_pair(move |sender, front, back| {
            sender
                .drain(self, front)
                .race(
                    background
                        .drain_in(back)
                        .flat_map(|()| IO::<(), E>::never()),
                )
                .void()
        })
    }

    /// Each element that is followed by no other for `quiet` (the last
    /// one of the stream too, at its end); `quiet` must be above zero.
    pub fn debounce(self, quiet: Duration) -> Result<Self, InvalidArgument> {
        let quiet = period("debounce", quiet)?;
        Ok(windows(self, move |elements| {
            debounce_loop(elements, None, quiet)
        }))
    }

    /// The elements in chunks of at most `n`, each emitted when full or
    /// `window` after its first element arrived, whichever is first; `n`
    /// must be above 0 and `window` above zero.
    pub fn group_within(
        self,
        n: usize,
        window: Duration,
    ) -> Result<Stream<Chunk<A>, E>, InvalidArgument> {
        let n = crate::stream::chunk_size("group_within", n)?;
        let window = period("group_within", window)?;
        Ok(windows(self, move |elements| {
            group_loop(elements, n, window)
        }))
    }
}

/// The elements of `input`, one at a time, read on a producer fiber into
/// a queue of one (`None` at the end), and the stream `stage` makes of
/// that queue.
fn windows<A, B, E, F>(input: Stream<A, E>, stage: F) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnOnce(Queue<Option<A>>) -> Stream<B, E> + Send + 'static,
{
    Stream::suspend(move || {
        let elements = Queue::<Option<A>>::bounded(1).expect("a capacity of 1");
        let feeding = elements.clone();
        let ended = elements.clone();
        let feed: Stream<(), E> = input
            .eval_map(move |item| feeding.offer(Some(item)))
            .append(Stream::exec(ended.offer(None)));
        stage(elements).concurrently(feed)
    })
}

fn debounce_loop<A, E>(
    elements: Queue<Option<A>>,
    pending: Option<A>,
    quiet: Duration,
) -> Stream<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    Stream::from_pull(move |scope| {
        let scope = scope.clone();
        let next = match pending {
            // Nothing waiting: wait as long as it takes.
            None => elements.take().map(Some),
            Some(_) => elements.take().timeout_option(quiet),
        };
        next.flat_map(move |next| match (next, pending) {
            // Quiet for long enough: the pending element goes out.
            (None, Some(item)) => IO::pure(Step::Emit(
                Chunk::singleton(item),
                debounce_loop(elements, None, quiet),
            )),
            // A newer element replaces the pending one.
            (Some(Some(item)), _) => debounce_loop(elements, Some(item), quiet).step(&scope),
            // The end: the pending element, if any, goes out.
            (Some(None), pending) => IO::pure(match pending {
                Some(item) => Step::Emit(Chunk::singleton(item), Stream::empty()),
                None => Step::Done,
            }),
            (None, None) => IO::pure(Step::Done),
        })
    })
}

fn group_loop<A, E>(elements: Queue<Option<A>>, n: usize, window: Duration) -> Stream<Chunk<A>, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    Stream::from_pull(move |_| {
        let first = elements.take();
        first.flat_map(move |first| match first {
            None => IO::pure(Step::Done),
            Some(item) => IO::monotonic().flat_map(move |start| {
                let mut group = Vec::with_capacity(n);
                group.push(item);
                fill_group(elements, group, n, window, start + window)
            }),
        })
    })
}

/// Adds elements to `group` until it holds `n`, the deadline passes, or
/// the input ends.
fn fill_group<A, E>(
    elements: Queue<Option<A>>,
    mut group: Vec<A>,
    n: usize,
    window: Duration,
    deadline: Duration,
) -> IO<Step<Chunk<A>, E>, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    if group.len() == n {
        let rest = group_loop(elements, n, window);
        return IO::pure(Step::Emit(Chunk::singleton(Chunk::from(group)), rest));
    }
    IO::monotonic().flat_map(move |now| {
        let left = deadline.saturating_sub(now);
        let next = if left.is_zero() {
            IO::pure(None)
        } else {
            elements.take().timeout_option(left)
        };
        next.flat_map(move |next| match next {
            Some(Some(item)) => {
                group.push(item);
                fill_group(elements, group, n, window, deadline)
            }
            Some(None) => IO::pure(Step::Emit(
                Chunk::singleton(Chunk::from(group)),
                Stream::empty(),
            )),
            None => {
                let rest = group_loop(elements, n, window);
                IO::pure(Step::Emit(Chunk::singleton(Chunk::from(group)), rest))
            }
        })
    })
}
