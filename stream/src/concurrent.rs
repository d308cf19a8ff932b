//! Concurrent stages: a producer on a fiber of its own feeding a bounded
//! channel that the stage's output reads.
//!
//! # Protocol
//!
//! When the stage is first pulled it opens a scope of its own (`own`),
//! opens the scopes its inputs will be pulled in (children of `own`), and
//! then, masked, starts the producer fiber and registers "cancel the
//! producer" in `own` — after the inputs' scopes, so that closing `own`
//! (in reverse order) first cancels the producer, waiting until it and
//! every fiber it started ended and ran their finalizers, and only then
//! releases what the inputs acquired. The producer sends chunks to a
//! bounded [`Queue`] (back-pressure: it waits while the queue is full), an
//! error as a `Failed` message, and closes the queue when it ends however
//! it ends.
//!
//! The output reads the queue: a chunk is emitted, `Failed` fails the
//! stream (the run's root scope then closes `own`: the producer and its
//! fibers are canceled), the queue's close ends the stream after `own` is
//! closed. A downstream that stops early (`take`) closes the scope `own`
//! is in, which cancels the producer the same way. So no fiber outlives
//! its stage, and every finalizer runs exactly once.
//!
//! A panic in a producer (or in a fiber it started, such as one inner
//! stream of `par_join`) is kept in the stage's [`PanicSlot`] and closes
//! the queue; the output, after the chunks sent before it, panics with the
//! same message in the consumer's fiber, as a panicked child of `both` or
//! `race` does in its parent. A stage never ends quietly because one of its
//! fibers panicked.
//!
//! The shapes follow fs2's `parEvalMap`, `merge` and `parJoin` (a bounded
//! channel between a supervised producer and the consumer); the code is
//! Spindle's own.

use alloc::boxed::Box;
use core::ops::ControlFlow;

use spindle_core::{ExitCase, IO, Outcome, PanicMessage, Queue, Semaphore, Supervisor};

use crate::chunk::Chunk;
use crate::scope::Scope;
use crate::stream::{InvalidArgument, Step, Stream};
use crate::sync::{Arc, Mutex};

/// What a producer sends.
enum Msg<A, E> {
    Chunk(Chunk<A>),
    Failed(E),
}

/// The first panic of a concurrent stage's fibers, kept for the stage's
/// consumer to raise again after the values finished before it.
#[derive(Clone)]
pub(crate) struct PanicSlot(Arc<Mutex<Option<PanicMessage>>>);

impl Default for PanicSlot {
    fn default() -> Self {
        PanicSlot(Arc::new(Mutex::new(None)))
    }
}

impl PanicSlot {
    /// Keeps the panic of `outcome`, if it is one and none was kept;
    /// whether it was a panic.
    pub(crate) fn keep<A, E>(&self, outcome: &Outcome<A, E>) -> bool {
        match outcome {
            Outcome::Panicked(panic) => {
                self.0.lock().get_or_insert_with(|| panic.clone());
                true
            }
            _ => false,
        }
    }

    /// The kept panic, raised again in the running fiber; `ended` if none
    /// was kept.
    pub(crate) fn raise_or<X: Send + 'static, E: Send + 'static>(
        &self,
        ended: IO<X, E>,
    ) -> IO<X, E> {
        match self.0.lock().take() {
            Some(panic) => Outcome::<X, E>::Panicked(panic).embed_never(),
            None => ended,
        }
    }
}

/// The sending side a producer gets.
pub(crate) struct Sender<A, E> {
    queue: Queue<Msg<A, E>>,
    panicked: PanicSlot,
}

