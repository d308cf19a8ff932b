//! [`Dispatcher`]: programs run from code that is not a fiber (see its documentation).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::convert::Infallible;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::engine::tracing::{Internal, NO_SITE};
#[cfg(feature = "std")]
use crate::fiber::ExecutorProbe;
use crate::fiber::handle::FiberHandle;
use crate::fiber::join::Completed;
use crate::fiber::join::JoinRef;
use crate::fiber::{RawFiberRef, Spawner};
use crate::future::JoinFuture;
use crate::io::IO;
use crate::outcome::{Failure, Outcome};
use crate::stdlib::data::deferred::Deferred;
use crate::stdlib::resource::{ExitCase, Resource};
use crate::stdlib::supervisor::Supervisor;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering};
use crate::wait::{Presence, wait_for};

/// Why a [`Dispatcher`] did not run a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatcherError {
    /// The dispatcher's scope has ended (Cats Effect's "dispatcher already
    /// shutdown"): the program was dropped, not run.
    Closed,
    /// [`Dispatcher::run_blocking`] was called where parking the thread
    /// could stall the executor that has to run the program (one of its
    /// threads, inside one of its fibers): nothing was run.
    Nested,
    /// The dispatcher's executor has shut down: the program was not run
    /// (or, for a `run_blocking` already waiting, was dropped by the
    /// shutdown).
    ShutDown,
}

impl fmt::Display for DispatcherError {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DispatcherError::Closed => {
                "the dispatcher's scope has ended (dispatcher already shut down)"
            }
            DispatcherError::Nested => {
                "Dispatcher::run_blocking was called on a thread of the dispatcher's executor \
                 (inside one of its fibers): waiting there could deadlock it"
            }
            DispatcherError::ShutDown => "the dispatcher's executor has shut down",
        })
    }
}

impl core::error::Error for DispatcherError {}

/// A dispatcher's error as an I/O error (kind
/// [`ErrorKind::Other`](std::io::ErrorKind::Other), the
/// [`DispatcherError`] as its source).
#[cfg(feature = "std")]
impl From<DispatcherError> for std::io::Error {
    fn from(e: DispatcherError) -> Self {
        std::io::Error::other(e)
    }
}

/// What a dispatcher's reporter receives: the failure of a program run
/// with [`Dispatcher::run_and_forget`] (its error, or its panic; a
/// cancellation is not reported), the error boxed for printing.
pub type ForgottenFailure = Failure<Box<dyn fmt::Debug + Send>>;

/// The function a dispatcher reports forgotten failures to.
type Reporter = Box<dyn Fn(ForgottenFailure) + Send + Sync>;

/// The default reporter: with `std`, one line on standard error (as Cats
/// Effect reports to its execution context); without, nothing but the
/// count ([`Dispatcher::failures_reported`]).
#[inline]
fn default_reporter() -> Reporter {
    Box::new(|failure: ForgottenFailure| {
        #[cfg(feature = "std")]
        std::eprintln!("spindle: a program run by Dispatcher::run_and_forget failed: {failure:?}");
        #[cfg(not(feature = "std"))]
        drop(failure);
    })
}

// ----- Replies -------------------------------------------------------------------

/// Where a submission stands, for its future and its cancel handle.
enum ReplyState {
    /// Queued, not started; the future's waker.
    Pending(Option<Waker>),
    /// Started as `fiber` (whose program is the submission's `IO<A, E>`);
    /// `taken`: the future joins it now.
    Started { fiber: JoinRef, taken: bool },
    /// Will never run (closed, canceled or dropped before it started): its
    /// outcome is `Outcome::Canceled`.
    NotRun,
}

/// The reply of one submission (untyped: the types are the future's).
struct Reply {
    state: Mutex<ReplyState>,
}

impl Reply {
    #[inline]
    fn new() -> Arc<Reply> {
        Arc::new(Reply {
            state: Mutex::new(ReplyState::Pending(None)),
        })
    }

    #[inline]
    fn is_pending(&self) -> bool {
        matches!(*self.state.lock(), ReplyState::Pending(_))
    }

