//! Unix signals as `IO` values and streams, on every std executor.
//!
//! * [`signals`]: the stream of the signals of a set that reach the
//!   process, registered when the stream is first pulled and unregistered
//!   exactly once when it ends, fails, is canceled or is stopped early by
//!   a downstream `take`.
//! * [`next`]: waits for the first signal of a set.
//! * [`listen`]: the registration itself as a `Resource` ([`Listener`]):
//!   signals that reach the process once it is acquired are kept for its
//!   [`recv`](Listener::recv) and [`stream`](Listener::stream), so that a
//!   program can register, then make a signal come (start a child, raise
//!   one), then wait, without a window in which the signal is lost.
//! * [`BlockingSignals`]: the same registration read by a thread of its
//!   own, for code that must react while every fiber is busy (the signal
//!   thread of `spindle-app`'s entry point is built on it).
//! * [`Signal`]: a signal's number, with the usual names as constants;
//!   [`raise`] sends one to this process.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//! use spindle_effect::signal::{self, Signal};
//!
//! let rt = Runtime::new()?;
//! // Registered first, then raised: the listener keeps it until it is read.
//! let program = signal::listen(&[Signal::SIGUSR1, Signal::SIGHUP]).use_with(|listener| {
//!     signal::raise(Signal::SIGHUP).product_r(listener.recv())
//! });
//! assert_eq!(rt.block_on(program)?.succeeded(), Some(Signal::SIGHUP));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The protocol
//!
//! A registration ([`listen`], [`signals`], [`next`], [`BlockingSignals`])
//! makes a connected pair of Unix sockets and, for each of its signals,
//! adds two actions to signal-hook's handler of that signal, in this
//! order: one sets the signal's *pending flag* (an `AtomicBool`), the
//! other writes a byte to the writing socket (signal-hook's self-pipe,
//! `low_level::pipe`: a non-blocking `send`, async-signal-safe; a full
//! socket drops the byte, and the reader is then woken anyway). The
//! reading socket is registered with the running executor's I/O driver
//! (`spindle_net::AsyncFd`), so a fiber that waits for a signal holds no
//! thread. A reader takes a pending flag if one is set; otherwise it
//! drains the socket, takes a flag again, and waits for readability if
//! none is set. The flag is set before the byte is written, and the reader
//! drains before it reads the flags, so a signal is never lost: at worst a
//! wake-up finds no flag (it waits again).
//!
//! One socket pair per registration, shared by its signals, rather than
//! one per signal: a fiber then waits for one descriptor whatever the
//! number of signals (racing reads on several descriptors could lose a
//! byte read by the loser of the race), and the flags tell the signals
//! apart. One registration per stream rather than one per process (tokio
//! shares one per signal kind and fans it out): a registration belongs to
//! the executor whose driver watches its socket, and a program may run on
//! several executors; signal-hook already runs every action of a signal,
//! so two listeners of one signal both receive it.
//!
//! # What is delivered
//!
//! * Every listener of a signal receives each delivery of it that comes
//!   while it is registered.
//! * Deliveries of one signal that come before the listener reads are
//!   *coalesced* into one (the kernel does the same with a signal that is
//!   pending while blocked), as with tokio's `tokio::signal`: a stream
//!   says "it came at least once since the last element", not how many
//!   times.
//! * When several signals of a set are pending at once, they are
//!   delivered one per element, starting after the signal delivered last
//!   (round robin: a signal that keeps coming does not starve the others).
//! * A signal that comes before the registration, or after it ends, is not
//!   received.
//!
//! # When the registration ends
//!
//! The actions are removed (`signal_hook::low_level::unregister`) exactly
//! once: when the stream of [`signals`] ends however it ends, when the
//! [`listen`] resource is released, when [`next`] has its signal or is
//! canceled, when [`BlockingSignals::close`] runs (or its value is
//! dropped). [`registrations`] counts the registrations alive, a leak check
//! for tests.
//!
//! signal-hook keeps its handler installed once it has installed one for a
//! signal, also when no action is left: the signal's default action (end
//! the process, for SIGINT or SIGTERM) is *not* restored, and the signal
//! is then ignored by this process. tokio's `tokio::signal` has the same
//! rule; a program that must die of a signal after it stopped handling it
//! can call [`signal_hook::low_level::emulate_default_handler`].
//!
//! # Signals that cannot be handled
//!
//! SIGKILL and SIGSTOP cannot be caught at all, and signal-hook refuses
//! SIGILL, SIGFPE and SIGSEGV (a handler that returns from them is
//! undefined behaviour): registering one of these is an error value of
//! kind `InvalidInput` whose payload is a [`ForbiddenSignal`] naming the
//! signal, never a panic. An empty set is an `InvalidInput` error too.
//!
//! # Executors
//!
//! The waiting is readiness on the driver of the executor that runs the
//! program (exec-wstp, exec-batching, exec-single, exec-tokio): the fiber
//! is suspended, no thread is held. A [`Listener`] belongs to the executor
//! that acquired it.
//!
//! Design credits: tokio's `tokio::signal` (coalescing, the default
//! action that is not restored), fs2's `Signals` (signals as a stream
//! whose registration is a resource) and signal-hook's `iterator`
//! (pending flags next to a self-pipe). No code is copied.

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Read as _};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use signal_hook::SigId;
use signal_hook::consts::signal as raw;
use spindle_core::untraced::Untraced as _;
use spindle_core::{IO, Resource};
use spindle_net::AsyncFd;
use spindle_stream::Stream;

