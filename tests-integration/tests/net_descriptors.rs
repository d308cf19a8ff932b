//! Connections leak nothing, on every executor: 1,000 concurrent
//! connections open and close, then 50,000 short ones (connect, one
//! request and its echo, close), and afterwards the process has the
//! descriptors it had before (counted in `/proc/self/fd`) and a resident
//! set that grew by less than [`RSS_GROWTH_LIMIT`] over the warmed-up one
//! (`/proc/self/statm`). And `serve` over 300 connections at once (a
//! third complete, answering through a clone of their stream from another
//! fiber; a third fail on malformed input; a third are canceled at
//! shutdown) leaves no descriptor and no registered socket behind, nor
//! does an executor dropped while one fiber holds a socket's write turn
//! and others wait for it.
//!
//! In a test binary of its own, whose tests run one at a time (a lock):
//! the counts are the process's, which any other test running at the same
//! time would disturb. Debug builds make [`SHORT_CONNECTIONS_DEBUG`] short
//! connections, so that `cargo test --workspace` stays quick; `.ci/run`
//! runs this binary in release too, with all 50,000:
//! `cargo test -p spindle-tests-integration --release --test net_descriptors`.
//! Loopback only; every loop is bounded.

#![cfg(target_os = "linux")]

mod common;

use common::net::*;
use common::{Counter, TestRuntime, rt_test};

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use spindle_core::{CountDownLatch, Deferred, IO, Outcome};
use spindle_net::{BufReader, ServeConfig, ServeSummary, TcpListener, TcpStream};

/// Concurrent connections of the first phase.
const CONNECTIONS: usize = 1000;
/// Short connections of the second phase, in release builds.
const SHORT_CONNECTIONS: usize = 50_000;
/// Short connections of the second phase in debug builds (see the module
/// documentation).
const SHORT_CONNECTIONS_DEBUG: usize = 5_000;
/// Clients that make the short connections at the same time, each one
/// after the other.
const SHORT_CLIENTS: usize = 8;
/// How much the resident set may grow over the short connections (a
/// generous bound: a leak of a few hundred bytes per connection exceeds it
/// at 50,000).
const RSS_GROWTH_LIMIT: usize = 16 * 1024 * 1024;
/// Descriptors an executor may open for itself, lazily, while it runs
/// (beyond those it opened when it was built); it closes them when dropped.
const EXECUTOR_SLACK: usize = 4;

/// One test at a time in this binary (module documentation).
static SERIAL: Mutex<()> = Mutex::new(());

fn short_connections() -> usize {
    if cfg!(debug_assertions) {
        SHORT_CONNECTIONS_DEBUG
    } else {
        SHORT_CONNECTIONS
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
}

/// The resident set, in bytes.
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .expect("the resident set in /proc/self/statm");
    pages * rustix::param::page_size()
}

