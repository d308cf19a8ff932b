//! The worker loop.
//!
//! Each worker owns a FIFO deque (crossbeam-deque's `Worker`); the others
//! hold its `Stealer`. One turn of the loop takes the next fiber:
//!
//! 1. every `global_queue_interval` ticks: due timers first, then the
//!    global queue before the local one, so that fibers scheduled from
//!    outside the pool are never starved by a worker busy with local work;
//! 2. otherwise the local queue, then a batch from the global queue (after
//!    a fiber yielded, the global queue first: a yield lets the fibers
//!    waiting there have a turn, so that two busy fibers started from
//!    outside the pool take turns even on one worker);
//! 3. out of work: due timers, then I/O readiness (a look at the pool's
//!    poller, when a fiber waits for I/O and no other worker holds the
//!    poller), then (as a searcher, see `idle.rs`) half of another
//!    worker's queue, starting at a random victim, then the global queue
//!    again;
//! 4. still nothing: park (`park.rs`): in the pool's poller if no other
//!    worker sleeps there, on the worker's condition variable if one does,
//!    until woken, until a socket is ready (in the poller), or until the
//!    earliest timer of this worker's shard is due.
//!
//! # I/O: one poller for the pool
//!
//! The pool has one mio poller ([`Poller`](spindle_net::driver::Poller),
//! spindle-net's reactor) for every socket its fibers make (each worker
//! runs its fibers inside `spindle_net::driver::with_driver` with the
//! pool's reactor). At most one worker sleeps in it at a time; the other
//! idle workers sleep on their condition variables, and whoever lets go
//! of the poller to run a fiber hands it to one of them (`park.rs`): so no
//! idle worker sleeps while readiness waits in the poller, however long
//! the fiber the last holder went to run. A busy worker also looks at the
//! poller without blocking every `global_queue_interval` ticks (with the
//! timers, and only when a fiber waits for I/O) and when it runs out of
//! work, if no other worker holds it. A sleep in the poller ends on
//! readiness, on the worker's earliest timer, or on a wake-up from another
//! thread (`Reactor::notify`, a system call only when the worker really
//! sleeps there). A fiber resumed by readiness is scheduled on the worker
//! that polled, in its next slot: it runs there next, while its socket's
//! data is in that core's cache (tokio's driver and Cats Effect 3.6's
//! polling system make the same choice; this is our own code).
//!
//! A fiber scheduled on a worker (a spawn, a resumed fiber) goes to that
//! worker's *next* slot (tokio's LIFO slot): it runs as soon as the
//! current fiber stops, while what it needs is still in cache (a message
//! and its reply, a parent and the child it just started). The fiber the
//! slot held moves to the back of the local queue, where others may steal
//! it, and then a sleeping worker is woken if nobody is searching (`idle.rs`,
//! rule 2); filling an empty slot wakes nobody, since this worker runs it
//! next. The slot cannot be stolen, so it is capped: after
//! [`MAX_NEXT_STREAK`] fibers in a row from the slot, the slot's fiber goes
//! to the back of the queue and the queue runs. A fiber that cedes or
//! auto-yields goes to the back of the queue without waking anyone (never
//! to the slot): if the queue was empty, the same worker runs it again at
//! once (Cats Effect's cede bypass), and if not, it runs after the fibers
//! that were waiting, which is the point of a cede.
//!
//! # Stealing: a back-off, and searchers that stay awake
//!
//! A searcher that finds fibers in another worker's queue leaves them to
//! their owner for [`STEAL_BACK_OFF_NS`] (3 µs) and takes them only if
//! they are still there then. The usual way a fiber gets there is a fiber
//! that starts two others (`both`, `race`: the second child displaces the
//! first from the next slot) or resumes two, and the owner runs them a
//! fraction of a microsecond after the current fiber stops; a steal in
//! that window moves the child to the other core, whose completion then
//! wakes the parent there, and the parent moves too: a hand-off between
//! cores per operation, where one worker could run the whole operation
//! from its cache. Work that stays queued longer (the owner runs a long
//! fiber, or has more queued than it gets through) is taken after the
//! back-off, so real parallel work stays parallel: the siblings of a fiber
//! that never yields wait 3 µs more for another worker than before.
//! Go's scheduler backs off in the same way before it steals a running
//! P's `runnext` (`runqgrab`, about 3 µs); this is our own code.
//!
//! "Still there" is judged by the owner's pace, not by a queue that is
//! never empty: each worker counts the fibers it runs, and a searcher
//! steals only if, in two back-off windows in a row, the owner either
//! ran long turns (1 µs or more on average, [`LONG_TURN_NS`]; or nothing
//! at all) or had at least a window's work queued (as many fibers as it
//! ran in the window) ([`worth_stealing`]). Fibers that cede after a few
//! hundred nanoseconds each (eight workers of a stream's `par_eval_map`
//! around one window) refill the queue as fast as the owner empties it;
//! spread over two cores they ran slower than on one, passing every
//! turn's cache lines and lock between the cores. One long turn (the
//! fiber that pulls a stream's next chunk) does not split them: the next
//! window is short again. While the owner keeps up the searcher lingers
//! (below) and looks again.
//!
//! A searcher that finds nothing does not park at once if it saw fibers
//! in another worker's queue, or was woken for some, less than
//! [`LINGER_NS`] (50 µs) ago: it looks again. While it searches, rule 2
//! of `idle.rs` wakes nobody, so a worker that makes work in a stream
//! (fork-joins, fibers that resume others) does not pay a wake-up of a
//! sleeping worker (a system call) per fiber it pushes. The cost is one
//! core spinning at most 50 µs after it last saw work. The protocol of
//! `idle.rs` is unchanged: a lingering worker is a searcher like any
//! other, and parks with rule 4 when it stops lingering.

