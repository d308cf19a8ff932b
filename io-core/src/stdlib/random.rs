//! `Random`: a seeded pseudo-random number generator as a service of
//! programs (Cats Effect std's `Random`, in its seeded and shared shape).
//!
//! # Generator
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014; the constants are the
//! published ones): a 64-bit counter advanced by a fixed odd increment,
//! with each counter value mixed into the output. It passes BigCrush, needs
//! one word of state, no allocation and no division, and splits naturally:
//! a child generator is seeded from the parent's next output. It is *not*
//! cryptographically secure; do not use it for keys, tokens or anything an
//! attacker must not predict.
//!
//! # Sharing and determinism
//!
//! A [`Random`] is a handle: its clones share one state behind a short
//! lock of the sync shim (held for a few instructions, never across a
//! suspension), so fibers that draw from the same handle never see the
//! same number twice, and the sequence *as a whole* is determined by the
//! seed. Which fiber gets which number depends on their interleaving, as
//! with any shared generator; for a per-fiber reproducible stream,
//! [`split`](Random::split) a handle off for each fiber.
//!
//! There is deliberately no way to seed from the operating system in this
//! `no_std` crate; with `std`, [`Random::from_entropy`] seeds from the
//! standard library's per-process random hasher keys and the clock.
//!
//! Left out, compared with Cats Effect's `Random`: Gaussian numbers,
//! strings and `nextBytes` (easy to build on [`next_u64`](Random::next_u64)),
//! and a secure generator (that needs an operating-system source, which
//! belongs in a crate of its own).

use alloc::vec::Vec;
use core::fmt;
use core::num::NonZeroU64;
use core::ops::Range;

use crate::engine::tracing::{Named, here};
use crate::io::IO;
use crate::sync::{Arc, Mutex};

crate::engine::tracing::trace_ops! {
    NextU64 = "Random::next_u64",
    NextF64 = "Random::next_f64",
    NextBool = "Random::next_bool",
    Below = "Random::below",
    InRange = "Random::range",
    Shuffle = "Random::shuffle",
    Split = "Random::split",
}

/// SplitMix64's increment (the golden-ratio odd constant).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// One step of SplitMix64: advances `state` and returns the mixed output.
#[inline]
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in `0..bound` from the generator `next`, without the
/// bias of a plain remainder (Lemire's multiply-and-reject method: the
/// high half of `x * bound` is uniform once the few low halves below
/// `2^64 mod bound` are rejected).
pub(crate) fn below_with(bound: NonZeroU64, mut next: impl FnMut() -> u64) -> u64 {
    let bound = bound.get();
    // 2^64 mod bound, computed in u64 as (2^64 - bound) mod bound.
    let threshold = bound.wrapping_neg() % bound;
    loop {
        let product = u128::from(next()) * u128::from(bound);
        // Truncation intended: the low and the high 64 bits.
        let low = product as u64;
        if low >= threshold {
            return (product >> 64) as u64;
        }
    }
}

/// A uniform `f64` in `[0, 1)` from 64 random bits (the top 53 bits, the
/// precision of an `f64`, scaled by 2^-53: every value is exact).
#[inline]
pub(crate) fn unit_f64(bits: u64) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (bits >> 11) as f64 * SCALE
}

/// A seeded pseudo-random number generator, shared by its clones.
///
/// The generator is SplitMix64: fast, one word of state, good statistical
/// quality, and *not* cryptographically secure (never use it for keys or
/// tokens). Clones share one state behind a short lock, so fibers drawing
/// from the same handle never get the same output twice, and the whole
/// sequence is determined by the seed; which fiber gets which number
/// depends on their interleaving. For per-fiber reproducible streams,
/// [`split`](Random::split) a generator off for each fiber.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Random, wstp::Runtime};
///
/// let random = Random::seeded(42);
/// let again = Random::seeded(42);
/// let rolls: IO<(u64, u64), ()> = random
///     .range(1..7)?
///     .flat_map(move |a| again.range(1..7).expect("non-empty").map(move |b| (a, b)));
/// let (a, b) = Runtime::new()?.block_on(rolls)?.succeeded().unwrap();
/// assert!((1..7).contains(&a));
/// assert_eq!(a, b, "the same seed gives the same numbers");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Random {
    state: Arc<Mutex<u64>>,
}

impl fmt::Debug for Random {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The state is not shown: it would let a reader predict the stream.
        f.debug_struct("Random").finish_non_exhaustive()
    }
}

/// [`Random::range`] was given an empty range (`start >= end`): there is
/// no number to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptyRange;

impl fmt::Display for EmptyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a random number was asked for from an empty range")
    }
}

impl core::error::Error for EmptyRange {}

impl Random {
    /// A generator whose sequence is determined by `seed` (every seed is
    /// valid, 0 included).
    pub fn seeded(seed: u64) -> Self {
        Random {
            state: Arc::new(Mutex::new(seed)),
        }
    }

