//! UDP on the event loop: datagram round trips (addressed and connected),
//! truncation, empty datagrams, canceled receives, errors as values. Every
//! program is bounded by [`HANG`]: a hang fails the test instead of
//! blocking the run.

mod common;
use common::*;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use spindle_core::IO;
use spindle_exec_batching::net::UdpSocket;
use spindle_exec_batching::{EventLoop, Handle};

/// Runs `program` on a new loop, within [`HANG`], and returns its error.
fn run_error<A: Send + 'static>(program: IO<A, io::Error>) -> io::Error {
    let rt = EventLoop::new().expect("build an event loop");
    rt.block_on(program.timeout(HANG))
        .expect("block_on")
        .errored()
        .expect("the program fails with an error value")
}

/// Two sockets bound to localhost, and the second one's address.
fn pair() -> IO<(UdpSocket, UdpSocket, SocketAddr), io::Error> {
    UdpSocket::bind(localhost()).flat_map(|a| {
        UdpSocket::bind(localhost()).flat_map(|b| b.local_addr().map(move |addr| (a, b, addr)))
    })
}

#[test]
fn a_datagram_sent_to_an_address_arrives_whole_with_its_senders_address() {
    let program = pair().flat_map(|(a, b, b_addr)| {
        a.local_addr().flat_map(move |a_addr| {
            a.send_to(b"hello, datagram".to_vec(), b_addr)
                .both(b.recv_from(1500))
                .map(move |(sent, (bytes, from))| (sent, bytes, from, a_addr))
        })
    });
    let (rt, (sent, bytes, from, a_addr)) = run(program);
    assert_eq!(sent, 15);
    assert_eq!(bytes, b"hello, datagram".to_vec());
    assert_eq!(from, a_addr);
    assert_eq!(rt.metrics().io_sources, 0, "both sockets closed");
    assert_eq!(rt.metrics().io_waiters, 0);
}

#[test]
fn connected_sockets_exchange_datagrams_in_both_directions_with_send_and_recv() {
    let program = pair().flat_map(|(a, b, b_addr)| {
        a.local_addr().flat_map(move |a_addr| {
            let connect = a.connect(b_addr).product_r(b.connect(a_addr));
            connect.flat_map(move |()| {
                let ping = a.send(b"ping").both(b.recv(64));
                ping.flat_map(move |(_, ping)| {
                    let pong = b.send(b"pong").both(a.recv(64));
                    pong.flat_map(move |(_, pong)| {
                        a.peer_addr().map(move |peer| (ping, pong, peer == b_addr))
                    })
                })
            })
        })
    });
    let (_rt, (ping, pong, peer_is_b)) = run(program);
    assert_eq!(ping, b"ping".to_vec());
    assert_eq!(pong, b"pong".to_vec());
    assert!(peer_is_b);
}

#[test]
fn a_receive_with_a_buffer_smaller_than_the_datagram_truncates_it_and_the_next_datagram_is_whole() {
    let program = pair().flat_map(|(a, b, b_addr)| {
        let long: Vec<u8> = (0..100u8).collect();
        let sends = a
            .send_to(long, b_addr)
            .product_r(a.send_to(b"next".to_vec(), b_addr));
        sends.flat_map(move |_| {
            b.recv_from(10)
                .flat_map(move |(first, _)| b.recv_from(64).map(move |(second, _)| (first, second)))
        })
    });
    let (_rt, (first, second)) = run(program);
    assert_eq!(first, (0..10u8).collect::<Vec<_>>(), "the first 10 bytes");
    assert_eq!(
        second,
        b"next".to_vec(),
        "the rest of the first is discarded"
    );
}

#[test]
fn an_empty_datagram_is_received_as_an_empty_vector() {
    let program = pair().flat_map(|(a, b, b_addr)| {
        a.send_to(Vec::new(), b_addr)
            .both(b.recv_from(64))
            .map(|(sent, (bytes, _))| (sent, bytes))
    });
    let (_rt, received) = run(program);
    assert_eq!(received, (0, Vec::new()));
}

#[test]
fn a_receive_canceled_by_a_timeout_leaves_no_waiter_and_a_later_receive_gets_the_datagram() {
    let program = pair().flat_map(|(a, b, b_addr)| {
        let timed_out = b
            .recv_from(64)
            .map(Some)
            .timeout_to(Duration::from_millis(20), IO::pure(None));
        timed_out.flat_map(move |first| {
            IO::delay(|| Handle::current().map(|h| h.metrics().io_waiters)).flat_map(
                move |waiters| {
                    a.send_to(b"late", b_addr)
                        .product_r(b.recv_from(64))
                        .map(move |(later, _)| (first.is_none(), waiters, later))
                },
            )
        })
    });
    let (_rt, (timed_out, waiters, later)) = run(program);
    assert!(timed_out, "nothing was sent before the timeout");
    assert_eq!(waiters, Some(0), "the canceled receive left no interest");
    assert_eq!(later, b"late".to_vec());
}

#[test]
fn sending_on_an_unconnected_socket_without_an_address_is_an_io_error_value() {
    let error = run_error(UdpSocket::bind(localhost()).flat_map(|socket| socket.send(b"x")));
    assert_ne!(error.kind(), io::ErrorKind::TimedOut, "{error}");
}

#[test]
fn binding_an_address_in_use_is_an_addr_in_use_error_value() {
    let error = run_error(UdpSocket::bind(localhost()).flat_map(|first| {
        first
            .local_addr()
            .flat_map(move |addr| UdpSocket::bind(addr).map(move |second| (first, second)))
    }));
    assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
}

#[test]
fn binding_outside_every_executor_with_io_is_an_io_error_not_a_panic() {
    // TestControl runs programs on virtual time, with no I/O driver.
    let error = spindle_exec_single::testkit::TestControl::run(UdpSocket::bind(localhost()))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(error.to_string().contains("outside"), "{error}");
}