    /// The submission's fiber has started: hands it to the future (or,
    /// if the submission was canceled meanwhile, cancels it).
    #[inline]
    fn started(&self, fiber: JoinRef) {
        let waker = {
            let mut state = self.state.lock();
            match &mut *state {
                ReplyState::Pending(waker) => {
                    let waker = waker.take();
                    *state = ReplyState::Started {
                        fiber,
                        taken: false,
                    };
                    waker
                }
                // Canceled between the worker's look and the start: the
                // future has its outcome already; the fiber goes too.
                _ => {
                    drop(state);
                    fiber.request_cancel();
                    None
                }
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Cancels the submission: before it started, it never will; once
    /// started, its fiber's cancellation is requested.
    #[inline]
    fn cancel(&self) {
        let mut state = self.state.lock();
        match &mut *state {
            ReplyState::Pending(waker) => {
                let waker = waker.take();
                *state = ReplyState::NotRun;
                drop(state);
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            ReplyState::Started { fiber, .. } => {
                let fiber = fiber.clone();
                drop(state);
                fiber.request_cancel();
            }
            ReplyState::NotRun => {}
        }
    }
}

/// Resolves a submission's reply as not run if it is dropped before the
/// fiber was handed over (the program dropped unrun, wherever that is).
struct ReplyGuard {
    reply: Option<Arc<Reply>>,
}

impl ReplyGuard {
    #[inline]
    fn started(mut self, fiber: JoinRef) {
        if let Some(reply) = self.reply.take() {
            reply.started(fiber);
        }
    }
}

impl Drop for ReplyGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            let waker = {
                let mut state = reply.state.lock();
                match &mut *state {
                    ReplyState::Pending(waker) => {
                        let waker = waker.take();
                        *state = ReplyState::NotRun;
                        waker
                    }
                    _ => None,
                }
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

// ----- Jobs ----------------------------------------------------------------------

/// A queued submission, its types erased.
trait Job: Send {
    /// The worker's program for this submission: start it as a child of
    /// `supervisor` (a masked step) and, if `wait`, wait until it has ended.
    fn start(self: Box<Self>, supervisor: &Supervisor, wait: bool) -> IO<(), Infallible>;
}

/// A submission whose outcome someone waits for (`to_future`,
/// `run_blocking`).
struct Replied<A, E> {
    io: IO<A, E>,
    reply: ReplyGuard,
}

impl<A: Send + 'static, E: Send + 'static> Job for Replied<A, E> {
    fn start(self: Box<Self>, supervisor: &Supervisor, wait: bool) -> IO<(), Infallible> {
        let Replied { io, reply } = *self;
        // Canceled before its turn: never started (the guard has nothing
        // more to resolve; dropping `io` here runs no program).
        if !reply.reply.as_ref().is_some_and(|r| r.is_pending()) {
            return IO::unit();
        }
        let supervisor = supervisor.clone();
        IO::uncancelable_untraced(move |_| {
            supervisor.supervise::<A, E, Infallible>(io).map_untraced(
                move |handle: FiberHandle<A, E>| {
                    let fiber = handle.into_raw();
                    let ended = completion(fiber.clone(), wait);
                    reply.started(fiber);
                    ended
                },
            )
        })
        .flat_map_untraced(|ended| ended)
    }
}

/// A submission of `run_and_forget`: its failures go to the reporter
/// (held apart from the dispatcher's state, which holds the queued
/// submissions: a queued one never keeps the state alive).
struct Forgotten<A, E> {
    io: IO<A, E>,
    reports: Arc<Reports>,
}

impl<A, E> Job for Forgotten<A, E>
where
    A: Send + 'static,
    E: fmt::Debug + Send + 'static,
{
    fn start(self: Box<Self>, supervisor: &Supervisor, wait: bool) -> IO<(), Infallible> {
        let Forgotten { io, reports } = *self;
        let on_panic = reports.clone();
        let program: IO<(), E> = io
            .attempt()
            .map_untraced(move |result| {
                if let Err(error) = result {
                    reports.report(Failure::Errored(Box::new(error)));
                }
            })
            .guarantee_case_ref(move |outcome| {
                if let Outcome::Panicked(message) = outcome {
                    on_panic.report(Failure::Panicked(message.clone()));
                }
                IO::unit()
            });
        let supervisor = supervisor.clone();
        IO::uncancelable_untraced(move |_| {
            supervisor
                .supervise::<(), E, Infallible>(program)
                .map_untraced(move |handle| completion(handle.into_raw(), wait))
        })
        .flat_map_untraced(|ended| ended)
    }
}

/// Waits until `fiber` has ended if `wait` (without reading its outcome);
/// else nothing.
#[inline]
fn completion(fiber: JoinRef, wait: bool) -> IO<(), Infallible> {
    if !wait {
        return IO::unit();
    }
    wait_for::<Completed, Presence, Infallible, _, Internal>(NO_SITE, fiber)
}

// ----- The dispatcher --------------------------------------------------------------

/// The state behind the dispatcher's lock.
struct State {
    closed: bool,
    /// Accepted submissions, not yet taken by the worker, in order.
    pending: VecDeque<Box<dyn Job>>,
    /// Completed (and replaced) by a submission, if `wanted`.
    signal: Deferred<()>,
    /// The worker waits on `signal`.
    wanted: bool,
}

/// What the dispatcher may ask of its executor, from any thread (with
/// `std`; a firmware image's executors are not asked, and their spawn
/// vtables stay as they were).
#[cfg(feature = "std")]
type Probe = Box<dyn ExecutorProbe>;
#[cfg(not(feature = "std"))]
type Probe = ();

/// The running fiber's executor, as a [`Probe`].
#[inline]
fn probe(spawner: Spawner) -> Probe {
    #[cfg(feature = "std")]
    return spawner.probe();
    #[cfg(not(feature = "std"))]
    let _ = spawner;
}

/// Whether the executor has shut down (never known without `std`).
#[inline]
fn shut_down(probe: &Probe) -> bool {
    #[cfg(feature = "std")]
    return probe.is_shut_down();
    #[cfg(not(feature = "std"))]
    {
        let () = probe;
        false
    }
}

/// Where the failures of `run_and_forget`'s programs go, and their count.
struct Reports {
    reporter: Reporter,
    reported: AtomicUsize,
}

impl Reports {
    #[inline]
    fn report(&self, failure: ForgottenFailure) {
        self.reported.fetch_add(1, Ordering::Relaxed);
        (self.reporter)(failure);
    }
}

/// What the handles and the worker share: the state, and what submitters
/// ask of the executor. Held by the [`Handle`] and by the worker fiber
/// (never by a submission: see the type doc of [`Dispatcher`], "Lifetime").
struct Shared {
    state: Mutex<State>,
    sequential: bool,
    /// What a dispatcher abandoned by its handles does with its programs
    /// (as its release in a scope that succeeded).
    await_on_release: bool,
    executor: Probe,
    reports: Arc<Reports>,
}

impl Shared {
    /// Marks the dispatcher closed, drops the queued submissions unless
    /// `awaiting` (outside the lock: dropping a program runs user code,
    /// and resolves its reply as not run), and wakes the worker if it
    /// waits, so that it starts what is left and ends. `false` if it was
    /// closed already (nothing done).
    #[inline]
    fn close(&self, awaiting: bool) -> bool {
        let (dropped, signal) = {
            let mut state = self.state.lock();
            if state.closed {
                return false;
            }
            state.closed = true;
            let dropped = if awaiting {
                VecDeque::new()
            } else {
                core::mem::take(&mut state.pending)
            };
            // Taken out of the state: the worker waiting on it is no
            // longer reachable from the state.
            let signal = if core::mem::take(&mut state.wanted) {
                Some(core::mem::take(&mut state.signal))
            } else {
                None
            };
            (dropped, signal)
        };
        drop(dropped);
        if let Some(signal) = signal {
            let _ = signal.complete_now(());
        }
        true
    }

    /// Queues `job`, or hands it back (to be dropped outside the lock).
    #[inline]
    fn submit(&self, job: Box<dyn Job>) -> Result<(), (DispatcherError, Box<dyn Job>)> {
        let signal = {
            let mut state = self.state.lock();
            if state.closed {
                return Err((DispatcherError::Closed, job));
            }
            if shut_down(&self.executor) {
                return Err((DispatcherError::ShutDown, job));
            }
            state.pending.push_back(job);
            if core::mem::take(&mut state.wanted) {
                Some(core::mem::take(&mut state.signal))
            } else {
                None
            }
        };
        if let Some(signal) = signal {
            let _ = signal.complete_now(());
        }
        Ok(())
    }
}

/// Runs programs as fibers from code that is not a fiber (Cats Effect's
/// `Dispatcher`): the protocol, what the release does, and where errors
/// go are below.
///
/// [`Dispatcher`]: run programs from code that is not a fiber (a C
/// library's callback, a synchronous framework, a thread of its own), as
/// Cats Effect's `std.Dispatcher` does.
///
/// A dispatcher is a [`Resource`]: inside its scope, any thread holding a
/// clone (it is `Clone + Send + Sync`) submits programs, which run as
/// fibers on the executor of the fiber that acquired the dispatcher. Three
/// forms of submission, each refused with [`DispatcherError::Closed`] once
/// the scope has ended:
///
/// * [`run_and_forget`](Dispatcher::run_and_forget): the program runs; its
///   value is dropped. Its **errors are reported, not lost**: an error or a
///   panic of the program goes to the dispatcher's *reporter* (with `std`,
///   by default, one line on standard error; any function with
///   [`Dispatcher::parallel_reporting`] and
///   [`Dispatcher::sequential_reporting`]), and is counted
///   ([`Dispatcher::failures_reported`]). A cancellation is not a failure.
/// * [`to_future`](Dispatcher::to_future): a [`DispatchFuture`] of the
///   program's [`Outcome`], for async code on any async runtime (or
///   `futures::executor::block_on`). **Dropping the future before it is
///   ready cancels the program** (before it starts, it never starts; once
///   it runs, its fiber is canceled and its finalizers run on the
///   executor). [`to_future_cancelable`](Dispatcher::to_future_cancelable)
///   adds a [`DispatchCancel`] that cancels it from elsewhere while the
///   future still waits (the future then gives `Outcome::Canceled`, once
///   the fiber's finalizers have run).
/// * [`run_blocking`](Dispatcher::run_blocking) (with `std`): parks the
///   calling thread until the program has ended and gives its outcome.
///   Called where parking could stall the executor that has to run the
///   program (one of its own threads, inside one of its fibers: what makes
///   `block_on` answer `RunError::Nested`, asked of the executor through
///   `Executor::refuses_blocking_here`), it refuses with
///   [`DispatcherError::Nested`] instead of deadlocking, running nothing.
///
/// # Protocol
///
/// The dispatcher's state is a short lock of the sync shim (never held
/// across a suspension, never while user code runs): `closed`, the
/// submissions not yet started (in submission order), and a *signal* (a
/// [`Deferred`]) its worker waits on.
///
/// * **Acquisition** starts one *worker* fiber on the acquiring fiber's
///   executor, and opens a [`Supervisor`] that owns every program the
///   dispatcher starts.
/// * **A submission** (any thread) checks `closed` and queues the program
///   under the lock, then wakes the worker (completes the signal, outside
///   the lock) if the worker had asked for it. A submission either finds
///   the dispatcher closed (an error to the caller, the program dropped)
///   or is queued before the release can take the queue: none is lost.
/// * **The worker** takes the queue under the lock, or, finding it empty,
///   marks the signal wanted and waits on it (so no wake-up is lost: the
///   submitter either saw the mark under the lock, or the worker saw the
///   submission). A **parallel** dispatcher starts every program it took as
///   a fiber of its own (they run concurrently); a **sequential** one
///   starts one, waits until it has ended, then starts the next: programs
///   run one after another, in submission order (of the submissions
///   accepted; across threads, the order the lock saw them in). Starting a
///   program and handing its fiber to the submitter is one masked step.
/// * **Each submission's reply** is resolved exactly once: when its fiber
///   starts (the future then joins the fiber), or, if it never starts (the
///   dispatcher closed first, the submitter canceled or dropped its future
///   first), as `Outcome::Canceled`: the pending submission's guard
///   resolves it when the program is dropped unrun.
///
/// # Release
///
/// When the scope ends, the release (masked, as every release) marks the
/// dispatcher closed (every later submission gets
/// [`DispatcherError::Closed`]; never a panic, never a hang), then:
///
/// * **cancel mode** (`await_on_release = false`, or a scope that failed,
///   panicked or was canceled): the queued submissions are dropped unrun
///   (their futures complete as `Outcome::Canceled`), the worker is
///   canceled, and every fiber the dispatcher started and that is still
///   running is canceled;
/// * **await mode** (`await_on_release = true` and a scope that
///   succeeded): the worker starts what was queued (a sequential one in
///   order, one after another), and every fiber is awaited.
///
/// Either way the release returns once every fiber the dispatcher started
/// has ended, so their finalizers have run, exactly once, before the code
/// after the scope runs; the futures of canceled fibers complete with
/// `Outcome::Canceled`.
///
/// A dispatcher used after its executor has shut down (known with `std`;
/// without, a submission is accepted and never runs): a `run_blocking`
/// waiting then returns [`DispatcherError::ShutDown`] (it looks every
/// 100 ms while it parks), a submission is refused with it, and a future
/// whose fiber the shutdown dropped never completes (as
/// [`IO::into_future_on`]'s).
///
/// # Lifetime
///
/// The clones of a `Dispatcher` (the scope's release holds one too) share
/// one *handle*; the worker fiber holds the dispatcher's state, not the
/// handle, and no queued submission holds either (a `run_and_forget`
/// program holds only the reporter). So a dispatcher whose scope is never
/// released (an [`allocated`](Resource::allocated) one whose release is
/// dropped unrun, for instance because its executor shut down first)
/// closes itself when its last clone is dropped, as its release would
/// have, by its `await_on_release` flag:
///
/// * **cancel mode** (`false`): the queued submissions are dropped unrun
///   (their futures complete as `Outcome::Canceled`) and the cancellation
///   of every fiber it started and that still runs is requested (their
///   finalizers run on the executor, once);
/// * **await mode** (`true`): the worker starts what was queued (a
///   sequential one in order, one after another), and the fibers run to
///   their end.
///
/// Nobody waits for them (there is no release to return); the worker is
/// woken and ends once the queue is empty, and with it goes the state (the
/// reporter, the executor handle). On an executor that has shut down
/// (known with `std`), nothing can run: the queued submissions are dropped
/// and the fibers' cancellation requested whatever the flag, and the
/// worker, woken, is freed by the executor, with the state: nothing of the
/// dispatcher is left. A program that holds a clone of its own dispatcher
/// keeps it open (and the worker alive) until that clone goes.
///
/// Every function of this module that is not generic is `#[inline]`, so
/// that it is compiled only into programs that use a dispatcher: an image
/// that never does (a firmware's) is left exactly as it was, where the
/// mere presence of this code, under LTO, changed the inlining of the rest
/// (424 B more flash in the thumbv7m image). The same reason keeps the
/// executor probe behind `std`.
///
/// Design credits: Cats Effect 3.6's `Dispatcher` (parallel and sequential
/// dispatchers, the `await` flag, run-and-forget, to-future, cancelable
/// futures and the shut-down error after release); no code is copied.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Dispatcher, wstp::Runtime};
///
/// let io: IO<u32, ()> = Dispatcher::parallel(false).use_with(|dispatcher| {
///     // A thread no executor knows runs a program and waits for it.
///     IO::blocking(move || {
///         std::thread::spawn(move || dispatcher.run_blocking(IO::<u32, ()>::pure(41).map(|n| n + 1)))
///             .join()
///             .expect("the thread ends")
///     })
///     .map(|ran| ran.ok().and_then(|outcome| outcome.succeeded()).unwrap_or(0))
/// });
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Dispatcher {
    handle: Arc<Handle>,
}

/// What every clone of a [`Dispatcher`] shares (the scope's release holds
/// one clone too): the state, and the supervisor of the programs started.
/// The worker does not hold it, so it goes when the last clone goes, and
/// its `Drop` closes the dispatcher (its type doc, "Lifetime").
struct Handle {
    shared: Arc<Shared>,
    supervisor: Supervisor,
}

impl Drop for Handle {
    #[inline]
    fn drop(&mut self) {
        let shared = &*self.shared;
        // A shut-down executor runs nothing more: what is queued or
        // running can only be dropped, as in cancel mode.
        let awaiting = shared.await_on_release && !shut_down(&shared.executor);
        if shared.close(awaiting) && !awaiting {
            // The release would cancel them; nobody is left to wait.
            self.supervisor.cancel_now();
        }
    }
}

impl fmt::Debug for Dispatcher {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &*self.handle.shared;
        let state = shared.state.lock();
        f.debug_struct("Dispatcher")
            .field("sequential", &shared.sequential)
            .field("closed", &state.closed)
            .field("queued", &state.pending.len())
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher that runs each program as a fiber of its own, at once
    /// (concurrently with the others). When its scope ends, the fibers
    /// still running are canceled, or, with `await_on_release` and a scope
    /// that succeeded, awaited; the release waits until they have ended.
    /// `run_and_forget`'s failures go to the default reporter.
    #[track_caller]
    pub fn parallel<E: Send + 'static>(await_on_release: bool) -> Resource<Dispatcher, E> {
        Dispatcher::scoped(false, await_on_release, default_reporter())
    }

    /// A dispatcher that runs its programs one after another, in the order
    /// they were submitted, each on a fiber of its own (so that one can be
    /// canceled without the others). Release as for
    /// [`parallel`](Dispatcher::parallel) (awaiting runs what is queued,
    /// in order; canceling drops it unrun).
    #[track_caller]
    pub fn sequential<E: Send + 'static>(await_on_release: bool) -> Resource<Dispatcher, E> {
        Dispatcher::scoped(true, await_on_release, default_reporter())
    }

    /// [`parallel`](Dispatcher::parallel), reporting the failures of
    /// `run_and_forget`'s programs to `reporter` (called on the failed
    /// program's fiber, after its error or panic).
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Deferred, Dispatcher, wstp::Runtime};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = seen.clone();
    /// let reporter = move |failure: spindle_effect::ForgottenFailure| {
    ///     s.lock().unwrap().push(format!("{:?}", failure.error()));
    /// };
    /// let io: IO<usize, ()> = Dispatcher::parallel_reporting(true, reporter).use_with(|d| {
    ///     IO::blocking(move || {
    ///         let other = d.clone();
    ///         std::thread::spawn(move || other.run_and_forget(IO::<(), String>::raise_error("lost?".into())))
    ///             .join()
    ///             .expect("the thread ends")
    ///             .expect("the dispatcher is open");
    ///         d
    ///     })
    /// })
    /// .map(|d| d.failures_reported());
    /// // The scope awaited the program, whose error was reported.
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(1));
    /// assert_eq!(*seen.lock().unwrap(), vec![r#"Some("lost?")"#.to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn parallel_reporting<E, R>(await_on_release: bool, reporter: R) -> Resource<Dispatcher, E>
    where
        E: Send + 'static,
        R: Fn(ForgottenFailure) + Send + Sync + 'static,
    {
        Dispatcher::scoped(false, await_on_release, Box::new(reporter))
    }

    /// [`sequential`](Dispatcher::sequential), reporting the failures of
    /// `run_and_forget`'s programs to `reporter`.
    #[track_caller]
    pub fn sequential_reporting<E, R>(
        await_on_release: bool,
        reporter: R,
    ) -> Resource<Dispatcher, E>
    where
        E: Send + 'static,
        R: Fn(ForgottenFailure) + Send + Sync + 'static,
    {
        Dispatcher::scoped(true, await_on_release, Box::new(reporter))
    }

    #[track_caller]
    fn scoped<E: Send + 'static>(
        sequential: bool,
        await_on_release: bool,
        reporter: Reporter,
    ) -> Resource<Dispatcher, E> {
        let supervisor = if await_on_release {
            Supervisor::scoped_awaiting::<E>()
        } else {
            Supervisor::scoped::<E>()
        };
        supervisor.flat_map(move |supervisor| {
            let acquire = IO::with_spawner(probe).flat_map_untraced(move |executor| {
                let shared = Arc::new(Shared {
                    state: Mutex::new(State {
                        closed: false,
                        pending: VecDeque::new(),
                        signal: Deferred::new(),
                        wanted: false,
                    }),
                    sequential,
                    await_on_release,
                    executor,
                    reports: Arc::new(Reports {
                        reporter,
                        reported: AtomicUsize::new(0),
                    }),
                });
                let handle = Arc::new(Handle {
                    shared: shared.clone(),
                    supervisor: supervisor.clone(),
                });
                work(shared, supervisor)
                    .start_untraced::<E>()
                    .map_untraced(move |worker| (Dispatcher { handle }, worker))
            });
            Resource::make_case(acquire, move |(dispatcher, worker), exit| {
                dispatcher.close(worker, await_on_release && exit == ExitCase::Succeeded)
            })
            .map(|(dispatcher, _)| dispatcher.clone())
        })
    }

