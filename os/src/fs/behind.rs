//! Write-behind: the writes of a [`File`](super::File) run on the blocking
//! pool while the fiber that asked for them goes on, and every other
//! operation on the file waits for them first.
//!
//! The state of one file: the chunks handed over and not yet written
//! (`queue`), whether a writer is at work on them (one at most: a fiber
//! whose one blocking call writes the queue's chunks in order until it is
//! empty), the error of a write that failed and has not been reported
//! yet, and the fibers that wait (for room in the queue, or for the
//! writes to be done). How many bytes may wait behind the write at work
//! is [`MAX_BEHIND`].
//!
//! The design is tokio's `tokio::fs::File` (a write hands its bytes to a
//! blocking task and returns; the next operation waits for that task, and
//! a failed write's error shows at the next operation or at `flush`), with
//! a bounded queue behind the write at work; no code of tokio is copied.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use spindle_core::untraced::{Untraced as _, UntracedPoll as _};
use spindle_core::{Callback, IO, Poll};

use super::at;
use super::file::Inner;

/// The most bytes that may wait in a file's queue behind the write at
/// work; a write that finds no room for its chunk waits until the writer
/// has brought the queue down to half of this and the chunk fits (or has
/// emptied it, for a chunk larger than this). A chunk is handed over
/// whole, so the queue may hold one chunk larger than this when it was
/// empty.
pub(crate) const MAX_BEHIND: usize = 1024 * 1024;

/// A file's writes behind its caller (module doc).
#[derive(Default)]
pub(crate) struct Behind {
    /// Whether any write is queued or at work, or an error waits to be
    /// reported: `false` lets the other operations skip the lock.
    busy: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Chunks handed over, not yet taken by the writer, in order.
    queue: VecDeque<Vec<u8>>,
    /// The bytes in `queue`.
    queued: usize,
    /// Whether a writer runs (it has the queue until it finds it empty).
    writing: bool,
    /// The error of a failed write, until one operation reports it.
    error: Option<io::Error>,
    /// The fibers waiting, each with what it waits for.
    waiters: Vec<Waiter>,
    next_waiter: u64,
}

struct Waiter {
    id: u64,
    want: Want,
    callback: Callback<(), io::Error>,
}

/// What [`Behind::hand_over`] did with a chunk.
pub(crate) enum HandOver {
    /// Queued behind the writer at work.
    Queued,
    /// Queued, and no writer was at work: the caller starts one.
    StartWriter,
    /// No room: the chunk back, to hand over again once there is.
    Full(Vec<u8>),
    /// A write failed before: its error, reported here (the chunk is not
    /// written).
    Failed(io::Error),
}

/// What a fiber waits for: room for a chunk of so many bytes, or the end
/// of every write.
#[derive(Clone, Copy)]
pub(crate) enum Want {
    Room(usize),
    Done,
}

impl State {
    /// Whether a chunk of `len` bytes may be queued now.
    fn room(&self, len: usize) -> bool {
        !self.writing || self.queued == 0 || self.queued + len <= MAX_BEHIND
    }

    /// Whether a waiter for `want` may go on (an error to report counts).
    /// Room is given once the queue is down to half (so that a writing
    /// fiber is woken once per half a queue, not once per chunk), and
    /// always implies [`room`](State::room) for the waiter's chunk: a
    /// waiter woken finds it.
    fn ready(&self, want: Want) -> bool {
        if self.error.is_some() || !self.writing {
            return true;
        }
        match want {
            Want::Done => false,
            Want::Room(len) => {
                self.queued == 0 || self.queued <= MAX_BEHIND / 2 && self.queued + len <= MAX_BEHIND
            }
        }
    }

    /// The waiters to wake now (taken out of the list).
    fn wake(&mut self) -> Vec<Callback<(), io::Error>> {
        let mut woken = Vec::new();
        let mut i = 0;
        while i < self.waiters.len() {
            if self.ready(self.waiters[i].want) {
                woken.push(self.waiters.swap_remove(i).callback);
            } else {
                i += 1;
            }
        }
        woken
    }
}

