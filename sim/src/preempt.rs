//! Preemptions: where a run switched away from a fiber that could have
//! gone on, and how a failing schedule is shrunk to the few switches it
//! needs.
//!
//! # Opportunities and preemptions
//!
//! A fiber that yields (it ran its step and can run again) goes back to
//! the ready fibers. At the next pick, if another fiber is ready too, the
//! pick is an *opportunity*: the strategy may let the same fiber go on,
//! or *preempt* it by picking another. An opportunity is named by the
//! fiber that yielded and how many times it had yielded
//! (fiber 2 after its 3rd yield), a name that stays the same when the
//! interleaving of the other fibers changes. A run records where it
//! preempted and to which fiber ([`Preemption`], printed `2.3>4`;
//! [`RunReport::preemptions`](crate::RunReport::preemptions)).
//!
//! A replay key may name the preemptions allowed
//! ([`ReplayKey::preemptions`](crate::ReplayKey::preemptions)): each
//! switches to the fiber it names when that one is ready (else to the
//! strategy's pick), and at every other opportunity the fiber that
//! yielded goes on, whatever the strategy drew.
//! The strategy still draws at every pick, so the generator's stream, and
//! with it every other choice of the run, stays aligned with the
//! original run for as long as the runs agree.
//!
//! # Shrinking
//!
//! A failing run with many preemptions is hard to read: most of them are
//! noise, and a bug of depth 2 or 3 (a check-then-act race, a lost
//! wake-up) needs one or two. After the faults are shrunk, the shrinker
//! replays the failure allowing only subsets of its preemptions (halves,
//! then quarters, ..., then single ones, as delta debugging does) and
//! keeps each subset under which the run still fails the same way; every
//! kept run's own preemptions, never more than the subset, become the
//! next candidate. Then it tries each single preemption of what is left,
//! and each pair, alone. The result is a replay key whose schedule
//! switches fibers only where the failure needs it, within a budget of
//! runs (400). Where the fibers go after one waits (a choice
//! that is not a preemption) stays the strategy's, so a subset may also
//! change those choices: shrinking keeps what fails, and is a search, not
//! a proof that fewer switches cannot fail.
//!
//! Design credit: preemption bounding (Musuvathi and Qadeer, PLDI 2007)
//! and delta debugging (Zeller and Hildebrandt, 2002). No code is copied.

use core::fmt;
use std::collections::BTreeMap;

use crate::executor::Ready;

/// The most replays one shrinking of the preemptions makes.
pub(crate) const SHRINK_RUNS: usize = 400;

/// A preemption (module doc): fiber number `fiber`, right after its
/// `yields`-th yield, switched away from to fiber number `to`. Printed
/// `fiber.yields>to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Preemption {
    /// The fiber that yielded (its number, as in the schedule).
    pub fiber: u32,
    /// How many times it had yielded, this one included (from 1).
    pub yields: u32,
    /// The fiber that ran instead (0: blocking work).
    pub to: u32,
}

impl fmt::Display for Preemption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}>{}", self.fiber, self.yields, self.to)
    }
}

/// A run's preemptions: the fiber that may go on, every fiber's yields
/// so far, the preemptions taken and the ones allowed.
#[derive(Debug)]
pub(crate) struct Preemptions {
    /// The opportunity of the next pick: the fiber that ran the last
    /// step and yielded (ready again), and its count of yields.
    last_yielded: Option<(u32, u32)>,
    /// Yields so far, by fiber number.
    yields: Vec<u32>,
    /// The preemptions this run made, in order.
    pub(crate) taken: Vec<Preemption>,
    /// Only these opportunities may preempt, each to the fiber it names
    /// when that one is ready (else to the strategy's pick); `None`: any.
    allowed: Option<BTreeMap<(u32, u32), u32>>,
}

impl Preemptions {
    /// A run's book, allowing `allowed` (`None`: every opportunity).
    pub(crate) fn new(allowed: Option<&[Preemption]>) -> Preemptions {
        Preemptions {
            last_yielded: None,
            yields: Vec::new(),
            taken: Vec::new(),
            allowed: allowed.map(|allowed| {
                allowed
                    .iter()
                    .map(|p| ((p.fiber, p.yields), p.to))
                    .collect()
            }),
        }
    }

    /// Fiber `fiber` ran a step: whether it yielded (it is ready again).
    #[inline]
    pub(crate) fn ran(&mut self, fiber: u32, yielded: bool) {
        self.last_yielded = None;
        if !yielded {
            return;
        }
        let i = fiber as usize;
        if self.yields.len() <= i {
            self.yields.resize(i + 1, 0);
        }
        self.yields[i] = self.yields[i].saturating_add(1);
        self.last_yielded = Some((fiber, self.yields[i]));
    }

    /// The index among `ready` to run, given the strategy's `picked`: the
    /// fiber that yielded last, where the pick would preempt it at an
    /// opportunity that may not; the allowed preemption's own target
    /// where it names one that is ready.
    #[inline]
    pub(crate) fn decide(&mut self, picked: usize, ready: &[Ready]) -> usize {
        let Some((fiber, yields)) = self.last_yielded.take() else {
            return picked;
        };
        if ready.len() < 2 {
            return picked;
        }
        let position = |id: u32| ready.iter().position(|e| e.id == id);
        let chosen = match &self.allowed {
            None => picked,
            Some(allowed) => match allowed.get(&(fiber, yields)) {
                Some(&to) => position(to).unwrap_or(picked),
                None => position(fiber).unwrap_or(picked),
            },
        };
        let to = ready[chosen].id;
        if to != fiber {
            self.taken.push(Preemption { fiber, yields, to });
        }
        chosen
    }
}

/// The candidates of one round of shrinking: `kept` without the `chunk`
/// elements starting at `start`.
pub(crate) fn without(kept: &[Preemption], start: usize, chunk: usize) -> Vec<Preemption> {
    let end = start.saturating_add(chunk).min(kept.len());
    kept[..start].iter().chain(&kept[end..]).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(fiber: u32) -> Preemption {
        Preemption {
            fiber,
            yields: 1,
            to: 0,
        }
    }

    #[test]
    fn without_removes_one_chunk_and_keeps_the_order() {
        let all = [p(1), p(2), p(3), p(4), p(5)];
        assert_eq!(without(&all, 1, 2), vec![p(1), p(4), p(5)]);
        assert_eq!(without(&all[..3], 2, 5), vec![p(1), p(2)]);
        assert_eq!(without(&all[..3], 0, 3), Vec::new());
    }
}
