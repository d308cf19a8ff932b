//! The [`Stream`] type, its pull protocol and its constructors.
//!
//! # The pull protocol
//!
//! A stream is a single-use value, like an `IO`: a boxed *pull* that,
//! given the scope it runs in, returns the program of its next step,
//! [`Step::Emit`] (a chunk and the rest of the stream) or [`Step::Done`].
//! The consumer drives: nothing is produced until a step is pulled, and a
//! stage pulls its input only when its own output is pulled. Errors are
//! the step program's typed errors; a cancellation is the fiber's.
//!
//! Resources (see `scope.rs`) live in the scope the pull was given; the
//! program that runs the stream closes the root scope however it ends.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use spindle_core::{ExitCase, IO, Resource};

use crate::chunk::Chunk;
use crate::scope::Scope;

/// How many elements a stream built from an iterator or an `unfold` puts
/// in one chunk unless told otherwise.
pub const DEFAULT_CHUNK_SIZE: usize = 4096;

/// A step of a stream: a chunk and the rest, or the end.
pub(crate) enum Step<A, E> {
    Emit(Chunk<A>, Stream<A, E>),
    Done,
}

/// One pull of a stream: consumes the stream's current state.
///
/// The scope the pull runs in is lent, not given: a stage that only passes
/// it on to its input (`map`, `filter`, `eval_map` between chunks) costs no
/// reference count per pull, and a stage that needs it after the pull (in
/// a continuation, or to register a finalizer) clones it. A reference
/// count taken and dropped per pull was a third of `eval_map`'s time.
pub(crate) trait Pull<A, E>: Send {
    fn pull(self: Box<Self>, scope: &Scope<E>) -> IO<Step<A, E>, E>;
}

impl<A, E, F> Pull<A, E> for F
where
    F: FnOnce(&Scope<E>) -> IO<Step<A, E>, E> + Send,
{
    fn pull(self: Box<Self>, scope: &Scope<E>) -> IO<Step<A, E>, E> {
        (*self)(scope)
    }
}

/// A pull-based, chunked, resource-safe stream of `A`s whose effects may
/// fail with `E` (fs2's model, on Spindle's `IO`).
///
/// A `Stream` describes: building one runs nothing, and it runs when the
/// program [`compile`](Stream::compile) makes runs on a fiber. Elements
/// move in [`Chunk`]s: pure stages (`map`, `filter`, `fold`, ...) are
/// loops over a chunk, and the per-chunk step is the only program step.
/// Resources acquired by the stream ([`bracket`](Stream::bracket),
/// [`resource`](Stream::resource), [`on_finalize`](Stream::on_finalize))
/// are released exactly once, in reverse order of acquisition, when the
/// part of the stream that acquired them ends, when a downstream
/// [`take`](Stream::take) stops early, or when the stream fails or is
/// canceled.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::single::SingleThreaded;
/// use spindle_effect::stream::Stream;
///
/// let evens: IO<Vec<u64>, ()> = Stream::iter(0u64..)
///     .filter(|n| n % 2 == 0)
///     .map(|n| n * 10)
///     .take(4)
///     .compile()
///     .to_vec();
/// assert_eq!(SingleThreaded::new()?.block_on(evens)?.succeeded(), Some(vec![0, 20, 40, 60]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a stream describes a computation and does nothing until it is compiled and run"]
pub struct Stream<A, E> {
    pull: Box<dyn Pull<A, E>>,
}

impl<A, E> fmt::Debug for Stream<A, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stream")
    }
}

/// A configuration value a stream constructor or stage refused (a chunk
/// size of 0, a parallelism of 0, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidArgument {
    /// The operation that refused it (`"chunk_n"`, ...).
    pub operation: &'static str,
    /// What the operation needs.
    pub requirement: &'static str,
}

impl fmt::Display for InvalidArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spindle-stream: `{}` needs {}",
            self.operation, self.requirement
        )
    }
}

impl core::error::Error for InvalidArgument {}

impl InvalidArgument {
    /// `n` if it is above 0; otherwise the error of `operation`, which
    /// needs `requirement` (`"a chunk size above 0"`): the check of every
    /// size and count a stage takes, for stages written outside this crate
    /// too (a socket's read size).
    pub fn above_zero(
        operation: &'static str,
        requirement: &'static str,
        n: usize,
    ) -> Result<usize, InvalidArgument> {
        if n == 0 {
            Err(InvalidArgument {
                operation,
                requirement,
            })
        } else {
            Ok(n)
        }
    }
}

