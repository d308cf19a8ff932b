//! The stages of a stream: pure chunk loops, effectful stages, early
//! stops (each in a scope of its own, see `scope.rs`), concatenation and
//! errors.

use alloc::collections::VecDeque;
use core::ops::ControlFlow;

use spindle_core::{ExitCase, IO};

use crate::chunk::Chunk;
use crate::scope::Scope;
use crate::stream::{InvalidArgument, Step, Stream, chunk_size};

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    // ----- pure stages ----------------------------------------------------

    /// Transforms every chunk with `f`.
    pub fn map_chunks<B, F>(self, mut f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(Chunk<A>) -> Chunk<B> + Send + 'static,
    {
        Stream::from_pull(move |scope| {
            self.step(scope).map(move |step| match step {
                Step::Emit(chunk, rest) => Step::Emit(f(chunk), rest.map_chunks(f)),
                Step::Done => Step::Done,
            })
        })
    }

    /// Transforms every element with `f`.
    pub fn map<B, F>(self, mut f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(A) -> B + Send + 'static,
    {
        self.map_chunks(move |chunk| chunk.map(&mut f))
    }

    /// The elements `keep` accepts.
    pub fn filter<F>(self, mut keep: F) -> Stream<A, E>
    where
        F: FnMut(&A) -> bool + Send + 'static,
    {
        self.map_chunks(move |chunk| chunk.filter(&mut keep))
    }

    /// The values `f` gives, skipping `None`s.
    pub fn filter_map<B, F>(self, mut f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(A) -> Option<B> + Send + 'static,
    {
        self.map_chunks(move |chunk| chunk.filter_map(&mut f))
    }

    /// Each element with its index (from 0).
    pub fn zip_with_index(self) -> Stream<(A, u64), E> {
        let mut next = 0u64;
        self.map(move |item| {
            let index = next;
            next += 1;
            (item, index)
        })
    }

    /// `separator` between every two elements.
    pub fn intersperse(self, separator: A) -> Stream<A, E>
    where
        A: Clone,
    {
        let mut first = true;
        self.map_chunks(move |chunk| {
            let mut out = Chunk::with_capacity(chunk.len() * 2);
            for item in chunk {
                if !first {
                    out.push(separator.clone());
                }
                first = false;
                out.push(item);
            }
            out
        })
    }

    /// The elements that differ from the one before them.
    pub fn changes(self) -> Stream<A, E>
    where
        A: PartialEq + Clone,
    {
        let mut last: Option<A> = None;
        self.filter(move |item| {
            if last.as_ref() == Some(item) {
                false
            } else {
                last = Some(item.clone());
                true
            }
        })
    }

    /// The running fold: `init`, then the state after each element.
    pub fn scan<S, F>(self, init: S, mut f: F) -> Stream<S, E>
    where
        S: Clone + Send + 'static,
        F: FnMut(&S, A) -> S + Send + 'static,
    {
        let mut state = init.clone();
        Stream::emit(init).append(self.map(move |item| {
            state = f(&state, item);
            state.clone()
        }))
    }

    /// Each chunk as one element.
    pub fn chunks(self) -> Stream<Chunk<A>, E> {
        self.map_chunks(Chunk::singleton)
    }

    /// The elements in chunks of exactly `n` (the last may be shorter),
    /// each as one element; `n` must be above 0.
    pub fn chunk_n(self, n: usize) -> Result<Stream<Chunk<A>, E>, InvalidArgument> {
        let n = chunk_size("chunk_n", n)?;
        Ok(chunk_n_from(self, Chunk::with_capacity(n), n))
    }

    /// The same elements, regrouped in chunks of `n` (the last may be
    /// shorter); `n` must be above 0. Never changes what a stream yields.
    pub fn rechunk(self, n: usize) -> Result<Stream<A, E>, InvalidArgument> {
        let n = chunk_size("rechunk", n)?;
        Ok(chunk_n_from(self, Chunk::with_capacity(n), n).flat_map(Stream::chunk))
    }

    /// Windows of `n` consecutive elements, one per element from the
    /// `n`-th on (`1, 2, 3, 4` by 2: `[1, 2]`, `[2, 3]`, `[3, 4]`); an
    /// input of fewer than `n` elements (but some) gives one window of
    /// them all (fs2's `sliding`). `n` must be above 0.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::single::SingleThreaded;
    /// use spindle_effect::stream::Stream;
    ///
    /// let sums = Stream::<u32, ()>::range(1..6)
    ///     .sliding(3)?
    ///     .map(|window| window.iter().sum::<u32>())
    ///     .compile()
    ///     .to_vec();
    /// assert_eq!(SingleThreaded::new()?.block_on(sums)?.succeeded(), Some(vec![6, 9, 12]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sliding(self, n: usize) -> Result<Stream<Chunk<A>, E>, InvalidArgument>
    where
        A: Clone,
    {
        let n = chunk_size("sliding", n)?;
        Ok(sliding_from(self, VecDeque::with_capacity(n), n, false))
    }

    /// Pulls this stream on a fiber of its own, ahead of the consumer: up
    /// to `n` elements wait ready for it (in chunks of at most `n`, and the
    /// next such chunk may wait to be handed over), so a faster producer
    /// goes on while a slower consumer works (the `buffer` of ZIO and Akka
    /// streams; fs2's `buffer`, which only regroups, is
    /// [`rechunk`](Stream::rechunk)). `n` must be above 0.
    pub fn buffer(self, n: usize) -> Result<Stream<A, E>, InvalidArgument> {
        let n = chunk_size("buffer", n)?;
        self.rechunk(n)?.prefetch_n(1)
    }

    /// The stream `pipe` makes of this one (`through(lines)`).
    pub fn through<B, E2, P>(self, pipe: P) -> Stream<B, E2>
    where
        P: FnOnce(Stream<A, E>) -> Stream<B, E2>,
    {
        pipe(self)
    }

    // ----- effectful stages ----------------------------------------------

    /// Runs `f`'s program for each element, in order, and emits its value:
    /// one element at a time, so a program runs only for an element that
    /// is pulled (`eval_map(send).take(1)` sends once). See
    /// [`Stream::eval_map_chunk`] for a chunk at a time.
    pub fn eval_map<B, F>(self, f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(A) -> IO<B, E> + Send + 'static,
    {
        eval_map_from(Chunk::empty().into_iter(), self, f)
    }

    /// Runs `f`'s program for every element of a chunk, in order, and
    /// emits the values as one chunk (fewer steps than
    /// [`Stream::eval_map`]; the programs of a whole chunk run even if
    /// fewer elements are pulled).
    pub fn eval_map_chunk<B, F>(self, f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(A) -> IO<B, E> + Send + 'static,
    {
        Stream::from_pull(move |scope| {
            self.step(scope).flat_map(move |step| match step {
                Step::Emit(chunk, rest) => traverse_chunk(chunk, f)
                    .map(move |(out, f)| Step::Emit(out, rest.eval_map_chunk(f))),
                Step::Done => IO::pure(Step::Done),
            })
        })
    }

    /// Runs `f`'s program for every element, in order, and emits the
    /// element.
    pub fn eval_tap<F>(self, mut f: F) -> Stream<A, E>
    where
        A: Clone,
        F: FnMut(&A) -> IO<(), E> + Send + 'static,
    {
        self.eval_map(move |item| f(&item).map(move |()| item))
    }

    /// Folds the stream into one element: the final state.
    pub fn fold<S, F>(self, init: S, f: F) -> Stream<S, E>
    where
        S: Send + 'static,
        F: FnMut(S, A) -> S + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let scope = scope.clone();
            IO::tail_rec((self, init, f), move |(stream, acc, mut f)| {
                stream.step(&scope).map(move |step| match step {
                    Step::Emit(chunk, rest) => {
                        let acc = chunk.into_iter().fold(acc, &mut f);
                        ControlFlow::Continue((rest, acc, f))
                    }
                    Step::Done => ControlFlow::Break(acc),
                })
            })
            .map(|state| Step::Emit(Chunk::singleton(state), Stream::empty()))
        })
    }

    // ----- early stops -------------------------------------------------------

    /// The first `n` elements. The input is pulled in a scope of its own,
    /// closed as soon as the `n`th element was emitted and pulled past:
    /// what the input acquired is released then.
    pub fn take(self, n: u64) -> Stream<A, E> {
        if n == 0 {
            return Stream::empty();
        }
        Stream::from_pull(move |scope: &Scope<E>| take_from(self, n, scope.open_child()))
    }

    /// The elements up to the first that `keep` refuses (released as
    /// [`Stream::take`] releases).
    pub fn take_while<F>(self, keep: F) -> Stream<A, E>
    where
        F: FnMut(&A) -> bool + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            take_while_from(self, keep, false, scope.open_child())
        })
    }

    /// The elements up to and including the first that `keep` refuses
    /// (fs2's `takeThrough`: a protocol's last message, `QUIT`, still goes
    /// out); the input is released as [`Stream::take`] releases it.
    pub fn take_through<F>(self, keep: F) -> Stream<A, E>
    where
        F: FnMut(&A) -> bool + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            take_while_from(self, keep, true, scope.open_child())
        })
    }

    /// All but the first `n` elements.
    pub fn drop(self, n: u64) -> Stream<A, E> {
        if n == 0 {
            return self;
        }
        Stream::from_pull(move |scope: &Scope<E>| {
            let scope = scope.clone();
            self.step(&scope).flat_map(move |step| match step {
                Step::Emit(mut chunk, rest) => {
                    let len = chunk.len() as u64;
                    if len > n {
                        chunk.drop_front(n as usize);
                        IO::pure(Step::Emit(chunk, rest))
                    } else {
                        rest.drop(n - len).step(&scope)
                    }
                }
                Step::Done => IO::pure(Step::Done),
            })
        })
    }

    /// The elements from the first that `skip` refuses on.
    pub fn drop_while<F>(self, mut skip: F) -> Stream<A, E>
    where
        F: FnMut(&A) -> bool + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let scope = scope.clone();
            self.step(&scope).flat_map(move |step| match step {
                Step::Emit(mut chunk, rest) => match chunk.iter().position(|item| !skip(item)) {
                    Some(at) => {
                        chunk.drop_front(at);
                        IO::pure(Step::Emit(chunk, rest))
                    }
                    None => rest.drop_while(skip).step(&scope),
                },
                Step::Done => IO::pure(Step::Done),
            })
        })
    }

    // ----- concatenation -------------------------------------------------

    /// This stream's elements, then `next`'s (fs2's `++`). Whatever this
    /// stream acquired in its own stages is released before `next` starts.
    pub fn append(self, next: Stream<A, E>) -> Stream<A, E> {
        Stream::from_pull(move |scope: &Scope<E>| {
            let scope = scope.clone();
            self.step(&scope).flat_map(move |step| match step {
                Step::Emit(chunk, rest) => IO::pure(Step::Emit(chunk, rest.append(next))),
                Step::Done => next.step(&scope),
            })
        })
    }

    /// The streams `f` makes of the elements, one after the other.
    pub fn flat_map<B, F>(self, f: F) -> Stream<B, E>
    where
        B: Send + 'static,
        F: FnMut(A) -> Stream<B, E> + Send + 'static,
    {
        flat_map_from(self, Chunk::empty().into_iter(), f)
    }

    // ----- errors ----------------------------------------------------------

    /// On an error of this stream (not of the stages after it), releases
    /// what this stream holds and goes on with the stream `handler` makes
    /// of the error.
    pub fn handle_error_with<F>(self, handler: F) -> Stream<A, E>
    where
        F: FnOnce(E) -> Stream<A, E> + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let own = scope.open_child();
            handle_from(self, own, scope.clone(), handler)
        })
    }

    /// The elements as `Ok`s, then the error as an `Err` if the stream
    /// fails (the stream then ends).
    pub fn attempt(self) -> Stream<Result<A, E>, E> {
        self.map(Ok)
            .handle_error_with(|error| Stream::emit(Err(error)))
    }

    /// On an error of this stream, runs `f`'s program with it, then fails
    /// with the error as before.
    pub fn on_error<F>(self, f: F) -> Stream<A, E>
    where
        F: FnOnce(&E) -> IO<(), E> + Send + 'static,
    {
        self.handle_error_with(move |error| {
            Stream::exec(f(&error)).append(Stream::raise_error(error))
        })
    }

    /// The stream with its errors transformed by `f` (its own releases'
    /// errors too).
    pub fn map_err<E2, F>(self, f: F) -> Stream<A, E2>
    where
        E2: Send + 'static,
        F: Fn(E) -> E2 + Send + Sync + 'static,
    {
        let f = crate::sync::Arc::new(f);
        Stream::from_pull(move |outer: &Scope<E2>| {
            // This stream's resources live in a scope of its error type,
            // released (errors mapped) when `outer` closes or this stream
            // ends.
            let own = Scope::<E>::root();
            let (closing, map) = (own.clone(), f.clone());
            match outer.register(alloc::boxed::Box::new(move |exit| {
                closing.close(exit).map_err(move |e| map.as_ref()(e))
            })) {
                Ok(()) => map_err_from(self, own, f),
                Err(release) => release(ExitCase::Canceled).map(|()| Step::Done),
            }
        })
    }

    /// On an error, pauses and starts the stream `make` builds again, as
    /// long as `schedule` gives a delay; then fails with the last error.
    /// Elements emitted before an error stay emitted (a reconnecting
    /// source).
    pub fn retrying<F>(schedule: &spindle_core::Schedule, make: F) -> Stream<A, E>
    where
        F: FnMut() -> Stream<A, E> + Send + 'static,
    {
        retry_from(schedule.delays(), make)
    }

    // ----- two inputs ------------------------------------------------------

    /// Pairs of this stream's and `other`'s elements, in order, until
    /// either ends (both are then released).
    pub fn zip<B>(self, other: Stream<B, E>) -> Stream<(A, B), E>
    where
        B: Send + 'static,
    {
        self.zip_with(other, |a, b| (a, b))
    }

    /// `f` of this stream's and `other`'s elements, in order, until either
    /// ends (both are then released).
    pub fn zip_with<B, C, F>(self, other: Stream<B, E>, f: F) -> Stream<C, E>
    where
        B: Send + 'static,
        C: Send + 'static,
        F: FnMut(A, B) -> C + Send + 'static,
    {
        Stream::from_pull(move |scope: &Scope<E>| {
            let zip = Zip {
                left: Side::new(self, scope.open_child()),
                right: Side::new(other, scope.open_child()),
                f,
            };
            zip.pull()
        })
    }

    /// This stream's and `other`'s elements, alternately, until either
    /// ends.
    pub fn interleave(self, other: Stream<A, E>) -> Stream<A, E> {
        self.zip(other).map_chunks(|pairs| {
            let mut out = Chunk::with_capacity(pairs.len() * 2);
            for (a, b) in pairs {
                out.push(a);
                out.push(b);
            }
            out
        })
    }
}

