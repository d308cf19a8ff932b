//! Clocks: where exec-single reads the time, and (without `std`) how it
//! waits while idle.

use core::time::Duration;

/// A monotonic clock for [`SingleThreaded`](crate::SingleThreaded).
///
/// With `std`, [`StdClock`] is the default. Without `std` the user supplies
/// one, typically from a hardware timer. The executor runs programs through
/// io-core's `IORuntime`, implemented for clocks with a `Default` (its
/// `from_env` makes the clock with it), so a clock is best a zero-sized
/// handle to the hardware, or to a `static` the interrupt handler writes:
///
/// ```
/// use core::sync::atomic::{AtomicU64, Ordering};
/// use core::time::Duration;
/// use spindle_effect::single::Clock;
///
/// /// Counted by the SysTick interrupt handler, 1 ms each.
/// static TICKS: AtomicU64 = AtomicU64::new(0);
///
/// /// Reads [`TICKS`].
/// #[derive(Default)]
/// struct SysTickClock;
///
/// impl Clock for SysTickClock {
///     fn now(&self) -> Duration {
///         Duration::from_millis(TICKS.load(Ordering::Relaxed))
///     }
///     // A real firmware would `wfi` in `wait` and leave `notify` empty
///     // (an interrupt ends `wfi` by itself).
/// }
/// ```
pub trait Clock: Send + Sync + 'static {
    /// Time since a fixed origin; must never go backwards.
    fn now(&self) -> Duration;

    /// Time since the Unix epoch, where the platform knows it. The default
    /// returns [`now`](Clock::now): bare-metal targets rarely have a wall clock.
    fn real_time(&self) -> Duration {
        self.now()
    }

    /// Without `std`: called when no fiber is runnable, to wait until
    /// `deadline` (the next timer, if any) or until [`notify`](Clock::notify)
    /// is called. It may return early; the loop checks again. The default
    /// spins once. With `std` the loop waits in its I/O poller (on the
    /// system clock, on Unix) or parks its thread instead, and this is not
    /// called.
    ///
    /// It is called **inside a critical section** (`critical_section::with`;
    /// on a single-core Cortex-M or RISC-V: interrupts masked), right after
    /// the loop saw that no wake-up is pending, so that an interrupt
    /// between that check and the sleep is not lost. So its body should
    /// sleep until an interrupt is *pending*, which `wfi` does even while
    /// interrupts are masked (the handler runs when the loop leaves the
    /// section); it must not wait for something an interrupt handler has
    /// to do first (a loop on a flag a handler sets would never end), nor
    /// enable interrupts itself.
    fn wait(&self, deadline: Option<Duration>) {
        let _ = deadline;
        core::hint::spin_loop();
    }

    /// Without `std`: called after a fiber was woken from outside the loop
    /// (an interrupt handler or another core), to end a [`wait`](Clock::wait)
    /// early (for instance with `sev`). The default does nothing.
    fn notify(&self) {}
}

/// The system's monotonic clock (`std::time::Instant`) and wall clock.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    origin: spindle_core::executor::support::Origin,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        StdClock {
            origin: spindle_core::executor::support::Origin::now(),
        }
    }
}

#[cfg(feature = "std")]
impl Default for StdClock {
    fn default() -> Self {
        StdClock::new()
    }
}

#[cfg(feature = "std")]
impl Clock for StdClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn real_time(&self) -> Duration {
        spindle_core::executor::support::wall_clock()
    }
}
