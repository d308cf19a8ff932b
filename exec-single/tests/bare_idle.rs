//! Without `std` (`cargo test -p spindle-exec-single --no-default-features`;
//! the test binary picks critical-section's `std` implementation, a global
//! lock): the loop's "nothing pending" check and [`Clock::wait`] run in one
//! critical section, so an interrupt handler's wake-up between the two is
//! never lost (on a single core, interrupts are masked until `wfi` returns;
//! `wfi` wakes on the pending interrupt). A thread plays the handler.

#![cfg(not(feature = "std"))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spindle_core::{IO, IORuntime, Outcome, Signal};
use spindle_exec_single::{Builder, Clock};

static IN_WAIT: AtomicBool = AtomicBool::new(false);
static WAITS: AtomicUsize = AtomicUsize::new(0);
/// What the probe thread saw once it got into a critical section: whether
/// the loop was still inside `wait` then.
static PROBE: Mutex<Option<JoinHandle<bool>>> = Mutex::new(None);

/// A clock on `Instant`, whose first `wait` checks that it runs inside a
/// critical section: a thread tries to enter one while `wait` sleeps.
/// (`Default`, as the clock of an executor that runs programs through
/// `IORuntime` is: its origin is when it is made.)
struct ProbingClock {
    origin: Instant,
}

impl Default for ProbingClock {
    fn default() -> Self {
        ProbingClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for ProbingClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wait(&self, _deadline: Option<Duration>) {
        if WAITS.fetch_add(1, Ordering::SeqCst) == 0 {
            IN_WAIT.store(true, Ordering::SeqCst);
            let probe =
                std::thread::spawn(|| critical_section::with(|_| IN_WAIT.load(Ordering::SeqCst)));
            std::thread::sleep(Duration::from_millis(50));
            IN_WAIT.store(false, Ordering::SeqCst);
            *PROBE.lock().unwrap() = Some(probe);
        } else {
            // Like `wfi` waking on a pending interrupt: the loop checks again.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn the_idle_check_and_clock_wait_run_in_one_critical_section_and_a_signal_still_wakes_the_loop() {
    static SIG: Signal<u32> = Signal::new();
    let rt = Builder::with_clock(ProbingClock::default())
        .remote_capacity(2)
        .build()
        .expect("build");
    let io: IO<u32, ()> = IO::delay(|| {
        std::thread::spawn(|| {
            while SIG.waiters() == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(5));
            SIG.signal(11);
        });
    })
    .product_r(SIG.wait());
    assert_eq!(rt.block_on(io), Ok(Outcome::Succeeded(11)));
    assert!(WAITS.load(Ordering::SeqCst) >= 1, "the loop idled");
    let probe = PROBE
        .lock()
        .unwrap()
        .take()
        .expect("the first wait ran the probe");
    assert!(
        !probe.join().unwrap(),
        "another context got into a critical section while the loop was in Clock::wait"
    );
}