/// `eval_map`'s state: the elements of the current chunk not run yet, the
/// rest of the input, the function. A pull reuses its own box for the
/// rest of the stream (no allocation per element for the stage).
struct EvalMap<A, E, F> {
    pending: crate::chunk::IntoIter<A>,
    input: Option<Stream<A, E>>,
    f: F,
}

impl<A, B, E, F> crate::stream::Pull<B, E> for EvalMap<A, E, F>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    fn pull(mut self: alloc::boxed::Box<Self>, scope: &Scope<E>) -> IO<Step<B, E>, E> {
        if let Some(item) = self.pending.next() {
            let program = (self.f)(item);
            return program
                .map(move |value| Step::Emit(Chunk::singleton(value), Stream::from_boxed(self)));
        }
        let Some(input) = self.input.take() else {
            return IO::pure(Step::Done);
        };
        // Once a chunk: the next pull needs the scope after this one.
        let scope = scope.clone();
        input.step(&scope).flat_map(move |step| match step {
            Step::Emit(chunk, rest) => {
                self.pending = chunk.into_iter();
                self.input = Some(rest);
                self.pull(&scope)
            }
            Step::Done => IO::pure(Step::Done),
        })
    }
}

fn eval_map_from<A, B, E, F>(
    pending: crate::chunk::IntoIter<A>,
    input: Stream<A, E>,
    f: F,
) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    Stream::from_boxed(alloc::boxed::Box::new(EvalMap {
        pending,
        input: Some(input),
        f,
    }))
}

