//! Futures and fibers, both ways (`core::task` only, so `no_std`).
//!
//! * **A future as a step of an `IO`**: [`IO::from_future`],
//!   [`IO::from_future_with`] (builds the future when the step runs),
//!   [`IO::from_try_future`] and [`IO::from_try_future_with`] (an
//!   `Err` output becomes the program's typed error).
//! * **A fiber as a future**: a [`FiberHandle`] is [`IntoFuture`], giving
//!   a [`JoinFuture`] whose output is the fiber's
//!   [`Outcome`](crate::Outcome); [`IO::into_future_on`] starts a
//!   program on an executor and gives that future in one call.
//!
//! # Polling a future on a fiber
//!
//! The fiber polls the future itself, inside a step of its run-loop, so the
//! future is polled on whichever thread runs the fiber at the time, and
//! only by it. Between polls the fiber suspends as in
//! [`IO::from_callback`]; the future's [`Waker`](core::task::Waker) ends
//! that suspension by completing the callback, which hands the fiber to its
//! executor's `schedule_fiber`. The waker and the fiber share a small
//! *wake cell* (one state word and the callback's slot); its protocol, and
//! why no wake is lost, are in `cell.rs`. In short:
//!
//! * A wake **during `poll`** (on the same thread or another) is remembered
//!   in the cell: the fiber cedes and polls again instead of suspending
//!   (as tokio runs a task woken while running again, behind the queue).
//! * **Spurious and repeated wakes** cost at most one extra poll each; only
//!   the first wake of a suspension resumes the fiber.
//! * A wake **after the future is gone** (ready, canceled or panicked)
//!   finds the cell closed and does nothing; the waker keeps only the small
//!   cell alive, not the fiber.
//! * Wakers may be called **from any thread** and from interrupt handlers:
//!   no wake ever waits for a lock (a waker that finds the slot busy leaves
//!   a flag that the slot's holder acts on).
//!
//! # Who drops the future, and where
//!
//! The future is owned by the fiber's program, never by a waker: it is
//! pinned once (in a block of io-core's per-thread pool, or boxed if it is
//! too large for one) and its owner is moved from step to step by the
//! fiber. It is
//! dropped by the fiber, on the fiber's thread, as soon as it is ready,
//! when the fiber is canceled while waiting (the pending step is dropped
//! while the fiber finalizes, before its finalizers run, as for any
//! cancellation), or while a panic in `poll` unwinds (with `std` that panic
//! ends the fiber as `Outcome::Panicked`, as a panic in `IO::delay` does;
//! without `std` a panic is the platform's panic handler's business, as
//! anywhere in a `no_std` program). A program that is built but never run
//! drops its future wherever the program is dropped. A fiber whose future
//! dropped every waker without being ready can never resume: like a fiber
//! whose callbacks were all dropped, it is freed as garbage wherever its
//! last reference goes (the last waker's thread, or the fiber's own), and
//! the future with it; an entry point's `try_block_on` then reports
//! `RunError::Deadlock` (`cell.rs`, "Wakers that are gone").
//!
//! Cancellation is observed at each suspension as for `from_callback`:
//! an unmasked fiber waiting for a wake is resumed at once to finalize. A
//! future is never interrupted *during* `poll`.
//!
//! # What it costs
//!
//! An immediately ready future costs one `defer`-like step and one `pure`
//! node, and the one place it is pinned in: a block of the per-thread pool
//! that `flat_map` nodes use (a thread-local pointer swap; without `std`
//! the global allocator), a `Box` for a future larger than a block, nothing
//! for a zero-sized one. [`IO::from_future`] pins when the program is
//! built, the `_with` forms when the step runs.
//! The first poll uses a waker over a flag on the fiber's native stack; the
//! shared wake cell is allocated (once per future) only when the future
//! clones its waker, which any future that returns `Pending` and is woken
//! later does. Each later suspension is one `from_callback` and one
//! `flat_map` node, as any wait.
//!
//! # Credits
//!
//! Cats Effect's `IO.fromFuture` (a lazy constructor of the future, so that
//! the `IO` stays a description); tokio's task waker and `JoinHandle` (a
//! join handle that is a future, detaches on drop, and replaces its stored
//! waker only when `will_wake` says it changed); the `futures` crate's
//! `AtomicWaker` (a waker that never waits for a registration, and leaves
//! the registrant to act on a wake it raced). No code is copied.