/// A chunk size checked to be above 0.
pub(crate) fn chunk_size(operation: &'static str, n: usize) -> Result<usize, InvalidArgument> {
    InvalidArgument::above_zero(operation, "a chunk size above 0", n)
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// A stream from its pull.
    pub(crate) fn from_pull<F>(pull: F) -> Self
    where
        F: FnOnce(&Scope<E>) -> IO<Step<A, E>, E> + Send + 'static,
    {
        Stream {
            pull: Box::new(pull),
        }
    }

    /// A stream from a boxed pull state (a stage that reuses its box for
    /// the rest of the stream).
    pub(crate) fn from_boxed(pull: Box<dyn Pull<A, E>>) -> Self {
        Stream { pull }
    }

    /// The program of this stream's next step, in `scope`.
    #[inline]
    pub(crate) fn step(self, scope: &Scope<E>) -> IO<Step<A, E>, E> {
        self.pull.pull(scope)
    }

    /// Pulls this stream in `own` and closes `own` when it ends.
    fn in_scope(self, own: Scope<E>) -> IO<Step<A, E>, E> {
        self.step(&own).flat_map(move |step| match step {
            Step::Emit(chunk, rest) => IO::pure(Step::Emit(
                chunk,
                Stream::from_pull(move |_| rest.in_scope(own)),
            )),
            Step::Done => own.close(ExitCase::Succeeded).map(|()| Step::Done),
        })
    }

    /// Pulls this stream in `scope` to its end, dropping its elements.
    pub(crate) fn drain_in(self, scope: Scope<E>) -> IO<(), E> {
        IO::tail_rec(self, move |stream| {
            stream.step(&scope).map(|step| match step {
                Step::Emit(_, rest) => core::ops::ControlFlow::Continue(rest),
                Step::Done => core::ops::ControlFlow::Break(()),
            })
        })
    }

    // ----- constructors --------------------------------------------------

    /// The stream of no elements.
    pub fn empty() -> Self {
        Stream::from_pull(|_| IO::pure(Step::Done))
    }

    /// The stream of one element.
    pub fn emit(item: A) -> Self {
        Stream::chunk(Chunk::singleton(item))
    }

    /// The stream of `items`, as one chunk.
    pub fn emits(items: Vec<A>) -> Self {
        Stream::chunk(Chunk::from(items))
    }

    /// The stream of one chunk's elements.
    pub fn chunk(chunk: Chunk<A>) -> Self {
        Stream::from_pull(move |_| IO::pure(Step::Emit(chunk, Stream::empty())))
    }

    /// The elements of an iterator, [`DEFAULT_CHUNK_SIZE`] to a chunk; the
    /// iterator is advanced only as the stream is pulled (it may be
    /// endless).
    pub fn iter<I>(items: I) -> Self
    where
        I: IntoIterator<Item = A>,
        I::IntoIter: Send + 'static,
    {
        Stream::iter_chunks(items.into_iter(), DEFAULT_CHUNK_SIZE)
    }

    /// [`Stream::iter`] with `n` elements to a chunk; `n` must be above 0.
    pub fn iter_chunked<I>(items: I, n: usize) -> Result<Self, InvalidArgument>
    where
        I: IntoIterator<Item = A>,
        I::IntoIter: Send + 'static,
    {
        let n = chunk_size("iter_chunked", n)?;
        Ok(Stream::iter_chunks(items.into_iter(), n))
    }

    fn iter_chunks<I>(mut items: I, n: usize) -> Self
    where
        I: Iterator<Item = A> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            IO::delay(move || {
                let chunk: Chunk<A> = items.by_ref().take(n).collect();
                if chunk.is_empty() {
                    Step::Done
                } else {
                    Step::Emit(chunk, Stream::iter_chunks(items, n))
                }
            })
        })
    }

    /// The values of `range` (any range that iterates, `0..n`, `0u64..`).
    pub fn range<R>(range: R) -> Self
    where
        R: Iterator<Item = A> + Send + 'static,
    {
        Stream::iter_chunks(range, DEFAULT_CHUNK_SIZE)
    }

    /// The stream of `state`'s unfolding: `f` gives an element and the
    /// next state, or `None` to end. One element per pull, as `f` is
    /// called only for elements that are pulled (use
    /// [`Stream::unfold_chunk`] to produce chunks).
    pub fn unfold<S, F>(state: S, mut f: F) -> Self
    where
        S: Send + 'static,
        F: FnMut(S) -> Option<(A, S)> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            IO::delay(move || match f(state) {
                Some((item, state)) => Step::Emit(Chunk::singleton(item), Stream::unfold(state, f)),
                None => Step::Done,
            })
        })
    }

    /// The stream of `state`'s unfolding a chunk at a time: `f` gives a
    /// chunk and the next state, or `None` to end.
    pub fn unfold_chunk<S, F>(state: S, mut f: F) -> Self
    where
        S: Send + 'static,
        F: FnMut(S) -> Option<(Chunk<A>, S)> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            IO::delay(move || match f(state) {
                Some((chunk, state)) => Step::Emit(chunk, Stream::unfold_chunk(state, f)),
                None => Step::Done,
            })
        })
    }

    /// `start`, `f(start)`, `f(f(start))`, ... without end (one element
    /// per pull: `f` runs only for elements that are pulled).
    pub fn iterate<F>(start: A, mut f: F) -> Self
    where
        F: FnMut(&A) -> A + Send + 'static,
    {
        Stream::unfold(start, move |item| {
            let next = f(&item);
            Some((item, next))
        })
    }

    /// The stream of the program's value.
    pub fn eval(program: IO<A, E>) -> Self {
        Stream::from_pull(move |_| {
            program.map(|item| Step::Emit(Chunk::singleton(item), Stream::empty()))
        })
    }

    /// Runs `program` for its effect: a stream of no elements.
    pub fn exec(program: IO<(), E>) -> Self {
        Stream::from_pull(move |_| program.map(|()| Step::Done))
    }

    /// The values of the programs `f` makes, one after the other, without
    /// end (until an error, or a downstream `take`).
    pub fn repeat_eval<F>(mut f: F) -> Self
    where
        F: FnMut() -> IO<A, E> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            f().map(move |item| Step::Emit(Chunk::singleton(item), Stream::repeat_eval(f)))
        })
    }

    /// The unfolding of `state` through a program: `f`'s program gives an
    /// element and the next state, or `None` to end.
    pub fn unfold_eval<S, F>(state: S, mut f: F) -> Self
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<Option<(A, S)>, E> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            f(state).map(move |next| match next {
                Some((item, state)) => {
                    Step::Emit(Chunk::singleton(item), Stream::unfold_eval(state, f))
                }
                None => Step::Done,
            })
        })
    }

    /// The unfolding of `state` through a program, a chunk at a time:
    /// `f`'s program gives a chunk and the next state, or `None` to end (a
    /// reader: each read a chunk).
    pub fn unfold_chunk_eval<S, F>(state: S, mut f: F) -> Self
    where
        S: Send + 'static,
        F: FnMut(S) -> IO<Option<(Chunk<A>, S)>, E> + Send + 'static,
    {
        Stream::from_pull(move |_| {
            f(state).map(move |next| match next {
                Some((chunk, state)) => Step::Emit(chunk, Stream::unfold_chunk_eval(state, f)),
                None => Step::Done,
            })
        })
    }

    /// The stream `f` makes, made when the stream is first pulled.
    pub fn suspend<F>(f: F) -> Self
    where
        F: FnOnce() -> Stream<A, E> + Send + 'static,
    {
        Stream::from_pull(move |scope| {
            let scope = scope.clone();
            IO::defer(move || f().step(&scope))
        })
    }

    /// A stream that fails with `error` when pulled.
    pub fn raise_error(error: E) -> Self {
        Stream::from_pull(move |_| IO::raise_error(error))
    }

    /// Acquires a value with `acquire` (masked), emits it, and releases
    /// it with `release` as soon as this stream is done: after the stages
    /// that use the value finished with it (`bracket(..).flat_map(use)`),
    /// when a downstream `take` stops early, or when the run fails or is
    /// canceled. The release runs exactly once, masked.
    ///
    /// The value is emitted as a clone of the one the release gets (a
    /// handle: an `Arc`, a file descriptor's owner behind one).
    pub fn bracket<R>(acquire: IO<A, E>, release: R) -> Self
    where
        A: Clone,
        R: FnOnce(A) -> IO<(), E> + Send + 'static,
    {
        Stream::bracket_case(acquire, move |item, _| release(item))
    }

    /// [`Stream::bracket`] whose release learns how the stream ended.
    pub fn bracket_case<R>(acquire: IO<A, E>, release: R) -> Self
    where
        A: Clone,
        R: FnOnce(A, ExitCase) -> IO<(), E> + Send + 'static,
    {
        Stream::acquired(move |own| {
            acquire.flat_map(move |item| {
                let kept = item.clone();
                match own.register(Box::new(move |exit| release(kept, exit))) {
                    Ok(()) => IO::pure(Some(item)),
                    Err(release) => release(ExitCase::Canceled).map(|()| None),
                }
            })
        })
    }

    /// The value of a [`Resource`], emitted once, released as
    /// [`Stream::bracket`] releases.
    pub fn resource(resource: Resource<A, E>) -> Self
    where
        A: Clone,
    {
        Stream::acquired(move |own| {
            resource.allocated().flat_map(move |allocated| {
                let item = allocated.value().clone();
                match own.register(Box::new(move |exit| allocated.release_case(exit))) {
                    Ok(()) => IO::pure(Some(item)),
                    Err(release) => release(ExitCase::Canceled).map(|()| None),
                }
            })
        })
    }

    /// Runs `acquire` masked in a scope of its own, emits its value (if
    /// the scope was still open), and closes the scope when the stream is
    /// pulled again.
    fn acquired<F>(acquire: F) -> Self
    where
        F: FnOnce(Scope<E>) -> IO<Option<A>, E> + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let own = scope.open_child();
            let done = own.clone();
            IO::uncancelable(move |_| acquire(own)).map(move |item| match item {
                Some(item) => Step::Emit(
                    Chunk::singleton(item),
                    Stream::from_pull(move |_| {
                        done.close(ExitCase::Succeeded).map(|()| Step::Done)
                    }),
                ),
                None => Step::Done,
            })
        })
    }

    /// The stream, then `finalizer` when it is done (however it ends, each
    /// exactly once).
    pub fn on_finalize(self, finalizer: IO<(), E>) -> Self {
        self.on_finalize_case(move |_| finalizer)
    }

    /// [`Stream::on_finalize`] whose finalizer learns how the stream ended.
    pub fn on_finalize_case<F>(self, finalizer: F) -> Self
    where
        F: FnOnce(ExitCase) -> IO<(), E> + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let own = scope.open_child();
            match own.register(Box::new(finalizer)) {
                Ok(()) => self.in_scope(own),
                Err(finalizer) => finalizer(ExitCase::Canceled).map(|()| Step::Done),
            }
        })
    }

    /// The program that runs this stream: see [`Compile`].
    pub fn compile(self) -> Compile<A, E> {
        Compile { stream: self }
    }
}