use std::cell::Cell;
use std::time::Duration;

use crossbeam_deque::{Steal, Worker};
use spindle_core::Fiber;

use crate::handle::{Handle, Remote, Shared, add, bump};
use crate::sync::Arc;
use crate::sync::{Ordering, fence};

/// How many fibers in a row a worker takes from its next slot before it
/// goes back to its queue (tokio's cap on its LIFO slot).
pub(crate) const MAX_NEXT_STREAK: u8 = 3;

/// How long a searcher that finds fibers in another worker's queue leaves
/// them to their owner before it takes them (module doc: Go's scheduler
/// backs off in the same way before it steals a running P's `runnext`).
const STEAL_BACK_OFF_NS: u64 = 3_000;

/// The shortest average turn (the time a worker runs one fiber) for which
/// running a victim's fibers on two cores beats the cache lines they
/// would then pass between the cores.
const LONG_TURN_NS: u64 = 1_000;

/// Whether a searcher takes fibers from a victim's queue after one window
/// of the back-off: the queue held `queued` fibers at the window's start,
/// and its owner ran `ran` fibers (from its queue and its next slot)
/// during the window, which lasted `elapsed_ns` (at least
/// [`STEAL_BACK_OFF_NS`]; longer when the searcher's own thread was
/// descheduled meanwhile).
///
/// * If the owner's turns are long (at least [`LONG_TURN_NS`] on average;
///   or it ran nothing, its thread descheduled or one fiber never
///   yielding), its queue is worth another core.
/// * If they are short, the queue is worth another core only if it holds
///   at least a back-off's work (`queued` turns of the window's average
///   length): the fibers at its back would wait longer than the back-off.
///   A shorter queue of short turns stays with its owner: fibers that
///   cede after a few hundred nanoseconds each, such as the workers of a
///   stream's `par_eval_map` around one shared window, refill the queue
///   as fast as it empties, and spread over two cores they pass each
///   turn's cache lines and lock back and forth and run slower than on
///   one.
fn worth_stealing(queued: u64, ran: u64, elapsed_ns: u64) -> bool {
    ran.saturating_mul(LONG_TURN_NS) <= elapsed_ns
        || queued.saturating_mul(elapsed_ns) >= ran.saturating_mul(STEAL_BACK_OFF_NS)
}

/// How many back-off windows in a row must find the owner behind its
/// queue ([`worth_stealing`]) before a searcher steals.
const BACK_OFF_WINDOWS: u32 = 2;

