//! The simulation executor: [`SimHandle`] (io-core's
//! [`Executor`] contract) and the loop of one run.
//!
//! # The loop
//!
//! One run is one seed: a fresh executor (fibers numbered from `#1`, the
//! main fiber first, virtual time at zero, a generator seeded with the
//! seed), and this loop on the calling thread until the main fiber ends:
//!
//! 1. a violated invariant (checked first: the main fiber's last step may
//!    have broken one), the main fiber's end, or more steps than the
//!    limit end the run;
//! 2. a clock jump (fault, with its probability): virtual time moves
//!    forward by a random amount up to the configured maximum;
//! 3. the timers due at the current virtual time fire, in deadline order,
//!    which makes their fibers ready; then the [network](crate::net)'s
//!    events due (packets arriving, which resume the fibers waiting for
//!    them; hosts crashing, whose fibers are dropped; hosts restarting,
//!    whose programs start again);
//! 4. nothing ready: virtual time jumps to the earlier of the next timer
//!    and the next network event, and the loop goes on; neither: the main
//!    fiber can never end, a [deadlock](crate::FailureKind::Deadlock);
//! 5. the strategy picks one ready task (a fiber, or the work of an
//!    `IO::blocking` call), which runs: a fiber for one run (by default
//!    one interpreter step: the executor's fibers auto-yield after every
//!    step, so that every bind is a point where another fiber may run), a
//!    blocking task to its end (it resumes its fiber), inside its host's
//!    I/O driver (`spindle_net::driver::with_driver`: the sockets it makes
//!    are on that host);
//! 6. a fiber that suspended and may be canceled is canceled with the
//!    configured probability (fault): it is resumed to run its
//!    finalizers, as if another fiber had canceled it.
//!
//! # Invariants
//!
//! * Everything runs on the thread that called the simulator, one task at
//!   a time; every choice (the pick, each fault) comes from the run's
//!   generator, and virtual time moves only in steps 2 and 4. So a run is
//!   a function of its seed and configuration, as long as the program
//!   itself is (no real clock, no threads of its own that wake fibers, no
//!   randomness from elsewhere: see the crate documentation).
//! * A ready task is in the ready set exactly once (the executor contract
//!   hands each fiber over once); the set is a `Vec` and a pick is a
//!   `swap_remove`, which reorders it, but deterministically.
//! * Every fiber belongs to a host: the host being started, for a host
//!   program's first fiber, else the host of the fiber running when it
//!   was made. A crash starts a new incarnation of the host: its ready
//!   tasks are dropped, and a fiber of an older incarnation is dropped
//!   when anything schedules it (it never runs again).
//! * When a run ends (main fiber ended, or failed), the executor is
//!   closed: fibers still ready, timers, and fibers scheduled later are
//!   dropped (freed; their finalizers do not run), and so is the network
//!   (its waiting fibers and packets), so that nothing of one seed leaks
//!   into the next.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use spindle_core::executor::support::{FiberIds, TimerHeap, TimerId, WeakFiber, WeakFibers};
use spindle_core::{BlockingTask, Executor, Fiber, FiberConfig, FiberDump, FiberId, TimerCallback};

use crate::rng::SimRng;
use crate::strategy::Picker;

/// The executor handle fibers of a simulation hold. Made by the
/// simulator for each run; a program reaches it only through its fibers
/// (it implements [`Executor`], so a program can `spawn` on it like on any
/// other executor).
#[derive(Clone)]
pub struct SimHandle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimHandle")
            .field(
                "now",
                &Duration::from_nanos(self.shared.now.load(Ordering::Relaxed)),
            )
            .finish_non_exhaustive()
    }
}

/// A task the strategy can pick.
pub(crate) enum Task {
    Fiber(Fiber<SimHandle>),
    Blocking(BlockingTask),
}

/// A ready task, with what the strategy needs to know of it.
pub(crate) struct Ready {
    pub(crate) task: Task,
    /// The fiber's number (0 for a blocking task).
    pub(crate) id: u32,
    /// The fiber whose `IO::blocking` call a blocking task is (its number
    /// when it ran `spawn_blocking`), for reports; a fiber's own number.
    pub(crate) owner: u32,
    pub(crate) priority: u64,
    /// The simulated host the task belongs to (0: the main one).
    pub(crate) host: u32,
}

/// What the run's faults did (see [`crate::Fault`]).
pub(crate) struct Faults {
    /// Fault opportunities that came out "inject" so far, numbered in the
    /// order they happened (suppressed ones too).
    pub(crate) drawn: u32,
    /// The numbers of the injected faults not to inject (shrinking).
    pub(crate) suppressed: Vec<u32>,
    /// The faults injected.
    pub(crate) injected: Vec<crate::Fault>,
}

