//! The reactor: I/O readiness from the `polling` crate, and the fibers
//! waiting for it.
//!
//! # Protocol
//!
//! * Every socket of the loop is added to the [`Poller`] once, when it is
//!   made, under a *key* (its slot in the table below), with no interest.
//!   Dropping the socket deletes it from the poller before its descriptor
//!   closes (`Source`'s `Drop` in `net.rs`), which is what `Poller::add`
//!   requires.
//! * A fiber whose non-blocking call returned `WouldBlock` registers a
//!   *waiter*: the callback of its `IO::from_callback` suspension, with the
//!   direction it waits for (read or write). Registering sets the socket's
//!   interest to the union of its waiters' directions (`Poller::modify`,
//!   oneshot: the kernel reports the socket once, then disarms it).
//! * The loop waits with `Poller::wait`. For every socket reported, it
//!   takes *all* of its waiters and resumes them (the kernel interest is
//!   disarmed by then, so table and kernel agree: no waiters, no interest).
//!   A waiter woken for the other direction than the one reported retries
//!   its call, gets `WouldBlock` again and registers again: a spurious
//!   wake-up, rare (a socket seldom has a reader and a writer waiting at
//!   once) and the price of not keeping the descriptor in the table.
//! * A canceled fiber's finalizer removes its waiter by token and sets the
//!   interest to what the remaining waiters need (none: `Event::none`).
//!
//! So the invariant is: *the kernel interest of a socket is the union of
//! the directions of its waiters in the table* (or disarmed when it has
//! none), and the waiter count says whether any I/O could still wake the
//! loop (used for deadlock detection and to skip the `wait` call when no
//! fiber waits for I/O).
//!
//! The table is behind a mutex because a socket may be dropped on any
//! thread (an `IO` value holding it can be freed anywhere); on the loop
//! thread the lock is uncontended. Callbacks are never dropped or completed
//! while it is held: dropping a callback may free a fiber whose program
//! owns another socket, whose drop takes this lock again.

use crate::sync::Mutex;
use crate::sync::{AtomicUsize, Ordering};
use std::io;

use polling::{Event, Events, Poller};
use spindle_core::Callback;

use crate::sync::lock;

/// The callback of a fiber suspended until its socket is ready.
pub(crate) type Wake = Callback<(), io::Error>;

/// Which readiness a waiter needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Readable (also: a connection to accept, end of stream, an error).
    Read,
    /// Writable (also: a connect that finished, an error).
    Write,
}

/// One suspended fiber.
struct Waiter {
    token: u64,
    direction: Direction,
    wake: Wake,
}

/// The waiters of one socket.
#[derive(Default)]
struct Entry {
    waiters: Vec<Waiter>,
}

impl Entry {
    fn interest(&self, key: usize) -> Event {
        let readable = self.waiters.iter().any(|w| w.direction == Direction::Read);
        let writable = self.waiters.iter().any(|w| w.direction == Direction::Write);
        Event::new(key, readable, writable)
    }
}

#[derive(Default)]
struct Table {
    /// Indexed by key; `None`: a free key.
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    next_token: u64,
}

impl Table {
    fn entry(&mut self, key: usize) -> io::Result<&mut Entry> {
        match self.entries.get_mut(key) {
            Some(Some(entry)) => Ok(entry),
            _ => Err(io::Error::other(
                "exec-batching: the socket is not registered with this event loop",
            )),
        }
    }
}

/// The poller and the table of waiters. One per event loop.
pub(crate) struct Reactor {
    pub(crate) poller: Poller,
    table: Mutex<Table>,
    /// Waiters in the table (any thread may read it).
    waiters: AtomicUsize,
    /// Sockets registered (any thread may read it).
    sources: AtomicUsize,
}

/// A socket the poller knows: what registration needs from it.
#[cfg(unix)]
pub(crate) trait Sys: std::os::fd::AsFd + std::os::fd::AsRawFd {}
#[cfg(unix)]
impl<T: std::os::fd::AsFd + std::os::fd::AsRawFd> Sys for T {}

/// A socket the poller knows: what registration needs from it.
#[cfg(windows)]
pub(crate) trait Sys:
    std::os::windows::io::AsSocket + std::os::windows::io::AsRawSocket
{
}
#[cfg(windows)]
impl<T: std::os::windows::io::AsSocket + std::os::windows::io::AsRawSocket> Sys for T {}

#[cfg(unix)]
fn raw(io: &impl Sys) -> std::os::fd::RawFd {
    io.as_raw_fd()
}

#[cfg(windows)]
fn raw(io: &impl Sys) -> std::os::windows::io::RawSocket {
    io.as_raw_socket()
}

#[cfg(unix)]
fn borrowed(io: &impl Sys) -> std::os::fd::BorrowedFd<'_> {
    io.as_fd()
}

