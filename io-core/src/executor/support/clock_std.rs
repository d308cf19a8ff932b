//! The clocks of hosted executors (`std`).

use core::time::Duration;

/// The wall clock: time since the Unix epoch (zero if the system clock is
/// set before 1970), for [`Executor::real_time`](crate::Executor::real_time).
pub fn wall_clock() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// A monotonic clock's origin: [`Executor::monotonic`](crate::Executor::monotonic)
/// is the time since it (`std::time::Instant`).
#[derive(Debug, Clone, Copy)]
pub struct Origin(std::time::Instant);

impl Origin {
    /// An origin at the present instant.
    pub fn now() -> Origin {
        Origin(std::time::Instant::now())
    }

    /// The time since the origin (never goes backwards).
    #[inline]
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    /// [`elapsed`](Origin::elapsed) in nanoseconds ([`nanos`](super::nanos)),
    /// the unit of [`TimerHeap`](super::TimerHeap) deadlines.
    #[inline]
    pub fn elapsed_nanos(&self) -> u64 {
        super::nanos(self.elapsed())
    }
}

impl Default for Origin {
    fn default() -> Self {
        Origin::now()
    }
}
