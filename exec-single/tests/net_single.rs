//! exec-single with `std` provides the I/O capability of spindle-net: on
//! the system clock its loop waits in a mio poller, so sockets made by its
//! fibers work; on any other clock (testkit's `TestControl`, a clock of the
//! user's) there is no driver and sockets fail with `Unsupported`.
//!
//! Here is what is exec-single's own: its clocks, its deadlock detection
//! (which counts fibers waiting for sockets), and building without
//! descriptors. What every executor shares (round trips, cancellation,
//! wake-ups from other threads while the loop sleeps in its poller, a main
//! fiber waiting on a socket, a fiber left waiting between two
//! `block_on`s, dropping the executor while a fiber waits) is tested on all
//! of them in `tests-integration/tests/net_*.rs`.
//!
//! Loopback only. Every test that could hang runs on a thread of its own
//! with a generous limit ([`HANG`]); threads that must act while a fiber
//! waits for a socket wait for the executor's I/O waiter count instead of
//! sleeping, and every such loop is bounded.

// Sockets need `std` and Unix (spindle-net); elsewhere this file is empty.
#![cfg(all(feature = "std", unix))]

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use spindle_core::{Callback, IO, IORuntime, Outcome};
use spindle_exec_single::testkit::TestControl;
use spindle_exec_single::{
    BuildError, Builder, Clock, Metrics, RunError, SingleThreaded, StdClock,
};
use spindle_net::{TcpListener, UdpSocket};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// How long a test may take before it is failed (a hang limit, not a
/// performance assertion).
const HANG: Duration = Duration::from_secs(20);

/// 127.0.0.1 with a port the system picks.
fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `f` on a new thread and returns its value; fails the test if it
/// did not finish within [`HANG`] (re-raises its panic).
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(r)) => r,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => panic!("hung: not done within {HANG:?}"),
    }
}

/// An executor on the system clock: the one with a reactor.
fn executor() -> SingleThreaded<StdClock> {
    SingleThreaded::new().expect("an executor")
}

/// Spins (yielding) on another thread until `done` holds; fails the test
/// after [`HANG`].
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < HANG, "gave up waiting for {what}");
        thread::yield_now();
    }
}

// ---------------------------------------------------------------------------
// Deadlock detection
// ---------------------------------------------------------------------------

#[test]
fn try_block_on_reports_a_deadlock_only_once_no_fiber_waits_on_a_socket() {
    let (run, read) = within(|| {
        let rt = executor();
        let handle = rt.handle().clone();
        let read: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
        let record = read.clone();
        let accepted = Arc::new(AtomicBool::new(false));
        let accepted_flag = accepted.clone();
        let client: Arc<Mutex<Option<thread::JoinHandle<()>>>> = Arc::default();
        let client_slot = client.clone();
        let program = TcpListener::bind(localhost()).flat_map(move |listener| {
            listener.local_addr().flat_map(move |addr| {
                *client_slot.lock().unwrap() = Some(thread::spawn(move || {
                    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
                    wait_for("the read to wait", || {
                        accepted.load(Ordering::SeqCst) && handle.metrics().io_waiters == 1
                    });
                    stream.write_all(b"ping").expect("write");
                }));
                // A fiber that reads from the socket; the main fiber then
                // drops its own callback: nothing can ever resume it, but
                // the reader still has work to do.
                let reader = listener.accept().flat_map(move |(stream, _peer)| {
                    accepted_flag.store(true, Ordering::SeqCst);
                    stream.read(16).map(move |bytes| {
                        *record.lock().unwrap() = Some(bytes);
                    })
                });
                reader.start().flat_map(|_reader| {
                    IO::from_callback(|callback: Callback<(), io::Error>| {
                        drop(callback);
                        None
                    })
                })
            })
        });
        let run = rt.try_block_on(program).map(|_| ());
        if let Some(client) = client.lock().unwrap().take() {
            client.join().expect("the client thread");
        }
        let read = read.lock().unwrap().take();
        (run, read)
    });
    assert_eq!(run, Err(RunError::Deadlock));
    assert_eq!(
        read.as_deref(),
        Some(&b"ping"[..]),
        "the deadlock was reported after the reader finished, not while it waited"
    );
}

// ---------------------------------------------------------------------------
// Executors without a driver, and building one
// ---------------------------------------------------------------------------

#[test]
fn sockets_under_test_control_fail_as_unsupported_since_virtual_time_has_no_driver() {
    let error = TestControl::run(TcpListener::bind(localhost()))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(error.to_string().contains("outside"), "{error}");
    let error = TestControl::run(UdpSocket::bind(localhost()))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
}

/// The system clock under another type: an executor on it has no driver.
#[derive(Debug, Default)]
struct OwnClock(StdClock);

impl Clock for OwnClock {
    fn now(&self) -> Duration {
        self.0.now()
    }
}

#[test]
fn an_executor_on_a_clock_of_the_users_has_no_driver_and_still_sleeps() {
    let (bind, slept) = within(|| {
        let rt = Builder::with_clock(OwnClock::default())
            .build()
            .expect("an executor");
        let bind = rt.block_on(TcpListener::bind(localhost()));
        let sleep: IO<(), ()> = IO::sleep(Duration::from_millis(1));
        let slept = rt.block_on(sleep);
        (
            bind.map(|outcome| outcome.errored().map(|e| e.kind())),
            slept,
        )
    });
    assert_eq!(bind, Ok(Some(io::ErrorKind::Unsupported)));
    assert_eq!(slept, Ok(Outcome::Succeeded(())));
}

/// Set (to the test's name) in the environment of a child run of this
/// test binary.
const CHILD: &str = "EXEC_SINGLE_NET_CHILD";

#[test]
fn a_system_out_of_descriptors_is_a_build_error_naming_the_poller() {
    const NAME: &str = "a_system_out_of_descriptors_is_a_build_error_naming_the_poller";
    if std::env::var(CHILD).is_ok_and(|v| v == NAME) {
        // In the child: no new descriptor may be opened.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` writes a `rlimit` through a valid pointer to
        // one; `setrlimit` reads one. Only this child process is affected.
        let lowered = unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: limit.rlim_max,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &none) == 0
            }
        };
        assert!(lowered, "lower RLIMIT_NOFILE");
        match SingleThreaded::new() {
            Err(e @ BuildError::Poller(_)) => eprintln!("system clock: {e}"),
            Err(e) => eprintln!("system clock: unexpected {e:?}"),
            Ok(_) => eprintln!("system clock: built"),
        }
        // An executor without I/O needs no descriptor.
        let virtual_time = Builder::with_clock(OwnClock::default()).build().is_ok();
        eprintln!("own clock: built {virtual_time}");
        // SAFETY: as above; restores the limit read before.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, NAME)
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("system clock: exec-single: could not make the I/O poller"),
        "{stderr}"
    );
    assert!(stderr.contains("own clock: built true"), "{stderr}");
    assert!(output.status.success(), "{stderr}");
}

/// `Metrics` prints its I/O waiters (used in assertion messages above).
#[test]
fn metrics_name_the_io_waiters() {
    let metrics: Metrics = executor().metrics();
    assert_eq!(metrics.io_waiters, 0);
    assert!(metrics.to_string().contains("io waiters: 0"), "{metrics}");
}