/// The operations as traces name them.
mod ops {
    use spindle_core::untraced::Op;

    pub(super) static LISTEN: Op = Op::new("signal::listen");
    pub(super) static NEXT: Op = Op::new("signal::next");
    pub(super) static RAISE: Op = Op::new("signal::raise");
    pub(super) static RECV: Op = Op::new("Listener::recv");
}

/// A Unix signal, by its number: the names of the usual ones are
/// constants (`Signal::SIGINT`), the others come from
/// [`Signal::from_raw`] (the real-time signals of Linux, say). Displayed
/// by its name (`SIGINT`), or as `signal 42` when it has none.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(i32);

/// The largest signal number [`Signal::from_raw`] takes (Linux's
/// `SIGRTMAX`; 31 on Apple systems; other systems check theirs when a
/// signal is registered).
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_SIGNAL: i32 = 64;
#[cfg(any(target_os = "macos", target_os = "ios"))]
const MAX_SIGNAL: i32 = 31;
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
)))]
const MAX_SIGNAL: i32 = 128;

impl Signal {
    /// The terminal hung up, or a daemon is asked to reload.
    pub const SIGHUP: Signal = Signal(raw::SIGHUP);
    /// Interrupt from the keyboard (Ctrl-C).
    pub const SIGINT: Signal = Signal(raw::SIGINT);
    /// Quit from the keyboard (Ctrl-\).
    pub const SIGQUIT: Signal = Signal(raw::SIGQUIT);
    /// Illegal instruction (cannot be handled here).
    pub const SIGILL: Signal = Signal(raw::SIGILL);
    /// Trace or breakpoint trap.
    pub const SIGTRAP: Signal = Signal(raw::SIGTRAP);
    /// Abort (`abort()`).
    pub const SIGABRT: Signal = Signal(raw::SIGABRT);
    /// Bus error.
    pub const SIGBUS: Signal = Signal(raw::SIGBUS);
    /// Arithmetic error (cannot be handled here).
    pub const SIGFPE: Signal = Signal(raw::SIGFPE);
    /// Kill (cannot be caught).
    pub const SIGKILL: Signal = Signal(raw::SIGKILL);
    /// User-defined signal 1.
    pub const SIGUSR1: Signal = Signal(raw::SIGUSR1);
    /// Invalid memory reference (cannot be handled here).
    pub const SIGSEGV: Signal = Signal(raw::SIGSEGV);
    /// User-defined signal 2.
    pub const SIGUSR2: Signal = Signal(raw::SIGUSR2);
    /// Write to a pipe with no reader.
    pub const SIGPIPE: Signal = Signal(raw::SIGPIPE);
    /// Timer of `alarm()`.
    pub const SIGALRM: Signal = Signal(raw::SIGALRM);
    /// Termination request (the default of `kill`).
    pub const SIGTERM: Signal = Signal(raw::SIGTERM);
    /// A child process stopped or ended.
    pub const SIGCHLD: Signal = Signal(raw::SIGCHLD);
    /// Continue if stopped.
    pub const SIGCONT: Signal = Signal(raw::SIGCONT);
    /// Stop (cannot be caught).
    pub const SIGSTOP: Signal = Signal(raw::SIGSTOP);
    /// Stop from the terminal (Ctrl-Z).
    pub const SIGTSTP: Signal = Signal(raw::SIGTSTP);
    /// A background process read from the terminal.
    pub const SIGTTIN: Signal = Signal(raw::SIGTTIN);
    /// A background process wrote to the terminal.
    pub const SIGTTOU: Signal = Signal(raw::SIGTTOU);
    /// Urgent data on a socket (ignored by default).
    pub const SIGURG: Signal = Signal(raw::SIGURG);
    /// CPU time limit exceeded.
    pub const SIGXCPU: Signal = Signal(raw::SIGXCPU);
    /// File size limit exceeded.
    pub const SIGXFSZ: Signal = Signal(raw::SIGXFSZ);
    /// Virtual timer expired.
    pub const SIGVTALRM: Signal = Signal(raw::SIGVTALRM);
    /// Profiling timer expired.
    pub const SIGPROF: Signal = Signal(raw::SIGPROF);
    /// The terminal's window changed size (ignored by default).
    pub const SIGWINCH: Signal = Signal(raw::SIGWINCH);
    /// Bad system call.
    pub const SIGSYS: Signal = Signal(raw::SIGSYS);