    /// Closes the dispatcher: refuses new submissions; then either drops the
    /// queued ones and cancels the worker, or lets the worker start them
    /// and end (`awaiting`). Masked. The supervisor's release, after this
    /// one, cancels or awaits the fibers started.
    fn close<E: Send + 'static>(
        self,
        worker: FiberHandle<(), Infallible>,
        awaiting: bool,
    ) -> IO<(), E> {
        IO::uncancelable_untraced(move |_| {
            IO::defer_untraced(move || {
                self.handle.shared.close(awaiting);
                if awaiting {
                    worker.join_void_untraced()
                } else {
                    worker.cancel_untraced()
                }
            })
        })
    }

    /// Whether the dispatcher runs its programs one after another
    /// ([`sequential`](Dispatcher::sequential)).
    #[inline]
    pub fn is_sequential(&self) -> bool {
        self.handle.shared.sequential
    }

    /// Whether the dispatcher's scope has ended (every submission is
    /// refused with [`DispatcherError::Closed`]).
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.handle.shared.state.lock().closed
    }

    /// How many failures of `run_and_forget`'s programs have been reported
    /// so far.
    #[inline]
    pub fn failures_reported(&self) -> usize {
        self.handle.shared.reports.reported.load(Ordering::Relaxed)
    }

    /// Runs `io` and forgets it: its value is dropped; an error or a panic
    /// is reported (module doc, "where errors go"), a cancellation is not.
    /// `Err` if the dispatcher is closed or its executor shut down (`io`
    /// is dropped, not run). Any thread; never blocks beyond a short lock.
    pub fn run_and_forget<A, E>(&self, io: IO<A, E>) -> Result<(), DispatcherError>
    where
        A: Send + 'static,
        E: fmt::Debug + Send + 'static,
    {
        let shared = &*self.handle.shared;
        let job = Box::new(Forgotten {
            io,
            reports: shared.reports.clone(),
        });
        shared.submit(job).map_err(|(error, job)| {
            drop(job);
            error
        })
    }

    /// Runs `io` and gives a future of its outcome, for async code (any
    /// async runtime, any thread). The future's output is `Err` if the
    /// dispatcher is closed or its executor shut down (`io` dropped, not
    /// run).
    ///
    /// **Dropping the future before it is ready cancels `io`**: if it has
    /// not started, it never starts; if it runs, its fiber is canceled (its
    /// finalizers run on the executor, once). A program canceled by the
    /// dispatcher's release gives `Ok(Outcome::Canceled)`.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Dispatcher, single::SingleThreaded, wstp::Runtime};
    ///
    /// let io: IO<u32, ()> = Dispatcher::sequential(false).use_with(|dispatcher| {
    ///     IO::blocking(move || {
    ///         let future = dispatcher.to_future(IO::<u32, ()>::pure(7));
    ///         // Awaited by async code elsewhere: here, another executor's
    ///         // fiber on a thread of its own.
    ///         std::thread::spawn(move || {
    ///             let other = SingleThreaded::new().expect("an executor");
    ///             other.block_on(IO::<_, ()>::from_future(future))
    ///         })
    ///         .join()
    ///         .expect("the thread ends")
    ///     })
    ///     .map(|ran| match ran {
    ///         Ok(Outcome::Succeeded(Ok(Outcome::Succeeded(n)))) => n,
    ///         _ => 0,
    ///     })
    /// });
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_future<A, E>(&self, io: IO<A, E>) -> DispatchFuture<A, E>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        self.to_future_cancelable(io).0
    }

    /// Like [`to_future`](Dispatcher::to_future), with a
    /// [`DispatchCancel`] that cancels the program from anywhere (Cats
    /// Effect's `unsafeToFutureCancelable`); the future then gives
    /// `Ok(Outcome::Canceled)` once the fiber's finalizers have run (or at
    /// once, if the program had not started).
    pub fn to_future_cancelable<A, E>(&self, io: IO<A, E>) -> (DispatchFuture<A, E>, DispatchCancel)
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let reply = Reply::new();
        let job = Box::new(Replied {
            io,
            reply: ReplyGuard {
                reply: Some(reply.clone()),
            },
        });
        match self.handle.shared.submit(job) {
            Ok(()) => (
                DispatchFuture {
                    stage: Stage::Waiting(reply.clone()),
                    _types: PhantomData,
                },
                DispatchCancel { reply: Some(reply) },
            ),
            Err((error, job)) => {
                drop(job);
                (
                    DispatchFuture {
                        stage: Stage::Refused(error),
                        _types: PhantomData,
                    },
                    DispatchCancel { reply: None },
                )
            }
        }
    }

    /// Runs `io` and parks the calling thread until it has ended; its
    /// outcome. For threads that are not the executor's: called where
    /// parking could stall the executor (one of its threads, inside one of
    /// its fibers), it returns `Err(DispatcherError::Nested)` at once and
    /// runs nothing; `Err(Closed)` after the dispatcher's scope;
    /// `Err(ShutDown)` if the executor shuts down.
    #[cfg(feature = "std")]
    pub fn run_blocking<A, E>(&self, io: IO<A, E>) -> Result<Outcome<A, E>, DispatcherError>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        let shared = &*self.handle.shared;
        if shared.executor.refuses_blocking_here() {
            return Err(DispatcherError::Nested);
        }
        let mut future = core::pin::pin!(self.to_future(io));
        let parker = std::sync::Arc::new(Parker(std::thread::current()));
        let waker = Waker::from(parker);
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(ran) = future.as_mut().poll(&mut cx) {
                return ran;
            }
            if shut_down(&shared.executor) {
                // The future is dropped with the executor's fibers.
                return Err(DispatcherError::ShutDown);
            }
            std::thread::park_timeout(core::time::Duration::from_millis(100));
        }
    }
}