impl Behind {
    /// Whether the other operations may run at once: no write queued or
    /// at work, no error to report. `Err` takes the error out (it is
    /// reported by this caller, once); `Ok(false)`: wait for
    /// [`Want::Done`] and ask again.
    pub(crate) fn settled(&self) -> io::Result<bool> {
        if !self.busy.load(Ordering::Acquire) {
            return Ok(true);
        }
        let mut state = self.state.lock();
        if let Some(error) = state.error.take() {
            if !state.writing {
                self.busy.store(false, Ordering::Release);
            }
            return Err(error);
        }
        Ok(!state.writing)
    }

    /// Whether a writer is at work.
    pub(crate) fn writing(&self) -> bool {
        self.busy.load(Ordering::Acquire) && self.state.lock().writing
    }

    /// The error of a failed write not yet reported, taken out (for the
    /// close, once no writer is at work).
    pub(crate) fn take_error(&self) -> Option<io::Error> {
        if !self.busy.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.state.lock();
        let error = state.error.take();
        if !state.writing {
            self.busy.store(false, Ordering::Release);
        }
        error
    }

    /// Hands `bytes` over to be written behind the caller (see
    /// [`HandOver`]).
    pub(crate) fn hand_over(&self, bytes: Vec<u8>) -> HandOver {
        let mut state = self.state.lock();
        if let Some(error) = state.error.take() {
            if !state.writing {
                self.busy.store(false, Ordering::Release);
            }
            return HandOver::Failed(error);
        }
        if bytes.is_empty() {
            return HandOver::Queued;
        }
        if !state.room(bytes.len()) {
            return HandOver::Full(bytes);
        }
        state.queued += bytes.len();
        state.queue.push_back(bytes);
        if state.writing {
            HandOver::Queued
        } else {
            state.writing = true;
            self.busy.store(true, Ordering::Release);
            HandOver::StartWriter
        }
    }

    /// The writer's next chunk, or `None` once the queue is empty (the
    /// writer is then done: `writing` is false and every waiter is woken).
    fn next_chunk(&self) -> Option<Vec<u8>> {
        let mut state = self.state.lock();
        let chunk = state.queue.pop_front();
        let woken = match &chunk {
            Some(chunk) => {
                state.queued -= chunk.len();
                if state.waiters.is_empty() {
                    Vec::new()
                } else {
                    state.wake()
                }
            }
            None => self.finish(&mut state, None),
        };
        drop(state);
        for callback in woken {
            callback.succeed(());
        }
        chunk
    }

    /// Ends the writer's work (`error`: the write that failed; the chunks
    /// still queued are dropped unwritten): the waiters to wake.
    fn finish(&self, state: &mut State, error: Option<io::Error>) -> Vec<Callback<(), io::Error>> {
        if let Some(error) = error {
            state.queue.clear();
            state.queued = 0;
            state.error = Some(error);
        }
        state.writing = false;
        if state.error.is_none() {
            self.busy.store(false, Ordering::Release);
        }
        state.wake()
    }

    /// Ends the writer's work on `error`.
    fn fail(&self, error: io::Error) {
        let woken = self.finish(&mut self.state.lock(), Some(error));
        for callback in woken {
            callback.succeed(());
        }
    }
}

/// The writer: a fiber (started here, not joined: the waiters learn of
/// its end from the state) whose one blocking call writes the queue's
/// chunks in order until the queue is empty or a write fails. Its work is
/// ended even if the blocking call is dropped without running (its
/// executor shut down) or stops half-way (a panic): then with an error of
/// kind `Other`, as if a write had failed.
pub(crate) fn start_writer(inner: Arc<Inner>) -> IO<(), io::Error> {
    let writer = Writer { inner: Some(inner) };
    IO::<(), io::Error>::try_blocking_untraced(move || {
        writer.run();
        Ok(())
    })
    .start_untraced::<io::Error>()
    .map_untraced(drop)
}