    /// The signal numbered `raw`, if it can be one on this system (from 1
    /// to the system's highest; the system checks further when the signal
    /// is registered or sent).
    pub const fn from_raw(raw: i32) -> Option<Signal> {
        if raw >= 1 && raw <= MAX_SIGNAL {
            Some(Signal(raw))
        } else {
            None
        }
    }

    /// The signal's number.
    pub const fn as_raw(self) -> i32 {
        self.0
    }

    /// The signal's name (`"SIGINT"`), if it is one of the usual ones.
    pub fn name(self) -> Option<&'static str> {
        signal_hook::low_level::signal_name(self.0)
    }

    /// Whether this process can handle it: not SIGKILL or SIGSTOP (no
    /// process can), nor SIGILL, SIGFPE or SIGSEGV (signal-hook refuses
    /// them; see the [module documentation](self)).
    pub fn can_be_handled(self) -> bool {
        !signal_hook::consts::FORBIDDEN.contains(&self.0)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "signal {}", self.0),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signal({self})")
    }
}

/// The payload of the error (kind `InvalidInput`) of a registration that
/// names a signal this process cannot handle (see
/// [`Signal::can_be_handled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForbiddenSignal {
    signal: Signal,
}

impl ForbiddenSignal {
    /// The signal that was refused.
    pub fn signal(&self) -> Signal {
        self.signal
    }

    /// The `ForbiddenSignal` of `error`, if it is one.
    pub fn of(error: &io::Error) -> Option<&ForbiddenSignal> {
        error.get_ref()?.downcast_ref()
    }
}

impl fmt::Display for ForbiddenSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.signal.0 {
            raw::SIGKILL | raw::SIGSTOP => "no process can catch it",
            _ => "a handler that returns from it is undefined behaviour",
        };
        write!(f, "{} cannot be handled: {why}", self.signal)
    }
}

impl std::error::Error for ForbiddenSignal {}

/// Registrations alive in this process (see [`registrations`]).
static REGISTRATIONS: AtomicUsize = AtomicUsize::new(0);

/// How many signal registrations this module holds in this process right
/// now: one per [`Listener`] acquired (a stream of [`signals`] and a
/// [`next`] hold one while they run) and per [`BlockingSignals`], until it
/// is unregistered. A registration is counted once all its handler
/// actions are in, so a signal sent after the count rose reaches it. A
/// leak check for tests: it is back where it started once every stream,
/// resource and wait has ended.
pub fn registrations() -> usize {
    REGISTRATIONS.load(Ordering::Acquire)
}

