//! [`Builder`]: configures and builds a [`SingleThreaded`] executor, with
//! the setters every Spindle executor's builder has (`fiber_config`,
//! `fiber_config_from_env`, `track_fibers`, and with std the starvation
//! watchdog's `starvation_threshold` and `on_starvation`: io-core's [`RuntimeBuilder`],
//! over the [`CommonSettings`] embedded here), `build`, and exec-single's
//! own (`clock`, `remote_capacity`).

use spindle_core::RuntimeBuilder;
use spindle_core::executor::support::CommonSettings;

use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::StdClock;
use crate::error::BuildError;
use crate::executor::SingleThreaded;
use crate::platform;

/// Configures and builds a [`SingleThreaded`] executor. The setters every
/// executor's builder has come from [`RuntimeBuilder`] (import it).
///
/// ```
/// # #[cfg(feature = "std")] { // The system clock needs `std`.
/// use spindle_effect::prelude::*;
/// use spindle_effect::{FiberConfig, single::SingleThreaded};
///
/// let config = FiberConfig::builder().auto_yield_after(256).build()?;
/// let rt = SingleThreaded::builder().fiber_config(config).track_fibers(true).build()?;
/// # let _ = rt;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder<C: Clock> {
    clock: C,
    common: CommonSettings,
    remote_capacity: usize,
}

impl<C: Clock> RuntimeBuilder for Builder<C> {
    fn common_settings(&mut self) -> &mut CommonSettings {
        &mut self.common
    }
}

#[cfg(feature = "std")]
impl Builder<StdClock> {
    /// The defaults: the system clock ([`StdClock`]), io-core's default
    /// [`FiberConfig`](spindle_core::FiberConfig) (the environment is not read), fibers listed for
    /// dumps while they trace.
    pub fn new() -> Builder<StdClock> {
        Builder::with_clock(StdClock::new())
    }
}

#[cfg(feature = "std")]
impl Default for Builder<StdClock> {
    fn default() -> Self {
        Builder::new()
    }
}

impl<C: Clock> Builder<C> {
    /// The defaults on a clock of the user's (a SysTick counter on a
    /// microcontroller, a [`VirtualClock`](crate::testkit::VirtualClock)):
    /// the builder of targets without `std`.
    pub fn with_clock(clock: C) -> Builder<C> {
        Builder {
            clock,
            common: CommonSettings::default(),
            remote_capacity: 0,
        }
    }

    /// Replaces the clock (the executor's own setter).
    pub fn clock<D: Clock>(self, clock: D) -> Builder<D> {
        Builder {
            clock,
            common: self.common,
            remote_capacity: self.remote_capacity,
        }
    }

    /// Room in the remote queue, made when the executor is built, for `n`
    /// fibers woken from outside the loop (other threads, interrupt
    /// handlers) between two turns: up to that many wake-ups never
    /// allocate. The queue keeps its buffer, so it only ever grows past
    /// `n` (once, by allocating in the pusher) if more fibers than that are
    /// woken at once. Firmware whose interrupt handlers wake fibers
    /// (`Signal::signal`, a `Callback`, a future's waker)
    /// sets it to the number of fibers its handlers may wake between two
    /// turns (at most the number of fibers that wait on them); then no
    /// handler allocates. Default: 0 (the buffer grows on first use).
    ///
    /// ```
    /// # #[cfg(feature = "std")] { // The system clock needs `std`.
    /// use spindle_effect::single::SingleThreaded;
    ///
    /// let rt = SingleThreaded::builder().remote_capacity(8).build()?;
    /// # let _ = rt;
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote_capacity(mut self, n: usize) -> Self {
        self.remote_capacity = n;
        self
    }

    /// Checks the configuration and makes the executor. On the system
    /// clock (with `std`, on Unix) this makes its I/O poller too, and fails
    /// with `BuildError::Poller` if the system refuses one (out of
    /// descriptors); see the [crate documentation](crate#the-loop).
    pub fn build(self) -> Result<SingleThreaded<C>, BuildError> {
        let config = self.common.fiber_config().map_err(BuildError::Config)?;
        let fibers = self.common.registry(&config, 1);
        let io = platform::io_for(&self.clock)?;
        #[cfg(feature = "std")]
        let starvation = self.common.starvation().map_err(BuildError::Config)?;
        #[cfg(feature = "std")]
        let lists_fibers = fibers.is_enabled();
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut executor = SingleThreaded::from_parts(self.clock, config, fibers, io);
        if self.remote_capacity > 0 {
            executor.handle.shared.remote.reserve(self.remote_capacity);
        }
        #[cfg(feature = "std")]
        if let Some(starvation) = starvation {
            use spindle_core::executor::support::{RunSlots, Watchdog};
            let slots = RunSlots::new();
            let slot = slots.add();
            let watchdog = Watchdog::start(
                starvation,
                slots,
                executor.handle.clone(),
                lists_fibers,
                std::string::String::from("spindle-single-watchdog"),
            )
            .map_err(BuildError::Watchdog)?;
            executor.watch = Some(std::boxed::Box::new(crate::executor::Watched {
                slot,
                _watchdog: watchdog,
            }));
        }
        Ok(executor)
    }
}