/// Runs `f` for every element of `chunk` in order; gives `f` back.
fn traverse_chunk<A, B, E, F>(chunk: Chunk<A>, f: F) -> IO<(Chunk<B>, F), E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> IO<B, E> + Send + 'static,
{
    let out = Chunk::with_capacity(chunk.len());
    IO::tail_rec(
        (chunk.into_iter(), out, f),
        |(mut items, mut out, mut f)| match items.next() {
            None => IO::pure(ControlFlow::Break((out, f))),
            Some(item) => f(item).map(move |value| {
                out.push(value);
                ControlFlow::Continue((items, out, f))
            }),
        },
    )
}

/// [`Stream::sliding`] with the last `n - 1` (or fewer) elements seen in
/// `last`; `emitted`: a window was emitted already.
fn sliding_from<A, E>(
    input: Stream<A, E>,
    mut last: VecDeque<A>,
    n: usize,
    mut emitted: bool,
) -> Stream<Chunk<A>, E>
where
    A: Clone + Send + 'static,
    E: Send + 'static,
{
    Stream::from_pull(move |scope: &Scope<E>| {
        let scope = scope.clone();
        input.step(&scope).flat_map(move |step| match step {
            Step::Emit(chunk, rest) => {
                let mut windows = Chunk::empty();
                for item in chunk {
                    if last.len() == n {
                        last.pop_front();
                    }
                    last.push_back(item);
                    if last.len() == n {
                        windows.push(last.iter().cloned().collect::<Chunk<A>>());
                        emitted = true;
                    }
                }
                let rest = sliding_from(rest, last, n, emitted);
                if windows.is_empty() {
                    rest.step(&scope)
                } else {
                    IO::pure(Step::Emit(windows, rest))
                }
            }
            Step::Done => IO::pure(if emitted || last.is_empty() {
                Step::Done
            } else {
                let window: Chunk<A> = last.into_iter().collect();
                Step::Emit(Chunk::singleton(window), Stream::empty())
            }),
        })
    })
}

