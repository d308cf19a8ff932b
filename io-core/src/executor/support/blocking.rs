//! [`BlockingPool`]: the bounded pool of threads behind `IO::blocking`,
//! shared by the std executors that hand blocking work off their own
//! threads (exec-wstp, exec-batching). The protocol is documented on
//! [`BlockingPool`] (this module is private; the type is re-exported by
//! the support module).
//!
//! # Locks
//!
//! One `std` mutex and condition variable, taken directly rather than from
//! io-core's sync shim: this module is std only, and no loom model checks
//! it (the executors' loom models cover their scheduling protocols). It is
//! built under loom all the same, with its `std` locks, so that the
//! executors built on it compile there with their whole API. Poisoning is
//! ignored: no user code runs under the lock (thunks run after it is
//! released), so the state is always consistent.
//!
//! Design credit: tokio's `spawn_blocking` pool (threads on demand up to a
//! cap, an idle keep-alive, a queue beyond the cap); this is Spindle's own
//! code, moved here from exec-wstp so that exec-batching uses the same
//! pool.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::string::String;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use std::vec::Vec;

use crate::fiber::BlockingTask;

/// The default bound on blocking threads: 512 (tokio's default).
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = 512;

/// How long an idle blocking thread waits for work before it exits, by
/// default: 10 seconds (tokio's default).
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Work a [`BlockingPool`] runs once on one of its threads. The executors'
/// pools run [`BlockingTask`]s; the trait lets the pool be tested (and
/// reused) with other work.
pub trait BlockingWork: Send + 'static {
    /// Runs the work (it may block its thread).
    fn run(self);
}

impl BlockingWork for BlockingTask {
    #[inline]
    fn run(self) {
        BlockingTask::run(self);
    }
}

struct State<T> {
    queue: VecDeque<T>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting for work.
    idle: usize,
    /// Wake-ups sent to idle threads and not yet consumed.
    notified: usize,
    shutdown: bool,
    handles: Vec<JoinHandle<()>>,
    /// Tests only: act as if the operating system refused every thread.
    #[cfg(test)]
    refuse_threads: bool,
}

/// A bounded pool of threads for blocking work (the executors' pools run
/// [`BlockingTask`]s).
///
/// # Why a separate pool
///
/// A fiber that calls `IO::blocking` suspends; the executor hands the
/// [`BlockingTask`] to this pool
/// ([`Executor::spawn_blocking`](crate::Executor::spawn_blocking)); a pool
/// thread runs the thunk and resumes the fiber through the executor's
/// `schedule_fiber`, so the fiber goes back to the executor's own threads.
/// The executor's threads (a work-stealing pool's workers, an event loop's
/// one thread) never run blocking work and never block on it. Cats Effect
/// instead hands a compute worker's role to a new thread when a fiber
/// blocks; in Rust a worker's state (its deque handle, timer shard, place
/// in the parking protocol, or an event loop's queues) is tied to its
/// thread, so moving it mid-run would put a hand-off on the scheduling
/// path. A separate pool (tokio's `spawn_blocking` design, written anew
/// here) leaves those threads untouched, for one hand-off per blocking call
/// in each direction.
///
/// # Threads
///
/// * Threads start on demand, up to `max_threads` alive at once; calls
///   beyond that wait in a FIFO queue. So at most `max_threads` thunks run
///   at any moment, however many fibers call `IO::blocking`.
/// * An idle thread exits after `keep_alive` without work.
/// * A call is handed to an idle thread if one waits (one wake-up per
///   call: `notified` counts wake-ups sent and not yet taken, so two calls
///   never count on the same idle thread); otherwise a new thread starts if
///   the bound allows; otherwise the call waits for a busy thread to finish.
///
/// # When the operating system refuses a thread
///
/// The call is not lost and never runs on the caller's thread: it stays
/// queued, and a running pool thread takes it when it finishes its current
/// call. If no pool thread is running, it waits for the next call that
/// manages to start one (every call tries again while the pool is below its
/// bound). `IO::blocking` has no error of its own to report (its error
/// type is the caller's), so the refusal is not an error value: the fiber
/// waits, and [`BlockingCounts::queued`] shows the call waiting.
///
/// # Shutdown
///
/// [`BlockingPool::shutdown`]: idle threads exit at once, busy ones after
/// their current call; queued calls are dropped (their fibers can then
/// never resume and are freed), and later calls are dropped at once. The
/// queued tasks hold fibers, which hold executor handles, which hold the
/// pool: shutting down breaks that cycle (see the
/// [support module](crate::executor::support#breaking-the-executorfiber-cycle)).
///
pub struct BlockingPool<T: BlockingWork = BlockingTask> {
    state: Mutex<State<T>>,
    condvar: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
}

