//! `par_eval_map` and `par_eval_map_unordered`: `n` worker fibers around
//! one shared window, and no fiber handed a message per element.
//!
//! # Protocol
//!
//! The stage's state ([`Window`]) lives behind one short lock, never held
//! while user code or a program runs. It holds the input (the rest of the
//! input stream while nobody pulls it, `Pulling` while a worker does, or
//! its end), the elements of the input's last chunk not yet claimed, and
//! the results: in input order, one slot per claimed element still
//! running or not yet emitted (`par_eval_map`); in completion order, one
//! per finished element not yet emitted (`par_eval_map_unordered`).
//!
//! A worker loops: under the lock it claims the next buffered element if
//! fewer than `n` programs run and fewer than `n` finished values wait for
//! the consumer (the window), takes the turn to pull the input's next
//! chunk if nothing is buffered and nobody pulls, exits once the input
//! ended and nothing is buffered, or else waits. It builds the claimed
//! element's program (`f`, behind a lock of its own), runs it with its
//! error caught, and stores the result in the element's slot. A pull's
//! chunk (or the input's end, or its error) is stored the same way.
//!
//! The consumer (the stage's output) takes, under the lock, every finished
//! value at the front of the results at once, as one chunk, stopping at a
//! failed one: a failed front fails the stream; the input's end with no
//! results left ends it, after the input's error if the pull failed.
//!
//! Waiting is a callback registered under the lock after checking again
//! whether the waiter can go on (so no wake-up is lost). Whoever changes
//! the state in a way that lets a waiter go on wakes it, outside the
//! lock: a stored result at the front (or any, unordered) and the input's
//! end wake the consumer; a pulled chunk, the input's end and values taken
//! by the consumer wake the waiting workers, who check again. A woken
//! waiter that was canceled meanwhile only leaves a stale callback, whose
//! call does nothing: workers are canceled only all together, when the
//! stage's scope closes. So a finished element never waits for a fiber to
//! hand it on, and a fiber waits only when the window is full, the input
//! is being pulled, or there is nothing to emit.
//!
//! No deadlock: if every worker waits, none runs a program, so either the
//! results hold finished values at the front (the consumer can go on, and
//! taking them wakes the workers) or nothing is claimed and the input is
//! neither buffered nor pulled, which a worker would pull instead of
//! waiting.
//!
//! The workers run under one supervising fiber that the stage's scope
//! cancels when the stage ends for any reason (see `concurrent.rs`); the
//! input is pulled in a scope of its own, a child of the stage's. A
//! worker's panic stops the workers; the consumer takes the values
//! finished before it, then panics with its message. fs2's
//! `parEvalMap` is the semantic model (at most `n` at once, order kept or
//! not); futures' `Buffered` (one window of `n`, finished values held
//! until taken in order) the shape. The code is Spindle's own.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use spindle_core::{Callback, ExitCase, IO};

use crate::chunk::{self, Chunk};
use crate::concurrent::PanicSlot;
use crate::scope::Scope;
use crate::stream::{Step, Stream};
use crate::sync::{Arc, Mutex};

/// Where the input stands.
enum Input<A, E> {
    /// The rest of the input; nobody is pulling it.
    Idle(Stream<A, E>),
    /// A worker is pulling the next chunk.
    Pulling,
    /// The input ended.
    Ended,
    /// The pull failed with this error (taken by the consumer).
    Failed(Option<E>),
}

/// A claimed element's place among the results.
enum Slot<B, E> {
    /// Its program runs (only in input order).
    Running,
    /// Its program ended with this.
    Done(Result<B, E>),
}

/// What a worker does next.
enum Action<A, E> {
    /// Run the program of this element, storing into slot `seq`.
    Run(u64, A),
    /// Pull the input's next chunk.
    Pull(Stream<A, E>),
    /// Wait until the state changes.
    Wait,
    /// Nothing is left to claim.
    Exit,
}

/// The workers a pull wakes.
enum Wake<W> {
    /// After a chunk: the first of a chain (each claim that leaves room
    /// wakes the next), if a worker waits and could go on.
    Chain(Option<W>),
    /// At the input's end: every waiting worker (they exit).
    All(Vec<W>),
}

/// What the consumer found.
enum Taken<B, E> {
    Emit(Chunk<B>),
    Fail(E),
    End,
    Wait,
}

/// A suspended worker or consumer: a fiber's callback (a thread's handle
/// in the loom model).
trait Waiter {
    /// Resumes it; `false` if it was resumed already (its fiber canceled).
    fn wake(self) -> bool;
}

impl<E: Send + 'static> Waiter for Callback<(), E> {
    fn wake(self) -> bool {
        self.succeed(())
    }
}

