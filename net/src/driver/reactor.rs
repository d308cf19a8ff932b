//! [`Reactor`] and [`Poller`]: the I/O capability on mio, for executors
//! that poll for themselves (exec-wstp per worker, exec-batching,
//! exec-single with std).
//!
//! # Readiness: edge-triggered, with a tick
//!
//! A socket is added to mio once, when it is registered, for both
//! directions, edge-triggered (mio's only mode): the kernel reports it
//! each time it *becomes* readable or writable, and never again until it
//! does anew. The reactor keeps, per socket, a readiness word (tokio's
//! `ScheduledIo` design, written anew here): a read bit, a write bit, and a
//! *tick* that counts the events reported for the socket. Every write of
//! the word happens under the table's lock; reads of it are lock-free.
//!
//! * An event sets the bits it reports, adds one to the tick, and takes
//!   the socket's waiters for those directions (under the lock), which the
//!   poller then resumes outside it.
//! * An operation takes a snapshot of the word ([`Registration::readiness`])
//!   before its non-blocking call. When the call returns `WouldBlock`, it
//!   waits: under the lock, if the word has the direction's bit *and a
//!   newer tick* than the snapshot, an event came after the snapshot and the
//!   wait ends at once (the call is tried again); otherwise the bit is
//!   stale (the call that just failed saw it), it is cleared, and the
//!   fiber's callback is added as a waiter.
//!
//! * An event that reports an end or an error (`EPOLLRDHUP`, `EPOLLHUP`,
//!   `EPOLLERR`) also sets a *closed* bit for the direction, which nothing
//!   clears: the end of a stream or an error is reported by one edge, and
//!   every later call returns at once, so a wait on a closed side ends at
//!   once instead of waiting for an edge that will not come.
//! * A socket starts ready in both directions, so its first operation
//!   tries its call. An operation whose snapshot has the direction's bit
//!   clear (a call returned `WouldBlock`, or a stream read drained the
//!   socket, and no event came since) waits without making the call.
//! * A stream read that returns fewer bytes than it asked for has drained
//!   the receive buffer: it clears the read bit with a compare-exchange
//!   against its snapshot (so only if no event came since), and the next
//!   read waits for an event instead of failing with `WouldBlock` first
//!   (tokio's `PollEvented` makes the same inference). On a reactor made
//!   with [`Reactor::ceding`] (exec-wstp's) that read cedes once and then
//!   tries its call instead: fair to the other fibers, and without a trip
//!   through a poller that a busy owner looks at late.
//!
//! Because the check-and-add and the event's set-and-take both run under
//! the lock, an event lands either before the check (the tick differs: no
//! wait) or after the add (it takes the waiter): *no readiness is lost*. A
//! bit cleared outside the lock (a drained read) is cleared only if the
//! word is still the snapshot's, so an event that came in between keeps
//! its bits.
//! No system call is made per wait: interest never changes after the
//! registration. A canceled wait removes its waiter by token; nothing
//! else is left behind.
//!
//! # Parking and notification
//!
//! The thread that owns the [`Poller`] sleeps in it (`epoll_wait`), so
//! that readiness, timers (the timeout) and other threads' wake-ups all end
//! one wait. Other threads wake it with [`Reactor::notify`], which costs a
//! system call only when the poller really sleeps: a state word goes
//! `AWAKE → PARKED` (the owner, before a blocking wait: it blocks only if
//! that succeeds), `→ NOTIFIED` (a notifier; it writes mio's `Waker` only
//! if it found `PARKED`), `→ AWAKE` (the owner, after the wait). A
//! notification that comes before the owner parks turns its wait into a
//! look (timeout 0); one that comes while it sleeps wakes it; one that
//! comes after it woke is seen by the owner's next look at its queues,
//! since notifiers publish their work before they notify and the owner
//! reads its queues after the wait (every step is a read-modify-write of
//! the one word, so they are totally ordered). The loom model below, and
//! exec-wstp's park models built on it, check this.
//!
//! # Shutdown
//!
//! [`Reactor::close`] hands back every waiter (the executor frees their
//! fibers, which breaks the executor/fiber reference cycle) and makes
//! every later wait fail with an error that says the executor is gone.
//! [`Reactor::set_driven`] tells whether anything polls the reactor now:
//! a wait on a reactor that nothing polls (an exec-batching loop between
//! two `block_on`s) fails instead of hanging.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use spindle_core::untraced::Untraced as _;
use spindle_core::{Callback, IO};

