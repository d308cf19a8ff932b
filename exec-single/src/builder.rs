//! [`Builder`]: configures and builds a [`SingleThreaded`] executor, with
//! the setter names every Spindle executor's builder has
//! (`fiber_config`, `track_fibers`, `build`) and exec-single's own
//! (`clock`, `remote_capacity`).

use spindle_core::FiberConfig;
use spindle_core::executor::support::{ConfigSource, FiberRegistry};

use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::StdClock;
use crate::error::BuildError;
use crate::executor::SingleThreaded;
use crate::platform;

/// Configures and builds a [`SingleThreaded`] executor.
///
/// ```
/// # #[cfg(feature = "std")] { // The system clock needs `std`.
/// use spindle_core::FiberConfig;
/// use spindle_exec_single::SingleThreaded;
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
    pub(crate) fiber_config: ConfigSource,
    track_fibers: bool,
    remote_capacity: usize,
}

#[cfg(feature = "std")]
impl Builder<StdClock> {
    /// The defaults: the system clock ([`StdClock`]), io-core's default
    /// [`FiberConfig`] (the environment is not read), fibers listed for
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
            fiber_config: ConfigSource::Default,
            track_fibers: false,
            remote_capacity: 0,
        }
    }

    /// Replaces the clock (the executor's own setter).
    pub fn clock<D: Clock>(self, clock: D) -> Builder<D> {
        Builder {
            clock,
            fiber_config: self.fiber_config,
            track_fibers: self.track_fibers,
            remote_capacity: self.remote_capacity,
        }
    }

    /// The run-loop configuration of every fiber (auto-yield budget,
    /// tracing). Without this call: [`FiberConfig::default`].
    pub fn fiber_config(mut self, config: FiberConfig) -> Self {
        self.fiber_config = ConfigSource::Explicit(config);
        self
    }

    /// Keeps a weak reference to every fiber so that
    /// [`SingleThreaded::live_fibers`] and [`SingleThreaded::fiber_dump`]
    /// list them, also when fibers do not trace. Fibers are listed anyway
    /// while they trace (io-core's `tracing` feature and a mode other than
    /// `none`); with tracing off and this option off (the default) nothing
    /// is kept per fiber.
    pub fn track_fibers(mut self, on: bool) -> Self {
        self.track_fibers = on;
        self
    }

    /// Room in the remote queue, made when the executor is built, for `n`
    /// fibers woken from outside the loop (other threads, interrupt
    /// handlers) between two turns: up to that many wake-ups never
    /// allocate. The queue keeps its buffer, so it only ever grows past
    /// `n` (once, by allocating in the pusher) if more fibers than that are
    /// woken at once. Firmware whose interrupt handlers wake fibers
    /// (`spindle_core::Signal::signal`, a `Callback`, a future's waker)
    /// sets it to the number of fibers its handlers may wake between two
    /// turns (at most the number of fibers that wait on them); then no
    /// handler allocates. Default: 0 (the buffer grows on first use).
    ///
    /// ```
    /// # #[cfg(feature = "std")] { // The system clock needs `std`.
    /// use spindle_exec_single::SingleThreaded;
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
        let config = self.fiber_config.resolve().map_err(BuildError::Config)?;
        let fibers = FiberRegistry::new(&config, self.track_fibers, 1);
        let io = platform::io_for(&self.clock)?;
        let executor = SingleThreaded::from_parts(self.clock, config, fibers, io);
        if self.remote_capacity > 0 {
            executor
                .handle()
                .shared
                .remote
                .reserve(self.remote_capacity);
        }
        Ok(executor)
    }
}
