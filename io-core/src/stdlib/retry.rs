//! Retry, repetition and fixed-rate runs, driven by schedules.
//!
//! * A [`Schedule`] is a value: a sequence of delays (fixed, or exponential
//!   backoff with an optional cap and jitter) and an optional limit on how
//!   many it gives. [`Schedule::delays`] lists the exact delays a run will
//!   use, so a policy can be checked without running anything.
//! * [`IO::retry`] and [`IO::retry_if`] run a program again after each
//!   failure, sleeping the schedule's next delay first, until it succeeds,
//!   the schedule runs out, or the predicate refuses the error.
//! * [`IO::repeat`] runs a program again after each *success*, sleeping the
//!   next delay between the end of one run and the start of the next.
//! * [`FixedRate`] runs a program every `period` without drift: the starts
//!   are on a grid `origin + k * period`, not "period after the previous run
//!   ended".
//!
//! # Programs are built again, not re-run
//!
//! An [`IO`] value is used once (running it consumes it), so these
//! combinators take a function that builds the program for each attempt,
//! like [`IO::replicate`] and [`IO::iterate_while`], where Cats Effect
//! writes `io.retry(policy)` over a by-name program. They are associated
//! functions: `IO::retry(&schedule, || program())`.
//!
//! # Determinism
//!
//! A schedule's jitter is drawn from a [`Jitter`] seed (a [`Random`] can
//! provide one: [`Jitter::from_random`]); each run of a schedule starts a
//! fresh SplitMix64 stream from that seed, so the same schedule always
//! yields the same delays — deterministic tests, and a documented sequence
//! for each policy. Give each client its own seed so that clients sharing
//! a policy do not retry in lock-step.
//!
//! # Arithmetic
//!
//! No operation panics: exponential growth uses checked multiplication and
//! saturates at the cap (or at `Duration::MAX` without one; executors treat
//! such a deadline as "never"); jitter is computed in 128-bit nanoseconds
//! and only ever shortens a delay; meaningless inputs (a zero period, a
//! zero exponential base, a growth factor below 2, a jitter outside 1..=100
//! percent) are refused with [`InvalidSchedule`] when the value is built.
//!
//! Design credits: Cats Effect's `retry`/`repeat` and cats-retry's
//! `RetryPolicies` (constant, exponential backoff, capped, limited, jitter),
//! tokio's `Interval` and `MissedTickBehavior::Skip` for the fixed rate.
//! No code is copied.

use core::fmt;
use core::num::NonZeroU64;
use core::ops::ControlFlow;
use core::time::Duration;

use crate::engine::tracing::{WithClosure, here};
use crate::io::IO;
use crate::stdlib::random::{Random, splitmix64};

crate::engine::tracing::trace_ops! {
    Retry = "IO::retry",
    Repeat = "IO::repeat",
    RunFixedRate = "FixedRate::run",
}

/// A schedule or fixed rate was built from meaningless input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidSchedule {
    /// An exponential backoff from a zero base would stay at zero: use
    /// [`Schedule::immediate`] for retries without delay.
    ZeroBase,
    /// An exponential growth factor below 2 (0 and 1 do not grow: use
    /// [`Schedule::fixed`]).
    FactorBelowTwo(u32),
    /// A jitter percentage outside `1..=100`.
    JitterPercent(u8),
    /// A fixed rate with a zero period would run without pause, forever.
    ZeroPeriod,
}

impl fmt::Display for InvalidSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidSchedule::ZeroBase => {
                f.write_str("an exponential backoff needs a base delay above zero")
            }
            InvalidSchedule::FactorBelowTwo(factor) => {
                write!(
                    f,
                    "an exponential backoff needs a factor of at least 2, not {factor}"
                )
            }
            InvalidSchedule::JitterPercent(percent) => {
                write!(
                    f,
                    "a jitter must be 1 to 100 percent of the delay, not {percent}"
                )
            }
            InvalidSchedule::ZeroPeriod => f.write_str("a fixed rate needs a period above zero"),
        }
    }
}

impl core::error::Error for InvalidSchedule {}

/// Randomisation of a schedule's delays: each delay `d` becomes a uniform
/// value in `[d - d * percent / 100, d]` (jitter only ever shortens a
/// delay, so a cap stays a cap). `percent = 100` is the "full jitter" of
/// the AWS architecture blog's backoff study; smaller values keep a floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jitter {
    percent: u8,
    seed: u64,
}