/// The state behind the lock; every method runs with the lock held and
/// returns the waiters to wake after it is released.
struct Window<A, B, E, W> {
    n: usize,
    ordered: bool,
    input: Input<A, E>,
    /// The elements of the last pulled chunk not yet claimed.
    buffered: chunk::IntoIter<A>,
    /// Programs running.
    running: usize,
    /// In input order: a slot per claimed element not yet emitted; in
    /// completion order: a `Done` slot per finished one not yet emitted.
    results: VecDeque<Slot<B, E>>,
    /// The sequence number of `results`' front (in input order).
    front_seq: u64,
    /// Workers waiting for the state to change.
    workers: Vec<W>,
    /// The consumer, waiting for a value or the end.
    consumer: Option<W>,
    /// The workers' supervisor ended (canceled, or every worker exited).
    stopped: bool,
}

impl<A, B, E, W: Waiter> Window<A, B, E, W> {
    fn new(input: Stream<A, E>, n: usize, ordered: bool) -> Self {
        Window {
            n,
            ordered,
            input: Input::Idle(input),
            buffered: Chunk::empty().into_iter(),
            running: 0,
            results: VecDeque::with_capacity(2 * n),
            front_seq: 0,
            workers: Vec::with_capacity(n),
            consumer: None,
            stopped: false,
        }
    }

    /// Finished values waiting for the consumer.
    fn finished(&self) -> usize {
        if self.ordered {
            self.results.len() - self.running
        } else {
            self.results.len()
        }
    }

    /// Whether a consumer just woken should let the running workers go
    /// first: fewer than half the window is finished and some programs
    /// still run.
    fn worth_a_cede(&self) -> bool {
        self.running > 0 && self.finished() * 2 < self.n
    }

    /// Whether the input can give no more elements.
    fn input_over(&self) -> bool {
        matches!(self.input, Input::Ended | Input::Failed(_)) && self.buffered.len() == 0
    }

    /// Whether the input ended and every claimed element's value was
    /// taken by the consumer.
    fn all_emitted(&self) -> bool {
        self.results.is_empty() && self.running == 0 && self.input_over()
    }

    /// Whether a waiting worker could do something other than wait.
    fn worker_can_go_on(&self) -> bool {
        self.input_over()
            || (self.running < self.n
                && self.finished() < self.n
                && (self.buffered.len() > 0 || matches!(self.input, Input::Idle(_))))
    }

    /// Whether the waiting consumer could do something other than wait.
    fn consumer_can_go_on(&self) -> bool {
        matches!(self.results.front(), Some(Slot::Done(_))) || self.all_emitted() || self.stopped
    }

    /// A waiting worker to wake, if one waits and could claim or pull.
    fn worker_to_wake(&mut self) -> Option<W> {
        if self.workers.is_empty() || !self.worker_can_go_on() {
            None
        } else {
            self.workers.pop()
        }
    }

    /// A worker's turn: stores the result of the element it ran last (if
    /// any), then claims an element, takes the pull, exits or waits. Also
    /// returns the consumer to wake (the stored value lets it go on) and
    /// the next worker to wake (a claim that leaves room wakes one: a
    /// chain, so that freed places do not wake every worker when the
    /// first one woken fills them).
    fn worker_turn(
        &mut self,
        ran: Option<(u64, Result<B, E>)>,
    ) -> (Action<A, E>, Option<W>, Option<W>) {
        let consumer = ran.and_then(|(seq, result)| self.store(seq, result));
        let action = self.next_action();
        let next = match action {
            Action::Run(..) => self.worker_to_wake(),
            _ => None,
        };
        (action, consumer, next)
    }

    /// Stores the result of slot `seq`; the consumer, if it can go on now.
    fn store(&mut self, seq: u64, result: Result<B, E>) -> Option<W> {
        self.running -= 1;
        if self.ordered {
            let index = (seq - self.front_seq) as usize;
            self.results[index] = Slot::Done(result);
            if index == 0 {
                self.consumer.take()
            } else {
                None
            }
        } else {
            self.results.push_back(Slot::Done(result));
            self.consumer.take()
        }
    }

    /// What a worker does next (claims or takes the pull turn).
    fn next_action(&mut self) -> Action<A, E> {
        if self.input_over() {
            return Action::Exit;
        }
        if self.running >= self.n || self.finished() >= self.n {
            return Action::Wait;
        }
        if let Some(item) = self.buffered.next() {
            self.running += 1;
            let seq = if self.ordered {
                self.results.push_back(Slot::Running);
                self.front_seq + (self.results.len() as u64 - 1)
            } else {
                0
            };
            return Action::Run(seq, item);
        }
        match core::mem::replace(&mut self.input, Input::Pulling) {
            Input::Idle(rest) => Action::Pull(rest),
            other => {
                self.input = other;
                Action::Wait
            }
        }
    }