/// Waits (bounded by [`HANG`]) until at most `most` descriptors are open:
/// a closed socket's descriptor may be released by another thread (a
/// worker dropping the last reference) just after the program ends.
/// Returns the count then.
fn descriptors_settle_at_most(most: usize) -> usize {
    let start = Instant::now();
    loop {
        let open = open_descriptors();
        if open <= most || start.elapsed() > HANG {
            return open;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Raises the soft limit on open files to what the test needs (both ends of
/// every connection live in this process), within the hard limit; returns
/// how many concurrent connections fit.
fn connections_that_fit() -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let needed = (2 * CONNECTIONS + 64) as u64;
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|current| current < needed) {
        limit.current = Some(limit.maximum.map_or(needed, |max| max.min(needed)));
        let _ = setrlimit(Resource::Nofile, limit);
    }
    match getrlimit(Resource::Nofile).current {
        Some(current) if current < needed => (current.saturating_sub(64) / 2) as usize,
        _ => CONNECTIONS,
    }
}

/// Server side of a concurrent connection: reads the client's byte,
/// answers, waits for its end of stream, drops the connection.
fn serve(stream: TcpStream) -> IO<(), io::Error> {
    stream.read(1).flat_map(move |byte| {
        stream
            .write_all(byte)
            .product_r(stream.read(1))
            .map(move |_| drop(stream))
    })
}

/// Client side of a concurrent connection: connects, round-trips a byte,
/// waits until every client is connected, then closes.
fn client(addr: SocketAddr, all_open: CountDownLatch) -> IO<(), io::Error> {
    TcpStream::connect(addr).flat_map(move |stream| {
        let round_trip = stream.write_all([7u8]).product_r(stream.read(1));
        round_trip.flat_map(move |_| {
            all_open
                .release()
                .product_r(all_open.wait())
                .product_r(stream.shutdown(Shutdown::Write))
                .map(move |()| drop(stream))
        })
    })
}

/// `connections` connections, all open at once, then all closed; returns
/// how many were served.
fn concurrent_connections(connections: usize) -> IO<usize, io::Error> {
    let all_open = CountDownLatch::new(connections as u64).expect("a latch");
    TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let accept_all = IO::traverse((0..connections).collect(), move |_| {
                listener
                    .accept()
                    .flat_map(|(stream, _)| serve(stream).start())
            });
            let clients = (0..connections)
                .map(|_| client(addr, all_open.clone()))
                .collect::<Vec<_>>();
            accept_all
                .both(IO::par_sequence(clients))
                .flat_map(|(servers, _)| {
                    let joins = servers.iter().map(|s| s.join_void()).collect::<Vec<_>>();
                    IO::sequence(joins).map_to(servers.len())
                })
        })
    })
}

/// Server side of a short connection: reads the request, echoes it, and
/// closes first (so that `TIME_WAIT` is the server's: the client's
/// ephemeral ports are free again at once, and 50,000 connections fit in
/// the system's port range).
fn serve_short(stream: TcpStream, served: Counter) -> IO<(), io::Error> {
    stream.read(64).flat_map(move |request| {
        stream.write_all(request).map(move |()| {
            served.incr();
            drop(stream)
        })
    })
}

/// Client side of a short connection: connects, sends its request, reads
/// the echo to end of stream, checks it, closes.
fn short_client(addr: SocketAddr, n: usize) -> IO<(), io::Error> {
    let request = (n as u64).to_le_bytes().to_vec();
    TcpStream::connect(addr).flat_map(move |stream| {
        let sent = stream.write_all(request.clone());
        sent.product_r(read_to_end(stream)).flat_map(move |echoed| {
            if echoed == request {
                IO::unit()
            } else {
                IO::raise_error(io::Error::other(format!(
                    "connection {n}: echoed {echoed:?}, sent {request:?}"
                )))
            }
        })
    })
}

/// `connections` short connections made by [`SHORT_CLIENTS`] client fibers,
/// each one connection after the other (so that the test itself holds
/// nothing per connection), to a server that starts a fiber per
/// connection; returns how many the server served.
fn short_connections_served(connections: usize) -> IO<usize, io::Error> {
    let served = Counter::new();
    TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let count = served.clone();
            let server = IO::forever(move || {
                let served = count.clone();
                listener
                    .accept()
                    .flat_map(move |(stream, _)| serve_short(stream, served).attempt().start())
            });
            server.start().flat_map(move |server| {
                let clients = (0..SHORT_CLIENTS)
                    .map(|client| {
                        // Client `client` makes connections client,
                        // client + SHORT_CLIENTS, ...
                        IO::tail_rec(client, move |n| {
                            if n >= connections {
                                IO::pure(ControlFlow::Break(()))
                            } else {
                                short_client(addr, n)
                                    .map_to(ControlFlow::Continue(n + SHORT_CLIENTS))
                            }
                        })
                    })
                    .collect::<Vec<_>>();
                IO::par_sequence(clients)
                    .flat_map(move |_| server.cancel().map(move |()| served.get()))
            })
        })
    })
}