impl Jitter {
    /// Up to `percent` (1 to 100) of each delay taken off at random, the
    /// random numbers drawn from a SplitMix64 stream started from `seed`.
    pub fn new(percent: u8, seed: u64) -> Result<Jitter, InvalidSchedule> {
        if percent == 0 || percent > 100 {
            return Err(InvalidSchedule::JitterPercent(percent));
        }
        Ok(Jitter { percent, seed })
    }

    /// [`Jitter::new`] with a seed drawn from `random` now (when the
    /// schedule is built).
    pub fn from_random(percent: u8, random: &Random) -> Result<Jitter, InvalidSchedule> {
        Jitter::new(percent, random.next_u64_now())
    }

    /// The largest share of a delay taken off, in percent.
    pub fn percent(&self) -> u8 {
        self.percent
    }

    /// The seed of the jitter's random stream.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Growth {
    Fixed(Duration),
    Exponential { base: Duration, factor: u32 },
}

/// A sequence of delays, for [`IO::retry`] and [`IO::repeat`]: fixed or
/// exponentially growing, optionally capped, jittered and limited in number.
///
/// The `n`-th delay (from 0) of an exponential schedule is
/// `min(base * factor^n, cap)`, then jittered; a fixed schedule gives the
/// same delay each time. Without [`limit`](Schedule::limit) a schedule never
/// runs out.
///
/// ```
/// use core::time::Duration;
/// use spindle_effect::{Jitter, Schedule};
///
/// let ms = Duration::from_millis;
/// let backoff = Schedule::exponential(ms(10), 2)?.cap(ms(50)).limit(5);
/// let delays: Vec<Duration> = backoff.delays().collect();
/// assert_eq!(delays, [ms(10), ms(20), ms(40), ms(50), ms(50)]);
///
/// // Jitter takes up to half of each delay off, the same way every time.
/// let jittered = backoff.jitter(Jitter::new(50, 7)?);
/// let first: Vec<Duration> = jittered.delays().collect();
/// assert_eq!(first, jittered.delays().collect::<Vec<_>>());
/// assert!(first.iter().zip(&delays).all(|(j, d)| *j <= *d && *j >= *d / 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    growth: Growth,
    cap: Option<Duration>,
    limit: Option<u32>,
    jitter: Option<Jitter>,
}

impl Schedule {
    /// The same delay every time (never runs out without a
    /// [`limit`](Schedule::limit)).
    pub fn fixed(delay: Duration) -> Schedule {
        Schedule {
            growth: Growth::Fixed(delay),
            cap: None,
            limit: None,
            jitter: None,
        }
    }

    /// No delay at all: retry (or repeat) at once.
    pub fn immediate() -> Schedule {
        Schedule::fixed(Duration::ZERO)
    }

    /// Exponential backoff: `base`, `base * factor`, `base * factor^2`, ...
    /// `base` must be above zero and `factor` at least 2.
    pub fn exponential(base: Duration, factor: u32) -> Result<Schedule, InvalidSchedule> {
        if base.is_zero() {
            return Err(InvalidSchedule::ZeroBase);
        }
        if factor < 2 {
            return Err(InvalidSchedule::FactorBelowTwo(factor));
        }
        Ok(Schedule {
            growth: Growth::Exponential { base, factor },
            cap: None,
            limit: None,
            jitter: None,
        })
    }

    /// No delay longer than `max` (applied before the jitter, which only
    /// shortens).
    #[must_use]
    pub fn cap(self, max: Duration) -> Schedule {
        Schedule {
            cap: Some(max),
            ..self
        }
    }

    /// At most `count` delays: for [`IO::retry`], at most `count` retries
    /// after the first attempt; for [`IO::repeat`], at most `count`
    /// repetitions after the first run. `limit(0)` is allowed and means
    /// "run once".
    #[must_use]
    pub fn limit(self, count: u32) -> Schedule {
        Schedule {
            limit: Some(count),
            ..self
        }
    }

    /// Randomises every delay (see [`Jitter`]).
    #[must_use]
    pub fn jitter(self, jitter: Jitter) -> Schedule {
        Schedule {
            jitter: Some(jitter),
            ..self
        }
    }

    /// The limit on the number of delays, if any.
    pub fn max_count(&self) -> Option<u32> {
        self.limit
    }