/// The writer's state (see [`start_writer`]); `inner` is `None` once its
/// work is ended.
struct Writer {
    inner: Option<Arc<Inner>>,
}

impl Writer {
    fn run(mut self) {
        let Some(inner) = self.inner.clone() else {
            return;
        };
        // Until its end, a writer dropped (a panic) ends its work.
        while let Some(chunk) = inner.behind.next_chunk() {
            let written = {
                let file = inner.file.read();
                match &*file {
                    Some(file) => file.write_all(&chunk),
                    None => Err(io::Error::other("the file is closed")),
                }
            };
            if let Err(e) = written {
                self.inner = None;
                inner.behind.fail(at("write", &inner.path, e));
                return;
            }
        }
        // `next_chunk` ended the work.
        self.inner = None;
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.behind.fail(dropped(&inner.path));
        }
    }
}

/// The error of writes whose writer never ran or stopped half-way.
fn dropped(path: &Path) -> io::Error {
    at(
        "write",
        path,
        io::Error::other(
            "the writes behind were dropped (the executor shut down, or the writer panicked)",
        ),
    )
}

/// Hands `bytes` to the writer of `inner`: once handed over (at once if
/// there is room), this completes; it waits for room (cancelable: a
/// canceled hand-over has handed nothing), and fails with the error of an
/// earlier write that failed (then `bytes` are not written). Runs masked
/// from the hand-over to the writer's start, so that no chunk is queued
/// without a writer.
pub(crate) fn write_behind(inner: Arc<Inner>, bytes: Vec<u8>) -> IO<(), io::Error> {
    IO::uncancelable_untraced(move |poll| hand_over(inner, bytes, poll))
}

fn hand_over(inner: Arc<Inner>, bytes: Vec<u8>, poll: Poll) -> IO<(), io::Error> {
    IO::defer_untraced(move || {
        if inner.file.read().is_none() {
            return IO::raise_error_untraced(at(
                "write",
                &inner.path,
                io::Error::other("the file is closed"),
            ));
        }
        match inner.behind.hand_over(bytes) {
            HandOver::Queued => IO::unit(),
            HandOver::StartWriter => start_writer(inner),
            HandOver::Failed(e) => IO::raise_error_untraced(e),
            HandOver::Full(bytes) => poll
                .apply_untraced(wait(inner.clone(), Want::Room(bytes.len())))
                .flat_map_untraced(move |()| hand_over(inner, bytes, poll)),
        }
    })
}

/// Waits until `want` holds for the writes of `inner` (or an error waits
/// to be reported). The wait is cancelable: a canceled waiter leaves the
/// writes running.
pub(crate) fn wait(inner: Arc<Inner>, want: Want) -> IO<(), io::Error> {
    IO::from_callback_untraced(move |callback| {
        let mut state = inner.behind.state.lock();
        if state.ready(want) {
            drop(state);
            callback.succeed(());
            return None;
        }
        let id = state.next_waiter;
        state.next_waiter += 1;
        state.waiters.push(Waiter { id, want, callback });
        drop(state);
        Some(IO::delay_untraced(move || {
            inner.behind.state.lock().waiters.retain(|w| w.id != id);
        }))
    })
}

/// `then()` once no write of `inner` is queued or at work: at once if
/// none is (the usual case, one atomic load), after waiting for them
/// otherwise (cancelable, see [`wait`]); instead, the error of a write
/// that failed, reported to this caller only.
pub(crate) fn after_writes<A, F>(inner: Arc<Inner>, then: F) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce() -> IO<A, io::Error> + Send + 'static,
{
    IO::defer_untraced(move || match inner.behind.settled() {
        Ok(true) => then(),
        Ok(false) => {
            wait(inner.clone(), Want::Done).flat_map_untraced(move |()| after_writes(inner, then))
        }
        Err(e) => IO::raise_error_untraced(e),
    })
}