/// The whole test on executors made by `make` (see the module
/// documentation); prints what it measured.
fn connections_leak_nothing<R: TestRuntime>(executor: &str, make: impl Fn() -> R) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let connections = connections_that_fit();
    assert!(
        connections >= 100,
        "the open-file limit is too low for this test"
    );
    let short = short_connections();
    let started = Instant::now();

    // Warm-up, on an executor of its own: whatever the process makes once
    // (thread-local state, the allocator's arenas) is made before the
    // counts are taken.
    {
        let rt = make();
        succeeded(&rt, concurrent_connections(connections.min(100)));
        succeeded(&rt, short_connections_served(100));
    }
    let before = open_descriptors();
    let rt = make();
    let with_executor = open_descriptors();

    // 1,000 concurrent connections.
    let served = succeeded(&rt, concurrent_connections(connections));
    assert_eq!(served, connections);
    assert_nothing_registered(&rt);
    let after_concurrent = descriptors_settle_at_most(with_executor + EXECUTOR_SLACK);
    assert!(
        after_concurrent <= with_executor + EXECUTOR_SLACK,
        "{after_concurrent} descriptors open after the concurrent connections closed, \
         {with_executor} before them"
    );
    let warm = resident_bytes();

    // 50,000 short connections (fewer in debug builds).
    let short_started = Instant::now();
    let served = succeeded(&rt, short_connections_served(short));
    let short_took = short_started.elapsed();
    assert_eq!(served, short);
    assert_nothing_registered(&rt);
    let after_short = descriptors_settle_at_most(with_executor + EXECUTOR_SLACK);
    assert!(
        after_short <= with_executor + EXECUTOR_SLACK,
        "{after_short} descriptors open after the short connections, {with_executor} before them"
    );
    let grown = resident_bytes().saturating_sub(warm);
    assert!(
        grown < RSS_GROWTH_LIMIT,
        "the resident set grew by {grown} bytes over {short} short connections"
    );

    drop(rt);
    let after = descriptors_settle_at_most(before);
    assert_eq!(
        after, before,
        "descriptors open after the executor was dropped"
    );
    eprintln!(
        "{executor}: {connections} concurrent and {short} short connections in {:.1?} \
         (short ones: {short_took:.1?}); descriptors {before} before, {with_executor} with the \
         executor, {after_concurrent} / {after_short} after each phase, {after} after; \
         resident set grew by {} KiB",
        started.elapsed(),
        grown / 1024
    );
}

/// Connections of [`serve_mixed`]: a third complete, a third fail on
/// malformed input, a third are still running at shutdown.
const SERVED: usize = 300;

/// Serves `connections` clients at once, a third of each kind (see
/// [`SERVED`]); the completing handlers answer through a clone of their
/// stream written from a fiber of its own. Returns the summary.
fn serve_mixed(connections: usize) -> IO<ServeSummary, io::Error> {
    IO::block(async move {
        let listener = TcpListener::bind(localhost()).await?;
        let addr = listener.local_addr().await?;
        let stop = Deferred::<()>::new();
        let all_running = CountDownLatch::new(connections as u64).expect("a latch");
        let running = all_running.clone();
        let config = ServeConfig::builder()
            .max_connections(connections)
            .grace_period(Duration::from_millis(50))
            .build()
            .expect("a valid configuration");
        let server = spindle_net::serve(
            listener,
            config,
            stop.get(),
            move |stream: TcpStream, _peer| {
                let running = running.clone();
                let reader = BufReader::new(stream.clone());
                IO::block(async move {
                    let line = reader.read_line().await?.unwrap_or_default();
                    running.release().value().await;
                    match line.trim_end() {
                        "ok" => {
                            let answer = stream.write_all(b"fine\n").start().value().await;
                            match answer.join().value().await {
                                Outcome::Succeeded(()) => Ok(()),
                                other => Err(io::Error::other(format!("the answer: {other:?}"))),
                            }
                        }
                        "bad" => Err(io::Error::new(io::ErrorKind::InvalidData, "malformed")),
                        _ => IO::never().await,
                    }
                })
            },
        )
        .start()
        .value()
        .await;
        let kinds = ["ok\n", "bad\n", "hold\n"];
        let clients = (0..connections)
            .map(|n| {
                IO::<_, io::Error>::block(async move {
                    let reader = BufReader::new(TcpStream::connect(addr).await?);
                    reader.get_ref().write_all(kinds[n % 3]).await?;
                    reader.read_line().await
                })
            })
            .collect();
        let clients = IO::par_sequence(clients).start().value().await;
        all_running.wait().value().await;
        let _ = stop.complete(()).value().await;
        let summary = match server.join().value().await {
            Outcome::Succeeded(summary) => summary,
            other => return Err(io::Error::other(format!("serve: {other:?}"))),
        };
        match clients.join().value().await {
            Outcome::Succeeded(answers) => {
                let fine = answers
                    .iter()
                    .filter(|a| a.as_deref() == Some("fine\n"))
                    .count();
                if fine != connections.div_ceil(3) {
                    return Err(io::Error::other(format!("{fine} clients answered")));
                }
            }
            other => return Err(io::Error::other(format!("clients: {other:?}"))),
        }
        Ok(summary)
    })
}