/// The set `signals` as registered: without duplicates, in their first
/// order; an error if it is empty or names a signal that cannot be handled.
fn checked(signals: &[Signal]) -> io::Result<Vec<Signal>> {
    if signals.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a signal registration needs at least one signal",
        ));
    }
    if let Some(&signal) = signals.iter().find(|s| !s.can_be_handled()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            ForbiddenSignal { signal },
        ));
    }
    let mut seen = HashSet::new();
    Ok(signals
        .iter()
        .copied()
        .filter(|s| seen.insert(*s))
        .collect())
}

/// The handlers' actions of one registration and the signals' pending
/// flags; unregistered exactly once, by [`close`](Registration::close) or
/// when dropped.
struct Registration {
    /// The signal-hook actions (two per signal), `None` once unregistered.
    ids: Mutex<Option<Vec<SigId>>>,
    /// Each signal with its pending flag, set by its handler action.
    pending: Vec<(Signal, Arc<AtomicBool>)>,
    /// Where the next look at the flags starts (round robin).
    cursor: AtomicUsize,
}

impl Registration {
    /// Registers `signals` (checked) to set their flags and then write a
    /// byte to `write` (a clone of it per signal, each closed when its
    /// action is removed); the reading end of `write`'s pair is the
    /// caller's. On error, what was registered is removed.
    fn new(signals: &[Signal], write: UnixStream) -> io::Result<Registration> {
        let signals = checked(signals)?;
        let mut ids = Vec::with_capacity(signals.len() * 2);
        let mut pending = Vec::with_capacity(signals.len());
        let registered = signals.into_iter().try_for_each(|signal| {
            let flag = Arc::new(AtomicBool::new(false));
            // The flag's action first: signal-hook runs a signal's actions
            // in the order they were registered, so the flag is set before
            // the byte that wakes the reader is written.
            ids.push(signal_hook::flag::register(signal.0, flag.clone())?);
            ids.push(signal_hook::low_level::pipe::register(
                signal.0,
                write.try_clone()?,
            )?);
            pending.push((signal, flag));
            Ok(())
        });
        if let Err(e) = registered {
            for id in ids {
                signal_hook::low_level::unregister(id);
            }
            return Err(e);
        }
        // Counted only now that every action is in: a test that waits for
        // the count to rise and then sends a signal must find the handler
        // (counted first, a signal sent between the count and the actions
        // was lost).
        REGISTRATIONS.fetch_add(1, Ordering::AcqRel);
        Ok(Registration {
            ids: Mutex::new(Some(ids)),
            pending,
            cursor: AtomicUsize::new(0),
        })
    }

    /// A pending signal, its flag cleared; `None` if no flag is set. The
    /// look starts after the signal taken last.
    fn take_pending(&self) -> Option<Signal> {
        let n = self.pending.len();
        let start = self.cursor.load(Ordering::Relaxed);
        (0..n).map(|i| (start + i) % n).find_map(|i| {
            let (signal, flag) = &self.pending[i];
            if flag.swap(false, Ordering::SeqCst) {
                self.cursor.store(i + 1, Ordering::Relaxed);
                Some(*signal)
            } else {
                None
            }
        })
    }

