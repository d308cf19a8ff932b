//! Unit tests of the support pieces that need no executor (the executors'
//! own tests and io-core's shared tests cover the rest); also under Miri.
//! The blocking pool's are `blocking.rs`; the loom model of the fiber
//! registry and the dumps that read it is `loom.rs`.

#[cfg(feature = "std")]
mod blocking;
#[cfg(loom)]
mod loom;
mod task_link;
#[cfg(loom)]
mod task_link_loom;

#[cfg(not(loom))]
use alloc::collections::VecDeque;
use alloc::string::ToString;
use core::time::Duration;

use super::*;

#[test]
fn nanos_converts_and_saturates() {
    assert_eq!(nanos(Duration::from_millis(1500)), 1_500_000_000);
    assert_eq!(nanos(Duration::MAX), u64::MAX);
}

#[test]
fn the_default_config_source_reads_no_environment() {
    assert_eq!(ConfigSource::Default.resolve(), Ok(FiberConfig::default()));
    let config = FiberConfig::builder()
        .auto_yield_after(7)
        .tracing(crate::TracingMode::None)
        .build()
        .unwrap();
    assert_eq!(ConfigSource::Explicit(config).resolve(), Ok(config));
}

#[test]
fn run_errors_say_what_was_wrong() {
    assert!(RunError::Deadlock.to_string().contains("deadlock"));
    assert!(RunError::ShutDown.to_string().contains("shut down"));
    assert!(RunError::Nested.to_string().contains("inside the executor"));
}

#[cfg(not(loom))]
#[test]
fn a_remote_queue_drains_in_order_and_refuses_pushes_once_closed() {
    let remote = RemoteQueue::new();
    assert!(!remote.has_pending());
    remote.push(1).unwrap();
    remote.push(2).unwrap();
    assert_eq!(remote.len(), 2);
    let mut out = VecDeque::new();
    remote.drain_into(&mut out);
    assert_eq!(out, [1, 2]);
    assert!(remote.is_empty() && !remote.has_pending());
    remote.push(3).unwrap();
    assert_eq!(remote.close(), [3]);
    assert_eq!(remote.push(4), Err(4));
    assert!(remote.is_closed());
}

#[cfg(not(loom))]
#[test]
fn published_numbers_read_back_as_stored() {
    let published = Published::<2>::new();
    assert_eq!(published.load(), [0, 0]);
    published.store([3, 5]);
    assert_eq!(published.load(), [3, 5]);
}

#[test]
fn common_settings_start_from_the_defaults_and_keep_what_the_setters_say() {
    let settings = CommonSettings::default();
    assert_eq!(settings.fiber_config(), Ok(FiberConfig::default()));
    assert!(!settings.track_fibers);
    let config = FiberConfig::builder().auto_yield_after(3).build().unwrap();
    let explicit = CommonSettings {
        fiber_config: ConfigSource::Explicit(config),
        track_fibers: true,
        ..CommonSettings::default()
    };
    assert_eq!(explicit.fiber_config(), Ok(config));
    // `track_fibers` lists fibers even when they do not trace.
    #[cfg(not(loom))]
    assert!(explicit.registry(&config, 1).is_enabled());
}

#[test]
fn a_shutdown_that_timed_out_says_what_was_still_running() {
    use crate::executor::{OnDeadlock, ShutdownTimedOut};
    let counted = ShutdownTimedOut::new(Some(3), 1).to_string();
    assert!(counted.contains("3 thread(s)"), "{counted}");
    assert!(counted.contains("1 blocking call(s)"), "{counted}");
    let uncounted = ShutdownTimedOut::new(None, 2).to_string();
    assert!(!uncounted.contains("thread(s)"), "{uncounted}");
    assert!(uncounted.contains("2 blocking call(s)"), "{uncounted}");
    assert!(OnDeadlock::Report.reports());
    assert!(!OnDeadlock::Wait.reports());
}