mod block;
mod cell;
mod join;
#[cfg(test)]
mod tests;

pub use block::{Await, AwaitValue};
pub use join::JoinFuture;

use alloc::boxed::Box;
use core::future::{Future, IntoFuture};
use core::marker::PhantomData;
use core::mem::size_of;
use core::pin::Pin;
use core::ptr::{self, NonNull};
use core::task::Poll;

use crate::engine::blocks;
use crate::engine::erased::{Value, Word, fits_block, fits_huge_block, fits_large_block};
use crate::engine::node::{BlockVTable, Node, Res, Resume, Slot, Stepped};
use crate::engine::tracing::{Internal, NO_SITE, Named, here};
use crate::executor::Executor;
use crate::fiber::handle::FiberHandle;
use crate::io::IO;
use crate::sync::Arc;
use block::BlockHead;
use cell::FiberCell;

crate::engine::tracing::trace_ops! {
    FromFuture = "from_future",
    FromTryFuture = "from_try_future",
    Block = "block",
}

/// A future pinned where it will stay until it is dropped: in a block of
/// io-core's per-thread pool (`engine/blocks.rs`: a thread-local pointer swap, where
/// a `Box` would be a `malloc` and a `free`) when it fits one, otherwise in
/// a `Box` (no allocation at all for a zero-sized future).
struct PinnedFuture<Fut> {
    /// Points at a live `Fut`, in a pool block if [`PinnedFuture::POOLED`],
    /// else from `Box::into_raw`. Never moved until dropped in place.
    ptr: NonNull<Fut>,
}

// SAFETY: a `PinnedFuture` owns its `Fut` as a `Box` would; moving it to
// another thread moves the future's ownership, which `Fut: Send` allows.
unsafe impl<Fut: Send> Send for PinnedFuture<Fut> {}

impl<Fut> PinnedFuture<Fut> {
    /// The pool class `Fut` goes in, if any (decided at compile time; never
    /// without `std`, where a block would only be larger than a `Box`): the
    /// smallest that fits it.
    const CLASS: Option<blocks::Class> = if !cfg!(feature = "std") || size_of::<Fut>() == 0 {
        None
    } else if fits_block::<Fut>() {
        Some(blocks::Class::Small)
    } else if fits_large_block::<Fut>() {
        Some(blocks::Class::Large)
    } else if fits_huge_block::<Fut>() {
        Some(blocks::Class::Huge)
    } else {
        None
    };

    fn new(future: Fut) -> Self {
        let ptr = match Self::CLASS {
            Some(class) => {
                let block = blocks::allocate_in(class).cast::<Fut>();
                // SAFETY: a fresh block of a class large and aligned enough
                // for `Fut` (`CLASS`), uninitialised: nothing is overwritten.
                unsafe { block.as_ptr().write(future) };
                block
            }
            None => NonNull::from(Box::leak(Box::new(future))),
        };
        PinnedFuture { ptr }
    }
}

impl<Fut> Drop for PinnedFuture<Fut> {
    fn drop(&mut self) {
        match Self::CLASS {
            // SAFETY: `ptr` is a block of `class` holding a live `Fut`,
            // dropped here in place exactly once; the block is then
            // released, and never used again.
            Some(class) => unsafe {
                ptr::drop_in_place(self.ptr.as_ptr());
                blocks::release_in(class, self.ptr.cast());
            },
            // SAFETY: `ptr` came from `Box::into_raw` (`Box::leak`) and is
            // released here exactly once.
            None => drop(unsafe { Box::from_raw(self.ptr.as_ptr()) }),
        }
    }
}

/// The pinned allocation of a future a fiber drives: the block's head
/// (its slot first: `repr(C)`, so the allocation's address is the slot's,
/// which the run-loop reaches through the block's node and frame:
/// `engine/node/block.rs`), then the future. Only `future` is pinned
/// (polled through a `Pin`, never moved); the head is plain data.
#[repr(C)]
struct DriverState<Fut> {
    head: BlockHead,
    future: Fut,
}

