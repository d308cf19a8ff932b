//! The outcome table: how a combinator that runs its programs on child
//! fibers learns how they ended, and waits until it knows enough.
//!
//! `race`, `race_outcome`, `race_all`, `both`, `both_outcome`,
//! `par_sequence` (and with it `par_traverse` and the bounded forms) and
//! the `timeout` family all work the same way, with one [`Table`] of `n`
//! children:
//!
//! 1. **Start.** The parent starts every child in one step of its masked
//!    region ([`start`]), each with a completion callback
//!    ([`spawn`]): no join state and no frames around the child's
//!    program.
//! 2. **Record.** A child's completion callback runs exactly once, when
//!    the child has ended (its finalizers have run), and records it behind
//!    the table's lock ([`Table::record`]): the table counts it (ended,
//!    succeeded) and tells it what it is the first of ([`Arrival`]: the
//!    first to end, the first not canceled, the first not succeeded), and
//!    the combinator keeps what it needs of the outcome in its *slots*
//!    `S`: every outcome, only the winner, or the values and the first
//!    failure. What it does not keep of an outcome (a loser's value, a
//!    second failure) is handed back and dropped after the lock is
//!    released: dropping a user's value may run user code.
//! 3. **Wait.** The parent waits for a condition on the counts
//!    ([`Condition`]): it takes the lock, and either the condition holds (it
//!    resumes at once) or it registers its callback with the condition and
//!    suspends ([`Table::register`]). The completion that makes the
//!    condition hold takes the callback under the lock and resumes the
//!    parent once it has released it.
//! 4. **Decide.** Woken, the parent takes what it needs from the slots
//!    and decides: the combinator's result, or a failure to raise again
//!    ([`embed`](crate::combinators::embed::embed)). Children still
//!    running are canceled and awaited first ([`cancel_and_wait`]): a
//!    loser's finalizers have run before the combinator returns.
//!
//! # Who touches the table
//!
//! Only the children's completion callbacks (each once, to record) and the
//! parent (to register its wait, and to take from the slots once the
//! condition it waited for holds); all of it under the lock, whose
//! sections run no user code and never wait. The counts only grow, and a
//! child's slot is written in the same section as the counts that announce
//! it, so a parent that has seen a condition hold finds what it announced.
//!
//! # Why no wake-up is lost
//!
//! The parent checks the condition and registers its callback in one lock
//! section; a child records its outcome and looks at the registered
//! callback in one lock section. Whichever section comes first, the other
//! sees it: if the record comes first, the registration finds the
//! condition holding and resumes at once; if the registration comes first,
//! the record that makes the condition hold finds the callback and takes
//! it (a record that does not leaves it in place). So the parent is woken
//! exactly once per wait, never before the condition holds, never missed.
//!
//! Only the parent waits, and for one condition at a time. A wait can end
//! otherwise than by its condition (the parent canceled in the unmasked
//! wait, or a deadline passed); its callback then stays in the table until
//! the next registration replaces it, or a record takes it and resumes a
//! suspension that has ended already, which does nothing: a callback
//! belongs to one suspension of its fiber (`fiber/callback.rs`). The loom
//! models in `tests/loom.rs` check this protocol with two recording
//! threads.
//!
//! # Cancellation
//!
//! The parent waits unmasked (`poll`, [`poll_wait`]); canceled meanwhile, it
//! requests the cancellation of every child and waits, masked, until all
//! have ended. So whatever ends the combinator, no child outlives it.
//!
//! # Shapes
//!
//! The counts and the wait are the same for every combinator; the slots
//! and the children are each combinator's: two children of two value
//! types are `[RawFiberRef; 2]` and slots of two fields (no heap `Vec`,
//! and each child's callback captures the table only: one word, stored in
//! place), `n` children of one type an `Arc<Vec<RawFiberRef>>` and slots
//! indexed by position.
//!
//! Design credit: Cats Effect derives these combinators from `racePair`
//! and `both` (two fibers joined through a `Deferred`) and traverses with
//! them; this table gives the same semantics with one lock and one
//! callback, for any number of children. No code is copied.

use alloc::vec::Vec;
use core::time::Duration;