#[cfg(windows)]
fn borrowed(io: &impl Sys) -> std::os::windows::io::BorrowedSocket<'_> {
    io.as_socket()
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            poller: Poller::new()?,
            table: Mutex::new(Table::default()),
            waiters: AtomicUsize::new(0),
            sources: AtomicUsize::new(0),
        })
    }

    /// Adds a socket to the poller (no interest yet); returns its key.
    ///
    /// The caller must call [`deregister`](Reactor::deregister) with the
    /// same socket before the socket is closed.
    pub(crate) fn register(&self, io: &impl Sys) -> io::Result<usize> {
        let mut table = lock(&self.table);
        let key = match table.free.pop() {
            Some(key) => key,
            None => {
                table.entries.push(None);
                table.entries.len() - 1
            }
        };
        // SAFETY: `Poller::add` requires the socket to be deleted from the
        // poller before it is closed. Every caller is `Source::new` (net.rs),
        // which owns the socket from here on and whose `Drop` calls
        // `deregister` (which deletes it) before the socket's own field is
        // dropped and closes the descriptor; a failed `add` leaves nothing
        // to delete.
        let added = unsafe { self.poller.add(raw(io), Event::none(key)) };
        match added {
            Ok(()) => {
                table.entries[key] = Some(Entry::default());
                self.sources.fetch_add(1, Ordering::Relaxed);
                Ok(key)
            }
            Err(e) => {
                table.free.push(key);
                Err(e)
            }
        }
    }

    /// Deletes a socket from the poller and frees its key. Its waiters (if
    /// any) are returned, for the caller to drop outside the lock.
    pub(crate) fn deregister(&self, key: usize, io: &impl Sys) -> Vec<Wake> {
        let mut table = lock(&self.table);
        let entry = match table.entries.get_mut(key) {
            Some(entry) => entry.take(),
            None => None,
        };
        let Some(entry) = entry else {
            return Vec::new();
        };
        // An error here means the descriptor is no longer in the poller
        // (nothing to undo); the key is freed either way.
        let _ = self.poller.delete(borrowed(io));
        table.free.push(key);
        self.sources.fetch_sub(1, Ordering::Relaxed);
        self.waiters
            .fetch_sub(entry.waiters.len(), Ordering::Relaxed);
        entry.waiters.into_iter().map(|w| w.wake).collect()
    }

    /// Registers a fiber waiting for `direction` on the socket `key` and
    /// arms the poller; returns the waiter's token (for
    /// [`remove_waiter`](Reactor::remove_waiter)).
    pub(crate) fn add_waiter(
        &self,
        key: usize,
        io: &impl Sys,
        direction: Direction,
        wake: Wake,
    ) -> io::Result<u64> {
        let mut table = lock(&self.table);
        let token = table.next_token;
        table.next_token += 1;
        let entry = table.entry(key)?;
        entry.waiters.push(Waiter {
            token,
            direction,
            wake,
        });
        match self.poller.modify(borrowed(io), entry.interest(key)) {
            Ok(()) => {
                self.waiters.fetch_add(1, Ordering::Relaxed);
                Ok(token)
            }
            Err(e) => {
                // Not armed: take the waiter back out (its callback is the
                // caller's clone; dropping this one inside the lock cannot
                // free the fiber, which the caller's clone keeps alive).
                entry.waiters.pop();
                Err(e)
            }
        }
    }

    /// Removes the waiter `token` (a canceled fiber) and narrows the
    /// socket's interest to the remaining waiters. Returns its callback for
    /// the caller to drop outside the lock; `None` if it was woken already.
    pub(crate) fn remove_waiter(&self, key: usize, io: &impl Sys, token: u64) -> Option<Wake> {
        let mut table = lock(&self.table);
        let entry = table.entry(key).ok()?;
        let index = entry.waiters.iter().position(|w| w.token == token)?;
        let waiter = entry.waiters.swap_remove(index);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        // On error the socket stays armed for the others' directions plus
        // the removed one: at worst one spurious wake-up of the others.
        let _ = self.poller.modify(borrowed(io), entry.interest(key));
        Some(waiter.wake)
    }

    /// Takes the waiters of every socket reported in `events` into `wake`
    /// (the caller resumes them after this returns).
    pub(crate) fn take_ready(&self, events: &Events, wake: &mut Vec<Wake>) {
        if events.is_empty() {
            return;
        }
        let mut table = lock(&self.table);
        for event in events.iter() {
            if let Some(Some(entry)) = table.entries.get_mut(event.key) {
                self.waiters
                    .fetch_sub(entry.waiters.len(), Ordering::Relaxed);
                wake.extend(entry.waiters.drain(..).map(|w| w.wake));
            }
        }
    }

    /// Every waiter of every socket (the loop is dropped: the caller drops
    /// them outside the lock, which frees their fibers).
    pub(crate) fn drain_waiters(&self) -> Vec<Wake> {
        let mut table = lock(&self.table);
        let mut all = Vec::new();
        for entry in table.entries.iter_mut().flatten() {
            all.extend(entry.waiters.drain(..).map(|w| w.wake));
        }
        self.waiters.store(0, Ordering::Relaxed);
        all
    }

    /// Fibers waiting for I/O.
    pub(crate) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    /// Sockets registered.
    pub(crate) fn sources(&self) -> usize {
        self.sources.load(Ordering::Relaxed)
    }
}