impl Faults {
    /// A fault came out of the generator: its number, and whether to
    /// inject it (it was not suppressed).
    pub(crate) fn decide(&mut self) -> (u32, bool) {
        let n = self.drawn;
        self.drawn += 1;
        (n, !self.suppressed.contains(&n))
    }
}

/// State touched with the lock held, on the simulator's thread.
pub(crate) struct State {
    pub(crate) ready: Vec<Ready>,
    pub(crate) timers: TimerHeap,
    pub(crate) rng: SimRng,
    pub(crate) picker: Picker,
    /// PCT priorities by fiber number (grown as fibers appear).
    pub(crate) priorities: Vec<u64>,
    /// Fibers that may be canceled at their suspension points, by number.
    pub(crate) cancelable: Vec<bool>,
    /// Every fiber made (weakly): dumps and the fibers left at the end.
    pub(crate) fibers: WeakFibers,
    /// The fiber running now (0: none, or a blocking task).
    pub(crate) running: u32,
    /// Steps so far (the step running now, during a step).
    pub(crate) step: u64,
    pub(crate) faults: Faults,
    /// Invariants violated inside the program ([`crate::invariant`]).
    pub(crate) violations: Vec<(String, Option<spindle_core::Trace>)>,
    /// The configuration's thresholds and scope, for the helpers.
    pub(crate) io_error_threshold: u64,
    pub(crate) cancel_threshold: u64,
    pub(crate) cancel_scope: crate::CancelScope,
    /// Each fiber's host and the host's incarnation when the fiber was
    /// made, by fiber number.
    pub(crate) host_of: Vec<(u32, u32)>,
    /// Each host's incarnation (a crash starts a new one), by host number.
    pub(crate) host_epoch: Vec<u32>,
    /// The host whose program the simulator is starting (its root fiber
    /// belongs to it).
    pub(crate) starting_host: Option<u32>,
    /// Host programs that failed (they fail the run).
    pub(crate) host_failures: Vec<crate::FailureKind>,
    /// The run's preemptions (`preempt.rs`).
    pub(crate) preemptions: crate::preempt::Preemptions,
}

impl State {
    fn epoch(&self, host: u32) -> u32 {
        self.host_epoch.get(host as usize).copied().unwrap_or(0)
    }

    /// The host of fiber `id` (0 for none: the main host), and whether the
    /// fiber belongs to a crashed incarnation of it.
    pub(crate) fn host_of(&self, id: u32) -> (u32, bool) {
        match self.host_of.get(id as usize) {
            Some(&(host, epoch)) => (host, epoch != self.epoch(host)),
            None => (0, false),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) config: FiberConfig,
    pub(crate) state: Mutex<State>,
    /// Virtual time, in nanoseconds (only the simulator's thread writes).
    pub(crate) now: AtomicU64,
    pub(crate) ids: FiberIds,
    pub(crate) closed: AtomicBool,
    /// The simulated network of the run.
    pub(crate) network: Arc<crate::net::Network>,
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic with the lock held (in the simulator itself) poisons it;
        // the state is still consistent (every update is one statement).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SimHandle {
    pub(crate) fn new(
        config: FiberConfig,
        state: State,
        network: Arc<crate::net::Network>,
    ) -> SimHandle {
        SimHandle {
            shared: Arc::new(Shared {
                config,
                state: Mutex::new(state),
                now: AtomicU64::new(0),
                ids: FiberIds::new(),
                closed: AtomicBool::new(false),
                network,
            }),
        }
    }

    /// Stops the fibers of the hosts the network crashed since the last
    /// call: a new incarnation of each (its fibers scheduled later are
    /// dropped), and its ready tasks dropped now (outside the lock).
    pub(crate) fn apply_crashes(&self) {
        let crashed = core::mem::take(&mut self.shared.network.lock().crashed);
        if crashed.is_empty() {
            return;
        }
        let mut stopped = Vec::new();
        {
            let mut state = self.shared.state();
            for host in crashed {
                let host = host as u32;
                let index = host as usize;
                if state.host_epoch.len() <= index {
                    state.host_epoch.resize(index + 1, 0);
                }
                state.host_epoch[index] += 1;
                let ready = core::mem::take(&mut state.ready);
                let (gone, kept): (Vec<Ready>, Vec<Ready>) =
                    ready.into_iter().partition(|r| r.host == host);
                state.ready = kept;
                stopped.extend(gone);
            }
        }
        drop(stopped);
    }

    /// Queues a task (fiber `id`, or 0 for a blocking task), unless the
    /// run has ended (then it is dropped here, outside the lock).
    fn push(&self, task: Task, id: u32) {
        if self.shared.closed.load(Ordering::Relaxed) {
            drop(task);
            return;
        }
        let mut guard = self.shared.state();
        // A fiber (or blocking work) of a crashed host's incarnation never
        // runs again.
        let (host, stale) = guard.host_of(if id == 0 { guard.running } else { id });
        if stale {
            drop(guard);
            drop(task);
            return;
        }
        let state = &mut *guard;
        let priority = if id == 0 {
            state.picker.new_priority(&mut state.rng)
        } else {
            let index = id as usize;
            if state.priorities.len() <= index {
                state.priorities.resize(index + 1, u64::MAX);
            }
            if state.priorities[index] == u64::MAX {
                state.priorities[index] = state.picker.new_priority(&mut state.rng);
            }
            state.priorities[index]
        };
        let owner = if id == 0 { state.running } else { id };
        state.ready.push(Ready {
            task,
            id,
            owner,
            priority,
            host,
        });
    }

    /// Virtual time now.
    pub(crate) fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.now.load(Ordering::Relaxed))
    }

    /// Closes the executor and frees what it holds (outside the lock).
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        let (ready, timers) = {
            let mut state = self.shared.state();
            (core::mem::take(&mut state.ready), state.timers.drain())
        };
        drop(ready);
        drop(timers);
    }

    /// The live fibers, with their states and traces.
    pub(crate) fn live(&self) -> Vec<spindle_core::FiberInfo> {
        // Read outside the lock: reading one upgrades its weak reference,
        // and dropping that strong reference may free the fiber (whose drop
        // may reach this executor). Nothing makes fibers meanwhile (this is
        // the simulator's thread, between steps), so the list goes back
        // as it was.
        let list = core::mem::take(&mut self.shared.state().fibers);
        let infos = list.infos().collect();
        self.shared.state().fibers = list;
        infos
    }
}