/// `chunk_n`'s loop: `pending` holds fewer than `n` elements.
fn chunk_n_from<A, E>(input: Stream<A, E>, pending: Chunk<A>, n: usize) -> Stream<Chunk<A>, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    Stream::from_pull(move |scope: &Scope<E>| {
        let scope = scope.clone();
        input.step(&scope).flat_map(move |step| match step {
            Step::Emit(chunk, rest) => {
                let mut pending = pending;
                let mut full = Chunk::empty();
                for item in chunk {
                    pending.push(item);
                    if pending.len() == n {
                        full.push(core::mem::replace(&mut pending, Chunk::with_capacity(n)));
                    }
                }
                let rest = chunk_n_from(rest, pending, n);
                if full.is_empty() {
                    rest.step(&scope)
                } else {
                    IO::pure(Step::Emit(full, rest))
                }
            }
            Step::Done => IO::pure(if pending.is_empty() {
                Step::Done
            } else {
                Step::Emit(Chunk::singleton(pending), Stream::empty())
            }),
        })
    })
}

/// A stream that closes `own` and ends.
fn close_and_end<A: Send + 'static, E: Send + 'static>(own: Scope<E>) -> Stream<A, E> {
    Stream::from_pull(move |_| own.close(ExitCase::Succeeded).map(|()| Step::Done))
}

