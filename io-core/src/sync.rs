//! The sync shim: every atomic, `Arc`, `UnsafeCell` and lock of io-core
//! comes from here, so that the same code runs under [loom] for model
//! checking (`RUSTFLAGS="--cfg loom" cargo test -p spindle-core --lib loom`),
//! in the manner of tokio's `src/loom/` and crossbeam-utils' `primitive`.
//!
//! * Normal builds use `portable-atomic` (so that targets without
//!   compare-and-swap, such as thumbv6m, get CAS through `critical-section`,
//!   implemented by the final binary) and `portable-atomic-util`'s `Arc`
//!   and `Weak` (`alloc::sync::Arc` does not exist on such targets).
//! * `--cfg loom` builds use loom's types, which explore every interleaving
//!   allowed by the memory model. loom's `Arc` has no weak references:
//!   there, [`Weak`] is a strong reference with the same API, raw pointers
//!   included (its doc says why that is enough, and what it keeps alive),
//!   so that the code built on weak references (waits, fiber dumps and
//!   executors' fiber registries) is the same code in both builds.
//!
//! [`UnsafeCell`] follows loom's closure-based API (`with`, `with_mut`), so
//! that loom can track every access to the cell.
//!
//! What is *not* here, on purpose: `Cell`/`RefCell` inside thread-locals
//! (the stack pool, the trace-ring pool, the std drop trampoline), which no
//! other thread can reach, so there is nothing for loom to model.
//!
//! # The lock
//!
//! [`Mutex`] guards the short critical sections of the data types and the
//! join cell (`Deferred`, `Ref`, `Semaphore`, `Queue`, a fiber's join
//! state): a few dozen instructions, never held across a suspension, never
//! running user code that waits. Which lock, per build:
//!
//! * **std**: `parking_lot::Mutex` (one byte: a compare-and-swap to lock
//!   and to unlock, a brief spin, then the waiter parks), which parks as
//!   `std::sync::Mutex` does but without its poison checks on every lock
//!   and unlock: about 35 to 115 instructions of a `Deferred` or `Queue`
//!   ping-pong round (see below). A lock whose holder can be preempted must not
//!   make waiters spin: on a machine with more runnable threads than cores
//!   (a worker pool beside other processes, or any machine under load), a
//!   waiter that spins while the holder is descheduled burns its whole time
//!   slice for nothing, and keeps the holder off the core it needs.
//! * **no std** (embedded, thumbv6m through portable-atomic): `spin`. There
//!   are no threads to park; the contenders are interrupt handlers or
//!   cores, and the sections are a few instructions.
//! * **loom**: loom's mutex.
//!
//! There is no poisoning (a panic in a section, which only a bug in
//! io-core could cause, leaves the lock usable, as `spin` and
//! `parking_lot` do), so the three variants behave alike.
//!
//! ## Measurement (why not `spin`, and why not spin-then-yield)
//!
//! Two to four threads contend on a `Deferred`-like section (lock, push and
//! pop a three-word waiter entry in a `Vec`, bump a counter, unlock; a few
//! nanoseconds of work between sections), 200,000 sections per thread,
//! five runs each, median (min, max) of the slowest thread's ns per
//! section. Machine: 2 cores shared with other builds (load average ~7.6,
//! so holders are preempted: the case that matters). Three runs:
//!
//! | lock                     | 1 thread    | 2 threads             | 4 threads                    |
//! |--------------------------|-------------|-----------------------|------------------------------|
//! | `spin::Mutex`            | 12 – 17     | 13 – 44 (max 153)     | 116 – 167 (max 358 – 506)    |
//! | spin, then `yield_now`   | 15 – 18     | 18 – 54 (max 73)      | 60 – 89 (max 136 – 180)      |
//! | `std::sync::Mutex`       | 14 – 20     | 39 – 42 (max 164)     | 94 – 186 (max 155 – 305)     |
//!
//! Uncontended, the three are within a few nanoseconds. Oversubscribed,
//! `spin`'s waiters spin through the holder's preemption: its tail is the
//! worst. Spin-then-yield had the best medians here, but `sched_yield`
//! promises nothing (the scheduler may run the yielding waiter again before
//! the preempted holder; with real-time priorities it can livelock) and it
//! still burns CPU the other processes on the machine need. The parking
//! lock is close to it, bounds the waste, and is what tokio and std use
//! for their own short sections; it is the choice. (Measured with a
//! throwaway program outside the repository, `std::time::Instant` only.)
//!
//! `parking_lot::Mutex` later replaced `std::sync::Mutex` as the parking
//! lock (callgrind, `benches/examples/prof.rs`, exec-single, 2 × 1,000
//! rounds): `start_join` 5,222,153 → 5,152,153 instructions,
//! `deferred_ping_pong` 7,903,316 → 7,707,316, `queue_ping_pong`
//! 7,759,162 → 7,527,192. A hand-written one-byte parking lock measured at
//! the same time saved about as much (5,097,247 / 7,526,410 / 7,582,168);
//! the well-kept crate is the choice.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicPtr, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use portable_atomic_util::{Arc, Weak};

