//! The starvation watchdog: reports a fiber that keeps one of its
//! executor's threads busy, without yielding, for longer than a threshold.
//!
//! A fiber shares its thread with every other fiber queued there. One that
//! blocks it (a blocking read, `std::thread::sleep`, a long computation
//! outside [`IO::blocking`](crate::IO::blocking), a lock held by another
//! thread) stops all of them: timers fire late, sockets are not served,
//! `block_on` does not return. Nothing fails, so nothing says why. The
//! watchdog says: once per such run, a [`StarvationReport`] with the fiber's
//! number, the thread, how long so far and the fiber's trace, given to a
//! handler (by default a warning on stderr).
//!
//! It is **off** unless the executor's builder is given a threshold
//! ([`RuntimeBuilder::starvation_threshold`](crate::RuntimeBuilder::starvation_threshold),
//! or `SPINDLE_STARVATION_MS` with `from_env`). Off, an executor makes no
//! thread and no slot, and its run path pays one predictable branch per
//! fiber run ([`run_fiber`]).
//!
//! # The protocol
//!
//! * Each thread that runs fibers has a [`RunSlot`]: one 64-bit word on a
//!   cache line of its own, written only by that thread. At the start of a
//!   fiber run the thread stores *(run number, running, fiber number)* in
//!   it, at the end the same word without *running*: two relaxed stores and
//!   a load of its own line, no clock read, no read-modify-write. The run
//!   number counts the thread's runs (31 bits, wrapping), so two runs of the
//!   same fiber are told apart.
//! * One watchdog thread per executor wakes every half threshold, reads
//!   every slot's word (relaxed: the word is all it needs, and a stale read
//!   only delays a report by one tick) and keeps, per slot, the last word
//!   it saw and when it first saw it. The same *running* word seen again is
//!   the same run still in progress; once it has been seen for at least the
//!   threshold and has not been reported yet, it is reported, once.
//! * So a run is reported after it has lasted between the threshold and
//!   about one and a half thresholds (plus the watchdog's own scheduling
//!   delay), and the reported duration ([`StarvationReport::running_for`])
//!   is a lower bound: the time since the watchdog first saw the run.
//!   A run shorter than the threshold is never reported, whatever the
//!   watchdog's delays: it cannot be seen twice a threshold apart.
//! * The trace comes from the executor's fiber listing
//!   ([`Executor::live_fibers`]), read by the watchdog thread (off the
//!   run path, only when it reports): a fiber that is not listed is
//!   reported without trace, with the reason ([`NoTrace`]). The running
//!   fiber does not write its ring while it is stuck, so the trace read is
//!   normally whole; one that moved on meanwhile is marked in motion.
//! * The watchdog thread holds a handle of the executor and is stopped and
//!   joined by [`Watchdog`]'s drop, which the executor's owner does first
//!   when it is dropped or shut down: no thread outlives the executor.
//!
//! Invariants: a slot is written by one thread only (its worker, or the
//! thread it was made for: [`RunSlots::this_thread`]); the watchdog only
//! reads slots; a report never blocks a worker (the handler runs on the
//! watchdog thread, so a slow handler delays only later reports).
//!
//! Each slot is a plain atomic of `std` rather than of the crate's sync
//! shim, as the blocking pool's state is: the protocol is single-word
//! relaxed stores and loads, where loom has no interleaving to find, and
//! the watchdog needs real threads and a real clock.
//!
//! Design credits: Cats Effect's CPU starvation checker (a timer that
//! reports when it fires late) and tokio's warnings for a task that
//! blocks a worker; no code is copied. Unlike Cats Effect's checker, this
//! one names the fiber: the slot says which fiber runs.

use std::boxed::Box;
use std::cell::RefCell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::string::String;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::config::ConfigError;
use crate::engine::tracing::Trace;
use crate::executor::{Executor, Fiber};
use crate::fiber::{FiberId, Ran};

/// The environment variable that turns the watchdog on for an executor
/// built from the environment (`X::from_env()`, or a builder's
/// `fiber_config_from_env`): a threshold in whole milliseconds, at least
/// 1. Unset or empty: off (unless the builder was given a threshold).
pub const STARVATION_ENV_VAR: &str = "SPINDLE_STARVATION_MS";

/// What the watchdog calls with each report, on its own thread. It should
/// return promptly: it delays later reports, and the executor's shutdown
/// waits for it. A panic in it loses that report only.
pub type StarvationHandler = Arc<dyn Fn(&StarvationReport) + Send + Sync>;