/// How long a searcher keeps searching without parking after it last saw
/// fibers in another worker's queue (or was woken for some): the owner is
/// making work in a stream, and a searcher that stays awake spares the
/// owner a wake-up per fiber it pushes (idle.rs, rule 2).
const LINGER_NS: u64 = 50_000;

/// The thread-local state of a worker, reachable from `schedule_fiber`
/// through [`CURRENT`].
pub(crate) struct WorkerContext {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) local: Worker<Fiber<Handle>>,
    /// The fiber to run next (not stealable).
    next: Cell<Option<Fiber<Handle>>>,
    /// Fibers taken from `next` in a row.
    next_streak: Cell<u8>,
    /// Turns left until the next look at the timers and the global queue.
    tick: Cell<u32>,
    /// The fiber that ran last yielded (a cede or an auto-yield): the next
    /// turn looks at the global queue first (module doc, rule 2).
    yielded: Cell<bool>,
    searching: Cell<bool>,
    /// When this worker, searching, last saw fibers in another worker's
    /// queue or was woken to search (`Shared::now_ns`); 0 for never.
    saw_work_at: Cell<u64>,
    /// xorshift state for choosing steal victims.
    rng: Cell<u32>,
    /// This worker let go of the pool's poller since it last ran a fiber
    /// or parked: it hands the poller off before its next fiber
    /// (`park.rs`).
    owes_hand_off: Cell<bool>,
    /// This worker's slot of the starvation watchdog (`None`: off).
    watch: Option<std::sync::Arc<spindle_core::executor::support::RunSlot>>,
}

