//! How the simulator picks the next task among those ready: uniformly at
//! random, or by PCT.
//!
//! # PCT
//!
//! The probabilistic concurrency testing scheduler of Burckhardt,
//! Kothari, Musuvathi and Nagarakatte, "A Randomized Scheduler with
//! Probabilistic Guarantees of Finding Bugs" (ASPLOS 2010): every fiber
//! gets a random priority when it is first seen (all above `depth`), the
//! ready fiber with the highest priority always runs, and at `depth − 1`
//! change points, steps drawn uniformly from `1..=expected_steps`, the
//! fiber that runs at that step drops to priority `depth − i` (below every
//! initial one). A bug of depth `d` (one that needs `d` ordering
//! constraints, such as a check-then-act race, depth 2, or a lost wake-up)
//! in a run of `k` steps with `n` fibers is then found with probability
//! at least `1 / (n · k^(d−1))` per seed, far more than a uniform walk
//! gives for long runs. The design is the paper's, adapted to fibers that
//! appear while the program runs (a new fiber draws its priority when it
//! is first scheduled) and to `IO::blocking` work (a blocking task draws
//! one too); no code was copied.
//!
//! Choose `expected_steps` near the length of a run (a passing
//! [`Sim::check`](crate::Sim::check) reports its steps: divide by the
//! seeds): change points past the end of a run never happen, and PCT then
//! finds nothing (measured on the crate's planted race, 17 steps a run:
//! depth 2 with 16 expected steps finds it in 7% of seeds, depth 3 with
//! 1,000 in 0.2%). For short programs the uniform strategy is often as
//! good (50% on the same race); PCT's guarantee matters for long runs.
//!
//! Both strategies draw only from the run's seeded generator, so a seed
//! fixes every pick.

use crate::rng::SimRng;

/// How the simulator chooses the next fiber to run when several are
/// ready. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Uniformly at random among the ready tasks, at every step.
    Random,
    /// PCT with bug depth `depth` (at least 1; 2–3 finds most races and
    /// lost wake-ups) over runs of about `expected_steps` steps (where
    /// the `depth − 1` priority change points are drawn; at least 1).
    Pct {
        /// The depth of the bugs looked for: `depth − 1` priority changes
        /// per run.
        depth: u32,
        /// About how many steps a run takes (the range of the change
        /// points).
        expected_steps: u64,
    },
}

impl Strategy {
    /// PCT with depth 3 over runs of about 1,000 steps (see the [module
    /// documentation](self) for choosing them).
    pub const fn pct() -> Strategy {
        Strategy::Pct {
            depth: 3,
            expected_steps: 1_000,
        }
    }
}

/// The state of a strategy for one run.
pub(crate) enum Picker {
    Random,
    Pct(Pct),
}

pub(crate) struct Pct {
    depth: u64,
    /// Change points, ascending, with the priority each one sets.
    changes: Vec<(u64, u64)>,
    next_change: usize,
}

impl Picker {
    pub(crate) fn new(strategy: Strategy, rng: &mut SimRng) -> Picker {
        match strategy {
            Strategy::Random => Picker::Random,
            Strategy::Pct {
                depth,
                expected_steps,
            } => {
                let depth = u64::from(depth.max(1));
                let mut changes: Vec<(u64, u64)> = (1..depth)
                    .map(|i| {
                        let step = 1 + rng.below(expected_steps.max(1));
                        (step, depth - i)
                    })
                    .collect();
                changes.sort_unstable();
                Picker::Pct(Pct {
                    depth,
                    changes,
                    next_change: 0,
                })
            }
        }
    }

    /// The priority of a task seen for the first time (PCT: random, above
    /// every priority a change point sets; unused by `Random`).
    #[inline]
    pub(crate) fn new_priority(&mut self, rng: &mut SimRng) -> u64 {
        match self {
            Picker::Random => 0,
            Picker::Pct(pct) => pct.depth + (rng.next_u64() >> 1),
        }
    }

    /// The index in `priorities` (one per ready task, at least one) of the
    /// task to run now.
    #[inline]
    pub(crate) fn pick(
        &mut self,
        rng: &mut SimRng,
        len: usize,
        priority: impl Fn(usize) -> u64,
    ) -> usize {
        match self {
            Picker::Random => rng.below(len as u64) as usize,
            Picker::Pct(_) => {
                let mut best = 0;
                let mut best_priority = priority(0);
                for i in 1..len {
                    let p = priority(i);
                    if p > best_priority {
                        best = i;
                        best_priority = p;
                    }
                }
                best
            }
        }
    }

    /// After step `step` (counted from 1): the priority the task that ran
    /// drops to, if `step` is a change point.
    #[inline]
    pub(crate) fn change_after(&mut self, step: u64) -> Option<u64> {
        let Picker::Pct(pct) = self else { return None };
        let mut lowered = None;
        while let Some(&(at, priority)) = pct.changes.get(pct.next_change) {
            if at > step {
                break;
            }
            pct.next_change += 1;
            if at == step {
                lowered = Some(priority);
            }
        }
        lowered
    }
}