use super::{Direction, IoDriver, Readiness, Registration};
use crate::sync::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// The callback of a fiber suspended until its socket is ready.
type Wake = Callback<(), io::Error>;

/// Capacity of the poller's event buffer: sockets reported per poll.
pub const EVENTS_CAPACITY: usize = 1024;

/// The token of the notification `Waker`.
const WAKE_TOKEN: Token = Token(usize::MAX);

/// A key is `index | generation << INDEX_BITS`: a stale event for a slot
/// reused since is recognised by its generation.
const INDEX_BITS: u32 = usize::BITS / 2;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// The largest index: `INDEX_MASK` itself is left out, so that no key is
/// `usize::MAX` ([`WAKE_TOKEN`]).
const MAX_INDEX: usize = INDEX_MASK - 1;

const READ: u64 = 1;
const WRITE: u64 = 2;
/// Sticky: the read side reached its end (or failed). Never cleared: a
/// read then returns at once (end of stream, or the error), and no new
/// edge would come to end a wait.
const READ_CLOSED: u64 = 4;
/// Sticky: the write side is closed (or failed).
const WRITE_CLOSED: u64 = 8;
const TICK: u64 = 16;

fn bit(direction: Direction) -> u64 {
    match direction {
        Direction::Read => READ,
        Direction::Write => WRITE,
    }
}

fn closed_bit(direction: Direction) -> u64 {
    match direction {
        Direction::Read => READ_CLOSED,
        Direction::Write => WRITE_CLOSED,
    }
}

/// The bits that say a call in `direction` would not fail with
/// `WouldBlock`.
fn ready_bits(direction: Direction) -> u64 {
    bit(direction) | closed_bit(direction)
}

fn tick(word: u64) -> u64 {
    word >> 4
}

/// The parking states of the poller's owner (module doc).
const AWAKE: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

/// Whether anything polls the reactor.
const IDLE: u8 = 0;
const DRIVEN: u8 = 1;
const CLOSED: u8 = 2;

/// The parking protocol of the module doc, on its own so that loom
/// models can run it with a stand-in for the system's wait.
#[derive(Debug)]
pub struct ParkState {
    state: AtomicU8,
}

impl ParkState {
    /// Awake, with no notification pending.
    pub fn new() -> ParkState {
        ParkState {
            state: AtomicU8::new(AWAKE),
        }
    }

    /// A notifier, after it published its work: true if the owner sleeps
    /// and must be woken (the caller then wakes it).
    pub fn notify(&self) -> bool {
        self.state.swap(NOTIFIED, Ordering::AcqRel) == PARKED
    }

    /// The owner, before a blocking wait: true if it may block; false if a
    /// notification is pending (it then only looks, timeout 0).
    pub fn begin_park(&self) -> bool {
        self.state
            .compare_exchange(AWAKE, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The owner, after the wait: back to awake, consuming a notification
    /// (whose work the owner reads next).
    pub fn end_park(&self) {
        self.state.swap(AWAKE, Ordering::AcqRel);
    }
}

impl Default for ParkState {
    fn default() -> ParkState {
        ParkState::new()
    }
}

/// One suspended fiber.
struct Waiter {
    token: u64,
    direction: Direction,
    wake: Wake,
}

/// A registered socket's entry.
struct Entry {
    readiness: Arc<AtomicU64>,
    waiters: Vec<Waiter>,
}

/// A slot of the table: its generation counts its reuses.
struct Slot {
    generation: usize,
    entry: Option<Entry>,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
    next_token: u64,
}

impl Table {
    fn key(&self, index: usize) -> usize {
        index | (self.slots[index].generation << INDEX_BITS)
    }

    fn entry(&mut self, key: usize) -> Option<&mut Entry> {
        let slot = self.slots.get_mut(key & INDEX_MASK)?;
        if slot.generation != key >> INDEX_BITS {
            return None;
        }
        slot.entry.as_mut()
    }
}

/// What the reactor's handles and the poller share.
struct Shared {
    registry: mio::Registry,
    waker: Waker,
    park: ParkState,
    status: AtomicU8,
    table: Mutex<Table>,
    /// Waiters in the table.
    waiters: AtomicUsize,
    /// Sockets registered.
    sources: AtomicUsize,
    /// What an operation does when a drained read (or a failed call) left
    /// its direction not ready.
    after_drain: AfterDrain,
}

/// What an operation does when the driver knows its socket is not ready
/// (a stream read drained it, or a call failed with `WouldBlock`, and no
/// event came since).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterDrain {
    /// Waits for an event without making the call ([`Reactor::new`]).
    Wait,
    /// Cedes once, then makes the call ([`Reactor::ceding`]).
    CedeThenTry,
    /// Makes the call ([`Reactor::trying_calls`]).
    Try,
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // No user code runs under the lock: a panic elsewhere leaves the table
    // consistent.
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The I/O capability on mio: registers sockets, and (with its [`Poller`])
/// resumes the fibers waiting for them. Cheap to clone; any thread.
#[derive(Clone)]
pub struct Reactor {
    shared: Arc<Shared>,
}

impl fmt::Debug for Reactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reactor")
            .field("sources", &self.sources())
            .field("waiters", &self.waiters())
            .finish_non_exhaustive()
    }
}