/// The ways to run a stream as a program ([`Stream::compile`]): each opens
/// the stream's root scope and closes it however the run ends (releasing
/// everything still held, then giving the run's outcome; a release that
/// fails after a successful run makes the run fail with its error).
#[must_use = "call to_vec, fold, count, last or drain to get the program"]
pub struct Compile<A, E> {
    stream: Stream<A, E>,
}

impl<A: Send + 'static, E: Send + 'static> Compile<A, E> {
    /// Folds every chunk into a state.
    pub fn fold_chunks<S, F>(self, init: S, f: F) -> IO<S, E>
    where
        S: Send + 'static,
        F: FnMut(S, Chunk<A>) -> S + Send + 'static,
    {
        let stream = self.stream;
        IO::defer(move || {
            let root = Scope::<E>::root();
            let closing = root.clone();
            fold_steps(stream, init, f, root)
                .guarantee_case_ref(move |outcome| closing.close(ExitCase::of(outcome)))
        })
    }

    /// Folds every element into a state.
    pub fn fold<S, F>(self, init: S, mut f: F) -> IO<S, E>
    where
        S: Send + 'static,
        F: FnMut(S, A) -> S + Send + 'static,
    {
        self.fold_chunks(init, move |acc, chunk| chunk.into_iter().fold(acc, &mut f))
    }