    /// Stores what a pull gave; the workers and the consumer to wake: at
    /// the input's end every waiting worker (they exit), after a chunk
    /// one (the first of a chain).
    fn pulled(&mut self, step: Result<Step<A, E>, E>) -> (Wake<W>, Option<W>) {
        match step {
            Ok(Step::Emit(chunk, rest)) => {
                self.buffered = chunk.into_iter();
                self.input = Input::Idle(rest);
            }
            Ok(Step::Done) => self.input = Input::Ended,
            Err(error) => self.input = Input::Failed(Some(error)),
        }
        let consumer = if self.consumer_can_go_on() {
            self.consumer.take()
        } else {
            None
        };
        let workers = if self.input_over() {
            Wake::All(core::mem::take(&mut self.workers))
        } else {
            Wake::Chain(self.worker_to_wake())
        };
        (workers, consumer)
    }

    /// Registers a waiting worker, unless it can go on: then it is
    /// returned, to be woken at once.
    fn wait_worker(&mut self, waiter: W) -> Option<W> {
        if self.worker_can_go_on() {
            Some(waiter)
        } else {
            self.workers.push(waiter);
            None
        }
    }

    /// Registers the waiting consumer, unless it can go on (returned).
    fn wait_consumer(&mut self, waiter: W) -> Option<W> {
        if self.consumer_can_go_on() {
            Some(waiter)
        } else {
            self.consumer = Some(waiter);
            None
        }
    }

    /// The consumer's turn: every finished value at the front at once, up
    /// to a failed one; a failed front; the end; or wait. Also returns the
    /// worker to wake when values were taken (their places are free).
    fn take(&mut self) -> (Taken<B, E>, Option<W>) {
        let ready = self
            .results
            .iter()
            .take_while(|slot| matches!(slot, Slot::Done(Ok(_))))
            .count();
        let taken = if ready > 0 {
            let mut values = Vec::with_capacity(ready);
            values.extend(self.results.drain(..ready).filter_map(|slot| match slot {
                Slot::Done(Ok(value)) => Some(value),
                _ => None,
            }));
            self.front_seq += ready as u64;
            Taken::Emit(Chunk::from(values))
        } else if let Some(Slot::Done(Err(_))) = self.results.front() {
            match self.results.pop_front() {
                Some(Slot::Done(Err(error))) => {
                    self.front_seq += 1;
                    Taken::Fail(error)
                }
                _ => Taken::Wait,
            }
        } else if self.all_emitted() {
            match &mut self.input {
                Input::Failed(error) => error.take().map_or(Taken::End, Taken::Fail),
                _ => Taken::End,
            }
        } else if self.stopped {
            // The workers were stopped with values missing: the stage's
            // scope is closing.
            Taken::End
        } else {
            Taken::Wait
        };
        let worker = if ready > 0 {
            self.worker_to_wake()
        } else {
            None
        };
        (taken, worker)
    }

    /// The workers' supervisor ended; the consumer to wake.
    fn stop(&mut self) -> Option<W> {
        self.stopped = true;
        self.consumer.take()
    }
}

/// How a waiting fiber registers in the window (`Window::wait_worker`
/// or `Window::wait_consumer`): its callback back if it can go on.
type Register<A, B, E> =
    fn(&mut Window<A, B, E, Callback<(), E>>, Callback<(), E>) -> Option<Callback<(), E>>;

/// The stage's shared part.
struct Shared<A, B, E, F> {
    window: Mutex<Window<A, B, E, Callback<(), E>>>,
    /// The element-to-program function, called by one worker at a time.
    f: Mutex<F>,
    /// The scope the input is pulled in.
    scope: Scope<E>,
    /// A worker's panic, raised again by the consumer after the values
    /// finished before it.
    panicked: PanicSlot,
}