impl<Fut: Future> DriverState<Fut> {
    /// Polls the future once, with a poll waker (`block.rs`) over the
    /// head (where a result for the block's last request may be waiting).
    ///
    /// # Safety
    /// * `state` points at a live, pinned `DriverState<Fut>` that nothing
    ///   else reaches during this call.
    #[inline(always)]
    unsafe fn poll(state: *mut Self) -> Poll<Fut::Output> {
        // SAFETY: the two fields are borrowed as disjoint places of the
        // live state (function contract): the head (unpinned: plain data),
        // and the future only through the `Pin` made here (never moved; it
        // is dropped in place with the state).
        let (head, future) = unsafe {
            (
                &mut *ptr::addr_of_mut!((*state).head),
                Pin::new_unchecked(&mut *ptr::addr_of_mut!((*state).future)),
            )
        };
        if let Some(cell) = &head.cell {
            cell.begin_poll();
        }
        head.poll(|cx| future.poll(cx))
    }
}

/// After a `Pending` poll: what comes next, left in the slot (the program
/// an `.await` asked for; else a wait of the driver's: a cede if the future
/// was woken during the poll, a wait for its waker, or forever if no waker
/// survived the poll). One copy for every future type.
// Inlined on 64-bit hosts (speed); one copy on narrower targets (flash).
#[cfg_attr(target_pointer_width = "64", inline(always))]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn after_pending(head: &mut BlockHead) -> Stepped {
    head.slot().end_poll();
    if head.cell.is_none() {
        if head.lazy.untouched() {
            // The common case of a block: no waker was cloned and none woke
            // (so there is no cell to look at).
            if !head.slot().has_request() {
                head.slot().wait(Node::never(NO_SITE));
            }
            return Stepped::Run;
        }
        let (cell, woken) = head.lazy.finish();
        head.cell = cell;
        if woken && !head.slot().has_request() {
            head.slot().wait(Node::cede(NO_SITE));
            return Stepped::Run;
        }
    }
    // An await asked for a program: run it first (a wake during the poll
    // is kept in the cell, and seen at a later poll).
    if head.slot().has_request() {
        return Stepped::Run;
    }
    let wait = match &head.cell {
        Some(cell) if cell.notified() => Node::cede(NO_SITE),
        Some(cell) => register(cell.clone()),
        // Cancelable like `IO::never`; the block's frame waits below it,
        // so that cancellation drops the future on the fiber.
        None => Node::never(NO_SITE),
    };
    head.slot().wait(wait);
    Stepped::Run
}

/// The wait for `cell`'s next wake: a registration of the fiber's callback.
#[inline(always)]
fn register(cell: Arc<FiberCell>) -> Node {
    IO::<(), core::convert::Infallible>::from_callback_untraced(move |cb| {
        cell.register(cb.into_raw());
        None
    })
    .into_node()
}

/// Before a poll: whether the last registration found the wake cell's
/// slot held with no wake to answer (cell.rs, "A waker that holds the
/// slot"); if so, instead of a poll, a cede and a new registration are
/// left in the slot. One copy for every future type.
#[cfg(feature = "std")]
#[inline]
fn registers_again(head: &mut BlockHead) -> bool {
    match &head.cell {
        Some(cell) if cell.take_busy() => {
            let wait = register_after_cede(cell.clone());
            head.slot().wait(wait);
            true
        }
        _ => false,
    }
}

/// A cede, then [`register`] (the rare path of [`registers_again`]).
#[cfg(feature = "std")]
#[cold]
#[inline(never)]
fn register_after_cede(cell: Arc<FiberCell>) -> Node {
    IO::<(), core::convert::Infallible>::from_node(Node::cede(NO_SITE))
        .flat_map_untraced(move |()| IO::<(), core::convert::Infallible>::from_node(register(cell)))
        .into_node()
}

/// How a future's output `T` becomes the result of the driven program, an
/// `IO<A, E>` (the types tie the program to its future at construction).
trait Finish<T, A, E> {
    fn finish(out: T) -> Res;
}