    /// Removes the actions, once: the writing sockets are closed with
    /// them, so the reading end reads the end of stream.
    fn close(&self) {
        let ids = self
            .ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(ids) = ids {
            for id in ids {
                signal_hook::low_level::unregister(id);
            }
            REGISTRATIONS.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn is_closed(&self) -> bool {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// The signals registered, in their order.
    fn signals(&self) -> Vec<Signal> {
        self.pending.iter().map(|(signal, _)| *signal).collect()
    }
}

impl Drop for Registration {
    /// A registration that is dropped without being closed (a failed
    /// acquisition, a [`BlockingSignals`] dropped) is closed here.
    fn drop(&mut self) {
        self.close();
    }
}

/// Drains what `socket` holds (without waiting): `Ok(false)` when it
/// reads the end of stream (the registration was closed).
fn drain(mut socket: &UnixStream) -> io::Result<bool> {
    let mut buf = [0u8; 64];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The error of a wait on a closed registration.
fn closed_error() -> io::Error {
    io::Error::other("the signal registration is closed")
}

/// A registration of handlers for a set of signals, whose signals a fiber
/// waits for ([`recv`](Listener::recv), [`stream`](Listener::stream)), made
/// by [`listen`] as a `Resource`. A cheap handle: clones share the
/// registration. A signal that comes once it is acquired is kept (pending)
/// until it is received; see the [module documentation](self) for what is
/// delivered.
#[derive(Clone)]
pub struct Listener {
    registration: Arc<Registration>,
    socket: AsyncFd<UnixStream>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("signals", &self.registration.signals())
            .field("closed", &self.registration.is_closed())
            .finish()
    }
}

impl Listener {
    /// Registers `signals` and registers the reading socket with the
    /// running executor's driver.
    fn acquire(signals: Vec<Signal>) -> IO<Listener, io::Error> {
        IO::defer_untraced(move || {
            let made = UnixStream::pair().and_then(|(read, write)| {
                Registration::new(&signals, write).map(|registration| (registration, read))
            });
            // On error (no driver) the registration is dropped, which
            // closes it.
            let registered = made.and_then(|(registration, read)| {
                AsyncFd::register_here(read).map(|socket| Listener {
                    registration: Arc::new(registration),
                    socket,
                })
            });
            match registered {
                Ok(listener) => IO::pure(listener),
                Err(e) => IO::raise_error_untraced(e),
            }
        })
    }

    /// The signals it listens to, in their order.
    pub fn signals(&self) -> Vec<Signal> {
        self.registration.signals()
    }

    /// Whether it is closed (its `Resource` was released).
    pub fn is_closed(&self) -> bool {
        self.registration.is_closed()
    }

    /// The next signal received: one that is pending at once, else the
    /// first that comes. An error (kind `Other`) once the listener is
    /// closed. Canceled while it waits, it leaves no interest behind and
    /// takes no signal.
    #[track_caller]
    pub fn recv(&self) -> IO<Signal, io::Error> {
        self.recv_untraced()
            .flat_map_untraced(|signal| match signal {
                Some(signal) => IO::pure(signal),
                None => IO::raise_error_untraced(closed_error()),
            })
            .traced_as(&ops::RECV)
    }

    /// The signals received, one per element, until the listener is
    /// closed (then the stream ends). The stream does not close the
    /// listener (its `Resource` does; [`signals`] makes a stream that
    /// does).
    pub fn stream(&self) -> Stream<Signal, io::Error> {
        Stream::unfold_eval(self.clone(), |listener| {
            listener
                .recv_untraced()
                .map_untraced(move |signal| signal.map(|signal| (signal, listener)))
        })
    }

    /// The next signal, or `None` once closed.
    fn recv_untraced(&self) -> IO<Option<Signal>, io::Error> {
        let registration = self.registration.clone();
        self.socket.read_with_untraced(move |socket| {
            if let Some(signal) = registration.take_pending() {
                return Ok(Some(signal));
            }
            // Drain, then look at the flags: a signal whose byte was
            // drained has its flag set already.
            let open = drain(socket)?;
            match registration.take_pending() {
                Some(signal) => Ok(Some(signal)),
                None if !open => Ok(None),
                None => Err(io::ErrorKind::WouldBlock.into()),
            }
        })
    }

    /// Unregisters, once.
    fn close(&self) -> IO<(), io::Error> {
        let registration = self.registration.clone();
        IO::delay_untraced(move || registration.close())
    }
}

/// Registers handlers for `signals` as a `Resource`: from its acquisition
/// on, the signals that reach the process are kept for the [`Listener`],
/// and its release unregisters them, exactly once, however its use ends.
/// An empty set, or a signal that cannot be handled ([`ForbiddenSignal`]),
/// fails the acquisition with an error of kind `InvalidInput`; so does
/// running it outside an executor with an I/O driver (kind
/// `Unsupported`).
#[track_caller]
pub fn listen(signals: &[Signal]) -> Resource<Listener, io::Error> {
    let checked = checked(signals);
    let acquire = IO::defer_untraced(move || match checked {
        Ok(signals) => Listener::acquire(signals),
        Err(e) => IO::raise_error_untraced(e),
    })
    .traced_as(&ops::LISTEN);
    Resource::make(acquire, |listener: Listener| listener.close())
}

/// The signals of `signals` that reach the process, one per element,
/// without end (until an error or a downstream `take`). The handlers are
/// registered when the stream is first pulled, and unregistered exactly
/// once when it ends, fails, is canceled or is stopped early by a
/// downstream `take`. Deliveries of one signal that come while nobody
/// pulls are coalesced (see the [module documentation](self)).
///
/// An empty set, or a signal that cannot be handled, is an error of kind
/// `InvalidInput` here, before any stream exists (a [`ForbiddenSignal`]
/// names the signal).
pub fn signals(signals: &[Signal]) -> io::Result<Stream<Signal, io::Error>> {
    let signals = checked(signals)?;
    let acquire = Listener::acquire(signals);
    Ok(
        Stream::resource(Resource::make(acquire, |listener: Listener| {
            listener.close()
        }))
        .flat_map(|listener| listener.stream()),
    )
}

/// Waits for the first of `signals` to reach the process (registered when
/// it runs, unregistered when it has it, fails or is canceled), and gives
/// it. Errors as [`listen`]'s.
#[track_caller]
pub fn next(signals: &[Signal]) -> IO<Signal, io::Error> {
    let checked = checked(signals);
    IO::defer_untraced(move || match checked {
        Ok(signals) => IO::bracket(
            Listener::acquire(signals),
            |listener: Listener| {
                listener
                    .recv_untraced()
                    .flat_map_untraced(|signal| match signal {
                        Some(signal) => IO::pure(signal),
                        None => IO::raise_error_untraced(closed_error()),
                    })
            },
            |listener: Listener| listener.close(),
        ),
        Err(e) => IO::raise_error_untraced(e),
    })
    .traced_as(&ops::NEXT)
}

/// Sends `signal` to this process (`raise`): a listener of it receives it;
/// without one, its default action runs (SIGTERM ends the process).
#[track_caller]
pub fn raise(signal: Signal) -> IO<(), io::Error> {
    IO::defer_untraced(move || match signal_hook::low_level::raise(signal.0) {
        Ok(()) => IO::unit(),
        Err(e) => IO::raise_error_untraced(e),
    })
    .traced_as(&ops::RAISE)
}

/// A registration of handlers for a set of signals, read by a thread that
/// blocks ([`wait`](BlockingSignals::wait)) rather than by a fiber: for
/// code that must react to a signal while every fiber (or the executor's
/// every thread) is busy, such as the signal thread of `spindle-app`'s
/// entry point. The mechanism is [`listen`]'s (pending flags and a socket
/// pair; see the [module documentation](self)); only the read blocks.
///
/// Registered when made; unregistered exactly once by
/// [`close`](BlockingSignals::close), which any thread may call (a thread
/// blocked in `wait` then returns `Ok(None)`), or when dropped.
pub struct BlockingSignals {
    registration: Registration,
    socket: UnixStream,
}

impl fmt::Debug for BlockingSignals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingSignals")
            .field("signals", &self.registration.signals())
            .field("closed", &self.registration.is_closed())
            .finish()
    }
}

impl BlockingSignals {
    /// Registers handlers for `signals` now. An empty set, or a signal
    /// that cannot be handled ([`ForbiddenSignal`]), is an error of kind
    /// `InvalidInput`; the system's errors are the others.
    pub fn new(signals: &[Signal]) -> io::Result<BlockingSignals> {
        let (read, write) = UnixStream::pair()?;
        let registration = Registration::new(signals, write)?;
        Ok(BlockingSignals {
            registration,
            socket: read,
        })
    }

    /// The signals registered, in their order.
    pub fn signals(&self) -> Vec<Signal> {
        self.registration.signals()
    }

    /// Blocks the calling thread until a signal of the set comes (at once
    /// if one is pending) and gives it; `Ok(None)` once the registration is
    /// closed (by [`close`](BlockingSignals::close), from any thread).
    pub fn wait(&self) -> io::Result<Option<Signal>> {
        let mut buf = [0u8; 64];
        loop {
            if let Some(signal) = self.registration.take_pending() {
                return Ok(Some(signal));
            }
            match (&self.socket).read(&mut buf) {
                Ok(0) => return Ok(self.registration.take_pending()),
                // Bytes read: the flags are looked at again.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Unregisters the handlers, once (a second call does nothing); a
    /// thread blocked in [`wait`](BlockingSignals::wait) returns.
    pub fn close(&self) {
        self.registration.close();
    }
}