/// `take`'s loop: `input` pulled in `own`, `n > 0` elements still to go.
fn take_from<A, E>(input: Stream<A, E>, n: u64, own: Scope<E>) -> IO<Step<A, E>, E>
where
    A: Send + 'static,
    E: Send + 'static,
{
    input.step(&own).flat_map(move |step| match step {
        Step::Emit(mut chunk, rest) => {
            let len = chunk.len() as u64;
            if len >= n {
                chunk.truncate(n as usize);
                drop(rest);
                IO::pure(Step::Emit(chunk, close_and_end(own)))
            } else {
                let next = Stream::from_pull(move |_| take_from(rest, n - len, own));
                IO::pure(Step::Emit(chunk, next))
            }
        }
        Step::Done => own.close(ExitCase::Succeeded).map(|()| Step::Done),
    })
}

/// `take_while`'s loop (`through`: `take_through`'s, which keeps the
/// refused element too).
fn take_while_from<A, E, F>(
    input: Stream<A, E>,
    mut keep: F,
    through: bool,
    own: Scope<E>,
) -> IO<Step<A, E>, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnMut(&A) -> bool + Send + 'static,
{
    input.step(&own).flat_map(move |step| match step {
        Step::Emit(mut chunk, rest) => match chunk.iter().position(|item| !keep(item)) {
            Some(at) => {
                chunk.truncate(at + usize::from(through));
                drop(rest);
                IO::pure(Step::Emit(chunk, close_and_end(own)))
            }
            None => {
                let next = Stream::from_pull(move |_| take_while_from(rest, keep, through, own));
                IO::pure(Step::Emit(chunk, next))
            }
        },
        Step::Done => own.close(ExitCase::Succeeded).map(|()| Step::Done),
    })
}