use crate::Callback;
use crate::combinators::monad_cancel::Poll;
use crate::engine::erased::ErasedFn;
use crate::engine::tracing::{ChildTraces, Trace};
use crate::fiber::{CompleteK, RawFiberRef, Spawner};
use crate::io::IO;
use crate::outcome::Outcome;
use crate::sync::{Arc, Mutex};

/// What the parent waits for, as the table stores it with the parent's
/// callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Until {
    /// A child has ended ([`FirstEnded`]).
    FirstEnded,
    /// A child has ended without being canceled, or every child has ended
    /// ([`Decided`]).
    Decided,
    /// Every child has succeeded, or one has ended otherwise ([`Settled`]).
    Settled,
    /// Every child has ended ([`AllEnded`]).
    AllEnded,
}

/// A condition the parent waits for, as a type: the closure of a wait then
/// captures the table only, one word stored in place, where a condition
/// value beside it would take a pooled block per wait (`engine/erased.rs`).
pub(super) trait Condition: Copy + Send + 'static {
    /// The condition as the table stores it.
    const UNTIL: Until;
}

/// A child has ended (`race_outcome`'s first).
#[derive(Clone, Copy)]
pub(super) struct FirstEnded;

/// A child has ended without being canceled (the winner of a race), or
/// every child has ended (each canceled itself).
#[derive(Clone, Copy)]
pub(super) struct Decided;

/// Every child has succeeded, or one has ended otherwise (`both`,
/// `par_sequence`).
#[derive(Clone, Copy)]
pub(super) struct Settled;

/// Every child has ended.
#[derive(Clone, Copy)]
pub(super) struct AllEnded;

impl Condition for FirstEnded {
    const UNTIL: Until = Until::FirstEnded;
}

impl Condition for Decided {
    const UNTIL: Until = Until::Decided;
}

impl Condition for Settled {
    const UNTIL: Until = Until::Settled;
}

impl Condition for AllEnded {
    const UNTIL: Until = Until::AllEnded;
}

/// How a child ended, as the table counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// With a value.
    Succeeded,
    /// With an error or a panic.
    Failed,
    /// Canceled.
    Canceled,
}

impl Ended {
    pub(super) fn of<A, E>(outcome: &Outcome<A, E>) -> Self {
        match outcome {
            Outcome::Succeeded(_) => Ended::Succeeded,
            Outcome::Canceled => Ended::Canceled,
            Outcome::Errored(_) | Outcome::Panicked(_) => Ended::Failed,
        }
    }
}

/// What a child's ending is the first of, among the table's children
/// (each is true for one child at most).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Arrival {
    /// The first to end.
    pub(super) first: bool,
    /// The first to end without being canceled: a race's winner.
    pub(super) winner: bool,
    /// The first to end without succeeding: the failure that settles
    /// `both` and `par_sequence`.
    pub(super) failure: bool,
}

/// What the table wakes when the parent's condition holds: the parent's
/// callback (a probe in the loom models).
pub(super) trait Wake {
    /// Resumes the waiter; called at most once, outside the lock.
    fn wake(self);
}

impl<E: Send + 'static> Wake for Callback<(), E> {
    #[inline]
    fn wake(self) {
        self.succeed(());
    }
}

/// The counts, the slots and the parent's wait, behind the lock.
struct State<S, W> {
    /// What the combinator keeps of its children's outcomes.
    slots: S,
    /// How many children were started (fixed).
    children: usize,
    /// How many have ended.
    ended: usize,
    /// How many have succeeded.
    succeeded: usize,
    /// Whether one ended without being canceled.
    won: bool,
    /// Whether one ended without succeeding.
    failed: bool,
    /// The parent's callback and the condition it waits for.
    waiter: Option<(W, Until)>,
}

impl<S, W> State<S, W> {
    #[inline]
    fn holds(&self, until: Until) -> bool {
        match until {
            Until::FirstEnded => self.ended > 0,
            Until::Decided => self.won || self.ended == self.children,
            Until::Settled => self.failed || self.succeeded == self.children,
            Until::AllEnded => self.ended == self.children,
        }
    }
}