/// `serve` over [`SERVED`] connections of three kinds, on an executor made
/// by `make`: the process has the descriptors it had before, and the
/// executor no socket registered.
fn served_connections_leak_nothing<R: TestRuntime>(executor: &str, make: impl Fn() -> R) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let connections = connections_that_fit().min(SERVED);
    {
        let rt = make();
        succeeded(&rt, serve_mixed(30));
    }
    let before = open_descriptors();
    let rt = make();
    let with_executor = open_descriptors();
    let summary = succeeded(&rt, serve_mixed(connections));
    let third = |k: usize| ((connections + 2 - k) / 3) as u64;
    assert_eq!(summary.accepted, connections as u64);
    assert_eq!(
        (
            summary.completed,
            summary.failed,
            summary.canceled,
            summary.panicked
        ),
        (third(0), third(1), third(2), 0)
    );
    assert_nothing_registered(&rt);
    let after_serving = descriptors_settle_at_most(with_executor + EXECUTOR_SLACK);
    assert!(
        after_serving <= with_executor + EXECUTOR_SLACK,
        "{after_serving} descriptors open after serve ended, {with_executor} before it"
    );
    drop(rt);
    let after = descriptors_settle_at_most(before);
    assert_eq!(
        after, before,
        "descriptors open after the executor was dropped"
    );
    eprintln!("{executor}: served {connections}: {summary:?}; descriptors {before} / {after}");
}

/// Leaves one fiber holding a socket's write turn (stuck on a peer that
/// does not read) and two waiting for it, then drops the executor: the
/// socket's descriptor must be closed (nothing keeps the waiting fibers).
fn writers_left_waiting_for_the_write_turn_leak_nothing<R: TestRuntime>(make: impl Fn() -> R) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let before = open_descriptors();
    let rt = make();
    let program = IO::block(async move {
        let (server, client) = tcp_pair().await?;
        let _holder = server
            .clone()
            .write_all(vec![b'a'; 8 * 1024 * 1024])
            .start()
            .value()
            .await;
        let _first = client.read_exact(1).await?;
        let _waiting = server.clone().write_all(b"B").start().value().await;
        let _also = server.write_all(b"C").start().value().await;
        IO::<(), io::Error>::sleep(Duration::from_millis(20)).await?;
        Ok(())
    });
    succeeded(&rt, program);
    drop(rt);
    let after = descriptors_settle_at_most(before);
    assert_eq!(
        after, before,
        "descriptors open after the executor was dropped"
    );
}

rt_test! {
    fn writers_left_waiting_for_a_write_turn_when_the_executor_is_dropped_leak_no_descriptor() {
        writers_left_waiting_for_the_write_turn_leak_nothing(rt);
    }

    fn a_thousand_concurrent_connections_then_many_short_ones_leak_no_descriptor_and_no_memory() {
        connections_leak_nothing(module_path!(), rt);
    }

    fn served_connections_that_complete_fail_or_are_canceled_at_shutdown_leak_no_descriptor() {
        served_connections_leak_nothing(module_path!(), rt);
    }
}