impl<A, B, E, F> Shared<A, B, E, F>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    /// Wakes `worker`, or if its fiber was resumed already (canceled), the
    /// next waiting worker that could go on, so the wake-up is not lost.
    fn wake_worker(&self, mut worker: Option<Callback<(), E>>) {
        while let Some(waiter) = worker {
            if waiter.wake() {
                return;
            }
            worker = self.window.lock().worker_to_wake();
        }
    }

    /// Stores what a pull gave, waking whoever can go on.
    fn pulled(&self, step: Result<Step<A, E>, E>) {
        let (workers, consumer) = self.window.lock().pulled(step);
        match workers {
            // The first of a chain: a stale one passes it on.
            Wake::Chain(first) => self.wake_worker(first),
            // The input's end: every waiting worker exits.
            Wake::All(workers) => {
                for worker in workers {
                    worker.wake();
                }
            }
        }
        if let Some(consumer) = consumer {
            consumer.wake();
        }
    }

    /// A fiber's wait, registered by `register` (the window's
    /// `wait_worker` or `wait_consumer`): until the state lets it go on.
    fn wait(this: Arc<Self>, register: Register<A, B, E>) -> IO<(), E> {
        IO::from_callback(move |callback| {
            let ready = register(&mut this.window.lock(), callback);
            if let Some(callback) = ready {
                callback.wake();
            }
            None
        })
    }
}

/// A worker's loop; each turn carries the result of the element it ran
/// last, stored under the same lock as the next claim. The loop is a
/// `flat_map` (or `redeem_with`) into the next turn, one run-loop step a
/// turn (the run loop keeps the recursion flat).
fn worker<A, B, E, F>(shared: Arc<Shared<A, B, E, F>>) -> IO<(), E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    IO::defer(move || worker_turn(shared, None))
}

/// One turn of [`worker`]: stores `ran`, then runs the action it got.
fn worker_turn<A, B, E, F>(
    shared: Arc<Shared<A, B, E, F>>,
    ran: Option<(u64, Result<B, E>)>,
) -> IO<(), E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    let (action, consumer, next) = shared.window.lock().worker_turn(ran);
    if let Some(consumer) = consumer {
        consumer.wake();
    }
    shared.wake_worker(next);
    match action {
        Action::Run(seq, item) => {
            let program = (shared.f.lock())(item);
            let failed = shared.clone();
            program.redeem_with(
                move |error| worker_turn(failed, Some((seq, Err(error)))),
                move |value| worker_turn(shared, Some((seq, Ok(value)))),
            )
        }
        Action::Pull(rest) => rest.step(&shared.scope).attempt().flat_map(move |step| {
            shared.pulled(step);
            worker_turn(shared, None)
        }),
        Action::Wait => Shared::wait(shared.clone(), Window::wait_worker)
            .flat_map(move |()| worker_turn(shared, None)),
        Action::Exit => IO::unit(),
    }
}

/// The stage's output: the next chunk of finished values, in `own`.
///
/// A consumer woken by a stored value that finds less than half the
/// window finished while programs still run cedes once before it takes:
/// the workers already scheduled store their values first, and one take
/// gets them all. (An executor that runs a woken fiber next, as
/// exec-wstp's next slot does, would otherwise have the consumer take one
/// value a wake-up; on a first-in-first-out executor the woken consumer
/// finds the window full and does not cede.)
fn read<A, B, E, F>(
    shared: Arc<Shared<A, B, E, F>>,
    own: Scope<E>,
    woken: bool,
) -> IO<Step<B, E>, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    let (taken, worker) = {
        let mut window = shared.window.lock();
        if woken && window.worth_a_cede() {
            drop(window);
            return IO::cede().flat_map(move |()| read(shared, own, false));
        }
        window.take()
    };
    shared.wake_worker(worker);
    match taken {
        Taken::Emit(values) => IO::pure(Step::Emit(
            values,
            Stream::from_pull(move |_| read(shared, own, false)),
        )),
        Taken::Fail(error) => IO::raise_error(error),
        Taken::End => shared
            .panicked
            .raise_or(own.close(ExitCase::Succeeded).map(|()| Step::Done)),
        Taken::Wait => Shared::wait(shared.clone(), Window::wait_consumer)
            .flat_map(move |()| read(shared, own, true)),
    }
}

/// The stage: `n` workers running `f`'s programs on `input`'s elements,
/// emitted in input order if `ordered`, else as they finish.
pub(crate) fn par_map<A, B, E, F>(
    input: Stream<A, E>,
    n: usize,
    ordered: bool,
    f: F,
) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    Stream::from_pull(move |scope: &Scope<E>| {
        let own = scope.open_child();
        let shared = Arc::new(Shared {
            window: Mutex::new(Window::new(input, n, ordered)),
            f: Mutex::new(f),
            scope: own.open_child(),
            panicked: PanicSlot::default(),
        });
        let stopping = shared.clone();
        let workers = (0..n).map(|_| worker(shared.clone())).collect();
        let body = IO::par_sequence(workers)
            .void()
            .guarantee_case_ref(move |outcome| {
                // Kept before the consumer can see the stop.
                stopping.panicked.keep(outcome);
                IO::delay(move || {
                    let consumer = stopping.window.lock().stop();
                    if let Some(consumer) = consumer {
                        consumer.wake();
                    }
                })
            });
        crate::concurrent::supervise(own.clone(), body).flat_map(move |()| read(shared, own, false))
    })
}