impl Executor for SimHandle {
    type TimerKey = TimerId;
    type FiberSlot = ();

    fn schedule_fiber(&self, fiber: Fiber<Self>) {
        let id = fiber.id().get();
        self.push(Task::Fiber(fiber), id);
    }

    fn reschedule_fiber(&self, fiber: Fiber<Self>) {
        self.schedule_fiber(fiber)
    }

    fn monotonic(&self) -> Duration {
        self.now()
    }

    /// Virtual time too, from the Unix epoch: a simulated program sees the
    /// same wall clock in every run of a seed.
    fn real_time(&self) -> Duration {
        self.now()
    }

    fn set_timer(&self, deadline: Duration, callback: TimerCallback) -> TimerId {
        let deadline = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        self.shared.state().timers.insert(deadline, callback)
    }

    fn cancel_timer(&self, key: TimerId) {
        let callback = self.shared.state().timers.cancel(key);
        drop(callback);
    }

    fn config(&self) -> &FiberConfig {
        &self.shared.config
    }

    /// A ready task of its own: the work runs when the strategy picks it,
    /// on the simulator's thread, so other fibers may run between the
    /// call and its end, as on a real blocking pool.
    fn spawn_blocking(&self, task: BlockingTask) {
        self.push(Task::Blocking(task), 0);
    }

    fn next_fiber_id(&self) -> FiberId {
        self.shared.ids.next()
    }

    fn fiber_created(&self, fiber: &Fiber<Self>) {
        let weak: WeakFiber = fiber.downgrade();
        let mut state = self.shared.state();
        let state = &mut *state;
        state.fibers.push(weak);
        // It belongs to the host being started, or to its parent's host
        // (the running fiber's).
        let host = match state.starting_host {
            Some(host) => host,
            None => state.host_of(state.running).0,
        };
        let epoch = state.epoch(host);
        let index = fiber.id().get() as usize;
        if state.host_of.len() <= index {
            state.host_of.resize(index + 1, (0, 0));
        }
        state.host_of[index] = (host, epoch);
    }

    fn is_shut_down(&self) -> bool {
        self.shared.closed.load(Ordering::Relaxed)
    }

    /// Always: a fiber of the simulation must not wait for the simulator
    /// (`Dispatcher::run_blocking` is refused), which runs on this thread.
    fn refuses_blocking_here(&self) -> bool {
        true
    }

    /// Every live fiber of the run, with the number of ready tasks and
    /// timers and virtual time (ms).
    fn fiber_dump(&self) -> FiberDump {
        let fibers = self.live();
        let (ready, timers) = {
            let state = self.shared.state();
            (state.ready.len() as u64, state.timers.len() as u64)
        };
        FiberDump {
            fibers,
            executor: vec![
                ("ready", ready),
                ("timers", timers),
                ("virtual time ms", self.now().as_millis() as u64),
            ],
        }
    }
}