impl<T: BlockingWork> core::fmt::Debug for BlockingPool<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockingPool")
            .field("max_threads", &self.max_threads)
            .field("keep_alive", &self.keep_alive)
            .field("thread_name", &self.thread_name)
            .field("counts", &self.counts())
            .finish()
    }
}

/// What a [`BlockingPool`] reports for metrics and fiber dumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct BlockingCounts {
    /// Threads alive (busy or idle).
    pub threads: usize,
    /// Threads waiting for work.
    pub idle: usize,
    /// Calls waiting for a thread.
    pub queued: usize,
}

impl<T: BlockingWork> BlockingPool<T> {
    /// A pool of at most `max_threads` threads named `thread_name`, each
    /// exiting after `keep_alive` without work. Starts no thread.
    pub fn new(max_threads: NonZeroUsize, keep_alive: Duration, thread_name: String) -> Self {
        BlockingPool {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                notified: 0,
                shutdown: false,
                handles: Vec::new(),
                #[cfg(test)]
                refuse_threads: false,
            }),
            condvar: Condvar::new(),
            max_threads: max_threads.get(),
            keep_alive,
            thread_name,
        }
    }

    /// The bound on threads alive at once.
    pub fn max_threads(&self) -> usize {
        self.max_threads
    }

    /// How long an idle thread waits for work before it exits.
    pub fn keep_alive(&self) -> Duration {
        self.keep_alive
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `task` and makes sure a thread will run it: an idle one, a
    /// new one if the bound allows, or else the next busy one to finish.
    /// `this` is the pool itself (its threads hold a reference while they
    /// live). After [`shutdown`](BlockingPool::shutdown), drops `task`.
    pub fn spawn(this: &Arc<Self>, task: T) {
        let mut state = this.lock();
        if state.shutdown {
            // The fiber can never resume; it is freed with the task
            // (outside the lock).
            drop(state);
            drop(task);
            return;
        }
        state.queue.push_back(task);
        if state.idle > state.notified {
            state.notified += 1;
            drop(state);
            this.condvar.notify_one();
            return;
        }
        if state.threads < this.max_threads {
            state.threads += 1;
            state.handles.retain(|handle| !handle.is_finished());
            match Self::start_thread(this, &state) {
                Ok(handle) => state.handles.push(handle),
                // The OS refused a thread: the task waits for a running one,
                // or for the next call that can start one (module doc).
                Err(_) => state.threads -= 1,
            }
        }
    }

    /// Starts a pool thread (called with the state locked: the new thread
    /// waits for the lock before it looks at the queue).
    fn start_thread(this: &Arc<Self>, state: &State<T>) -> std::io::Result<JoinHandle<()>> {
        #[cfg(test)]
        if state.refuse_threads {
            return Err(std::io::Error::other("refused by a test"));
        }
        #[cfg(not(test))]
        let _ = state;
        let pool = this.clone();
        std::thread::Builder::new()
            .name(this.thread_name.clone())
            .spawn(move || pool.run())
    }

    /// A pool thread: runs queued calls until it has waited `keep_alive`
    /// without work, or the pool shuts down.
    fn run(&self) {
        let mut state = self.lock();
        loop {
            if let Some(task) = state.queue.pop_front() {
                drop(state);
                task.run();
                state = self.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            state = match self.condvar.wait_timeout(state, self.keep_alive) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
            state.idle -= 1;
            if state.notified > 0 {
                state.notified -= 1;
            } else if state.queue.is_empty() && !state.shutdown {
                // Timed out (or woke spuriously) with nothing to do.
                break;
            }
        }
        state.threads -= 1;
    }

    /// Stops the pool: idle threads exit, queued tasks are dropped, later
    /// [`spawn`](BlockingPool::spawn)s drop their task. Returns the threads,
    /// for the caller to join (a thread busy in a call that never returns
    /// never finishes: join with a deadline, or not at all).
    pub fn shutdown(&self) -> Vec<JoinHandle<()>> {
        let mut state = self.lock();
        state.shutdown = true;
        let queued: Vec<T> = state.queue.drain(..).collect();
        let handles = core::mem::take(&mut state.handles);
        drop(state);
        self.condvar.notify_all();
        drop(queued);
        handles
    }

    /// Threads alive, idle threads, and calls waiting for a thread.
    pub fn counts(&self) -> BlockingCounts {
        let state = self.lock();
        BlockingCounts {
            threads: state.threads,
            idle: state.idle,
            queued: state.queue.len(),
        }
    }

    /// Tests only (`tests/blocking.rs`): makes every later thread start fail
    /// (`true`) or succeed.
    #[cfg(test)]
    pub(super) fn refuse_threads(&self, refuse: bool) {
        self.lock().refuse_threads = refuse;
    }
}
