//! 1,000 concurrent connections open and close with no leaked file
//! descriptor. In a test binary of its own: it counts the entries of
//! `/proc/self/fd`, which other tests running at the same time in the same
//! process would disturb.

#![cfg(target_os = "linux")]

use std::io;
use std::net::{Shutdown, SocketAddr};

use spindle_core::{CountDownLatch, IO};
use spindle_exec_batching::EventLoop;
use spindle_exec_batching::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 1000;

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
}

/// Raises the soft limit on open files to what the test needs (both ends of
/// every connection live in this process), within the hard limit; returns
/// how many connections fit.
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

/// Server side: reads the client's byte, answers, waits for its end of
/// stream, drops the connection.
fn serve(stream: TcpStream) -> IO<(), io::Error> {
    stream.read(1).flat_map(move |byte| {
        stream
            .write_all(byte)
            .product_r(stream.read(1))
            .map(move |_| drop(stream))
    })
}

/// Client side: connects, round-trips a byte, waits until every client is
/// connected, then closes.
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

#[test]
fn a_thousand_concurrent_connections_open_and_close_with_no_leaked_descriptors() {
    let connections = connections_that_fit();
    assert!(
        connections >= 100,
        "the open-file limit is too low for this test"
    );
    let before = open_descriptors();
    let rt = EventLoop::new().expect("build an event loop");
    let all_open = CountDownLatch::new(connections as u64).expect("a latch");
    let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(move |listener| {
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
    });
    let served = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("every connection succeeds");
    assert_eq!(served, connections);
    let stats = rt.metrics();
    assert_eq!(stats.io_sources, 0, "{stats}");
    assert_eq!(stats.io_waiters, 0, "{stats}");
    drop(rt);
    assert_eq!(open_descriptors(), before);
}
