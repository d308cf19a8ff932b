//! Parking and waking workers: who searches for work, who sleeps, and who
//! wakes whom.
//!
//! The protocol follows the design of tokio's multi-thread scheduler (its
//! `idle.rs`), which Cats Effect's `WorkStealingThreadPool` also adopted;
//! this is our own implementation of it.
//!
//! # State
//!
//! One atomic word packs two counters: `searching` (workers looking for work
//! to steal) in the high half and `unparked` (workers not asleep) in the low
//! half. The list of sleeping workers is behind a mutex that only idle
//! paths take.
//!
//! # Rules
//!
//! 1. **Searching is capped.** A worker out of local work may become a
//!    searcher only while `2 * searching < workers`: at most about half the
//!    pool steals at once, so idle workers do not stampede a busy one.
//! 2. **Wake only if nobody searches.** Whoever makes work visible to other
//!    workers (a push to the global queue, or to a local queue others may
//!    steal from) wakes a sleeper only when `searching == 0` and some worker
//!    sleeps; the woken worker starts as a searcher (both counters go up
//!    together, under the sleepers lock).
//! 3. **The last searcher passes the baton.** A searcher that finds work
//!    stops searching before it runs it; if it was the last searcher, it
//!    wakes another worker, which searches for the rest of the work.
//! 4. **The last searcher looks again before sleeping.** A worker parks by
//!    removing itself from `unparked` (and `searching`) and adding itself to
//!    the sleepers, in one step under the lock. If it was the last searcher,
//!    it checks every queue once more after that step, and wakes a worker if
//!    it sees work.
//!
//! A searcher may search for a while before it parks (`worker.rs`: a
//! searcher that saw work less than 50 µs ago looks again): it stays
//! counted as searching meanwhile, so rule 2 wakes nobody for it, and it
//! parks through rule 4 like any other when it stops. The rules, and the
//! argument below, are unchanged by it.
//!
//! # Why no wake-up is lost
//!
//! A producer pushes, then (after a `SeqCst` fence) reads the counters; a
//! parking searcher updates the counters (`SeqCst`), then (after a fence)
//! reads the queues. Of two such Dekker-style sequences at least one sees
//! the other: either the producer sees `searching == 0` after the last
//! searcher left and wakes a sleeper, or the last searcher sees the pushed
//! work and wakes one. A worker that parks without being a searcher did not
//! get to search because others were searching (rule 1); the last of those
//! re-checks (rule 4). The model tests below (loom) check that every pushed
//! item is taken and that no interleaving leaves all workers asleep with
//! work queued.
//!
//! # Where a worker sleeps
//!
//! A worker sleeps in the pool's I/O poller if no other worker sleeps
//! there, on its condition variable if one does (`park.rs`, which also
//! hands the poller to a sleeping worker when its holder goes back to
//! work), and is woken with `park::Driver::unpark`: a per-worker state
//! word says where it sleeps, and a wake-up that comes before the sleep
//! turns the sleep into a look, so it is never lost. Readiness also ends
//! a sleep in the poller: the worker resumes those fibers onto itself,
//! leaves the sleepers list and runs them. The models below run that
//! code (`park.rs` and spindle-net's `ParkState`, the real code) over a
//! stand-in for the system's wait, with I/O events delivered by a thread
//! of their own.

use crate::sync::{AtomicUsize, Mutex, Ordering};

const UNPARKED_MASK: usize = (1 << 16) - 1;
const SEARCHING_ONE: usize = 1 << 16;

/// The searching/unparked counters and the list of sleeping workers.
#[derive(Debug)]
pub(crate) struct Idle {
    state: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
    workers: usize,
}

fn searching(state: usize) -> usize {
    state >> 16
}

fn unparked(state: usize) -> usize {
    state & UNPARKED_MASK
}