/// The polling half of a [`Reactor`]: owned by the one thread that polls
/// (and sleeps in) it.
pub struct Poller {
    poll: Poll,
    events: Events,
    ready: Vec<Wake>,
    shared: Arc<Shared>,
}

impl fmt::Debug for Poller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl Reactor {
    /// A reactor (not driven yet: see [`set_driven`](Reactor::set_driven))
    /// and its poller. Fails when the system refuses a poller or its
    /// waker (out of descriptors).
    ///
    /// A read that drains its stream makes the next read wait for an event
    /// without trying its call first (see the module doc): right for a
    /// poller its owner looks at every turn (an event loop).
    pub fn new() -> io::Result<(Reactor, Poller)> {
        Reactor::make(AfterDrain::Wait)
    }

    /// Like [`new`](Reactor::new), but an operation that the driver knows
    /// is not ready (a drained read, no event since) cedes once and then
    /// tries its call, instead of waiting for an event: right for a poller
    /// whose owner may be busy running fibers when the event comes (an
    /// exec-wstp worker looks at the poller every few dozen fibers). The
    /// cede puts the fiber behind every other queued fiber, so a
    /// connection whose peer answers fast is served once per turn, as the
    /// connections whose readiness the poller reported are (fair), and its
    /// data, there by the time its turn comes, is read without a round
    /// trip through the poller (cheap). A try that fails waits as usual.
    pub fn ceding() -> io::Result<(Reactor, Poller)> {
        Reactor::make(AfterDrain::CedeThenTry)
    }

    /// Like [`new`](Reactor::new), but every operation tries its call
    /// before it waits, whatever the last read drained: for a poller whose
    /// owner may be busy running fibers when an event comes, where waiting
    /// for the owner's next look can cost more than one call that fails
    /// with `WouldBlock`. The price is fairness: a fiber whose peer answers
    /// fast finds its data at every try and is served again and again in
    /// one run, while fibers whose readiness waits in the poller wait for
    /// the owner's next look (measured on a pool: a median latency of
    /// 16 µs with a 99th percentile of 9 ms, where [`ceding`](Reactor::ceding)
    /// gives 0.56 ms and 2.3 ms). No executor of this project uses it.
    pub fn trying_calls() -> io::Result<(Reactor, Poller)> {
        Reactor::make(AfterDrain::Try)
    }