/// Loom models of the window's protocol: worker threads and a consumer
/// thread drive [`Window`] through the shim's lock exactly as the fibers
/// do, with a thread's `Notify` as the waiter. Every interleaving must
/// give each value once, in input order when ordered, at most `n` running
/// and at most `n` finished-but-untaken at a time, end the consumer, and
/// let every worker exit (a lost wake-up shows as loom's deadlock).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use alloc::vec;
    use loom::sync::Notify;
    use loom::sync::atomic::{AtomicUsize, Ordering};

    /// A parked thread.
    struct Parked(Arc<Notify>);

    impl Waiter for Parked {
        fn wake(self) -> bool {
            self.0.notify();
            true
        }
    }

    type Model = Window<u32, u32, (), Parked>;

    /// The input's chunks, pulled in order, then its end.
    const CHUNKS: &[&[u32]] = &[&[1], &[2]];

    fn worker(window: Arc<Mutex<Model>>, pulls: Arc<AtomicUsize>) {
        let me = Arc::new(Notify::new());
        let mut ran = None;
        loop {
            let (action, consumer, next) = window.lock().worker_turn(ran.take());
            if let Some(consumer) = consumer {
                consumer.wake();
            }
            if let Some(next) = next {
                next.wake();
            }
            match action {
                Action::Run(seq, item) => {
                    let _ = window.lock().check_bounds();
                    ran = Some((seq, Ok(item * 10)));
                }
                Action::Pull(rest) => {
                    drop(rest);
                    let k = pulls.fetch_add(1, Ordering::SeqCst);
                    let step = match CHUNKS.get(k) {
                        Some(items) => Ok(Step::Emit(Chunk::from(items.to_vec()), Stream::empty())),
                        None => Ok(Step::Done),
                    };
                    let (workers, consumer) = window.lock().pulled(step);
                    let workers = match workers {
                        Wake::Chain(first) => first.into_iter().collect(),
                        Wake::All(all) => all,
                    };
                    for worker in workers {
                        worker.wake();
                    }
                    if let Some(consumer) = consumer {
                        consumer.wake();
                    }
                }
                Action::Wait => {
                    if let Some(ready) = window.lock().wait_worker(Parked(me.clone())) {
                        ready.wake();
                    }
                    me.wait();
                }
                Action::Exit => return,
            }
        }
    }

    fn consumer(window: &Arc<Mutex<Model>>) -> Vec<u32> {
        let me = Arc::new(Notify::new());
        let mut got = vec![];
        loop {
            let (taken, worker) = window.lock().take();
            if let Some(worker) = worker {
                worker.wake();
            }
            match taken {
                Taken::Emit(values) => got.extend(values),
                Taken::End => return got,
                Taken::Fail(()) => panic!("no element fails in the model"),
                Taken::Wait => {
                    if let Some(ready) = window.lock().wait_consumer(Parked(me.clone())) {
                        ready.wake();
                    }
                    me.wait();
                }
            }
        }
    }

    impl Model {
        /// The window's bounds hold.
        fn check_bounds(&self) {
            assert!(self.running <= self.n, "more than n running");
            assert!(
                self.finished() <= self.n,
                "more than n finished values held"
            );
        }
    }

    fn model(workers: usize, n: usize, ordered: bool) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.check(move || {
            let window = Arc::new(Mutex::new(Model::new(Stream::empty(), n, ordered)));
            let pulls = Arc::new(AtomicUsize::new(0));
            let workers: Vec<_> = (0..workers)
                .map(|_| {
                    let (window, pulls) = (window.clone(), pulls.clone());
                    loom::thread::spawn(move || worker(window, pulls))
                })
                .collect();
            let mut got = consumer(&window);
            for worker in workers {
                worker.join().expect("a worker");
            }
            if !ordered {
                got.sort_unstable();
            }
            assert_eq!(got, vec![10, 20]);
            assert_eq!(pulls.load(Ordering::SeqCst), CHUNKS.len() + 1);
        });
    }

    #[test]
    fn loom_a_worker_with_a_window_of_one_waits_for_the_consumer_and_gives_every_value() {
        model(1, 1, true);
    }

    #[test]
    fn loom_two_workers_with_a_window_of_two_give_every_value_in_input_order() {
        model(2, 2, true);
    }

    #[test]
    fn loom_two_unordered_workers_give_every_value_once() {
        model(2, 2, false);
    }
}