impl Idle {
    /// All `workers` start unparked and not searching.
    pub(crate) fn new(workers: usize) -> Idle {
        assert!(
            workers <= UNPARKED_MASK,
            "exec-wstp: worker count checked by the builder"
        );
        Idle {
            state: AtomicUsize::new(workers),
            sleepers: Mutex::new(Vec::with_capacity(workers)),
            workers,
        }
    }

    /// Rule 2: which sleeping worker to wake after new work became visible,
    /// if any. The worker returned is already counted as unparked and
    /// searching; the caller unparks its [`Parker`].
    pub(crate) fn worker_to_notify(&self) -> Option<usize> {
        if !self.should_notify() {
            return None;
        }
        let mut sleepers = self.sleepers.lock();
        if !self.should_notify() {
            return None;
        }
        let worker = sleepers.pop()?;
        self.state.fetch_add(SEARCHING_ONE | 1, Ordering::SeqCst);
        Some(worker)
    }

    /// No searcher, and at least one worker sleeps. Callers that just made
    /// work visible issue a `SeqCst` fence first (see the module doc).
    fn should_notify(&self) -> bool {
        let state = self.state.load(Ordering::SeqCst);
        searching(state) == 0 && unparked(state) < self.workers
    }

    /// Rule 1: becomes a searcher if fewer than half the workers search.
    pub(crate) fn try_start_searching(&self) -> bool {
        let state = self.state.load(Ordering::SeqCst);
        if 2 * searching(state) >= self.workers {
            return false;
        }
        self.state.fetch_add(SEARCHING_ONE, Ordering::SeqCst);
        true
    }

    /// Rule 3: stops searching; true if this was the last searcher (the
    /// caller then wakes another worker).
    pub(crate) fn stop_searching(&self) -> bool {
        let previous = self.state.fetch_sub(SEARCHING_ONE, Ordering::SeqCst);
        searching(previous) == 1
    }

    /// Rule 4: records `worker` as asleep (and no longer searching, if it
    /// was); true if it was the last searcher, which must then check the
    /// queues once more.
    pub(crate) fn park(&self, worker: usize, was_searching: bool) -> bool {
        let mut sleepers = self.sleepers.lock();
        let delta = if was_searching { SEARCHING_ONE | 1 } else { 1 };
        let previous = self.state.fetch_sub(delta, Ordering::SeqCst);
        sleepers.push(worker);
        was_searching && searching(previous) == 1
    }