/// `Output = A`: the value.
struct Plain;
impl<A: Send + 'static, E> Finish<A, A, E> for Plain {
    #[inline(always)]
    fn finish(out: A) -> Res {
        Ok(Value::new(out))
    }
}

/// `Output = Result<A, E>`: the value or the typed error.
struct Fallible;
impl<A: Send + 'static, E: Send + 'static> Finish<Result<A, E>, A, E> for Fallible {
    #[inline(always)]
    fn finish(out: Result<A, E>) -> Res {
        match out {
            Ok(a) => Ok(Value::new(a)),
            Err(e) => Err(Value::new(e)),
        }
    }
}

/// The vtable of the allocation of a future of type `Fut` driven as an
/// `IO<A, E>` (its output made a result by `K`), recorded as the
/// operation `M` (`engine/node/block.rs`).
struct VTableOf<Fut, K, M, A, E>(PhantomData<Types<Fut, K, M, A, E>>);

/// The types a [`VTableOf`] is made for.
type Types<Fut, K, M, A, E> = fn() -> (Fut, K, M, A, E);

impl<Fut, K, M, A, E> VTableOf<Fut, K, M, A, E>
where
    Fut: Future + Send + 'static,
    K: Finish<Fut::Output, A, E> + 'static,
    M: crate::engine::tracing::OpMeta,
    A: 'static,
    E: 'static,
{
    const VTABLE: &'static BlockVTable = &BlockVTable {
        drop: Some(drop_state::<Fut>),
        step: step::<Fut, K, A, E>,
        #[cfg(feature = "tracing")]
        op: M::OP,
    };
}

/// Frees the allocation of a future of type `Fut` (the block is over,
/// canceled or dropped unrun): later wakes do nothing, and the cell's
/// callback (a reference to the fiber) goes now; the future is dropped
/// on this (the fiber's, or the unrun program's owner's) thread.
///
/// # Safety
/// * `word` is the address of a live `DriverState<Fut>` made by
///   [`driven`], owned by the caller, not used after this.
unsafe fn drop_state<Fut>(word: Word) {
    // SAFETY: function contract: `PinnedFuture` owns the state it points
    // at, which it drops in place and frees.
    let state = unsafe {
        PinnedFuture {
            ptr: NonNull::new_unchecked(word.assume_init().cast::<DriverState<Fut>>()),
        }
    };
    // SAFETY: as above, the state is alive; only the head is read.
    if let Some(cell) = unsafe { &(*state.ptr.as_ptr()).head.cell } {
        cell.close();
    }
    drop(state);
}

/// Polls once and says what comes next (`engine/node/block.rs`): the
/// result, a program an `.await` asked for, or a wait (a cede, a wait for a
/// waker, or forever), each left in the slot.
///
/// # Safety
/// * `word` is the address of a live `DriverState<Fut>` made by [`driven`]
///   with `K`, `A` and `E`, and no other step of it runs.
unsafe fn step<Fut, K, A, E>(word: Word) -> Stepped
where
    Fut: Future + Send + 'static,
    K: Finish<Fut::Output, A, E> + 'static,
    A: 'static,
    E: 'static,
{
    // SAFETY: function contract.
    let state = unsafe { word.assume_init() }.cast::<DriverState<Fut>>();
    // SAFETY: function contract: nothing else reaches the state (this
    // borrow ends before the poll borrows it again).
    #[cfg(feature = "std")]
    if registers_again(unsafe { &mut (*state).head }) {
        return Stepped::Run;
    }
    // SAFETY: function contract; the state is pinned where it was made.
    let polled = unsafe { DriverState::poll(state) };
    // SAFETY: function contract; the poll is over.
    let head = unsafe { &mut (*state).head };
    match polled {
        Poll::Ready(out) => {
            // A cell a clone made in this poll is closed when the state is
            // dropped, right after (`LazyWake`'s `Drop`).
            head.slot().end_poll();
            head.slot().done(K::finish(out));
            Stepped::Done
        }
        Poll::Pending => after_pending(head),
    }
}

