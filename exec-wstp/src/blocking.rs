//! The pool of blocking threads behind `IO::blocking`.
//!
//! # Why a separate pool
//!
//! Cats Effect hands a compute worker's role to a new thread when a fiber
//! blocks, so the blocked thread carries on as a blocking thread. In Rust a
//! worker's state is its local deque handle, its timer shard and its place
//! in the parking protocol, all tied to its thread; moving them mid-run
//! would put a hand-off on the scheduling path. A separate pool (tokio's
//! `spawn_blocking` design) keeps compute workers untouched: the fiber
//! suspends, a blocking thread runs the thunk and resumes the fiber, which
//! goes back to a compute worker. The cost is one hand-off per blocking
//! call in each direction, the same as tokio's.
//!
//! # Threads
//!
//! Threads are started on demand, up to `max_blocking_threads`, and an idle
//! thread exits after `blocking_keep_alive` without work. Calls beyond the
//! maximum wait in a FIFO queue. At shutdown, idle threads exit at once,
//! busy ones after their current call, and queued calls are dropped (their
//! fibers can then never resume and are freed).

use std::collections::VecDeque;
use std::thread::JoinHandle;
use std::time::Duration;

use spindle_core::BlockingTask;

use crate::sync::{self, Arc, Condvar, Mutex};

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<BlockingTask>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting for work.
    idle: usize,
    /// Wake-ups sent to idle threads and not yet consumed.
    notified: usize,
    shutdown: bool,
    handles: Vec<JoinHandle<()>>,
}

/// The blocking pool (shared by the runtime's handles).
#[derive(Debug)]
pub(crate) struct BlockingPool {
    state: Mutex<State>,
    condvar: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
}

/// What the metrics report of the pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockingCounts {
    pub(crate) threads: usize,
    pub(crate) idle: usize,
    pub(crate) queued: usize,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, keep_alive: Duration, thread_name: String) -> Self {
        BlockingPool {
            state: Mutex::new(State::default()),
            condvar: Condvar::new(),
            max_threads,
            keep_alive,
            thread_name,
        }
    }

    /// Queues `task` and makes sure a thread will run it. `this` is the
    /// pool itself (threads hold a reference while they live).
    pub(crate) fn spawn(this: &Arc<BlockingPool>, task: BlockingTask) {
        let mut state = this.state.lock();
        if state.shutdown {
            // The fiber can never resume; it is freed with the task.
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
            let pool = this.clone();
            let spawned = std::thread::Builder::new()
                .name(this.thread_name.clone())
                .spawn(move || pool.run());
            match spawned {
                Ok(handle) => state.handles.push(handle),
                // The OS refused a thread: the task waits for a running one
                // (there is at least one unless none could ever start; then
                // the fiber waits until one can).
                Err(_) => state.threads -= 1,
            }
        }
    }

    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            if let Some(task) = state.queue.pop_front() {
                drop(state);
                task.run();
                state = self.state.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            state = sync::wait_timeout(&self.condvar, state, self.keep_alive);
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

    /// Stops the pool: idle threads exit, queued tasks are dropped. Returns
    /// the threads to join.
    pub(crate) fn shutdown(&self) -> Vec<JoinHandle<()>> {
        let mut state = self.state.lock();
        state.shutdown = true;
        let queued: Vec<BlockingTask> = state.queue.drain(..).collect();
        let handles = std::mem::take(&mut state.handles);
        drop(state);
        self.condvar.notify_all();
        drop(queued);
        handles
    }

    pub(crate) fn counts(&self) -> BlockingCounts {
        let state = self.state.lock();
        BlockingCounts {
            threads: state.threads,
            idle: state.idle,
            queued: state.queue.len(),
        }
    }
}