/// The outcome table of one run of a combinator (module doc): shared by
/// `Arc` between the parent and its children's completion callbacks.
pub(super) struct Table<S, W> {
    state: Mutex<State<S, W>>,
}

impl<S, W: Wake> Table<S, W> {
    /// The table of `children` children, none ended, with empty `slots`.
    pub(super) fn new(children: usize, slots: S) -> Self {
        Table {
            state: Mutex::new(State {
                slots,
                children,
                ended: 0,
                succeeded: 0,
                won: false,
                failed: false,
                waiter: None,
            }),
        }
    }

    /// A child ended as `ended` (its completion callback: exactly once per
    /// child). `keep` stores what the combinator needs in the slots, under
    /// the lock; what it returns is dropped after the lock is released.
    /// Wakes the parent if this makes its condition hold.
    #[inline]
    pub(super) fn record<R>(&self, ended: Ended, keep: impl FnOnce(&mut S, Arrival) -> R) {
        let (rest, waiter) = {
            let mut state = self.state.lock();
            let arrival = Arrival {
                first: state.ended == 0,
                winner: !state.won && ended != Ended::Canceled,
                failure: !state.failed && ended != Ended::Succeeded,
            };
            state.ended += 1;
            state.succeeded += usize::from(ended == Ended::Succeeded);
            state.won |= arrival.winner;
            state.failed |= arrival.failure;
            let rest = keep(&mut state.slots, arrival);
            let wake = match &state.waiter {
                Some((_, until)) => state.holds(*until),
                None => false,
            };
            (rest, if wake { state.waiter.take() } else { None })
        };
        drop(rest);
        if let Some((waiter, _)) = waiter {
            waiter.wake();
        }
    }

    /// The parent's wait: wakes `waiter` at once if `until` holds, or else
    /// registers it, to be woken by the record that makes `until` hold.
    #[inline]
    pub(super) fn register(&self, waiter: W, until: Until) {
        let ready = {
            let mut state = self.state.lock();
            if state.holds(until) {
                Some(waiter)
            } else {
                // This replaces (drops) the callback of an earlier wait that
                // ended otherwise (module doc), under the lock: it belongs
                // to the parent, which is alive (it is registering), so the
                // drop only decrements a count and runs no user code.
                state.waiter = Some((waiter, until));
                None
            }
        };
        if let Some(waiter) = ready {
            waiter.wake();
        }
    }

    /// Runs `f` on the slots, under the lock (the parent, to take what a
    /// condition it waited for has announced).
    #[inline]
    pub(super) fn slots<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.state.lock().slots)
    }
}

/// The table of a combinator whose parent is a fiber (all of them: the
/// loom models use other waiters).
pub(super) type Outcomes<S, E> = Table<S, Callback<(), E>>;

/// Starts `program` as a child of `table` whose completion callback
/// records its outcome with `keep`, which receives the slots, the outcome,
/// its failure traces (to raise an error again with) and the [`Arrival`].
///
/// The callback captures the table only (and what `keep` captures): with a
/// `keep` that captures nothing it is one word, stored in place.
#[inline]
pub(super) fn spawn<S, E, A, R, K>(
    table: Arc<Outcomes<S, E>>,
    spawner: Spawner,
    program: IO<A, E>,
    keep: K,
) -> RawFiberRef
where
    S: Send + 'static,
    E: Send + 'static,
    A: Send + 'static,
    K: FnOnce(&mut S, Outcome<A, E>, ChildTraces, Arrival) -> R + Send + 'static,
{
    let on_complete =
        move |outcome: Outcome<A, E>, _: Vec<E>, trace: Trace, children: ChildTraces| {
            let traces = ChildTraces::of_failure(&outcome, trace, children);
            table.record(Ended::of(&outcome), move |slots, arrival| {
                keep(slots, outcome, traces, arrival)
            });
        };
    spawner.spawn(
        program.into_node(),
        Some(ErasedFn::new::<CompleteK<A, E>, _>(on_complete)),
    )
}