/// A weak reference to `arc`'s value (`Arc::downgrade`; a free function so
/// that the loom build, whose `Arc` has no weak references, can stand in).
#[cfg(not(loom))]
#[inline]
pub(crate) fn downgrade<T>(arc: &Arc<T>) -> Weak<T> {
    Arc::downgrade(arc)
}

/// Under loom, a *strong* reference standing in for a weak one: loom's
/// `Arc` has no weak references. Weak references are what lets a wait
/// that nobody can end be freed (`wait/cell.rs`, "Waits nobody can
/// end"), and what keeps a fiber listing from keeping its fibers
/// (`fiber/dump.rs`): a question of memory, not of interleavings. No
/// protocol of ours depends on an upgrade failing (a failed upgrade means
/// only "the structure and its waiter list are gone", or "the fiber is
/// gone", which a dump also learns from the fiber's state word once it
/// has completed), so the models check every interleaving of the code
/// that runs when it succeeds.
///
/// What it keeps alive, under loom only: whatever holds one holds the
/// value. A fiber listed in a [`WeakFibers`](crate::fiber::WeakFibers)
/// list (an executor's `FiberRegistry`) stays allocated until its entry
/// is swept (after it completed), the list is dropped, or the registry
/// is cleared (`FiberRegistry::clear`, which every executor calls when it
/// is dropped, and which a model whose fibers hold the registry through
/// their executor must call before it ends: loom fails a model that ends
/// with an `Arc` still alive).
#[cfg(loom)]
pub(crate) struct Weak<T>(Arc<T>);

#[cfg(loom)]
impl<T> Weak<T> {
    /// The value (always there under loom: see the type doc).
    pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
        Some(self.0.clone())
    }

    /// `Weak::into_raw`: the pointer of the reference, which the caller
    /// now owns (here `Arc::into_raw` of the strong reference).
    pub(crate) fn into_raw(this: Self) -> *const T {
        Arc::into_raw(this.0)
    }

    /// `Weak::from_raw`: takes back the reference of [`Weak::into_raw`].
    ///
    /// # Safety
    /// * `ptr` comes from [`Weak::into_raw`], and the caller gives up the
    ///   reference it stands for.
    pub(crate) unsafe fn from_raw(ptr: *const T) -> Self {
        // SAFETY: forwarded precondition; under loom `into_raw` is
        // `Arc::into_raw` of a strong reference.
        Weak(unsafe { Arc::from_raw(ptr) })
    }
}

/// See the non-loom variant.
#[cfg(loom)]
pub(crate) fn downgrade<T>(arc: &Arc<T>) -> Weak<T> {
    Weak(arc.clone())
}

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// The atomic of io-core's process-wide counters (`static`s): the real
/// one in every build, loom's included, since loom's atomics cannot be
/// `static`. Only for counters that hand out distinct numbers and order
/// nothing else (the owners of polls, `fiber/run_state.rs`): any
/// read-modify-write hands each number out once, whatever the
/// interleaving, so there is nothing for loom to explore.
pub(crate) use portable_atomic::AtomicUsize as StaticAtomicUsize;

/// The global lock of the bare-metal drop trampoline (`engine/node/drop_bare.rs`):
/// a critical section, safe from interrupt handlers (the final binary picks
/// the implementation).
#[cfg(not(feature = "std"))]
pub(crate) use critical_section::Mutex as CriticalSectionMutex;

/// The short-critical-section lock (see the module doc for which, and why).
pub(crate) struct Mutex<T>(MutexInner<T>);

#[cfg(all(not(loom), feature = "std"))]
type MutexInner<T> = parking_lot::Mutex<T>;
#[cfg(all(not(loom), not(feature = "std")))]
type MutexInner<T> = spin::Mutex<T>;
#[cfg(loom)]
type MutexInner<T> = loom::sync::Mutex<T>;

/// What [`Mutex::lock`] returns.
#[cfg(all(not(loom), feature = "std"))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
/// What [`Mutex::lock`] returns.
#[cfg(all(not(loom), not(feature = "std")))]
pub(crate) type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;
/// What [`Mutex::lock`] returns.
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// Wraps `value`.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Mutex(MutexInner::new(value))
    }

    /// Wraps `value` (loom's mutex is not `const`).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Mutex(MutexInner::new(value))
    }

    /// Locks: parks (std) or spins (no std) while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.0.lock()
        }
        #[cfg(loom)]
        {
            self.0.lock().unwrap()
        }
    }
}