    fn make(after_drain: AfterDrain) -> io::Result<(Reactor, Poller)> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKE_TOKEN)?;
        let shared = Arc::new(Shared {
            registry,
            waker,
            park: ParkState::new(),
            status: AtomicU8::new(IDLE),
            table: Mutex::new(Table::default()),
            waiters: AtomicUsize::new(0),
            sources: AtomicUsize::new(0),
            after_drain,
        });
        let poller = Poller {
            poll,
            events: Events::with_capacity(EVENTS_CAPACITY),
            ready: Vec::new(),
            shared: shared.clone(),
        };
        Ok((Reactor { shared }, poller))
    }

    /// Wakes the poller's owner if it sleeps in [`Poller::poll`], or makes
    /// its next blocking poll only look. Call it after publishing the work
    /// the owner should see. Costs a system call only when it sleeps.
    pub fn notify(&self) {
        if self.shared.park.notify() {
            // An error means the waker's descriptor is broken; the owner
            // then sees the work at its next poll.
            let _ = self.shared.waker.wake();
        }
    }

    /// Whether something polls the reactor now: waits fail while not (see
    /// the [module documentation](self)). Ignored once closed.
    pub fn set_driven(&self, driven: bool) {
        let to = if driven { DRIVEN } else { IDLE };
        let from = if driven { IDLE } else { DRIVEN };
        let _ = self
            .shared
            .status
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Shuts the reactor down: every later wait fails; returns the
    /// callbacks of the fibers waiting now, for the caller to drop outside
    /// its own locks (which frees those fibers).
    pub fn close(&self) -> Vec<Callback<(), io::Error>> {
        let shared = &*self.shared;
        let mut table = lock(&shared.table);
        shared.status.store(CLOSED, Ordering::Release);
        let mut all = Vec::new();
        for slot in &mut table.slots {
            if let Some(entry) = &mut slot.entry {
                all.extend(entry.waiters.drain(..).map(|w| w.wake));
            }
        }
        shared.waiters.store(0, Ordering::Relaxed);
        all
    }

    /// Fibers waiting for readiness (any thread may read it; used to skip
    /// polls and for deadlock detection).
    pub fn waiters(&self) -> usize {
        self.shared.waiters.load(Ordering::Relaxed)
    }

    /// Sockets registered.
    pub fn sources(&self) -> usize {
        self.shared.sources.load(Ordering::Relaxed)
    }

    /// Whether `self` and `other` are the same reactor.
    pub fn same(&self, other: &Reactor) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl IoDriver for Reactor {
    fn register(&self, socket: OwnedFd) -> io::Result<Arc<dyn Registration>> {
        let shared = &self.shared;
        let raw = socket.as_raw_fd();
        // Ready until a call says otherwise: the first operation tries its
        // call (a socket accepted with its request already in, a connect
        // that finished at once) instead of waiting for the first event.
        let readiness = Arc::new(AtomicU64::new(READ | WRITE));
        let key = {
            let mut table = lock(&shared.table);
            let index = match table.free.pop() {
                Some(index) => index,
                None if table.slots.len() <= MAX_INDEX => {
                    table.slots.push(Slot {
                        generation: 0,
                        entry: None,
                    });
                    table.slots.len() - 1
                }
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "spindle-net: the reactor's table of sockets is full",
                    ));
                }
            };
            let key = table.key(index);
            // Registered under the lock: an event for this key cannot be
            // handled before its entry exists.
            let added = shared.registry.register(
                &mut SourceFd(&raw),
                Token(key),
                Interest::READABLE | Interest::WRITABLE,
            );
            if let Err(e) = added {
                table.free.push(index);
                return Err(e);
            }
            table.slots[index].entry = Some(Entry {
                readiness: readiness.clone(),
                waiters: Vec::new(),
            });
            key
        };
        shared.sources.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(SocketRegistration {
            shared: shared.clone(),
            key,
            readiness,
            socket,
        }))
    }
}

/// A socket registered with a [`Reactor`]. Field order matters: see `Drop`.
struct SocketRegistration {
    shared: Arc<Shared>,
    key: usize,
    readiness: Arc<AtomicU64>,
    socket: OwnedFd,
}

impl Drop for SocketRegistration {
    fn drop(&mut self) {
        let shared = &*self.shared;
        // Out of the poller first, closed after (the `socket` field drops
        // once this body returns): the descriptor number is never closed
        // while the poller watches it. An error means it is not watched.
        let _ = shared
            .registry
            .deregister(&mut SourceFd(&self.socket.as_raw_fd()));
        let waiters = {
            let mut table = lock(&shared.table);
            let index = self.key & INDEX_MASK;
            let entry = table.entry(self.key).map(|entry| {
                let waiters = std::mem::take(&mut entry.waiters);
                shared.waiters.fetch_sub(waiters.len(), Ordering::Relaxed);
                waiters
            });
            if entry.is_some() {
                let slot = &mut table.slots[index];
                slot.entry = None;
                slot.generation = (slot.generation + 1) & (INDEX_MASK >> 1);
                table.free.push(index);
                shared.sources.fetch_sub(1, Ordering::Relaxed);
            }
            entry
        };
        // Callbacks are dropped outside the lock: dropping one may free a
        // fiber whose program owns another socket of this reactor.
        drop(waiters);
    }
}