/// `flat_map`'s loop: the elements of the outer chunk not expanded yet,
/// then the rest of the outer stream.
fn flat_map_from<A, B, E, F>(
    outer: Stream<A, E>,
    mut pending: crate::chunk::IntoIter<A>,
    mut f: F,
) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    F: FnMut(A) -> Stream<B, E> + Send + 'static,
{
    Stream::from_pull(move |scope: &Scope<E>| match pending.next() {
        Some(item) => {
            let inner = f(item);
            inner.append(flat_map_from(outer, pending, f)).step(scope)
        }
        None => {
            let scope = scope.clone();
            outer.step(&scope).flat_map(move |step| match step {
                Step::Emit(chunk, rest) => flat_map_from(rest, chunk.into_iter(), f).step(&scope),
                Step::Done => IO::pure(Step::Done),
            })
        }
    })
}

/// `handle_error_with`'s loop: `input` pulled in `own`.
fn handle_from<A, E, F>(
    input: Stream<A, E>,
    own: Scope<E>,
    outer: Scope<E>,
    handler: F,
) -> IO<Step<A, E>, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnOnce(E) -> Stream<A, E> + Send + 'static,
{
    input.step(&own).attempt().flat_map(move |step| match step {
        Ok(Step::Emit(chunk, rest)) => IO::pure(Step::Emit(
            chunk,
            Stream::from_pull(move |_| handle_from(rest, own, outer, handler)),
        )),
        Ok(Step::Done) => own.close(ExitCase::Succeeded).map(|()| Step::Done),
        Err(error) => own
            .close(ExitCase::Errored)
            .flat_map(move |()| handler(error).step(&outer)),
    })
}