    /// A generator seeded from the standard library's per-process random
    /// hasher keys (which std draws from the operating system) mixed with
    /// the wall clock: different in every process, not reproducible.
    #[cfg(feature = "std")]
    pub fn from_entropy() -> Self {
        use core::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        hasher.write_u128(nanos);
        Random::seeded(hasher.finish())
    }

    /// Draws the next 64 bits now (for io-core's own users: schedules).
    fn draw(&self) -> u64 {
        splitmix64(&mut self.state.lock())
    }

    /// The next 64 random bits, uniform over all of `u64`.
    #[track_caller]
    pub fn next_u64<E: Send + 'static>(&self) -> IO<u64, E> {
        let this = self.clone();
        IO::delay_at::<Named<NextU64>, _>(here(), move || this.draw())
    }

    /// A uniform number in `[0, 1)`, with the 53 bits of precision of an
    /// `f64`.
    #[track_caller]
    pub fn next_f64<E: Send + 'static>(&self) -> IO<f64, E> {
        let this = self.clone();
        IO::delay_at::<Named<NextF64>, _>(here(), move || unit_f64(this.draw()))
    }

    /// `true` or `false`, each with probability one half.
    #[track_caller]
    pub fn next_bool<E: Send + 'static>(&self) -> IO<bool, E> {
        let this = self.clone();
        IO::delay_at::<Named<NextBool>, _>(here(), move || this.draw() >> 63 == 1)
    }

    /// A uniform number in `0..bound`, without modulo bias. The bound is a
    /// `NonZeroU64`: `0..0` has no number, and the type says so.
    #[track_caller]
    pub fn below<E: Send + 'static>(&self, bound: NonZeroU64) -> IO<u64, E> {
        let this = self.clone();
        IO::delay_at::<Named<Below>, _>(here(), move || below_with(bound, || this.draw()))
    }

    /// A uniform number in `range` (`start` included, `end` excluded),
    /// without modulo bias; `Err(EmptyRange)` when `start >= end`, checked
    /// when the program is built.
    #[track_caller]
    pub fn range<E: Send + 'static>(&self, range: Range<u64>) -> Result<IO<u64, E>, EmptyRange> {
        let width = range
            .end
            .checked_sub(range.start)
            .and_then(NonZeroU64::new)
            .ok_or(EmptyRange)?;
        let this = self.clone();
        let start = range.start;
        Ok(IO::delay_at::<Named<InRange>, _>(here(), move || {
            // `start + x < end` for every `x < width`: no overflow.
            start + below_with(width, || this.draw())
        }))
    }

    /// The items in a uniformly random order (Fisher–Yates: every
    /// permutation equally likely, given a uniform source).
    #[track_caller]
    pub fn shuffle<T: Send + 'static, E: Send + 'static>(&self, items: Vec<T>) -> IO<Vec<T>, E> {
        let this = self.clone();
        IO::delay_at::<Named<Shuffle>, _>(here(), move || {
            let mut items = items;
            // One lock for the whole shuffle: a few instructions per item.
            let mut state = this.state.lock();
            for i in (1..items.len()).rev() {
                // `i + 1` is at least 2 here; usize fits in u64 on every
                // supported target.
                let Some(bound) = NonZeroU64::new(i as u64 + 1) else {
                    continue;
                };
                let j = below_with(bound, || splitmix64(&mut state)) as usize;
                items.swap(i, j);
            }
            drop(state);
            items
        })
    }

    /// A new, independent generator seeded from this one's next output:
    /// give one to each fiber for per-fiber reproducible streams.
    #[track_caller]
    pub fn split<E: Send + 'static>(&self) -> IO<Random, E> {
        let this = self.clone();
        IO::delay_at::<Named<Split>, _>(here(), move || Random::seeded(this.draw()))
    }

    /// [`split`](Random::split) now, outside a program: for building
    /// seeds of other values (a schedule's jitter) when the program is
    /// built.
    pub fn split_now(&self) -> Random {
        Random::seeded(self.draw())
    }

    /// The next 64 bits now, outside a program (the same stream as
    /// [`next_u64`](Random::next_u64)): for seeding values such as a
    /// schedule's [`Jitter`](crate::Jitter) when they are built.
    pub fn next_u64_now(&self) -> u64 {
        self.draw()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_published_reference_outputs() {
        // First outputs of the reference implementation seeded with 0.
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(splitmix64(&mut s), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_stays_below_its_bound_and_reaches_both_ends() {
        let mut s = 7u64;
        let bound = NonZeroU64::new(3).unwrap();
        let mut seen = [false; 3];
        for _ in 0..1000 {
            let x = below_with(bound, || splitmix64(&mut s));
            assert!(x < 3);
            seen[x as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn unit_f64_is_in_the_half_open_unit_interval() {
        assert_eq!(unit_f64(0), 0.0);
        assert!(unit_f64(u64::MAX) < 1.0);
    }
}