/// Waits until `U` holds.
#[inline]
pub(super) fn wait<S, E, U>(table: Arc<Outcomes<S, E>>, _until: U) -> IO<(), E>
where
    S: Send + 'static,
    E: Send + 'static,
    U: Condition,
{
    IO::from_callback_untraced(move |waker: Callback<(), E>| {
        table.register(waker, U::UNTIL);
        None
    })
}

/// Waits until `U` holds or the executor's monotonic clock reaches
/// `deadline`, whichever comes first (the parent tells which from the
/// slots).
#[inline]
pub(super) fn wait_until<S, E, U>(
    table: Arc<Outcomes<S, E>>,
    _until: U,
    deadline: Duration,
) -> IO<(), E>
where
    S: Send + 'static,
    E: Send + 'static,
    U: Condition,
{
    IO::from_callback_until_untraced(deadline, move |waker: Callback<(), E>| {
        table.register(waker, U::UNTIL);
        None
    })
}

/// The started children of one table, for their cancellation.
pub(super) trait Children: Clone + Send + 'static {
    /// Requests the cancellation of every child (of one that has ended, it
    /// changes nothing).
    fn request_cancel(&self);
}

impl Children for RawFiberRef {
    #[inline]
    fn request_cancel(&self) {
        RawFiberRef::request_cancel(self);
    }
}

impl<const N: usize> Children for [RawFiberRef; N] {
    #[inline]
    fn request_cancel(&self) {
        for child in self {
            child.request_cancel();
        }
    }
}

impl Children for Arc<Vec<RawFiberRef>> {
    #[inline]
    fn request_cancel(&self) {
        for child in self.iter() {
            child.request_cancel();
        }
    }
}

/// Starts a combinator's children in one step of the parent's masked
/// region, then continues with `then`, still masked: `table` makes the
/// table, `spawn` starts every child on it ([`spawn`]) and returns
/// them, and `then` receives the region's poll, the table and the children.
#[inline]
pub(super) fn start<S, E, C, X, T, F, G>(table: T, spawn: F, then: G) -> IO<X, E>
where
    S: Send + 'static,
    E: Send + 'static,
    C: Children,
    X: Send + 'static,
    T: FnOnce() -> Outcomes<S, E> + Send + 'static,
    F: FnOnce(Spawner, Arc<Outcomes<S, E>>) -> C + Send + 'static,
    G: FnOnce(Poll, Arc<Outcomes<S, E>>, C) -> IO<X, E> + Send + 'static,
{
    IO::uncancelable_untraced(move |poll| {
        let table = Arc::new(table());
        let spawning = table.clone();
        IO::<C, E>::with_spawner(move |spawner| spawn(spawner, spawning))
            .flat_map_untraced(move |children| then(poll, table, children))
    })
}

/// Requests the cancellation of `children` and waits (masked) until every
/// child of `table` has ended: their finalizers have run.
#[inline]
pub(super) fn cancel_and_wait<S, E, C>(table: Arc<Outcomes<S, E>>, children: C) -> IO<(), E>
where
    S: Send + 'static,
    E: Send + 'static,
    C: Children,
{
    IO::uncancelable_untraced(move |_| {
        IO::delay_untraced(move || children.request_cancel())
            .product_r_untraced(wait(table, AllEnded))
    })
}

/// `wait` made interruptible by `poll`: a cancellation meanwhile cancels
/// every child and waits until all have ended.
#[inline]
pub(super) fn interruptibly<S, E, C>(
    poll: Poll,
    table: &Arc<Outcomes<S, E>>,
    children: &C,
    wait: IO<(), E>,
) -> IO<(), E>
where
    S: Send + 'static,
    E: Send + 'static,
    C: Children,
{
    poll.apply_untraced(wait)
        .on_cancel_untraced(cancel_and_wait(table.clone(), children.clone()))
}

/// Waits (unmasked) until `until` holds; a cancellation meanwhile cancels
/// every child and waits until all have ended.
#[inline]
pub(super) fn poll_wait<S, E, C, U>(
    poll: Poll,
    table: &Arc<Outcomes<S, E>>,
    children: &C,
    until: U,
) -> IO<(), E>
where
    S: Send + 'static,
    E: Send + 'static,
    C: Children,
    U: Condition,
{
    interruptibly(poll, table, children, wait(table.clone(), until))
}
