//! Conversions between [`Stream`] and async Rust's `Stream` trait
//! (`futures_core::Stream`).
//!
//! * [`Stream::from_futures`]: a fiber pulls the async stream through
//!   `IO::from_future`; one pull takes every item the async stream has
//!   ready (up to a chunk) before it would wait, so a busy source moves in
//!   chunks.
//! * [`Stream::into_futures_on`] (with `std`): a fiber on the given
//!   executor runs the stream and sends its chunks through a bounded
//!   channel of one chunk to the async side; dropping the async stream
//!   makes the fiber's next send fail, which ends the run (its resources
//!   are released then).

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use futures_core::Stream as AsyncStream;
use spindle_core::IO;

use crate::chunk::Chunk;
use crate::stream::{DEFAULT_CHUNK_SIZE, Step, Stream};

/// The items an async stream has ready, at least one (or its end).
struct NextChunk<S> {
    stream: Option<Pin<Box<S>>>,
}

impl<S: AsyncStream> Future for NextChunk<S> {
    type Output = (Chunk<S::Item>, Option<Pin<Box<S>>>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut chunk = Chunk::empty();
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready((chunk, None));
        };
        loop {
            match stream.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    chunk.push(item);
                    if chunk.len() == DEFAULT_CHUNK_SIZE {
                        return Poll::Ready((chunk, self.stream.take()));
                    }
                }
                Poll::Ready(None) => {
                    // The end: what was gathered, then nothing more.
                    self.stream = None;
                    return Poll::Ready((chunk, None));
                }
                Poll::Pending if chunk.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready((chunk, self.stream.take())),
            }
        }
    }
}

fn from_async<S, E>(stream: Pin<Box<S>>) -> Stream<S::Item, E>
where
    S: AsyncStream + Send + 'static,
    S::Item: Send + 'static,
    E: Send + 'static,
{
    Stream::from_pull(move |_| {
        IO::from_future(NextChunk {
            stream: Some(stream),
        })
        .map(|(chunk, rest)| match rest {
            Some(rest) => Step::Emit(chunk, from_async(rest)),
            None if chunk.is_empty() => Step::Done,
            None => Step::Emit(chunk, Stream::empty()),
        })
    })
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// The items of an async stream (`futures_core::Stream`), pulled when
    /// this stream is pulled; the items it has ready move as one chunk.
    pub fn from_futures<S>(stream: S) -> Self
    where
        S: AsyncStream<Item = A> + Send + 'static,
    {
        from_async(Box::pin(stream))
    }
}

#[cfg(feature = "std")]
mod to_async {
    use super::*;
    use core::future::poll_fn;
    use core::ops::ControlFlow;
    use futures_channel::mpsc;
    use spindle_core::{Executor, ExitCase, FiberHandle};

    use crate::scope::Scope;

    /// The async side of [`Stream::into_futures_on`]: each item of the
    /// stream as `Ok`, then its error as an `Err` if it fails.
    pub struct IntoAsync<A, E> {
        chunks: mpsc::Receiver<Result<Chunk<A>, E>>,
        current: crate::chunk::IntoIter<A>,
        /// Cancels the stream's fiber (on a fiber of the executor's) when
        /// the async side is dropped.
        stop: Option<Box<dyn FnOnce() + Send>>,
    }

    impl<A, E> Unpin for IntoAsync<A, E> {}

    impl<A, E> Drop for IntoAsync<A, E> {
        fn drop(&mut self) {
            if let Some(stop) = self.stop.take() {
                stop();
            }
        }
    }

    impl<A, E> AsyncStream for IntoAsync<A, E> {
        type Item = Result<A, E>;

        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            loop {
                if let Some(item) = self.current.next() {
                    return Poll::Ready(Some(Ok(item)));
                }
                match Pin::new(&mut self.chunks).poll_next(cx) {
                    Poll::Ready(Some(Ok(chunk))) => self.current = chunk.into_iter(),
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                    Poll::Ready(None) => {
                        // The fiber ended: nothing to cancel when dropped.
                        self.stop = None;
                        return Poll::Ready(None);
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
    }

    /// Sends `message`, waiting for room; `false` if the async side is
    /// gone.
    fn send<M: Send + 'static, E: Send + 'static>(
        mut sender: mpsc::Sender<M>,
        message: M,
    ) -> IO<Option<mpsc::Sender<M>>, E> {
        IO::from_future(async move {
            match poll_fn(|cx| sender.poll_ready(cx)).await {
                Ok(()) => sender.start_send(message).ok().map(|()| sender),
                Err(_) => None,
            }
        })
    }

    impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
        /// Runs this stream on a fiber of `executor` and gives its items to
        /// async Rust as a `futures_core::Stream` of `Result`s (an error
        /// ends it). Back-pressure: the fiber waits while a chunk is not
        /// yet taken. Dropping the async stream cancels the fiber at once
        /// (wherever it waits), releasing what the stream holds; the
        /// release runs on the executor, after the drop returns.
        pub fn into_futures_on<X: Executor>(self, executor: &X) -> IntoAsync<A, E> {
            let (sender, chunks) = mpsc::channel::<Result<Chunk<A>, E>>(0);
            let failing = sender.clone();
            let stream = self;
            let run: IO<(), E> = IO::defer(move || {
                let root = Scope::<E>::root();
                let closing = root.clone();
                IO::tail_rec((stream, sender), move |(stream, sender)| {
                    stream.step(&root).flat_map(move |step| match step {
                        Step::Emit(chunk, rest) => {
                            send(sender, Ok(chunk)).map(move |sent| match sent {
                                Some(sender) => ControlFlow::Continue((rest, sender)),
                                // The async side is gone: stop.
                                None => ControlFlow::Break(()),
                            })
                        }
                        Step::Done => IO::pure(ControlFlow::Break(())),
                    })
                })
                .guarantee_case_ref(move |outcome| closing.close(ExitCase::of(outcome)))
            })
            .handle_error_with(move |error| send(failing, Err(error)).void());
            let fiber = FiberHandle::spawn(run, executor);
            let executor = executor.clone();
            IntoAsync {
                chunks,
                current: Chunk::empty().into_iter(),
                stop: Some(Box::new(move || {
                    // The cancel is a program: it runs on a fiber of its
                    // own, which waits until the stream's fiber ended.
                    let _stopping = FiberHandle::spawn(fiber.cancel::<E>(), &executor);
                })),
            }
        }
    }
}

#[cfg(feature = "std")]
pub use to_async::IntoAsync;