/// What a wait found under the lock.
enum Added {
    /// A new event since the snapshot: try again now.
    ReadyNow,
    /// Waiting, as this token.
    Waiting(u64),
}

impl SocketRegistration {
    fn add_waiter(&self, direction: Direction, seen: Readiness, wake: Wake) -> io::Result<Added> {
        let shared = &*self.shared;
        let mut table = lock(&shared.table);
        match shared.status.load(Ordering::Acquire) {
            DRIVEN => {}
            CLOSED => return Err(closed()),
            _ => return Err(not_driven()),
        }
        let token = table.next_token;
        table.next_token += 1;
        let Some(entry) = table.entry(self.key) else {
            return Err(closed());
        };
        let now = self.readiness.load(Ordering::Relaxed);
        let wanted = bit(direction);
        if now & closed_bit(direction) != 0 {
            // Closed sides stay ready: the call returns at once.
            return Ok(Added::ReadyNow);
        }
        if now & wanted != 0 {
            if tick(now) != tick(seen.0) {
                return Ok(Added::ReadyNow);
            }
            // The call that just failed saw this readiness: it is stale.
            self.readiness.store(now & !wanted, Ordering::Release);
        }
        entry.waiters.push(Waiter {
            token,
            direction,
            wake,
        });
        shared.waiters.fetch_add(1, Ordering::Relaxed);
        Ok(Added::Waiting(token))
    }

    /// Removes the waiter `token` (a canceled fiber); its callback, for the
    /// caller to drop outside the lock (`None` if it was woken already).
    fn remove_waiter(&self, token: u64) -> Option<Wake> {
        let shared = &*self.shared;
        let mut table = lock(&shared.table);
        let entry = table.entry(self.key)?;
        let index = entry.waiters.iter().position(|w| w.token == token)?;
        let waiter = entry.waiters.swap_remove(index);
        shared.waiters.fetch_sub(1, Ordering::Relaxed);
        Some(waiter.wake)
    }
}

fn closed() -> io::Error {
    io::Error::other(
        "spindle-net: the executor that polls this socket is shut down (its reactor is closed)",
    )
}

fn not_driven() -> io::Error {
    io::Error::other(
        "spindle-net: nothing polls this socket now (it was made on an exec-batching loop or \
         exec-single executor that is not running): a wait would never end",
    )
}

impl Registration for SocketRegistration {
    #[inline]
    fn readiness(&self) -> Readiness {
        Readiness(self.readiness.load(Ordering::Acquire))
    }

    #[inline]
    fn may_be_ready(&self, direction: Direction, seen: Readiness) -> bool {
        self.shared.after_drain == AfterDrain::Try || seen.0 & ready_bits(direction) != 0
    }

    #[inline]
    fn cedes_before_try(&self) -> bool {
        self.shared.after_drain == AfterDrain::CedeThenTry
    }

