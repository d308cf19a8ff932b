//! `CountDownLatch`: fibers wait until a count reaches zero (Cats Effect's
//! `CountDownLatch`).
//!
//! The count sits behind a short lock; the release that brings it to zero
//! completes a [`Deferred`], which every waiter awaits (so a canceled wait
//! leaves no waiter behind). Releases past zero do nothing.

use core::fmt;

use crate::engine::tracing::{Named, here};
use crate::io::IO;
use crate::stdlib::data::deferred::Deferred;
use crate::sync::{Arc, Mutex};

// The operations as traces name them.
crate::engine::tracing::trace_ops! {
    Release = "CountDownLatch::release",
    Wait = "CountDownLatch::wait",
}

struct Shared {
    remaining: Mutex<u64>,
    done: Deferred<()>,
}

/// A latch opened by a number of releases.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{CountDownLatch, wstp::Runtime};
///
/// let latch = CountDownLatch::new(2)?;
/// let (l1, l2) = (latch.clone(), latch.clone());
/// let io: IO<&str, ()> = l1.release().product_r(l2.release()).product_r(latch.wait()).map_to("open");
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some("open"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    shared: Arc<Shared>,
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("remaining", &*self.shared.remaining.lock())
            .finish()
    }
}

/// A latch was asked for a count of 0: it would be open from the start,
/// which is almost certainly a mistake (use no latch instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidCount;

impl fmt::Display for InvalidCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a count-down latch needs a count of at least 1")
    }
}

impl core::error::Error for InvalidCount {}

impl CountDownLatch {
    /// A latch that opens after `count` releases (at least 1).
    pub fn new(count: u64) -> Result<Self, InvalidCount> {
        if count == 0 {
            return Err(InvalidCount);
        }
        Ok(CountDownLatch {
            shared: Arc::new(Shared {
                remaining: Mutex::new(count),
                done: Deferred::new(),
            }),
        })
    }

    /// Releases the latch once; the release that reaches zero opens it.
    #[track_caller]
    pub fn release<E: Send + 'static>(&self) -> IO<(), E> {
        let shared = self.shared.clone();
        IO::defer_at::<Named<Release>, _>(here(), move || {
            let opened = {
                let mut remaining = shared.remaining.lock();
                match *remaining {
                    0 => false,
                    1 => {
                        *remaining = 0;
                        true
                    }
                    _ => {
                        *remaining -= 1;
                        false
                    }
                }
            };
            if opened {
                shared.done.complete_untraced::<E>(()).void_untraced()
            } else {
                IO::unit()
            }
        })
    }

    /// Waits until the latch is open.
    #[track_caller]
    pub fn wait<E: Send + 'static>(&self) -> IO<(), E> {
        self.shared.done.get_at::<Named<Wait>, E>(here())
    }

    /// Releases still needed.
    pub fn remaining(&self) -> u64 {
        *self.shared.remaining.lock()
    }
}