/// Unparks the thread of a `run_blocking`.
#[cfg(feature = "std")]
struct Parker(std::thread::Thread);

#[cfg(feature = "std")]
impl std::task::Wake for Parker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// The worker: takes the queue (all of it, or one program for a
/// sequential dispatcher), starts what it took, and waits for more;
/// ends once the dispatcher is closed and the queue empty.
#[inline]
fn work(shared: Arc<Shared>, supervisor: Supervisor) -> IO<(), Infallible> {
    IO::defer_untraced(move || {
        let taken: Vec<Box<dyn Job>> = {
            let mut state = shared.state.lock();
            if state.pending.is_empty() {
                if state.closed {
                    return IO::unit();
                }
                let signal = state.signal.clone();
                state.wanted = true;
                drop(state);
                return signal
                    .get_untraced::<Infallible>()
                    .flat_map_untraced(move |()| work(shared, supervisor));
            }
            if shared.sequential {
                state.pending.pop_front().into_iter().collect()
            } else {
                state.pending.drain(..).collect()
            }
        };
        let sequential = shared.sequential;
        taken
            .into_iter()
            .fold(IO::unit(), |started, job| {
                let supervisor = supervisor.clone();
                started.flat_map_untraced(move |()| job.start(&supervisor, sequential))
            })
            .flat_map_untraced(move |()| work(shared, supervisor))
    })
}

