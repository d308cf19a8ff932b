//! Fiber numbers: what dumps and `Debug` call a fiber (`fiber #3`).
//!
//! Each executor numbers the fibers it makes, 1 for the first, in the
//! order it makes them ([`Executor::next_fiber_id`]). The number is taken
//! once, before the fiber's allocation is made, and kept in its header
//! (four bytes, read by nothing on the run-loop's path), so that it stays
//! the fiber's for its whole life and is read without a lock from a
//! handle, a weak reference or a dump.
//!
//! Numbering costs one relaxed atomic add per fiber on a counter of the
//! executor ([`FiberIds`]), or nothing more for an executor that counts
//! the fibers it makes anyway: it derives the number from that count
//! ([`FiberId::nth`]).
//!
//! [`Executor::next_fiber_id`]: crate::Executor::next_fiber_id

use core::fmt;

use crate::sync::{AtomicUsize, Ordering};

/// A fiber's number on its executor: `#1` for the first fiber the executor
/// made, `#2` for the next, and so on, for the fiber's whole life.
///
/// Fiber dumps, [`FiberHandle`](crate::FiberHandle)'s and
/// [`Fiber`](crate::Fiber)'s `Debug` show it (`fiber #3 WAITING`,
/// `FiberHandle { fiber: #3 }`); `Display` and `Debug` both write `#3`.
///
/// Numbers are per executor (two executors each have a `#1`) and start
/// over from `#1` after `u32::MAX` fibers ([`FiberId::nth`]): they name a
/// fiber for a person reading a dump, not for ever.
/// An executor that numbers nothing (the default of
/// [`Executor::next_fiber_id`](crate::Executor::next_fiber_id)) gives every
/// fiber [`FiberId::UNNUMBERED`], `#0`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FiberId(u32);

impl FiberId {
    /// The number of every fiber of an executor that numbers none: `#0`.
    pub const UNNUMBERED: FiberId = FiberId(0);

    /// The number of the `n`th fiber an executor made, counting from 1: for
    /// an executor that counts the fibers it makes anyway (its count after
    /// adding this one). The number is the low 32 bits of `n`, or 1 where
    /// those are all 0: after `u32::MAX` fibers numbers start over from
    /// `#1`, and a numbered fiber is never `#0`.
    #[inline]
    pub const fn nth(n: u64) -> FiberId {
        let number = n as u32;
        FiberId(if number == 0 { 1 } else { number })
    }

    /// The number (0 for [`FiberId::UNNUMBERED`]).
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for FiberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Debug for FiberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The counter an executor numbers its fibers with: its
/// [`Executor::next_fiber_id`](crate::Executor::next_fiber_id) returns
/// [`next`](FiberIds::next), one relaxed atomic add, no lock (safe from any
/// thread, and without `std` from interrupt handlers).
///
/// An executor keeps one for all its handles (in the state they share),
/// so that its fibers are numbered `#1`, `#2`, ... in the order they are
/// made, whichever thread makes them.
pub struct FiberIds {
    /// How many fibers were numbered.
    made: AtomicUsize,
}

impl FiberIds {
    /// A counter whose first number is `#1`.
    pub fn new() -> FiberIds {
        FiberIds {
            made: AtomicUsize::new(0),
        }
    }

    /// The number of the next fiber: `#1` on the first call, then `#2`,
    /// ... (see [`FiberId::nth`] for what happens after `u32::MAX`).
    #[inline]
    pub fn next(&self) -> FiberId {
        let before = self.made.fetch_add(1, Ordering::Relaxed);
        FiberId::nth((before as u64).wrapping_add(1))
    }

    /// How many numbers [`next`](FiberIds::next) has given: the fibers
    /// made (for an executor's fibers-started counter). Any thread.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed) as u64
    }
}

impl Default for FiberIds {
    fn default() -> FiberIds {
        FiberIds::new()
    }
}

impl fmt::Debug for FiberIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberIds")
            .field("made", &self.made.load(Ordering::Relaxed))
            .finish()
    }
}