    /// The delays this schedule gives, in order: exactly the ones a retry
    /// or repeat driven by it sleeps. Infinite without a limit.
    pub fn delays(&self) -> Delays {
        Delays {
            growth: self.growth,
            next_base: match self.growth {
                Growth::Fixed(d) => d,
                Growth::Exponential { base, .. } => base,
            },
            cap: self.cap,
            remaining: self.limit,
            jitter: self.jitter.map(|j| (j.percent, j.seed)),
        }
    }
}

/// The delays of a [`Schedule`], in order ([`Schedule::delays`]).
#[derive(Debug, Clone)]
pub struct Delays {
    growth: Growth,
    /// The next delay before the cap and jitter.
    next_base: Duration,
    cap: Option<Duration>,
    remaining: Option<u32>,
    /// Percentage and the SplitMix64 state of the jitter stream.
    jitter: Option<(u8, u64)>,
}

/// Nanoseconds back to a `Duration`, saturating at `Duration::MAX`.
fn from_nanos_u128(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        // The remainder is below 10^9: it fits a u32.
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if let Some(remaining) = &mut self.remaining {
            *remaining = remaining.checked_sub(1)?;
        }
        let base = self.next_base;
        if let Growth::Exponential { factor, .. } = self.growth {
            // Saturates instead of overflowing; once at the cap, it stays.
            let grown = base.checked_mul(factor).unwrap_or(Duration::MAX);
            self.next_base = match self.cap {
                Some(cap) => grown.min(cap),
                None => grown,
            };
        }
        let capped = match self.cap {
            Some(cap) => base.min(cap),
            None => base,
        };
        Some(match &mut self.jitter {
            None => capped,
            Some((percent, state)) => {
                // A duration is below 2^94 ns, so nanos * 100 fits u128,
                // and so does span * r with r below 2^32: the off-cut is a
                // uniform fraction (r / 2^32) of the span, at most the span.
                let nanos = capped.as_nanos();
                let span = nanos * u128::from(*percent) / 100;
                let r = u128::from(splitmix64(state) >> 32);
                let off = (span * r) >> 32;
                from_nanos_u128(nanos - off)
            }
        })
    }
}

/// Once a limited schedule has run out, it stays out.
impl core::iter::FusedIterator for Delays {}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Runs the program `make` builds; after each failure, sleeps the
    /// `schedule`'s next delay and runs a new one, until one succeeds.
    /// When the schedule runs out, the last error is raised. Cancellation
    /// and panics are not failures: they end the retrying at once.
    ///
    /// ```
    /// use core::time::Duration;
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Ref, Schedule, wstp::Runtime};
    ///
    /// let attempts = Ref::new(0u32);
    /// let a = attempts.clone();
    /// let flaky: IO<u32, String> = IO::retry(
    ///     &Schedule::fixed(Duration::from_millis(1)).limit(5),
    ///     move || a.update_and_get(|n| *n += 1).flat_map(|n| {
    ///         if n < 3 { IO::raise_error(format!("attempt {n} failed")) } else { IO::pure(n) }
    ///     }),
    /// );
    /// assert_eq!(Runtime::new()?.block_on(flaky)?.succeeded(), Some(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn retry<M>(schedule: &Schedule, make: M) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
    {
        IO::retry_at::<WithClosure<Retry, M>, M, _>(here(), schedule, make, |_: &E| true)
    }

    /// [`IO::retry`], but only the errors for which `should_retry` holds
    /// are retried; any other error is raised at once.
    #[track_caller]
    pub fn retry_if<M, P>(schedule: &Schedule, make: M, should_retry: P) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
        P: FnMut(&E) -> bool + Send + 'static,
    {
        IO::retry_at::<WithClosure<Retry, M>, M, P>(here(), schedule, make, should_retry)
    }

    fn retry_at<Meta: crate::engine::tracing::OpMeta, M, P>(
        site: Option<crate::engine::tracing::Site>,
        schedule: &Schedule,
        mut make: M,
        should_retry: P,
    ) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
        P: FnMut(&E) -> bool + Send + 'static,
    {
        let delays = schedule.delays();
        IO::defer_at::<Meta, _>(site, move || {
            // The delays and the predicate travel through the loop state,
            // so that each continuation owns them (as in `iterate_while`).
            IO::tail_rec_untraced((delays, should_retry), move |(mut delays, mut retry)| {
                make()
                    .attempt_untraced()
                    .flat_map_untraced(move |result| match result {
                        Ok(a) => IO::pure(ControlFlow::Break(a)),
                        Err(e) => {
                            if !retry(&e) {
                                return IO::raise_error_untraced(e);
                            }
                            match delays.next() {
                                None => IO::raise_error_untraced(e),
                                Some(delay) => IO::<(), E>::sleep(delay)
                                    .map_untraced(move |()| ControlFlow::Continue((delays, retry))),
                            }
                        }
                    })
            })
        })
    }

    /// Runs the program `make` builds; after each success, sleeps the
    /// `schedule`'s next delay and runs a new one, until the schedule runs
    /// out; produces the value of the last run. The first failure ends the
    /// repetition with that error. The delay is measured from the end of
    /// one run to the start of the next, so the runs drift by their own
    /// duration: for runs on a fixed grid, use [`FixedRate`]. With an
    /// unlimited schedule it runs until it fails or is canceled; the
    /// number of runs of a limited schedule that ends normally is
    /// `1 + limit`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Ref, Schedule, wstp::Runtime};
    ///
    /// let runs = Ref::new(0u32);
    /// let r = runs.clone();
    /// let io: IO<u32, ()> = IO::repeat(
    ///     &Schedule::fixed(Duration::from_millis(1)).limit(3),
    ///     move || r.update_and_get(|n| *n += 1),
    /// );
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn repeat<M>(schedule: &Schedule, mut make: M) -> IO<A, E>
    where
        M: FnMut() -> IO<A, E> + Send + 'static,
    {
        let delays = schedule.delays();
        IO::defer_at::<WithClosure<Repeat, M>, _>(here(), move || {
            IO::tail_rec_untraced(delays, move |mut delays| {
                make().flat_map_untraced(move |a| match delays.next() {
                    None => IO::pure(ControlFlow::Break(a)),
                    Some(delay) => IO::<(), E>::sleep(delay)
                        .map_untraced(move |()| ControlFlow::Continue(delays)),
                })
            })
        })
    }
}