    #[inline]
    fn drained(&self, direction: Direction, seen: Readiness) {
        if self.shared.after_drain == AfterDrain::Try {
            return;
        }
        // Only if nothing happened since the snapshot (the tick and the bits
        // are the same): an event since then may have brought more bytes.
        // Events write the word under the table's lock and this does not
        // take it: an event that lands between its read and its write
        // replaces the word with a newer tick, and this exchange then fails;
        // one that lands after it sets its bits again. Either way no
        // readiness is lost.
        let _ = self.readiness.compare_exchange(
            seen.0,
            seen.0 & !bit(direction),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    fn wait(self: Arc<Self>, direction: Direction, seen: Readiness) -> IO<(), io::Error> {
        // Without the lock: an event came after the snapshot already.
        let now = self.readiness.load(Ordering::Acquire);
        let new_edge = now & bit(direction) != 0 && tick(now) != tick(seen.0);
        if new_edge || now & closed_bit(direction) != 0 {
            return IO::pure(());
        }
        IO::from_callback_untraced(move |wake: Wake| {
            match self.add_waiter(direction, seen, wake.clone()) {
                Ok(Added::Waiting(token)) => Some(IO::delay_untraced(move || {
                    let waiter = self.remove_waiter(token);
                    drop(waiter);
                })),
                Ok(Added::ReadyNow) => {
                    wake.succeed(());
                    None
                }
                Err(e) => {
                    wake.fail(e);
                    None
                }
            }
        })
    }
}

impl Poller {
    /// The reactor this poller polls.
    pub fn reactor(&self) -> Reactor {
        Reactor {
            shared: self.shared.clone(),
        }
    }

    /// Waits for readiness at most `timeout` (`None`: until an event or a
    /// [`notify`](Reactor::notify); zero: only looks), then resumes the
    /// fibers waiting for the sockets reported. Returns how many it
    /// resumed. A blocking wait honours the parking protocol of the
    /// [module documentation](self): a pending notification makes it only
    /// look. mio rounds a timeout up to the next millisecond.
    pub fn poll(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let blocking = timeout != Some(Duration::ZERO);
        let parked = blocking && self.shared.park.begin_park();
        let timeout = if blocking && !parked {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        let polled = loop {
            match self.poll.poll(&mut self.events, timeout) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        if blocking {
            self.shared.park.end_park();
        }
        polled?;
        self.take_ready();
        let resumed = self.ready.len();
        for wake in self.ready.drain(..) {
            wake.succeed(());
        }
        Ok(resumed)
    }

    /// Records the events of the last poll and takes their waiters.
    fn take_ready(&mut self) {
        if self.events.is_empty() {
            return;
        }
        let shared = &*self.shared;
        let mut table = lock(&shared.table);
        for event in self.events.iter() {
            if event.token() == WAKE_TOKEN {
                continue;
            }
            let Some(entry) = table.entry(event.token().0) else {
                // Deregistered since the kernel reported it.
                continue;
            };
            let failed = event.is_error();
            let mut bits = 0;
            if event.is_readable() {
                bits |= READ;
            }
            if failed || event.is_read_closed() {
                bits |= READ | READ_CLOSED;
            }
            if event.is_writable() {
                bits |= WRITE;
            }
            if failed || event.is_write_closed() {
                bits |= WRITE | WRITE_CLOSED;
            }
            let now = entry.readiness.load(Ordering::Relaxed);
            entry
                .readiness
                .store(now.wrapping_add(TICK) | bits, Ordering::Release);
            let before = self.ready.len();
            let mut i = 0;
            while i < entry.waiters.len() {
                if ready_bits(entry.waiters[i].direction) & bits != 0 {
                    self.ready.push(entry.waiters.swap_remove(i).wake);
                } else {
                    i += 1;
                }
            }
            shared
                .waiters
                .fetch_sub(self.ready.len() - before, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, loom))]
mod tests_loom {
    //! The parking protocol with a stand-in for the system's wait (a flag
    //! and a condition variable, sticky like mio's `Waker`): no
    //! notification is lost, whichever way the notifier and the owner
    //! interleave.

    use super::ParkState;
    use crate::sync::{AtomicUsize, Ordering};
    use loom::sync::{Arc, Condvar, Mutex};
    use loom::thread;

    /// The system's wait: `wake` makes the current or next `wait` return.
    #[derive(Default)]
    struct Kernel {
        woken: Mutex<bool>,
        condvar: Condvar,
    }

    impl Kernel {
        fn wait(&self) {
            let mut woken = self.woken.lock().unwrap();
            while !*woken {
                woken = self.condvar.wait(woken).unwrap();
            }
            *woken = false;
        }

        fn wake(&self) {
            *self.woken.lock().unwrap() = true;
            self.condvar.notify_one();
        }
    }

    #[test]
    fn loom_a_notification_is_never_lost_by_a_parking_owner() {
        loom::model(|| {
            let park = Arc::new(ParkState::new());
            let kernel = Arc::new(Kernel::default());
            let work = Arc::new(AtomicUsize::new(0));
            let notifier = {
                let (park, kernel, work) = (park.clone(), kernel.clone(), work.clone());
                thread::spawn(move || {
                    work.store(1, Ordering::Release);
                    if park.notify() {
                        kernel.wake();
                    }
                })
            };
            // The owner: look at the work, park until there is some.
            loop {
                if work.load(Ordering::Acquire) == 1 {
                    break;
                }
                if park.begin_park() {
                    kernel.wait();
                }
                park.end_park();
            }
            notifier.join().unwrap();
        });
    }
}