impl<A, E> Clone for Sender<A, E> {
    fn clone(&self) -> Self {
        Sender {
            queue: self.queue.clone(),
            panicked: self.panicked.clone(),
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Sender<A, E> {
    fn chunk(&self, chunk: Chunk<A>) -> IO<(), E> {
        if chunk.is_empty() {
            IO::unit()
        } else {
            self.queue.offer(Msg::Chunk(chunk))
        }
    }

    /// `program`, which, if it panics, keeps the panic for the consumer
    /// and closes the queue (the consumer raises it after the chunks
    /// sent before).
    fn on_panic_close(&self, program: IO<(), E>) -> IO<(), E> {
        let (panicked, queue) = (self.panicked.clone(), self.queue.clone());
        program.guarantee_case_ref(move |outcome| {
            if panicked.keep(outcome) {
                queue.close().void()
            } else {
                IO::unit()
            }
        })
    }

    /// Pulls `input` in `scope` to its end, sending its chunks.
    pub(crate) fn drain(self, input: Stream<A, E>, scope: Scope<E>) -> IO<(), E> {
        IO::tail_rec((input, self), move |(input, sender)| {
            input.step(&scope).flat_map(move |step| match step {
                Step::Emit(chunk, rest) => sender
                    .chunk(chunk)
                    .map(move |()| ControlFlow::Continue((rest, sender))),
                Step::Done => IO::pure(ControlFlow::Break(())),
            })
        })
    }
}

/// A checked parallelism.
fn parallelism(operation: &'static str, n: usize) -> Result<usize, InvalidArgument> {
    InvalidArgument::above_zero(operation, "a parallelism above 0", n)
}

/// The stream of what `producer` sends: see the module doc. `inputs` is
/// how many input scopes the producer gets (children of the stage's own
/// scope, opened before the producer starts).
fn produced<A, E, P>(capacity: usize, inputs: usize, producer: P) -> Stream<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    P: FnOnce(Sender<A, E>, alloc::vec::Vec<Scope<E>>) -> IO<(), E> + Send + 'static,
{
    Stream::from_pull(move |scope: &Scope<E>| {
        let own = scope.open_child();
        let input_scopes = (0..inputs).map(|_| own.open_child()).collect();
        let queue = Queue::<Msg<A, E>>::bounded(capacity).expect("a capacity above 0");
        let panicked = PanicSlot::default();
        let reading = panicked.clone();
        let sender = Sender {
            queue: queue.clone(),
            panicked: panicked.clone(),
        };
        let closing = queue.clone();
        let failing = queue.clone();
        let body = producer(sender, input_scopes)
            .handle_error_with(move |error| failing.offer(Msg::Failed(error)))
            .guarantee_case_ref(move |outcome| {
                panicked.keep(outcome);
                closing.close().void()
            });
        supervise(own.clone(), body).flat_map(move |()| read(queue, own, reading))
    })
}

/// Starts `body` on a fiber of its own, masked, and registers "cancel it"
/// in `own` (whose closing then waits until the fiber and everything it
/// started ended).
pub(crate) fn supervise<E: Send + 'static>(own: Scope<E>, body: IO<(), E>) -> IO<(), E> {
    IO::uncancelable(move |_| {
        body.start::<E>().flat_map(move |fiber| {
            match own.register(Box::new(move |_| fiber.cancel())) {
                Ok(()) => IO::unit(),
                // The stage's scope closed already: stop the fiber now.
                Err(cancel) => cancel(ExitCase::Canceled),
            }
        })
    })
}

/// [`produced`] with one input scope.
pub(crate) fn produced_by<A, E, P>(capacity: usize, producer: P) -> Stream<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    P: FnOnce(Sender<A, E>, Scope<E>) -> IO<(), E> + Send + 'static,
{
    produced(capacity, 1, move |sender, mut scopes| {
        let scope = scopes.pop().expect("one input scope");
        producer(sender, scope)
    })
}

/// [`produced`] (a queue of one chunk) with two input scopes.
pub(crate) fn produced_pair<A, E, P>(producer: P) -> Stream<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    P: FnOnce(Sender<A, E>, Scope<E>, Scope<E>) -> IO<(), E> + Send + 'static,
{
    produced(1, 2, move |sender, mut scopes| {
        let second = scopes.pop().expect("two input scopes");
        let first = scopes.pop().expect("two input scopes");
        producer(sender, first, second)
    })
}

/// The output side: the next message of `queue`.
fn read<A: Send + 'static, E: Send + 'static>(
    queue: Queue<Msg<A, E>>,
    own: Scope<E>,
    panicked: PanicSlot,
) -> IO<Step<A, E>, E> {
    queue.receive().flat_map(move |msg| match msg {
        Some(Msg::Chunk(chunk)) => IO::pure(Step::Emit(
            chunk,
            Stream::from_pull(move |_| read(queue, own, panicked)),
        )),
        Some(Msg::Failed(error)) => IO::raise_error(error),
        None => panicked.raise_or(own.close(ExitCase::Succeeded).map(|()| Step::Done)),
    })
}

/// What an IO block given to [`Stream::block`] emits through: each
/// `emit` is a program the block awaits, which waits while the stream's
/// consumer has not taken the previous chunk (back-pressure).
pub struct Emitter<A, E> {
    sender: Sender<A, E>,
}

impl<A, E> Clone for Emitter<A, E> {
    fn clone(&self) -> Self {
        Emitter {
            sender: self.sender.clone(),
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Emitter<A, E> {
    /// Emits one element.
    pub fn emit(&self, item: A) -> IO<(), E> {
        self.sender.chunk(Chunk::singleton(item))
    }

    /// Emits a chunk's elements at once.
    pub fn emit_chunk(&self, chunk: Chunk<A>) -> IO<(), E> {
        self.sender.chunk(chunk)
    }
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// The elements an IO block emits (`async` code that `.await`s
    /// programs, run as a program on a fiber of its own): the stream ends
    /// when the block returns `Ok(())`, fails with its `Err`, and stops the
    /// block (canceling its fiber) when the consumer stops early.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::single::SingleThreaded;
    /// use spindle_effect::stream::Stream;
    ///
    /// let squares: Stream<u64, ()> = Stream::block(|out| async move {
    ///     for n in 1..=4u64 {
    ///         out.emit(n * n).await?;
    ///     }
    ///     Ok(())
    /// });
    /// let got = SingleThreaded::new()?.block_on(squares.compile().to_vec())?;
    /// assert_eq!(got.succeeded(), Some(vec![1, 4, 9, 16]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn block<F, Fut>(make: F) -> Self
    where
        F: FnOnce(Emitter<A, E>) -> Fut + Send + 'static,
        Fut: core::future::Future<Output = Result<(), E>> + Send + 'static,
    {
        produced_by(1, move |sender, _scope| IO::block(make(Emitter { sender })))
    }

    /// Runs `f`'s program for up to `n` elements at once and emits the
    /// values in input order; `n` must be above 0. The first error (in
    /// input order) fails the stream and cancels the programs still
    /// running.
    ///
    /// `n` worker fibers claim the elements and run their programs; at
    /// most `n` programs run and at most `n` finished values wait for the
    /// consumer at any time, and the consumer takes every value finished
    /// in order at once, as one chunk. No fiber is started per element.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::single::SingleThreaded;
    /// use spindle_effect::stream::Stream;
    ///
    /// let doubled = Stream::range(0u64..5)
    ///     .par_eval_map(3, |n| IO::<(), ()>::cede().map(move |()| n * 2))?
    ///     .compile()
    ///     .to_vec();
    /// assert_eq!(SingleThreaded::new()?.block_on(doubled)?.succeeded(), Some(vec![0, 2, 4, 6, 8]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn par_eval_map<B, F>(self, n: usize, f: F) -> Result<Stream<B, E>, InvalidArgument>
    where
        B: Send + 'static,
        F: FnMut(A) -> IO<B, E> + Send + 'static,
    {
        let n = parallelism("par_eval_map", n)?;
        Ok(crate::par_map::par_map(self, n, true, f))
    }

    /// Runs `f`'s program for up to `n` elements at once and emits the
    /// values as they finish; `n` must be above 0. The first error fails
    /// the stream (after the values that finished before it) and cancels
    /// the programs still running.
    ///
    /// `n` worker fibers claim the elements and run their programs, as in
    /// [`Stream::par_eval_map`].
    pub fn par_eval_map_unordered<B, F>(
        self,
        n: usize,
        f: F,
    ) -> Result<Stream<B, E>, InvalidArgument>
    where
        B: Send + 'static,
        F: FnMut(A) -> IO<B, E> + Send + 'static,
    {
        let n = parallelism("par_eval_map_unordered", n)?;
        Ok(crate::par_map::par_map(self, n, false, f))
    }

    /// The elements of this stream and of `other` as they come (each
    /// pulled on a fiber of its own), until both end; an error of either
    /// fails the stream and stops the other.
    pub fn merge(self, other: Stream<A, E>) -> Stream<A, E> {
        produced(2, 2, move |sender: Sender<A, E>, mut scopes| {
            let right = scopes.pop().expect("two input scopes");
            let left = scopes.pop().expect("two input scopes");
            sender
                .clone()
                .drain(self, left)
                .both(sender.drain(other, right))
                .void()
        })
    }

    /// The same elements, with up to `n` chunks pulled ahead on a fiber of
    /// its own while the stages after this one work; `n` must be above 0.
    pub fn prefetch_n(self, n: usize) -> Result<Stream<A, E>, InvalidArgument> {
        let n = parallelism("prefetch_n", n)?;
        Ok(produced(n, 1, move |sender: Sender<A, E>, mut scopes| {
            let scope = scopes.pop().expect("one input scope");
            sender.drain(self, scope)
        }))
    }

    /// [`Stream::prefetch_n`] of one chunk.
    pub fn prefetch(self) -> Stream<A, E> {
        produced(1, 1, move |sender: Sender<A, E>, mut scopes| {
            let scope = scopes.pop().expect("one input scope");
            sender.drain(self, scope)
        })
    }
}

impl<A: Send + 'static, E: Send + 'static> Stream<Stream<A, E>, E> {
    /// The elements of the inner streams as they come, up to `n` inner
    /// streams pulled at once (each on a fiber of its own); `n` must be
    /// above 0. Ends when the outer stream and every inner stream ended;
    /// an error of any fails the stream and stops the others.
    pub fn par_join(self, n: usize) -> Result<Stream<A, E>, InvalidArgument> {
        let n = parallelism("par_join", n)?;
        Ok(produced(n, 1, move |sender: Sender<A, E>, mut scopes| {
            let scope = scopes.pop().expect("one input scope");
            let permits = Semaphore::new(n as u64).expect("n > 0");
            let all_ended = permits.clone();
            let inner_parent = scope.clone();
            // The children are awaited by taking every permit back (a
            // wait the stage's end can cancel); the supervisor's release
            // then cancels whatever still runs: the producer was canceled.
            Supervisor::scoped().use_with(move |supervisor: Supervisor| {
                self.eval_map(move |inner: Stream<A, E>| {
                    let (sender, supervisor, release) =
                        (sender.clone(), supervisor.clone(), permits.clone());
                    let own = inner_parent.clone();
                    permits.acquire().flat_map(move |()| {
                        let inner_scope = own.open_child();
                        let closing = inner_scope.clone();
                        let failing = sender.clone();
                        let drained = sender
                            .clone()
                            .drain(inner, inner_scope)
                            .flat_map(move |()| closing.close(ExitCase::Succeeded))
                            .handle_error_with(move |error| {
                                failing.queue.offer(Msg::Failed(error))
                            });
                        // The supervisor keeps a child's panic to itself;
                        // it is kept for the consumer before the permit
                        // goes back.
                        let child = sender
                            .on_panic_close(drained)
                            .guarantee(release.release().void());
                        supervisor.supervise::<(), E, E>(child).void()
                    })
                })
                .drain_in(scope)
                .flat_map(move |()| all_ended.acquire_n(n as u64))
            })
        }))
    }
}