/// `core::cell::UnsafeCell` with loom's access API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Gives `f` a shared pointer to the contents.
    #[allow(dead_code)]
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Gives `f` a mutable pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

// ----- the executor support types' lock ------------------------------------

#[cfg(all(feature = "std", not(loom)))]
/// The short lock of the support types: state any thread (or, without
/// `std`, any interrupt handler) may touch for a few instructions.
///
/// * With `std`: a `std` mutex (blocking, never spinning while contended
///   for long). A panic while it is held cannot leave the data half-updated
///   (pushes, reads), so poisoning is ignored.
/// * Without `std`: a `critical-section` (never a spin lock: an interrupt
///   handler that schedules a fiber while the loop holds a spin lock would
///   spin forever). The final binary provides the implementation.
/// * Under loom: loom's mutex (the shim's [`Mutex`]), so that a model of a
///   support type (the fiber registry's shards) explores every order of
///   its sections. (A `std` mutex there would block a model thread that
///   loom switched away from while it held the lock.)
///
/// User code never runs under this lock, and nothing is dropped under it.
pub(crate) struct Lock<T>(std::sync::Mutex<T>);

#[cfg(all(feature = "std", not(loom)))]
impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock(std::sync::Mutex::new(value))
    }

    /// Runs `f` with the value locked.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(all(not(feature = "std"), not(loom)))]
/// See the `std` variant.
pub(crate) struct Lock<T>(critical_section::Mutex<core::cell::RefCell<T>>);

#[cfg(all(not(feature = "std"), not(loom)))]
impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock(critical_section::Mutex::new(core::cell::RefCell::new(
            value,
        )))
    }

    /// Runs `f` with the value borrowed inside a critical section; `f`
    /// never takes this lock again (the support types do not nest it).
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        critical_section::with(|cs| f(&mut self.0.borrow_ref_mut(cs)))
    }
}

/// See the `std` variant.
#[cfg(loom)]
pub(crate) struct Lock<T>(Mutex<T>);

#[cfg(loom)]
impl<T> Lock<T> {
    /// Wraps `value` (loom's mutex is not `const`).
    pub(crate) fn new(value: T) -> Self {
        Lock(Mutex::new(value))
    }

    /// Runs `f` with the value locked.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }
}

// ----- the lock an interrupt handler may take --------------------------------

/// The lock of state that an interrupt handler touches (`data::signal`):
/// held for a few instructions, never across a call out of io-core, never
/// while allocating on the handler's side.
///
/// * **no std** (firmware): a `critical-section` (on a single-core
///   Cortex-M, interrupts masked). Never a spin lock: a handler that
///   interrupts the loop while the loop holds a spin lock would spin
///   forever. The final binary picks the implementation.
/// * **std**: a `std` mutex (an "interrupt handler" is then another thread,
///   which may wait for the holder). Poisoning is ignored: nothing that runs
///   under it can panic halfway through an update.
/// * **loom**: loom's mutex, so that the models explore every order of the
///   sections.
pub(crate) struct IrqLock<T>(IrqLockInner<T>);

#[cfg(all(not(loom), feature = "std"))]
type IrqLockInner<T> = std::sync::Mutex<T>;
#[cfg(all(not(loom), not(feature = "std")))]
type IrqLockInner<T> = critical_section::Mutex<core::cell::RefCell<T>>;
#[cfg(loom)]
type IrqLockInner<T> = loom::sync::Mutex<T>;

impl<T> IrqLock<T> {
    /// Wraps `value`.
    #[cfg(all(not(loom), feature = "std"))]
    pub(crate) const fn new(value: T) -> Self {
        IrqLock(std::sync::Mutex::new(value))
    }

    /// Wraps `value`.
    #[cfg(all(not(loom), not(feature = "std")))]
    pub(crate) const fn new(value: T) -> Self {
        IrqLock(critical_section::Mutex::new(core::cell::RefCell::new(
            value,
        )))
    }

    /// Wraps `value` (loom's mutex is not `const`).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        IrqLock(loom::sync::Mutex::new(value))
    }

    /// Runs `f` with the value locked. `f` never takes this lock again
    /// (so the `RefCell` of the no-std variant is never borrowed twice).
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(all(not(loom), feature = "std"))]
        {
            f(&mut self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner))
        }
        #[cfg(all(not(loom), not(feature = "std")))]
        {
            critical_section::with(|cs| f(&mut self.0.borrow_ref_mut(cs)))
        }
        #[cfg(loom)]
        {
            f(&mut self.0.lock().unwrap())
        }
    }
}