// ----- The futures -----------------------------------------------------------------

enum Stage<A, E> {
    /// The submission was refused.
    Refused(DispatcherError),
    /// Queued; the fiber not yet handed over.
    Waiting(Arc<Reply>),
    /// Joining the started fiber (canceled if dropped before ready).
    Joining(JoinFuture<A, E>),
    /// Ready was returned.
    Done,
}

/// The future of a program submitted with [`Dispatcher::to_future`] (or
/// [`to_future_cancelable`](Dispatcher::to_future_cancelable)): its
/// [`Outcome`], or the [`DispatcherError`] that refused it.
///
/// `Send`, `Unpin`, pollable from any thread with any waker. **Dropping it
/// before it is ready cancels the program** (it never starts, or its fiber
/// is canceled). Polling it again after it was ready gives
/// `Ok(Outcome::Canceled)` (the outcome was moved out; no panic).
#[must_use = "dropping a DispatchFuture cancels its program"]
pub struct DispatchFuture<A, E> {
    stage: Stage<A, E>,
    _types: PhantomData<fn() -> (A, E)>,
}

impl<A, E> fmt::Debug for DispatchFuture<A, E> {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match &self.stage {
            Stage::Refused(_) => "refused",
            Stage::Waiting(_) => "queued",
            Stage::Joining(_) => "running",
            Stage::Done => "done",
        };
        f.debug_struct("DispatchFuture")
            .field("stage", &stage)
            .finish()
    }
}