thread_local! {
    /// The worker this thread is, if it is one.
    pub(crate) static CURRENT: Cell<*const WorkerContext> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with the worker context of this thread, if it is a worker of
/// the runtime `shared`.
#[inline]
pub(crate) fn with_current<R>(shared: &Shared, f: impl FnOnce(Option<&WorkerContext>) -> R) -> R {
    let ptr = CURRENT.with(|current| current.get());
    // SAFETY: `CURRENT` is set by `run_worker` to a context that lives on
    // that thread's stack for the whole time the pointer is set, and is
    // cleared before the context is dropped; only shared references to the
    // context are ever made (its mutable parts are `Cell`s).
    let ctx = unsafe { ptr.as_ref() };
    f(ctx.filter(|ctx| std::ptr::eq(&*ctx.shared, shared)))
}

/// The thread body of worker `index`.
pub(crate) fn run_worker(shared: Arc<Shared>, index: usize, local: Worker<Fiber<Handle>>) {
    // The builder marked the reactor driven already.
    let reactor = shared.reactor.clone();
    let watch = shared
        .watch_slots
        .as_ref()
        .and_then(|slots| slots.get(index).cloned());
    let interval = shared.global_queue_interval;
    let ctx = WorkerContext {
        index,
        shared,
        local,
        next: Cell::new(None),
        next_streak: Cell::new(0),
        tick: Cell::new(interval),
        yielded: Cell::new(false),
        searching: Cell::new(false),
        saw_work_at: Cell::new(0),
        rng: Cell::new(0x9E37_79B9 ^ (index as u32).wrapping_mul(0x85EB_CA6B) | 1),
        owes_hand_off: Cell::new(false),
        watch,
    };
    CURRENT.with(|current| current.set(&ctx));
    spindle_net::driver::with_driver(&reactor, || ctx.run());
    CURRENT.with(|current| current.set(std::ptr::null()));
    // Fibers still queued here are dropped (shutdown).
    drop(ctx.next.take());
    while let Some(fiber) = ctx.local.pop() {
        drop(fiber);
    }
    ctx.shared.worker_exited();
}

impl WorkerContext {
    fn run(&self) {
        let shared = &*self.shared;
        let interval = shared.global_queue_interval;
        loop {
            if shared.is_shutdown() {
                return;
            }
            // Ticks left until the next look at the timers and the global
            // queue (a count down: no division per turn).
            let tick = self.tick.get();
            let due = tick <= 1;
            self.tick.set(if due { interval } else { tick - 1 });
            let next = if due {
                self.fire_timers();
                self.poll_io_now();
                self.pop_global()
                    .or_else(|| self.pop_next())
                    .or_else(|| self.pop_local())
            } else if self.yielded.replace(false) {
                // A yield lets others run, and the fibers waiting in the
                // global queue (the children of a `block_on`'s main fiber,
                // fibers started from outside the pool) are others too:
                // a batch of them joins the local queue, ahead of the
                // yielder, and the fibers take turns.
                self.pop_global()
                    .or_else(|| self.pop_next())
                    .or_else(|| self.pop_local())
            } else {
                self.pop_next()
                    .or_else(|| self.pop_local())
                    .or_else(|| self.pop_global())
            };
            if let Some(fiber) = next {
                self.run_fiber(fiber);
                continue;
            }
            if self.fire_timers() {
                continue;
            }
            if self.poll_io_now() > 0 {
                continue;
            }
            if let Some(fiber) = self.steal() {
                self.run_fiber(fiber);
                continue;
            }
            if self.searching.get() && self.lingers() {
                // Still a searcher: another look soon, without parking.
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
                continue;
            }
            self.park();
        }
    }

    #[inline]
    fn run_fiber(&self, fiber: Fiber<Handle>) {
        if self.owes_hand_off.get() && self.shared.reactor.waiters() > 0 {
            // This worker let go of the poller and runs a fiber now, which
            // may take long, while fibers wait for I/O: a worker asleep on
            // its condition variable takes the poller over (park.rs). With
            // no fiber waiting for I/O the debt stays, for the first fiber
            // this worker runs once one waits.
            self.owes_hand_off.set(false);
            self.shared.driver.hand_off();
        }
        if self.searching.get() {
            self.searching.set(false);
            if self.shared.idle.stop_searching() {
                // The last searcher found work: another worker searches for
                // the rest (idle.rs, rule 3).
                self.shared.notify_one();
            }
        }
        // Counted for searchers (`worth_stealing`).
        add(&self.shared.remotes[self.index].counters.ran, 1);
        // With the starvation watchdog on, the run is marked in this
        // worker's slot; off, one branch.
        // A fiber that yields goes behind the local work from here, as
        // `reschedule_fiber` would put it, without a clone of the pool's
        // handle out of the fiber.
        spindle_core::executor::support::run_fiber_with(self.watch.as_deref(), fiber, |fiber| {
            self.yield_fiber(fiber)
        });
    }

    /// Puts a fiber scheduled on this worker in its next slot (see the
    /// module doc).
    #[inline]
    pub(crate) fn schedule_next(&self, fiber: Fiber<Handle>) {
        if let Some(previous) = self.next.replace(Some(fiber)) {
            self.local.push(previous);
            self.shared.notify_after_push();
        }
    }

    /// Puts a fiber that yielded behind the local work; the next turn looks
    /// at the global queue first.
    #[inline]
    pub(crate) fn yield_fiber(&self, fiber: Fiber<Handle>) {
        self.local.push(fiber);
        self.yielded.set(true);
    }

    /// The fiber in the next slot, unless the streak cap is reached (the
    /// slot's fiber then goes to the back of the queue).
    #[inline]
    fn pop_next(&self) -> Option<Fiber<Handle>> {
        let fiber = self.next.take()?;
        let streak = self.next_streak.get();
        if streak < MAX_NEXT_STREAK {
            self.next_streak.set(streak + 1);
            Some(fiber)
        } else {
            self.next_streak.set(0);
            self.local.push(fiber);
            None
        }
    }

    /// The oldest fiber of the local queue (which ends a streak of the next
    /// slot).
    #[inline]
    fn pop_local(&self) -> Option<Fiber<Handle>> {
        let fiber = self.local.pop()?;
        self.next_streak.set(0);
        Some(fiber)
    }

    /// A batch from the global queue into the local one, and its first fiber.
    fn pop_global(&self) -> Option<Fiber<Handle>> {
        // A look first: two loads, where a steal from an empty queue also
        // pays a full fence (every turn after a yield comes here).
        if self.shared.injector.is_empty() {
            return None;
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(fiber) => return Some(fiber),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// As a searcher: half of another worker's queue, or the global queue.
    fn steal(&self) -> Option<Fiber<Handle>> {
        let shared = &*self.shared;
        if !self.searching.get() {
            if !shared.idle.try_start_searching() {
                return None;
            }
            self.searching.set(true);
        }
        let workers = shared.remotes.len();
        let start = self.next_random() as usize % workers;
        let mut backed_off = false;
        for attempt in 0..2 {
            let mut retry = false;
            for offset in 0..workers {
                let victim = (start + offset) % workers;
                if victim == self.index {
                    continue;
                }
                let remote = &shared.remotes[victim];
                let stealer = &remote.stealer;
                if !backed_off && !stealer.is_empty() {
                    backed_off = true;
                    self.saw_work_at.set(shared.now_ns());
                    if !self.back_off(remote) {
                        // Its owner took them.
                        continue;
                    }
                }
                match stealer.steal_batch_and_pop(&self.local) {
                    Steal::Success(fiber) => {
                        bump(&shared.remotes[self.index].counters.steals);
                        return Some(fiber);
                    }
                    Steal::Empty => {}
                    Steal::Retry => retry = true,
                }
            }
            if let Some(fiber) = self.pop_global() {
                return Some(fiber);
            }
            if !retry || attempt == 1 {
                break;
            }
        }
        None
    }

    /// Leaves the fibers in a victim's queue to their owner for
    /// [`STEAL_BACK_OFF_NS`]; true if the queue is not empty after it and
    /// its fibers are [`worth_stealing`].
    fn back_off(&self, victim: &Remote) -> bool {
        let shared = &*self.shared;
        let stealer = &victim.stealer;
        let mut queued = stealer.len() as u64;
        let mut ran_before = victim.counters.ran.load(Ordering::Relaxed);
        let mut start = shared.now_ns();
        let mut windows = 1;
        loop {
            // Only the clock is read meanwhile: every look at the victim's
            // queue or counter takes its cache lines from the owner, which
            // writes them at each fiber it runs.
            let now = shared.now_ns();
            let elapsed = now.saturating_sub(start);
            if elapsed >= STEAL_BACK_OFF_NS {
                if stealer.is_empty() {
                    return false;
                }
                let ran = victim.counters.ran.load(Ordering::Relaxed);
                if !worth_stealing(queued, ran.wrapping_sub(ran_before), elapsed) {
                    return false;
                }
                if windows == BACK_OFF_WINDOWS {
                    return true;
                }
                // Behind in this window: one long turn (a fiber that pulls
                // a chunk, say) is not yet a reason to split the queue;
                // still behind in the next window is.
                windows += 1;
                queued = stealer.len() as u64;
                ran_before = ran;
                start = now;
            }
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
    }

    /// Whether a searcher that found nothing searches again instead of
    /// parking: it saw work (or was woken for some) less than
    /// [`LINGER_NS`] ago.
    fn lingers(&self) -> bool {
        let saw = self.saw_work_at.get();
        saw != 0 && self.shared.now_ns().saturating_sub(saw) < LINGER_NS
    }

    fn next_random(&self) -> u32 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng.set(x);
        x
    }

    /// Fires this worker's due timers; true if any fired.
    fn fire_timers(&self) -> bool {
        let remote = &self.shared.remotes[self.index];
        if !remote.has_timers.load(Ordering::Relaxed) {
            return false;
        }
        let now = self.shared.now_ns();
        let mut due = Vec::new();
        {
            let mut timers = remote.timers.lock();
            timers.take_due(now, &mut due);
            remote
                .has_timers
                .store(!timers.is_empty(), Ordering::Relaxed);
        }
        let fired = !due.is_empty();
        add(&remote.counters.timers_fired, due.len() as u64);
        for callback in due {
            callback.fire();
        }
        fired
    }

    /// Looks at the pool's poller without blocking, if a fiber waits for
    /// I/O and no other worker holds the poller (that worker sees the
    /// events); resumes the fibers whose sockets are ready (onto this
    /// worker). How many it resumed.
    fn poll_io_now(&self) -> usize {
        if self.shared.reactor.waiters() == 0 {
            return 0;
        }
        match self.shared.driver.poll_now() {
            Some(resumed) => {
                self.owes_hand_off.set(true);
                add(
                    &self.shared.remotes[self.index].counters.io_events,
                    resumed as u64,
                );
                resumed
            }
            None => 0,
        }
    }

    /// Rule 4 of `idle.rs`, then sleep (in the pool's poller if no other
    /// worker sleeps there, `park.rs`) until woken, until a socket is ready
    /// (in the poller), or until this worker's next deadline.
    fn park(&self) {
        let shared = &*self.shared;
        let was_searching = self.searching.replace(false);
        if shared.idle.park(self.index, was_searching) {
            fence(Ordering::SeqCst);
            if shared.has_visible_work() {
                shared.notify_one();
            }
        }
        let remote = &shared.remotes[self.index];
        bump(&remote.counters.parks);
        loop {
            if shared.is_shutdown() {
                shared.idle.unpark_self(self.index);
                return;
            }
            if !shared.idle.is_asleep(self.index) {
                // Woken by a notifier, which counted us as a searcher: work
                // was made for others to take, and more may follow.
                self.searching.set(true);
                self.saw_work_at.set(shared.now_ns());
                return;
            }
            let timeout = {
                let mut timers = remote.timers.lock();
                timers
                    .next_deadline()
                    .map(|deadline| Duration::from_nanos(deadline.saturating_sub(shared.now_ns())))
            };
            if timeout == Some(Duration::ZERO) {
                // A timer is due: back to work. If a notifier took us off
                // the list meanwhile, we count as a searcher.
                if !shared.idle.unpark_self(self.index) {
                    self.searching.set(true);
                }
                return;
            }
            // Parking discharges a hand-off owed (this worker tries the
            // poller itself), and it owes one again after: it may have
            // slept in the poller (a sleep on the condition variable owes
            // none, but a spare hand-off only costs a fence and a look).
            let resumed = shared.driver.park(self.index, timeout);
            add(&remote.counters.io_events, resumed as u64);
            self.owes_hand_off.set(true);
            if resumed > 0 {
                // Readiness resumed fibers onto this worker: back to work
                // (as a searcher if a notifier took us off the list).
                if !shared.idle.unpark_self(self.index) {
                    self.searching.set(true);
                }
                return;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::worth_stealing;

    /// A window of exactly the back-off.
    const W: u64 = super::STEAL_BACK_OFF_NS;

    #[test]
    fn a_short_queue_of_short_turns_stays_with_its_owner() {
        // Eight fibers queued, 25 run in the 3 µs window: 120 ns a turn.
        assert!(!worth_stealing(8, 25, W));
        assert!(!worth_stealing(1, 4, W));
        assert!(!worth_stealing(8, 9, W));
    }

    #[test]
    fn a_queue_of_short_turns_longer_than_a_window_of_work_is_stolen_from() {
        assert!(worth_stealing(8, 8, W));
        assert!(worth_stealing(200, 40, W));
    }

    #[test]
    fn a_queue_behind_long_turns_is_stolen_from() {
        // Turns of 1 µs or more: two busy fibers that cede now and then.
        assert!(worth_stealing(1, 1, W));
        assert!(worth_stealing(1, 3, W));
    }

    #[test]
    fn a_queue_whose_owner_ran_nothing_in_the_window_is_stolen_from() {
        // One fiber that never yields, or the owner's thread descheduled.
        assert!(worth_stealing(1, 0, W));
        assert!(worth_stealing(0, 0, W));
    }

    #[test]
    fn a_window_stretched_by_the_searchers_own_descheduling_judges_the_turns_by_its_length() {
        // 10 ms in which the owner ran 5,000 turns of 2 µs: long turns.
        assert!(worth_stealing(1, 5_000, 10_000_000));
        // 10 ms in which it ran 50,000 turns of 200 ns, one queued: short.
        assert!(!worth_stealing(1, 50_000, 10_000_000));
    }
}