    /// Every element, in order.
    pub fn to_vec(self) -> IO<Vec<A>, E> {
        self.fold_chunks(Vec::new(), |mut all, chunk| {
            if all.is_empty() {
                chunk.into_vec()
            } else {
                all.extend(chunk);
                all
            }
        })
    }

    /// How many elements the stream has.
    pub fn count(self) -> IO<u64, E> {
        self.fold_chunks(0u64, |n, chunk| n + chunk.len() as u64)
    }

    /// The last element, if any.
    pub fn last(self) -> IO<Option<A>, E> {
        self.fold_chunks(None, |last, chunk| chunk.into_iter().last().or(last))
    }

    /// Runs the stream for its effects, dropping its elements.
    pub fn drain(self) -> IO<(), E> {
        self.fold_chunks((), |(), _| ())
    }
}

/// The compiled loop: each step's chunk folded into `acc`, then the next
/// step, as a `flat_map` into the rest (one run-loop step per pull; the
/// run loop keeps the recursion flat, each step's frame popped before the
/// next is pushed).
fn fold_steps<A, E, S, F>(stream: Stream<A, E>, acc: S, mut f: F, root: Scope<E>) -> IO<S, E>
where
    A: Send + 'static,
    E: Send + 'static,
    S: Send + 'static,
    F: FnMut(S, Chunk<A>) -> S + Send + 'static,
{
    stream.step(&root).flat_map(move |step| match step {
        Step::Emit(chunk, rest) => {
            let acc = f(acc, chunk);
            fold_steps(rest, acc, f, root)
        }
        Step::Done => IO::pure(acc),
    })
}