impl<A: Send + 'static, E: Send + 'static> Future for DispatchFuture<A, E> {
    type Output = Result<Outcome<A, E>, DispatcherError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.stage {
                Stage::Refused(error) => {
                    let error = *error;
                    this.stage = Stage::Done;
                    return Poll::Ready(Err(error));
                }
                Stage::Waiting(reply) => {
                    let mut state = reply.state.lock();
                    match &mut *state {
                        ReplyState::Pending(waker) => {
                            match waker {
                                Some(w) if w.will_wake(cx.waker()) => {}
                                _ => *waker = Some(cx.waker().clone()),
                            }
                            return Poll::Pending;
                        }
                        ReplyState::Started { fiber, taken } => {
                            *taken = true;
                            // SAFETY: the fiber runs this submission's
                            // program, an `IO<A, E>` (`Replied<A, E>`),
                            // without a completion callback (a supervised
                            // child).
                            let handle = unsafe {
                                FiberHandle::<A, E>::from_fiber(RawFiberRef::clone(fiber))
                            };
                            drop(state);
                            this.stage = Stage::Joining(
                                core::future::IntoFuture::into_future(handle).cancel_on_drop(),
                            );
                        }
                        ReplyState::NotRun => {
                            drop(state);
                            this.stage = Stage::Done;
                            return Poll::Ready(Ok(Outcome::Canceled));
                        }
                    }
                }
                Stage::Joining(join) => {
                    return match Pin::new(join).poll(cx) {
                        Poll::Ready(outcome) => {
                            this.stage = Stage::Done;
                            Poll::Ready(Ok(outcome))
                        }
                        Poll::Pending => Poll::Pending,
                    };
                }
                Stage::Done => return Poll::Ready(Ok(Outcome::Canceled)),
            }
        }
    }
}

impl<A, E> Drop for DispatchFuture<A, E> {
    #[inline]
    fn drop(&mut self) {
        // A joining future cancels on its own drop (`cancel_on_drop`).
        if let Stage::Waiting(reply) = &self.stage {
            reply.cancel();
        }
    }
}

/// Cancels a program submitted with
/// [`Dispatcher::to_future_cancelable`], from any thread, any number of
/// times (`Clone`): before it starts, it never starts; once it runs, its
/// fiber's cancellation is requested (its finalizers then run on the
/// executor, once). The paired future gives `Ok(Outcome::Canceled)` (or
/// the outcome the program reached first). Does nothing for a refused
/// submission or a program that has ended.
#[derive(Clone)]
pub struct DispatchCancel {
    reply: Option<Arc<Reply>>,
}

impl fmt::Debug for DispatchCancel {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchCancel").finish_non_exhaustive()
    }
}

impl DispatchCancel {
    /// Requests the cancellation (see the type's doc); returns at once.
    #[inline]
    pub fn cancel(&self) {
        if let Some(reply) = &self.reply {
            reply.cancel();
        }
    }
}