/// A fiber that has kept one of its executor's threads busy without
/// yielding for longer than the threshold: what the watchdog hands its
/// handler, once per such run.
///
/// `Display` writes the warning the default handler prints on stderr:
///
/// ```text
/// spindle: fiber #3 has kept worker 0 busy for at least 60 ms without yielding (threshold 50 ms)...
///  ├ delay @ src/main.rs:12:9
///  ╰ ...
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StarvationReport {
    /// The fiber's number on its executor.
    pub fiber: FiberId,
    /// The thread it keeps busy: the worker's index (exec-wstp's worker
    /// `n`; 0 for a single-threaded loop; for exec-tokio, the order in
    /// which threads first ran one of the executor's fibers: tokio's, and
    /// any thread in exec-tokio's `block_on`, which runs the main fiber
    /// itself until it first waits).
    pub worker: usize,
    /// How long the run had lasted at least when it was reported (since the
    /// watchdog first saw it).
    pub running_for: Duration,
    /// The executor's threshold.
    pub threshold: Duration,
    /// The fiber's trace, from the executor's fiber listing, or why there
    /// is none.
    pub trace: Result<Trace, NoTrace>,
}

/// Why a [`StarvationReport`] has no trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoTrace {
    /// The executor lists no fibers: tracing is off (mode `none`, or
    /// io-core's `tracing` feature compiled out) and the builder's
    /// `track_fibers` is off.
    NotListed,
    /// The fiber is not in the executor's listing: a fiber is listed after
    /// the first run it outlives (it waited or yielded), so one stuck in its
    /// first run is not yet; or it ended before the watchdog looked.
    NotYetListed,
    /// The fiber is listed but keeps no trace (tracing mode `none`, with
    /// `track_fibers`).
    NotTraced,
}

impl fmt::Display for NoTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoTrace::NotListed => {
                "no trace: the executor lists no fibers (tracing is off; turn it on, or \
                 `track_fibers(true)` for the fiber's state)"
            }
            NoTrace::NotYetListed => {
                "no trace: the fiber is not listed yet (it is still in its first run, which \
                 keeps its events in the thread's scratch ring), or it has just ended"
            }
            NoTrace::NotTraced => "no trace: the fiber keeps no trace (tracing mode `none`)",
        })
    }
}

impl fmt::Display for StarvationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spindle: fiber {} has kept worker {} busy for at least {} ms without yielding \
             (threshold {} ms): every other fiber of that thread waits. Blocking calls belong \
             in IO::blocking; long computations should cede now and then.",
            self.fiber,
            self.worker,
            self.running_for.as_millis(),
            self.threshold.as_millis(),
        )?;
        match &self.trace {
            Ok(trace) => write!(f, "\n{trace}"),
            Err(why) => write!(f, "\n ({why})"),
        }
    }
}

/// The default handler: the report's `Display` on stderr, one block.
pub fn print_starvation_report(report: &StarvationReport) {
    std::eprintln!("{report}");
}

/// The watchdog's resolved configuration (what an executor's `build` gets
/// from [`CommonSettings::starvation`](super::CommonSettings::starvation)
/// when the watchdog is on).
#[derive(Clone)]
pub struct StarvationConfig {
    /// A run longer than this is reported (more than zero).
    pub threshold: Duration,
    /// Who gets the reports.
    pub handler: StarvationHandler,
}

impl fmt::Debug for StarvationConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StarvationConfig")
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

/// The bit of a slot's word that says a run is in progress.
const RUNNING: u64 = 1 << 32;
/// The run number's place in a slot's word (the 31 top bits).
const RUN_SHIFT: u32 = 33;

/// One thread's slot: what fiber it runs now, if any, and which of its
/// runs that is (see the [module doc](self)). Written by that thread only.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct RunSlot {
    word: AtomicU64,
}

/// A run in progress in a [`RunSlot`]: ends it when dropped (also if the
/// run unwinds, so that a slot never stays *running*).
#[must_use = "the run ends when this is dropped"]
pub struct RunGuard<'a> {
    slot: &'a RunSlot,
    word: u64,
}

impl RunSlot {
    /// Marks the start of a run of fiber `fiber` on this slot's thread
    /// (which alone writes the slot); the run ends when the guard drops.
    #[inline]
    pub fn begin(&self, fiber: FiberId) -> RunGuard<'_> {
        let run = (self.word.load(Ordering::Relaxed) >> RUN_SHIFT).wrapping_add(1);
        let word = (run << RUN_SHIFT) | RUNNING | u64::from(fiber.get());
        self.word.store(word, Ordering::Relaxed);
        RunGuard { slot: self, word }
    }

    /// Runs `fiber` with its run marked in this slot: the watched path of
    /// [`run_fiber`], out of line so that the unwatched one stays small.
    #[inline(never)]
    pub fn run<X: Executor>(&self, fiber: Fiber<X>) -> Ran {
        let _run = self.begin(fiber.id());
        fiber.run()
    }

    /// [`run`](RunSlot::run) with [`Fiber::run_with`]: a fiber that yields
    /// goes to `requeue`.
    pub fn run_with<X: Executor>(&self, fiber: Fiber<X>, requeue: impl FnOnce(Fiber<X>)) -> Ran {
        let _run = self.begin(fiber.id());
        fiber.run_with(requeue)
    }

    /// The word now (the watchdog's read).
    fn read(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }
}

