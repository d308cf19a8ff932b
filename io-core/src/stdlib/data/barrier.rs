//! `CyclicBarrier`: `n` fibers wait for each other, then all go on, and the
//! barrier is ready for the next round (Cats Effect std's `CyclicBarrier`).
//!
//! # Protocol
//!
//! The state, behind a short lock of the sync shim (never held across a
//! suspension), is the number of fibers waiting in the current round, the
//! round's number (its *generation*) and the round's gate, a
//! [`Deferred`]:
//!
//! 1. A fiber arrives (`wait`). If it is not the last of the round, it
//!    counts itself in, takes a clone of the gate and the generation, and
//!    waits on the gate (cancelable).
//! 2. The last arrival puts a fresh gate and a zero count in place, moves
//!    the generation on, and opens the old gate, outside the lock: every
//!    fiber of the round goes on, and the next round starts empty.
//! 3. A waiter canceled while waiting counts itself out again, but only if
//!    its round is still the current one: once the round was released, the
//!    count already belongs to the next round.
//!
//! The arrival (step 1) and the installation of the cancel finalizer run
//! masked, so a cancellation lands only in the wait itself: either the
//! fiber is not counted in, or it is and its finalizer is in place.
//!
//! Invariant: `0 <= waiting < parties` whenever the lock is free.

use core::fmt;

use crate::engine::tracing::{Named, here};
use crate::io::IO;
use crate::stdlib::data::deferred::Deferred;
use crate::sync::{Arc, Mutex};

crate::engine::tracing::trace_ops! {
    Wait = "CyclicBarrier::wait",
}

struct State {
    waiting: usize,
    generation: u64,
    gate: Deferred<()>,
}

/// A barrier for `parties` fibers, reusable round after round.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{CyclicBarrier, wstp::Runtime};
///
/// let barrier = CyclicBarrier::new(2)?;
/// let other = barrier.clone();
/// let io: IO<&str, ()> = other
///     .wait()
///     .start()
///     .flat_map(move |fiber| barrier.wait().product_r(fiber.join_with_never()))
///     .map_to("both went through");
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some("both went through"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CyclicBarrier {
    parties: usize,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for CyclicBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("CyclicBarrier")
            .field("parties", &self.parties)
            .field("waiting", &state.waiting)
            .field("generation", &state.generation)
            .finish()
    }
}

/// A barrier was asked for 0 parties: no fiber could ever be the last to
/// arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidParties;

impl fmt::Display for InvalidParties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a cyclic barrier needs at least 1 party")
    }
}

impl core::error::Error for InvalidParties {}

/// What an arrival found.
enum Arrival {
    /// The last of the round: opens this gate.
    Last(Deferred<()>),
    /// Waits on the gate of this generation.
    Wait(Deferred<()>, u64),
}

impl CyclicBarrier {
    /// A barrier that releases each round when `parties` fibers (at least
    /// 1) have arrived.
    pub fn new(parties: usize) -> Result<Self, InvalidParties> {
        if parties == 0 {
            return Err(InvalidParties);
        }
        Ok(CyclicBarrier {
            parties,
            state: Arc::new(Mutex::new(State {
                waiting: 0,
                generation: 0,
                gate: Deferred::new(),
            })),
        })
    }

    /// The number of fibers each round waits for.
    pub fn parties(&self) -> usize {
        self.parties
    }

    /// How many fibers wait in the current round (for diagnostics and
    /// tests).
    pub fn waiting(&self) -> usize {
        self.state.lock().waiting
    }

    /// Arrives at the barrier and waits until `parties` fibers have
    /// arrived in this round; the last arrival releases them all and does
    /// not wait. A wait canceled before its round is released no longer
    /// counts toward it.
    #[track_caller]
    pub fn wait<E: Send + 'static>(&self) -> IO<(), E> {
        let parties = self.parties;
        let state = self.state.clone();
        IO::uncancelable_at::<Named<Wait>, _>(here(), move |poll| {
            let arrival = {
                let mut s = state.lock();
                if s.waiting + 1 >= parties {
                    s.waiting = 0;
                    s.generation = s.generation.wrapping_add(1);
                    Arrival::Last(core::mem::take(&mut s.gate))
                } else {
                    s.waiting += 1;
                    Arrival::Wait(s.gate.clone(), s.generation)
                }
            };
            match arrival {
                Arrival::Last(gate) => {
                    // A fresh gate of a finished round is completed once
                    // only: the `Err` cannot happen, and is ignored.
                    gate.complete_untraced::<E>(()).void_untraced()
                }
                Arrival::Wait(gate, generation) => {
                    let leave = IO::delay_untraced(move || {
                        let mut s = state.lock();
                        if s.generation == generation {
                            s.waiting = s.waiting.saturating_sub(1);
                        }
                    });
                    poll.apply_untraced(gate.get_untraced())
                        .on_cancel_untraced(leave)
                }
            }
        })
    }
}