    /// A worker that woke up by itself (a timer, shutdown, a spurious
    /// wake-up) takes itself off the sleepers list. False if a notifier had
    /// already done so (the worker then counts as a searcher, rule 2).
    pub(crate) fn unpark_self(&self, worker: usize) -> bool {
        let mut sleepers = self.sleepers.lock();
        match sleepers.iter().position(|&w| w == worker) {
            Some(index) => {
                sleepers.swap_remove(index);
                self.state.fetch_add(1, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Whether `worker` is on the sleepers list.
    pub(crate) fn is_asleep(&self, worker: usize) -> bool {
        self.sleepers.lock().contains(&worker)
    }

    /// Sleeping and searching workers, for metrics.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.state.load(Ordering::SeqCst);
        (self.workers - unparked(state), searching(state))
    }
}

#[cfg(all(test, loom))]
mod tests_loom {
    //! Model tests of the protocol: workers that take items from a shared
    //! queue and park with exactly the steps the real worker loop takes
    //! (`worker.rs`), through the real `park.rs` code (the pool's poller,
    //! here a model of it, or a condition variable, and the hand-off),
    //! producers that push and notify like `schedule_fiber`, and an I/O
    //! thread whose readiness events wake the poller like the kernel does.
    //! Loom reports a deadlock if every thread ends up blocked, which is
    //! what a lost wake-up looks like; a worker that gets stuck for good
    //! (as in a fiber that never yields) checks that readiness still
    //! reaches the other worker.

    use super::*;
    use crate::park::{Driver, Notify, Poll};
    use crate::sync::{Arc, AtomicBool, Condvar, fence, wait};
    use loom::thread;
    use spindle_net::driver::ParkState;
    use std::collections::VecDeque;
    use std::time::Duration;

    /// What the system's wait holds: the waker's pending edge and the
    /// readiness events not yet reported.
    #[derive(Default)]
    struct Kernel {
        woken: bool,
        events: VecDeque<u32>,
    }

    /// The pool's poller: the real parking state (spindle-net's
    /// `ParkState`, as `Reactor::notify` and `Poller::poll` use it) over a
    /// mutex and a condition variable standing in for `epoll_wait` (sticky
    /// like mio's waker: a wake before the wait is reported by the wait).
    struct ModelPoller {
        park: ParkState,
        kernel: Mutex<Kernel>,
        condvar: Condvar,
    }

    impl ModelPoller {
        fn new() -> ModelPoller {
            ModelPoller {
                park: ParkState::new(),
                kernel: Mutex::new(Kernel::default()),
                condvar: Condvar::new(),
            }
        }

        /// `Reactor::notify`.
        fn notify(&self) {
            if self.park.notify() {
                self.kernel.lock().woken = true;
                self.condvar.notify_one();
            }
        }

        /// The kernel reports a socket ready (an I/O thread).
        fn deliver(&self, item: u32) {
            self.kernel.lock().events.push_back(item);
            self.condvar.notify_one();
        }

        /// `Poller::poll`: blocking (until an event or a notification) or
        /// a look; the events reported.
        fn poll(&self, blocking: bool) -> Vec<u32> {
            let parked = blocking && self.park.begin_park();
            let mut kernel = self.kernel.lock();
            while parked && !kernel.woken && kernel.events.is_empty() {
                kernel = wait(&self.condvar, kernel);
            }
            kernel.woken = false;
            let events = kernel.events.drain(..).collect();
            drop(kernel);
            if blocking {
                self.park.end_park();
            }
            events
        }
    }

    /// The pool's poller as `park::Driver` holds it: the events of a poll
    /// are handed to the worker that polled, which resumes them.
    struct ModelPoll {
        poller: Arc<ModelPoller>,
        handed: Arc<Mutex<Vec<u32>>>,
    }

    impl Poll for ModelPoll {
        fn poll(&mut self, timeout: Option<Duration>) -> usize {
            let events = self.poller.poll(timeout != Some(Duration::ZERO));
            let resumed = events.len();
            self.handed.lock().extend(events);
            resumed
        }
    }

    /// The poller's waker (`Reactor::notify`).
    struct ModelWaker(Arc<ModelPoller>);

    impl Notify for ModelWaker {
        fn notify(&self) {
            self.0.notify();
        }
    }

    struct Pool {
        idle: Idle,
        /// The real `park.rs` code over the model poller.
        driver: Driver<ModelPoll, ModelWaker>,
        poller: Arc<ModelPoller>,
        handed: Arc<Mutex<Vec<u32>>>,
        queue: Mutex<VecDeque<u32>>,
        taken: AtomicUsize,
        done: AtomicBool,
        /// Running the item of the first readiness event (1000) makes the
        /// next one (1001) come, as a fiber that writes to a socket whose
        /// peer another fiber reads.
        chained: bool,
    }

    impl Pool {
        fn new(workers: usize, chained: bool) -> Arc<Pool> {
            let poller = Arc::new(ModelPoller::new());
            let handed = Arc::new(Mutex::new(Vec::new()));
            let poll = ModelPoll {
                poller: poller.clone(),
                handed: handed.clone(),
            };
            Arc::new(Pool {
                idle: Idle::new(workers),
                driver: Driver::new(poll, ModelWaker(poller.clone()), workers),
                poller,
                handed,
                queue: Mutex::new(VecDeque::new()),
                taken: AtomicUsize::new(0),
                done: AtomicBool::new(false),
                chained,
            })
        }

        fn push(&self, item: u32) {
            self.queue.lock().push_back(item);
            fence(Ordering::SeqCst);
            self.notify_one();
        }

        fn notify_one(&self) {
            if let Some(worker) = self.idle.worker_to_notify() {
                self.driver.unpark(worker);
            }
        }

        fn has_work(&self) -> bool {
            !self.queue.lock().is_empty()
        }

        /// Fibers resumed by readiness onto the worker that polled, as
        /// `schedule_next` puts them: the first in its next slot (returned;
        /// no wake-up), the others where others can take them too, with
        /// rule 2.
        fn resume(&self) -> Option<u32> {
            let events = std::mem::take(&mut *self.handed.lock());
            let mut events = events.into_iter();
            let first = events.next();
            for item in events {
                self.push(item);
            }
            first
        }

        /// The worker loop of `worker.rs`, reduced to one queue. After
        /// `stuck_after` items the worker stops for good, as a worker
        /// stuck in a fiber that never yields (it never looks at the
        /// poller or parks again).
        fn work(&self, index: usize, expected: usize, stuck_after: usize) {
            let mut searching = false;
            let mut owes_hand_off = false;
            let mut ran = 0;
            // The next slot: only this worker takes it.
            let mut next = None;
            loop {
                if self.taken.load(Ordering::SeqCst) == expected {
                    break;
                }
                // The next slot, then own queue and global queue: every
                // worker looks there.
                let mut item = next.take().or_else(|| self.queue.lock().pop_front());
                if item.is_none() {
                    // Out of work: a look at the poller first, if free.
                    if self.driver.poll_now().is_some() {
                        owes_hand_off = true;
                    }
                    if let Some(first) = self.resume() {
                        next = Some(first);
                        continue;
                    }
                }
                if item.is_none() {
                    // Stealing needs the searcher role (rule 1).
                    if !searching {
                        searching = self.idle.try_start_searching();
                    }
                    if searching {
                        item = self.queue.lock().pop_front();
                    }
                }
                if let Some(item) = item {
                    // `run_fiber`.
                    if owes_hand_off {
                        owes_hand_off = false;
                        self.driver.hand_off();
                    }
                    if searching {
                        searching = false;
                        if self.idle.stop_searching() {
                            self.notify_one();
                        }
                    }
                    if self.taken.fetch_add(1, Ordering::SeqCst) + 1 == expected {
                        self.done.store(true, Ordering::SeqCst);
                        for worker in 0..self.parkers() {
                            self.driver.unpark(worker);
                        }
                    }
                    if self.chained && item == 1000 {
                        self.poller.deliver(1001);
                    }
                    ran += 1;
                    if ran == stuck_after {
                        return;
                    }
                    continue;
                }
                // Park (rule 4); a parked worker no longer searches.
                let was_searching = std::mem::replace(&mut searching, false);
                if self.idle.park(index, was_searching) {
                    fence(Ordering::SeqCst);
                    if self.has_work() {
                        self.notify_one();
                    }
                }
                loop {
                    if self.done.load(Ordering::SeqCst) {
                        self.idle.unpark_self(index);
                        return;
                    }
                    if !self.idle.is_asleep(index) {
                        // Woken by a notifier: counted as a searcher.
                        searching = true;
                        break;
                    }
                    // Parking discharges a hand-off owed (the worker tries
                    // the poller itself) and owes one again after.
                    let resumed = self.driver.park(index, None);
                    owes_hand_off = true;
                    if let Some(first) = (resumed > 0).then(|| self.resume()).flatten() {
                        // Readiness: back to work.
                        next = Some(first);
                        if !self.idle.unpark_self(index) {
                            searching = true;
                        }
                        break;
                    }
                }
            }
        }

        fn parkers(&self) -> usize {
            self.driver.workers()
        }
    }

    /// Explores interleavings with at most 3 preemptions each (loom's
    /// recommended bound: bugs need few preemptions to show, and the full
    /// space of three-thread models with condition variables is too large
    /// for CI).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(f);
    }

    /// `workers` workers; `producers` threads pushing `items_per_producer`
    /// items each (the first is the model's main thread); `io_events`
    /// readiness events delivered to the pool's poller by a thread of
    /// their own. Every item and event must be taken.
    fn run_model(workers: usize, producers: usize, items_per_producer: u32, io_events: u32) {
        run_model_with(workers, producers, items_per_producer, io_events, false);
    }

    /// [`run_model`]; if `chained`, the last worker gets stuck for good (a
    /// fiber that never yields) after its first item, and the first
    /// readiness event's item, when it runs, makes one more event come
    /// (see `Pool::chained`): if the stuck worker ran it, the other
    /// worker must take that event from the poller.
    fn run_model_with(
        workers: usize,
        producers: usize,
        items_per_producer: u32,
        io_events: u32,
        chained: bool,
    ) {
        model(move || {
            let expected =
                producers * items_per_producer as usize + io_events as usize + usize::from(chained);
            let stuck_after = if chained { 1 } else { usize::MAX };
            let pool = Pool::new(workers, chained);
            let mut threads = Vec::new();
            for index in 0..workers {
                let pool = pool.clone();
                let stuck_after = if index + 1 == workers {
                    stuck_after
                } else {
                    usize::MAX
                };
                threads.push(thread::spawn(move || {
                    pool.work(index, expected, stuck_after)
                }));
            }
            let mut other_threads = Vec::new();
            for p in 1..producers {
                let pool = pool.clone();
                other_threads.push(thread::spawn(move || {
                    for i in 0..items_per_producer {
                        pool.push(p as u32 * 100 + i);
                    }
                }));
            }
            if io_events > 0 {
                let pool = pool.clone();
                other_threads.push(thread::spawn(move || {
                    for i in 0..io_events {
                        pool.poller.deliver(1000 + i);
                    }
                }));
            }
            for i in 0..items_per_producer {
                pool.push(i);
            }
            for t in other_threads {
                t.join().unwrap();
            }
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(pool.taken.load(Ordering::SeqCst), expected);
        });
    }

    #[test]
    fn loom_one_worker_takes_every_item_pushed_from_outside() {
        run_model(1, 1, 2, 0);
    }

    #[test]
    fn loom_two_workers_never_both_sleep_while_an_item_waits() {
        run_model(2, 1, 1, 0);
    }

    #[test]
    fn loom_two_producers_and_two_workers_lose_no_wake_up() {
        run_model(2, 2, 1, 0);
    }

    #[test]
    fn loom_two_items_from_one_producer_both_reach_two_workers() {
        run_model(2, 1, 2, 0);
    }

    #[test]
    fn loom_readiness_after_the_poller_holder_got_stuck_in_a_fiber_reaches_the_idle_worker() {
        run_model_with(2, 0, 0, 1, true);
    }

    #[test]
    fn loom_readiness_wakes_a_worker_asleep_in_the_poller() {
        run_model(1, 0, 0, 1);
    }

    #[test]
    fn loom_readiness_and_a_push_from_outside_both_reach_one_worker() {
        run_model(1, 1, 1, 1);
    }

    #[test]
    fn loom_readiness_while_both_workers_sleep_is_taken() {
        run_model(2, 0, 0, 1);
    }

    #[test]
    fn loom_a_notification_before_the_worker_sleeps_is_kept() {
        model(|| {
            let poller = Arc::new(ModelPoller::new());
            let notifier = poller.clone();
            let t = thread::spawn(move || notifier.notify());
            // Blocks until the notification, or only looks if it came
            // first: it never sleeps past it.
            let _ = poller.poll(true);
            t.join().unwrap();
        });
    }
}