impl Drop for RunGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.slot
            .word
            .store(self.word & !RUNNING, Ordering::Relaxed);
    }
}

/// Runs `fiber` ([`Fiber::run`]), marking the run in `slot` when the
/// watchdog is on: what an executor's worker loop calls in place of
/// `fiber.run()`. With `None` (the watchdog off) this is `fiber.run()`
/// behind one predictable branch.
#[inline(always)]
pub fn run_fiber<X: Executor>(slot: Option<&RunSlot>, fiber: Fiber<X>) -> Ran {
    match slot {
        None => fiber.run(),
        Some(slot) => slot.run(fiber),
    }
}

/// [`run_fiber`] with [`Fiber::run_with`]: a fiber that yields goes to
/// `requeue` (the worker loop's own way back into its queue) rather than
/// to [`Executor::reschedule_fiber`].
#[inline(always)]
pub fn run_fiber_with<X: Executor>(
    slot: Option<&RunSlot>,
    fiber: Fiber<X>,
    requeue: impl FnOnce(Fiber<X>),
) -> Ran {
    match slot {
        None => fiber.run_with(requeue),
        Some(slot) => slot.run_with(fiber, requeue),
    }
}

/// The slots of one executor's threads, shared by its workers and its
/// [`Watchdog`]: made before the workers start (the watchdog needs the
/// executor's handle, which needs the slots), with one slot per worker
/// ([`add`](RunSlots::add)); an executor whose fibers run on
/// threads it does not own (exec-tokio) adds one per thread as they come
/// ([`this_thread`](RunSlots::this_thread)).
#[derive(Clone, Default)]
pub struct RunSlots {
    slots: Arc<Mutex<Vec<Arc<RunSlot>>>>,
}

impl fmt::Debug for RunSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunSlots")
            .field("slots", &self.lock().len())
            .finish()
    }
}

std::thread_local! {
    /// This thread's slots in the executors it has run fibers of
    /// ([`RunSlots::this_thread`]), by the address of their slot list.
    static THREAD_SLOTS: RefCell<Vec<(usize, Arc<RunSlot>)>> = const { RefCell::new(Vec::new()) };
}