/// The program that drives `future` on its fiber, recorded as the
/// operation `M` at `site` when it starts.
#[inline(always)]
fn driven<Fut, K, M, A, E>(future: Fut, site: Option<crate::engine::tracing::Site>) -> IO<A, E>
where
    Fut: Future + Send + 'static,
    K: Finish<Fut::Output, A, E> + 'static,
    M: crate::engine::tracing::OpMeta,
    A: 'static,
    E: 'static,
{
    let state = core::mem::ManuallyDrop::new(PinnedFuture::new(DriverState {
        head: BlockHead::new(site),
        future,
    }));
    // SAFETY: the state is `repr(C)` with the head first, and the head with
    // the slot first: the allocation's address is its slot's. The
    // allocation is live and pinned, owned by the handle from now on (the
    // `ManuallyDrop` gives up this one), and the vtable was made for
    // `DriverState<Fut>` with these `K`, `A` and `E`.
    let resume = unsafe {
        Resume::new(
            state.ptr.cast::<Slot>(),
            VTableOf::<Fut, K, M, A, E>::VTABLE,
        )
    };
    IO::from_node(Node::block(resume))
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// A program that awaits `future` on its fiber and produces its output.
    ///
    /// The future is polled by the fiber, on the fiber's thread; its waker
    /// resumes the fiber through the executor, from any thread. Cancellation
    /// drops the future (on the fiber) and runs the fiber's finalizers; a
    /// panic in `poll` ends the fiber with `Outcome::Panicked` (with `std`).
    /// Works on every executor, also without `std`. See the
    /// [module documentation](crate::future) of `future` for the protocol.
    ///
    /// The future exists already when the program is built (it is pinned
    /// then), so this program runs it once; to build the future each time
    /// the step runs, use [`IO::from_future_with`]. For a future whose
    /// output is a `Result<A, E>`, see [`IO::from_try_future`].
    ///
    /// ```
    /// use spindle_effect::{IO, IORuntime, Outcome};
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let io: IO<u32, ()> = IO::from_future(async { 6 * 7 });
    /// assert_eq!(SingleThreaded::new()?.block_on(io)?, Outcome::Succeeded(42));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn from_future<Fut>(future: Fut) -> Self
    where
        Fut: Future<Output = A> + Send + 'static,
    {
        driven::<Fut, Plain, Named<FromFuture>, A, E>(future, here())
    }

    /// A program that builds a future with `make` when it runs, then awaits
    /// it as [`IO::from_future`] does: the program stays a description
    /// (Cats Effect's `IO.fromFuture(IO(...))`), and nothing is built or
    /// allocated until the step runs.
    ///
    /// ```
    /// use spindle_effect::{IO, IORuntime, Outcome};
    /// use spindle_effect::single::SingleThreaded;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let built = Arc::new(AtomicUsize::new(0));
    /// let b = built.clone();
    /// let io: IO<usize, ()> = IO::from_future_with(move || {
    ///     let n = b.fetch_add(1, Ordering::SeqCst) + 1;
    ///     async move { n }
    /// });
    /// assert_eq!(built.load(Ordering::SeqCst), 0, "building the IO builds no future");
    /// assert_eq!(SingleThreaded::new()?.block_on(io)?, Outcome::Succeeded(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn from_future_with<F, Fut>(make: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = A> + Send + 'static,
    {
        IO::defer_at::<Named<FromFuture>, _>(here(), move || {
            driven::<Fut, Plain, Internal, A, E>(make(), NO_SITE)
        })
    }

    /// Like [`IO::from_future`], for a future whose output is a `Result`:
    /// `Ok(a)` produces `a`, `Err(e)` fails the program with `e` (a typed
    /// error, as [`IO::raise_error`]; `Outcome::Errored(e)` if unhandled).
    ///
    /// ```
    /// use spindle_effect::{IO, IORuntime, Outcome};
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let io: IO<u32, String> = IO::from_try_future(async { Err("refused".to_string()) });
    /// assert_eq!(SingleThreaded::new()?.block_on(io)?, Outcome::Errored("refused".into()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn from_try_future<Fut>(future: Fut) -> Self
    where
        Fut: Future<Output = Result<A, E>> + Send + 'static,
    {
        driven::<Fut, Fallible, Named<FromTryFuture>, A, E>(future, here())
    }

    /// Like [`IO::from_future_with`], for a future whose output is a
    /// `Result` (see [`IO::from_try_future`]).
    #[track_caller]
    pub fn from_try_future_with<F, Fut>(make: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<A, E>> + Send + 'static,
    {
        IO::defer_at::<Named<FromTryFuture>, _>(here(), move || {
            driven::<Fut, Fallible, Internal, A, E>(make(), NO_SITE)
        })
    }

    /// An IO block: a program written as an `async` block (or the future
    /// of an `async fn`) whose `.await`s on `IO`s run those programs on
    /// this fiber, one step of its run-loop each (no new fiber, no spawned
    /// future). An awaited `IO<T, E2>` gives a `Result<T, E2>`, so `?`
    /// propagates typed errors (converted with `From`, as anywhere); the
    /// block's `Ok(a)` is the program's value, its `Err(e)` the program's
    /// typed error. Any other `Future` may be awaited too, polled on the
    /// fiber as [`IO::from_future`] polls one.
    ///
    /// Everything else is the run-loop's: cancellation is observed where
    /// an awaited program would observe it (when the block is canceled,
    /// its state is dropped, after the finalizers of the program it was
    /// awaiting); masks and `poll` work inside blocks; a panic ends the
    /// fiber as [`Outcome::Panicked`](crate::Outcome::Panicked). Each
    /// `.await`'s line is recorded in the fiber's trace.
    ///
    /// ```
    /// use spindle_effect::{IO, IORuntime, Outcome};
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let program: IO<u64, String> = IO::block(async {
    ///     let mut total = 0;
    ///     for i in 1..=3u64 {
    ///         total += IO::<u64, String>::delay(move || i * 10).await?;
    ///     }
    ///     if total > 100 {
    ///         return Err("too much".to_string());
    ///     }
    ///     Ok(total)
    /// });
    /// assert_eq!(SingleThreaded::new()?.block_on(program)?, Outcome::Succeeded(60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn block<Fut>(future: Fut) -> Self
    where
        Fut: Future<Output = Result<A, E>> + Send + 'static,
    {
        driven::<Fut, Fallible, Named<Block>, A, E>(future, here())
    }

    /// [`IO::from_try_future_with`] for io-core's own nodes and
    /// [`untraced::Untraced`](crate::untraced::Untraced) (no trace event).
    pub(crate) fn from_try_future_with_untraced<F, Fut>(make: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<A, E>> + Send + 'static,
    {
        IO::defer_untraced(move || driven::<Fut, Fallible, Internal, A, E>(make(), NO_SITE))
    }

    /// Starts this program as a new fiber on `executor` and returns a future
    /// of its outcome: `FiberHandle::spawn(io, executor).into_future()` in
    /// one call, for async code that wants an `IO`'s result.
    ///
    /// The fiber runs on `executor` whether or not the future is polled, and
    /// dropping the future detaches it (see [`JoinFuture`]). An executor
    /// that is shut down drops the fiber unrun and the future never
    /// completes; to find out first, spawn through the executor's own
    /// `handle().spawn(io)`, which says
    /// [`RunError::ShutDown`](crate::error::RunError::ShutDown), and await the
    /// handle it returns.
    ///
    /// ```
    /// use spindle_effect::{IO, IORuntime, Outcome};
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let rt = SingleThreaded::new()?;
    /// let handle = rt.handle().clone();
    /// // A fiber awaits another fiber's program as a future: IO -> Future -> IO.
    /// let io: IO<u32, ()> = IO::defer(move || {
    ///     IO::from_future(IO::<u32, ()>::pure(41).into_future_on(&handle))
    ///         .map(|outcome| outcome.succeeded().map_or(0, |n| n + 1))
    /// });
    /// assert_eq!(rt.block_on(io)?, Outcome::Succeeded(42));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_future_on<X: Executor>(self, executor: &X) -> JoinFuture<A, E> {
        FiberHandle::spawn(self, executor).into_future()
    }
}
