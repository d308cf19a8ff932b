//! exec-single with `std` provides the I/O capability of spindle-net: on
//! the system clock its loop waits in a mio poller, so sockets made by its
//! fibers work; on any other clock (testkit's `TestControl`, a clock of the
//! user's) there is no driver and sockets fail with `Unsupported`.
//!
//! Loopback only. Every test that could hang runs on a thread of its own
//! with a generous limit ([`HANG`]); threads that must act while a fiber
//! waits for a socket wait for the executor's I/O waiter count instead of
//! sleeping, and every such loop is bounded.

// Sockets need `std` and Unix (spindle-net); elsewhere this file is empty.
#![cfg(all(feature = "std", unix))]

use std::fmt::Debug;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use spindle_core::{Callback, Either, IO, Outcome};
use spindle_exec_single::testkit::TestControl;
use spindle_exec_single::{
    BuildError, Builder, Clock, Handle, Metrics, RunError, SingleThreaded, StdClock,
};
use spindle_net::{TcpListener, TcpStream, UdpSocket};

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

/// The value of a run that must succeed.
fn succeeded<A, E: Debug>(run: Result<Outcome<A, E>, RunError>) -> A {
    match run.expect("block_on") {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("the program failed: {e:?}"),
        Outcome::Canceled => panic!("the program was canceled"),
        Outcome::Panicked(p) => panic!("the program panicked: {p:?}"),
    }
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

/// A program that cedes until `handle`'s executor has `waiters` fibers
/// waiting for a socket (at most 10,000 times, then it fails).
fn cede_until_io_waiters<C: Clock>(handle: Handle<C>, waiters: usize) -> IO<(), io::Error> {
    IO::tail_rec(0u32, move |ceded| {
        let handle = handle.clone();
        IO::delay(move || handle.metrics().io_waiters).flat_map(move |now| {
            if now == waiters {
                IO::pure(ControlFlow::Break(()))
            } else if ceded == 10_000 {
                IO::raise_error(io::Error::other(format!(
                    "still {now} I/O waiters after 10,000 cedes (expected {waiters})"
                )))
            } else {
                IO::cede().map_to(ControlFlow::Continue(ceded + 1))
            }
        })
    })
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

#[test]
fn a_tcp_echo_round_trip_runs_on_the_default_executor() {
    let (echoed, metrics) = within(|| {
        let rt = executor();
        let program = TcpListener::bind(localhost()).flat_map(|listener| {
            listener.local_addr().flat_map(move |addr| {
                let server = listener.accept().flat_map(|(stream, _peer)| {
                    stream
                        .read(1024)
                        .flat_map(move |bytes| stream.write_all(bytes))
                });
                let client = TcpStream::connect(addr)
                    .flat_map(|stream| stream.write_all(b"hello").product_r(stream.read(1024)));
                server.both(client).map(|((), echoed)| echoed)
            })
        });
        let echoed = succeeded(rt.block_on(program));
        (echoed, rt.metrics())
    });
    assert_eq!(echoed, b"hello");
    assert_eq!(metrics.io_waiters, 0, "{metrics}");
}

#[test]
fn a_udp_datagram_and_its_reply_make_a_round_trip() {
    let (reply, from_server) = within(|| {
        let rt = executor();
        let sockets = UdpSocket::bind(localhost()).both(UdpSocket::bind(localhost()));
        let program = sockets.flat_map(|(client, server)| {
            server.local_addr().flat_map(move |server_addr| {
                // The server sends each datagram back reversed.
                let serve = server.recv_from(64).flat_map(move |(datagram, from)| {
                    let reversed: Vec<u8> = datagram.into_iter().rev().collect();
                    server.send_to(reversed, from)
                });
                let ask = client
                    .send_to(b"ping", server_addr)
                    .product_r(client.recv_from(64))
                    .map(move |(reply, from)| (reply, from == server_addr));
                serve.both(ask).map(|(_sent, asked)| asked)
            })
        });
        succeeded(rt.block_on(program))
    });
    assert_eq!(reply, b"gnip");
    assert!(from_server, "the reply came from the server's address");
}

// ---------------------------------------------------------------------------
// Cancellation, deadlock detection, wake-ups
// ---------------------------------------------------------------------------

#[test]
fn a_read_canceled_by_timeout_leaves_the_stream_usable() {
    let (first, waiters_after_cancel, later) = within(|| {
        let rt = executor();
        let handle = rt.handle().clone();
        let program = TcpListener::bind(localhost()).flat_map(move |listener| {
            listener.local_addr().flat_map(move |addr| {
                let accepted = listener.accept();
                accepted.both(TcpStream::connect(addr)).flat_map(
                    move |((server, _peer), client)| {
                        // Nothing was sent: the read waits, and is canceled.
                        let first = server.read(16).timeout(Duration::from_millis(20)).attempt();
                        first.flat_map(move |first| {
                            let waiters = IO::delay(move || handle.metrics().io_waiters);
                            waiters.flat_map(move |waiters_after_cancel| {
                                let later = client.write_all(b"late").product_r(server.read(16));
                                later.map(move |later| (first, waiters_after_cancel, later))
                            })
                        })
                    },
                )
            })
        });
        succeeded(rt.block_on(program))
    });
    let error = first.expect_err("nothing was sent before the timeout");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
    assert_eq!(
        waiters_after_cancel, 0,
        "the canceled read left no interest behind"
    );
    assert_eq!(later, b"late", "the stream reads what comes next");
}

#[test]
fn a_main_fiber_waiting_on_a_socket_makes_try_block_on_wait_not_report_a_deadlock() {
    let read = within(|| {
        let rt = executor();
        let handle = rt.handle().clone();
        let accepted = Arc::new(AtomicBool::new(false));
        let accepted_flag = accepted.clone();
        let program = TcpListener::bind(localhost()).flat_map(move |listener| {
            listener.local_addr().flat_map(move |addr| {
                let client = thread::spawn(move || {
                    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
                    // Only once the loop has nothing to run but a read that
                    // waits for this socket.
                    wait_for("the read to wait", || {
                        accepted.load(Ordering::SeqCst) && handle.metrics().io_waiters == 1
                    });
                    stream.write_all(b"ping").expect("write");
                });
                listener.accept().flat_map(move |(stream, _peer)| {
                    accepted_flag.store(true, Ordering::SeqCst);
                    stream.read(16).map(move |read| {
                        client.join().expect("the client thread");
                        read
                    })
                })
            })
        });
        succeeded(rt.try_block_on(program))
    });
    assert_eq!(read, b"ping");
}

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

#[test]
fn a_wake_up_from_another_thread_while_the_loop_sleeps_in_its_poller_resumes_the_fiber() {
    // Fifty rounds: in each, the loop has nothing to run and sleeps in its
    // poller (a listener waits for a connection that never comes) until a
    // thread completes the fiber's callback.
    const ROUNDS: u32 = 50;
    let (sum, metrics) = within(|| {
        let rt = executor();
        let handle = rt.handle().clone();
        let program = TcpListener::bind(localhost()).flat_map(move |listener| {
            IO::tail_rec(0u32, move |round| {
                let handle = handle.clone();
                let woken: IO<u32, io::Error> = IO::from_callback(move |callback| {
                    thread::spawn(move || {
                        // The accept below has registered: the loop is
                        // idle (or about to be).
                        wait_for("the accept to wait", || handle.metrics().io_waiters == 1);
                        callback.succeed(round);
                    });
                    None
                });
                let never_accepted = listener.accept().map(|_| u32::MAX);
                never_accepted.race(woken).map(move |winner| match winner {
                    Either::Right(value) if round + 1 == ROUNDS => ControlFlow::Break(value),
                    Either::Right(_) => ControlFlow::Continue(round + 1),
                    Either::Left(_) => ControlFlow::Break(u32::MAX),
                })
            })
        });
        let last = succeeded(rt.block_on(program));
        (last, rt.metrics())
    });
    assert_eq!(sum, ROUNDS - 1, "every round was woken by its thread");
    assert_eq!(
        metrics.io_waiters, 0,
        "the losing accepts left nothing behind"
    );
}

// ---------------------------------------------------------------------------
// Between runs, and dropping the executor
// ---------------------------------------------------------------------------

#[test]
fn a_fiber_left_waiting_on_a_socket_by_one_block_on_resumes_in_the_next() {
    let read = within(|| {
        let rt = executor();
        let handle = rt.handle().clone();
        let first = TcpListener::bind(localhost()).flat_map(move |listener| {
            listener.local_addr().flat_map(move |addr| {
                let reader = listener
                    .accept()
                    .flat_map(|(stream, _peer)| stream.read(16));
                reader
                    .start()
                    .flat_map(move |reader| cede_until_io_waiters(handle, 1).map_to(reader))
                    .map(move |reader| (reader, addr))
            })
        });
        let (reader, addr) = succeeded(rt.block_on(first));
        assert_eq!(rt.metrics().io_waiters, 1, "the reader waits to accept");
        // Nothing polls now: the connection and its bytes wait in the
        // kernel until the next run.
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        client.write_all(b"ping").expect("write");
        let read = succeeded(rt.block_on(reader.join::<io::Error>()));
        drop(client);
        read
    });
    assert_eq!(read.succeeded(), Some(b"ping".to_vec()));
}

#[test]
fn dropping_the_executor_frees_a_fiber_waiting_on_a_socket() {
    let witness = Arc::new(());
    let (alive_while_the_executor_is, waiters, freed) = within({
        let witness = witness.clone();
        move || {
            let rt = executor();
            let handle = rt.handle().clone();
            let held = witness.clone();
            let program = TcpListener::bind(localhost()).flat_map(move |listener| {
                // Waits forever: nobody connects.
                let waiting = listener.accept().map(move |_| drop(held));
                waiting
                    .start()
                    .flat_map(move |_waiting| cede_until_io_waiters(handle, 1))
            });
            succeeded(rt.block_on(program));
            let alive = Arc::strong_count(&witness);
            let waiters = rt.metrics().io_waiters;
            drop(rt);
            (alive, waiters, Arc::strong_count(&witness))
        }
    });
    assert_eq!(
        alive_while_the_executor_is, 3,
        "the waiting fiber holds the witness while the executor lives"
    );
    assert_eq!(waiters, 1);
    assert_eq!(freed, 2, "dropping the executor freed the waiting fiber");
    assert_eq!(Arc::strong_count(&witness), 1);
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