impl RunSlots {
    /// No slots yet: each thread that will run fibers gets one with
    /// [`add`](RunSlots::add) (a worker pool: one per worker, in worker
    /// order, at build) or [`this_thread`](RunSlots::this_thread).
    pub fn new() -> RunSlots {
        RunSlots {
            slots: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<RunSlot>>> {
        // No code that could panic runs under the lock.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new slot, for one thread to write: the next worker's (reports
    /// name it by its place, 0 for the first added).
    pub fn add(&self) -> Arc<RunSlot> {
        let slot = Arc::new(RunSlot::default());
        self.lock().push(slot.clone());
        slot
    }

    /// The calling thread's slot, made and added the first time this
    /// thread asks (a thread-local lookup afterwards): for fibers that run
    /// on threads the executor does not own. A thread's entries for
    /// executors that are gone are dropped when it adds one.
    pub fn this_thread(&self) -> Arc<RunSlot> {
        let key = Arc::as_ptr(&self.slots) as usize;
        THREAD_SLOTS.with(|cell| {
            let mut mine = cell.borrow_mut();
            if let Some((_, slot)) = mine.iter().find(|(k, _)| *k == key) {
                return slot.clone();
            }
            // An entry whose slot only this thread still holds belongs to an
            // executor that is gone (its address may be reused).
            mine.retain(|(_, slot)| Arc::strong_count(slot) > 1);
            let slot = self.add();
            mine.push((key, slot.clone()));
            slot
        })
    }

    /// Every slot's word now, in slot order.
    fn read_all(&self, into: &mut Vec<u64>) {
        into.clear();
        into.extend(self.lock().iter().map(|slot| slot.read()));
    }
}

/// The stop signal of a watchdog thread.
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

/// One executor's watchdog thread (see the [module doc](self)): started by
/// the executor's `build` when the watchdog is on, kept by the executor's
/// owner, stopped and joined when dropped.
pub struct Watchdog {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watchdog")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

/// What the watchdog remembers of one slot.
#[derive(Clone, Copy)]
struct Seen {
    word: u64,
    since: Instant,
    reported: bool,
}

impl Watchdog {
    /// Starts the watchdog thread of the executor behind `handle`, watching
    /// `slots` with `config`; `name` names the thread. The handle is used
    /// only to read the fiber listing for a report's trace
    /// ([`Executor::live_fibers`]); `lists_fibers` says whether the
    /// executor lists its fibers at all (its registry is enabled). Fails
    /// only if the system refuses a thread.
    pub fn start<X: Executor>(
        config: StarvationConfig,
        slots: RunSlots,
        handle: X,
        lists_fibers: bool,
        name: String,
    ) -> std::io::Result<Watchdog> {
        let stop = Arc::new(Stop {
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        });
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            watch(&config, &slots, &handle, lists_fibers, &thread_stop);
        })?;
        Ok(Watchdog {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the watchdog thread and waits for it (for at most the report
    /// in progress: a handler should return promptly). Dropping the
    /// watchdog does this.
    pub fn stop(&mut self) {
        *self
            .stop
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.stop.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A handler that dropped the executor runs on the watchdog's own
            // thread, which ends when the handler returns: not joined there.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often the watchdog looks: every half threshold, at least every
/// millisecond apart.
fn tick(threshold: Duration) -> Duration {
    (threshold / 2).max(Duration::from_millis(1))
}

/// The watchdog thread's body.
fn watch<X: Executor>(
    config: &StarvationConfig,
    slots: &RunSlots,
    handle: &X,
    lists_fibers: bool,
    stop: &Stop,
) {
    let tick = tick(config.threshold);
    let mut words = Vec::new();
    let mut seen: Vec<Option<Seen>> = Vec::new();
    let mut stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let deadline = Instant::now() + tick;
        // Until the tick has passed (a spurious wake-up waits again).
        loop {
            if *stopped {
                return;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            stopped = stop
                .wake
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(stopped);
        slots.read_all(&mut words);
        let now = Instant::now();
        seen.resize(words.len(), None);
        for (worker, (&word, seen)) in words.iter().zip(seen.iter_mut()).enumerate() {
            if word & RUNNING == 0 {
                *seen = None;
                continue;
            }
            match seen {
                Some(run) if run.word == word => {
                    let running_for = now.saturating_duration_since(run.since);
                    if !run.reported && running_for >= config.threshold {
                        run.reported = true;
                        // The low 32 bits: the fiber's number (0 on an
                        // executor that numbers none).
                        let number = word as u32;
                        let report = StarvationReport {
                            fiber: if number == 0 {
                                FiberId::UNNUMBERED
                            } else {
                                FiberId::nth(u64::from(number))
                            },
                            worker,
                            running_for,
                            threshold: config.threshold,
                            trace: trace_of(handle, number, lists_fibers),
                        };
                        // A handler that panics loses its report, not the
                        // watchdog (the panic hook has printed the panic).
                        let _ = catch_unwind(AssertUnwindSafe(|| (config.handler)(&report)));
                    }
                }
                _ => {
                    *seen = Some(Seen {
                        word,
                        since: now,
                        reported: false,
                    })
                }
            }
        }
        stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
    }
}

/// The trace of fiber number `fiber` from the executor's listing, or why
/// there is none.
fn trace_of<X: Executor>(handle: &X, fiber: u32, lists_fibers: bool) -> Result<Trace, NoTrace> {
    if !lists_fibers {
        return Err(NoTrace::NotListed);
    }
    let info = handle
        .live_fibers()
        .into_iter()
        .find(|info| info.id.get() == fiber)
        .ok_or(NoTrace::NotYetListed)?;
    info.trace.ok_or(NoTrace::NotTraced)
}

/// The threshold named by [`STARVATION_ENV_VAR`]: `None` when unset or
/// empty; an error naming the variable when it is not a whole number of
/// milliseconds of at least 1.
pub(crate) fn threshold_from_env() -> Result<Option<Duration>, ConfigError> {
    match std::env::var_os(STARVATION_ENV_VAR) {
        None => Ok(None),
        Some(value) => parse_threshold(&value.to_string_lossy()),
    }
}

/// The threshold a value of [`STARVATION_ENV_VAR`] names (see
/// [`threshold_from_env`]).
fn parse_threshold(value: &str) -> Result<Option<Duration>, ConfigError> {
    if value.is_empty() {
        return Ok(None);
    }
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms))),
        _ => Err(ConfigError::StarvationEnv(Box::from(value))),
    }
}

#[cfg(test)]
mod tests;