/// `map_err`'s loop: `input` pulled in `own` (a root scope of `E`), its
/// errors mapped; `own` closed when `input` ends.
fn map_err_from<A, E, E2, F>(
    input: Stream<A, E>,
    own: Scope<E>,
    f: crate::sync::Arc<F>,
) -> IO<Step<A, E2>, E2>
where
    A: Send + 'static,
    E: Send + 'static,
    E2: Send + 'static,
    F: Fn(E) -> E2 + Send + Sync + 'static,
{
    let (map, closing) = (f.clone(), own.clone());
    input
        .step(&own)
        .flat_map(move |step| match step {
            Step::Emit(chunk, rest) => IO::pure(Some((chunk, rest))),
            Step::Done => closing.close(ExitCase::Succeeded).map(|()| None),
        })
        .map_err(move |e| map.as_ref()(e))
        .map(move |step| match step {
            Some((chunk, rest)) => Step::Emit(
                chunk,
                Stream::from_pull(move |_| map_err_from(rest, own, f)),
            ),
            None => Step::Done,
        })
}

/// `retrying`'s loop: the stream `make` builds, restarted after each
/// error while `delays` gives a pause.
fn retry_from<A, E, F>(mut delays: spindle_core::Delays, mut make: F) -> Stream<A, E>
where
    A: Send + 'static,
    E: Send + 'static,
    F: FnMut() -> Stream<A, E> + Send + 'static,
{
    Stream::suspend(move || {
        make().handle_error_with(move |error| match delays.next() {
            Some(pause) => Stream::exec(IO::sleep(pause)).append(retry_from(delays, make)),
            None => Stream::raise_error(error),
        })
    })
}

/// One input of a zip: its stream (while it has not ended), the elements
/// of its last chunk not paired yet, and its scope.
struct Side<A, E> {
    stream: Option<Stream<A, E>>,
    buffer: alloc::collections::VecDeque<A>,
    own: Scope<E>,
}

impl<A: Send + 'static, E: Send + 'static> Side<A, E> {
    fn new(stream: Stream<A, E>, own: Scope<E>) -> Self {
        Side {
            stream: Some(stream),
            buffer: alloc::collections::VecDeque::new(),
            own,
        }
    }

    /// Fills the buffer if it is empty: `false` if the input ended.
    fn fill(mut self) -> IO<(Self, bool), E> {
        if !self.buffer.is_empty() {
            return IO::pure((self, true));
        }
        let Some(stream) = self.stream.take() else {
            return IO::pure((self, false));
        };
        stream.step(&self.own).map(move |step| match step {
            Step::Emit(chunk, rest) => {
                self.buffer.extend(chunk);
                self.stream = Some(rest);
                (self, true)
            }
            Step::Done => (self, false),
        })
    }
}

struct Zip<A, B, E, F> {
    left: Side<A, E>,
    right: Side<B, E>,
    f: F,
}

impl<A, B, C, E, F> Zip<A, B, E, F>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
    E: Send + 'static,
    F: FnMut(A, B) -> C + Send + 'static,
{
    fn pull(self) -> IO<Step<C, E>, E> {
        let Zip { left, right, f } = self;
        left.fill().flat_map(move |(left, more)| {
            if !more {
                return zip_end(left.own, right.own);
            }
            right.fill().flat_map(move |(right, more)| {
                if !more {
                    return zip_end(left.own, right.own);
                }
                let mut zip = Zip { left, right, f };
                let n = zip.left.buffer.len().min(zip.right.buffer.len());
                let mut out = Chunk::with_capacity(n);
                for _ in 0..n {
                    let (Some(a), Some(b)) =
                        (zip.left.buffer.pop_front(), zip.right.buffer.pop_front())
                    else {
                        break;
                    };
                    out.push((zip.f)(a, b));
                }
                IO::pure(Step::Emit(out, Stream::from_pull(move |_| zip.pull())))
            })
        })
    }
}

/// The end of a zip: both inputs released (the right one, opened last,
/// first).
fn zip_end<C: Send + 'static, E: Send + 'static>(
    left: Scope<E>,
    right: Scope<E>,
) -> IO<Step<C, E>, E> {
    right
        .close(ExitCase::Succeeded)
        .flat_map(move |()| left.close(ExitCase::Succeeded))
        .map(|()| Step::Done)
}