/// One start of a [`FixedRate`] run: which slot of the grid it fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// The slot: this run was due at `origin + slot * period` (0 for the
    /// first run).
    pub slot: u64,
    /// The time it was due, on the executor's monotonic clock
    /// ([`IO::monotonic`]); a run starts at this time or, if late, later.
    pub scheduled: Duration,
    /// Slots skipped just before this one, because the previous run ended
    /// after they were due (see [`FixedRate`]).
    pub skipped: u64,
    /// How many runs started before this one.
    pub run: u64,
}

/// Runs a program every `period`, without drift: run `k` is due at
/// `origin + k * period` on the executor's monotonic clock, where `origin`
/// is when [`run`](FixedRate::run) started, however long each run takes.
///
/// # A run longer than the period
///
/// Runs never overlap: a run starts only when the previous one ended. If a
/// run ends after the next slot was due, the next run starts at once (one
/// late run, not a burst), is given the latest slot that is already due,
/// and the slots in between are skipped ([`Tick::skipped`] counts them).
/// Later runs go back to the grid. This is tokio's
/// `MissedTickBehavior::Skip`: catching up with a burst would hammer
/// whatever the program talks to, and delaying the grid would drift.
///
/// ```
/// use core::num::NonZeroU64;
/// use core::time::Duration;
/// use spindle_effect::prelude::*;
/// use spindle_effect::{FixedRate, wstp::Runtime};
///
/// let every_ms = FixedRate::new(Duration::from_millis(1))?.limit(NonZeroU64::new(3).unwrap());
/// let io: IO<u64, ()> = every_ms.run(|tick| IO::pure(tick.slot));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedRate {
    period: Duration,
    limit: Option<NonZeroU64>,
}

impl FixedRate {
    /// Runs every `period` (above zero), without end until
    /// [`limit`](FixedRate::limit)ed.
    pub fn new(period: Duration) -> Result<FixedRate, InvalidSchedule> {
        if period.is_zero() {
            return Err(InvalidSchedule::ZeroPeriod);
        }
        Ok(FixedRate {
            period,
            limit: None,
        })
    }

