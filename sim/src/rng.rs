//! The seeded generator behind every choice of a run: ChaCha8 (the
//! `rand_chacha` crate), whose stream for a seed is fixed by the algorithm,
//! so that a seed replays the same run on every machine and with every
//! later version of this crate that keeps the same draws in the same order.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A seeded source of choices.
pub(crate) struct SimRng(ChaCha8Rng);

impl SimRng {
    pub(crate) fn new(seed: u64) -> SimRng {
        SimRng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A number in `0..n` (`n > 0`), by multiply-and-shift (Lemire's
    /// method without the rejection step: a bias below n / 2^64, which a
    /// scheduler can live with, and one draw per choice, always).
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.0.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A full 64-bit draw.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// `true` with probability `p` (a threshold fixed when the
    /// configuration was built: `p · 2^32`). One draw, whatever `p`: a run
    /// with a fault switched off draws the same numbers as one with it on.
    #[inline]
    pub(crate) fn chance(&mut self, threshold: u64) -> bool {
        u64::from(self.0.next_u32()) < threshold
    }
}

/// `p` (in `0.0..=1.0`) as a threshold for [`SimRng::chance`].
pub(crate) fn threshold(p: f64) -> u64 {
    (p * 4_294_967_296.0) as u64
}