    /// Stops after `runs` runs.
    #[must_use]
    pub fn limit(self, runs: NonZeroU64) -> FixedRate {
        FixedRate {
            limit: Some(runs),
            ..self
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Runs the program `make` builds for each [`Tick`], at the fixed rate;
    /// produces the number of runs once the limit is reached (without a
    /// limit it runs until a run fails, which ends it with that error, or
    /// it is canceled).
    #[track_caller]
    pub fn run<A, E, M>(&self, make: M) -> IO<u64, E>
    where
        A: Send + 'static,
        E: Send + 'static,
        M: FnMut(Tick) -> IO<A, E> + Send + 'static,
    {
        let period = self.period.as_nanos();
        let limit = self.limit.map(NonZeroU64::get);
        IO::defer_at::<WithClosure<RunFixedRate, M>, _>(here(), move || {
            IO::<Duration, E>::monotonic().flat_map_untraced(move |origin| {
                let origin = origin.as_nanos();
                // State: the next slot, the runs started so far, and the
                // maker (it travels through the state so that the
                // continuation that knows the tick owns it).
                IO::tail_rec_untraced((0u64, 0u64, make), move |(next, runs, mut make)| {
                    if limit.is_some_and(|limit| runs >= limit) {
                        return IO::pure(ControlFlow::Break(runs));
                    }
                    IO::<Duration, E>::monotonic().flat_map_untraced(move |now| {
                        let (wait, tick) = next_tick(origin, period, next, runs, now.as_nanos());
                        let run = match wait {
                            Some(wait) => IO::<(), E>::sleep(wait).flat_map_untraced(move |()| {
                                make(tick).map_untraced(move |_| make)
                            }),
                            None => make(tick).map_untraced(move |_| make),
                        };
                        run.map_untraced(move |make| {
                            ControlFlow::Continue((tick.slot.saturating_add(1), runs + 1, make))
                        })
                    })
                })
            })
        })
    }
}

/// The tick for the next run of a fixed rate, and how long to wait for it
/// (`None`: start at once). All times in nanoseconds of the monotonic
/// clock; `next` is the first slot not yet run.
fn next_tick(
    origin: u128,
    period: u128,
    next: u64,
    runs: u64,
    now: u128,
) -> (Option<Duration>, Tick) {
    // Slot `k` is due at origin + k * period, saturating.
    let due = |slot: u64| origin.saturating_add(u128::from(slot).saturating_mul(period));
    let next_due = due(next);
    if now < next_due {
        // On time: wait for the slot.
        let tick = Tick {
            slot: next,
            scheduled: from_nanos_u128(next_due),
            skipped: 0,
            run: runs,
        };
        (Some(from_nanos_u128(next_due - now)), tick)
    } else {
        // Late (or exactly due): the latest slot already due, at once.
        // `period` is above zero (checked in `FixedRate::new`).
        let latest = u64::try_from((now - origin) / period).unwrap_or(u64::MAX);
        let slot = latest.max(next);
        let tick = Tick {
            slot,
            scheduled: from_nanos_u128(due(slot)),
            skipped: slot - next,
            run: runs,
        };
        (None, tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_exponential_schedule_saturates_instead_of_overflowing() {
        let huge = Schedule::exponential(Duration::MAX / 2, 4)
            .unwrap()
            .limit(3);
        let delays: alloc::vec::Vec<_> = huge.delays().collect();
        assert_eq!(delays, [Duration::MAX / 2, Duration::MAX, Duration::MAX]);
    }

    #[test]
    fn full_jitter_of_a_huge_delay_stays_within_it() {
        let s = Schedule::fixed(Duration::MAX)
            .jitter(Jitter::new(100, 1).unwrap())
            .limit(50);
        assert!(s.delays().all(|d| d <= Duration::MAX));
        assert!(s.delays().any(|d| d < Duration::MAX / 2));
    }

    #[test]
    fn a_limit_of_zero_gives_no_delay() {
        assert_eq!(Schedule::fixed(ms(1)).limit(0).delays().next(), None);
    }

    #[test]
    fn a_late_run_takes_the_latest_due_slot_and_counts_the_skipped_ones() {
        let p = ms(10).as_nanos();
        // On time: slot 1 due at 10ms, now 4ms.
        let (wait, tick) = next_tick(0, p, 1, 1, ms(4).as_nanos());
        assert_eq!(wait, Some(ms(6)));
        assert_eq!((tick.slot, tick.skipped, tick.scheduled), (1, 0, ms(10)));
        // Late: slot 1 was due at 10ms, now 35ms: slot 3 (30ms), 2 skipped.
        let (wait, tick) = next_tick(0, p, 1, 1, ms(35).as_nanos());
        assert_eq!(wait, None);
        assert_eq!((tick.slot, tick.skipped, tick.scheduled), (3, 2, ms(30)));
        // Exactly due: at once, nothing skipped.
        let (wait, tick) = next_tick(0, p, 2, 2, ms(20).as_nanos());
        assert_eq!((wait, tick.slot, tick.skipped), (None, 2, 0));
    }
}
