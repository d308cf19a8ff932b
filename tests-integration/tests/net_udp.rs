//! UDP on every executor: datagram round trips (addressed, replied to,
//! connected), truncation, empty datagrams, canceled receives, a socket
//! error that ends a waiting receive, two receivers and a burst, errors as
//! values. Every program is bounded by [`HANG`]: a hang fails the test
//! instead of blocking the run.
#![cfg(unix)]

mod common;

use common::net::*;
use common::{TestRuntime, rt_test};

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use spindle_core::{Deferred, IO};
use spindle_net::UdpSocket;

/// Two sockets bound to localhost, and the second one's address.
fn pair() -> IO<(UdpSocket, UdpSocket, SocketAddr), io::Error> {
    UdpSocket::bind(localhost()).flat_map(|a| {
        UdpSocket::bind(localhost()).flat_map(|b| b.local_addr().map(move |addr| (a, b, addr)))
    })
}

/// Rounds of the test of two fibers receiving on one socket: a lost
/// wake-up shows up in some rounds only (exec-tokio's did within a few
/// hundred).
const BURST_ROUNDS: usize = 1000;
/// How long one such round may take.
const ROUND_LIMIT: Duration = Duration::from_secs(5);

rt_test! {
    fn a_datagram_sent_to_an_address_arrives_whole_with_its_senders_address() {
        let rt = rt();
        let program = pair().flat_map(|(a, b, b_addr)| {
            a.local_addr().flat_map(move |a_addr| {
                a.send_to(b"hello, datagram".to_vec(), b_addr)
                    .both(b.recv_from(1500))
                    .map(move |(sent, (bytes, from))| (sent, bytes, from, a_addr))
            })
        });
        let (sent, bytes, from, a_addr) = succeeded(&rt, program);
        assert_eq!(sent, 15);
        assert_eq!(bytes, b"hello, datagram".to_vec());
        assert_eq!(from, a_addr);
        // Both sockets closed.
        assert_nothing_registered(&rt);
    }

    fn a_server_replies_to_the_address_a_datagram_came_from() {
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
        let (reply, from_server) = succeeded(&rt(), program);
        assert_eq!(reply, b"gnip".to_vec());
        assert!(from_server, "the reply came from the server's address");
    }

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
        let (ping, pong, peer_is_b) = succeeded(&rt(), program);
        assert_eq!(ping, b"ping".to_vec());
        assert_eq!(pong, b"pong".to_vec());
        assert!(peer_is_b);
    }

    fn a_receive_with_a_buffer_smaller_than_the_datagram_truncates_it_and_the_next_datagram_is_whole() {
        let program = pair().flat_map(|(a, b, b_addr)| {
            let long: Vec<u8> = (0..100u8).collect();
            let sends = a
                .send_to(long, b_addr)
                .product_r(a.send_to(b"next".to_vec(), b_addr));
            sends.flat_map(move |_| {
                b.recv_from(10).flat_map(move |(first, _)| {
                    b.recv_from(64).map(move |(second, _)| (first, second))
                })
            })
        });
        let (first, second) = succeeded(&rt(), program);
        assert_eq!(first, (0..10u8).collect::<Vec<_>>(), "the first 10 bytes");
        assert_eq!(
            second,
            b"next".to_vec(),
            "the rest of the first is discarded"
        );
    }

    fn an_empty_datagram_is_received_as_an_empty_vector() {
        let program = pair().flat_map(|(a, b, b_addr)| {
            a.send_to(Vec::new(), b_addr)
                .both(b.recv_from(64))
                .map(|(sent, (bytes, _))| (sent, bytes))
        });
        assert_eq!(succeeded(&rt(), program), (0, Vec::new()));
    }

    fn a_receive_canceled_by_a_timeout_leaves_no_waiter_and_a_later_receive_gets_the_datagram() {
        let rt = rt();
        let probe = rt.io_probe();
        let program = pair().flat_map(move |(a, b, b_addr)| {
            let timed_out = b
                .recv_from(64)
                .map(Some)
                .timeout_to(Duration::from_millis(20), IO::pure(None));
            timed_out.flat_map(move |first| {
                IO::delay(move || probe.waiters()).flat_map(move |waiters| {
                    a.send_to(b"late", b_addr)
                        .product_r(b.recv_from(64))
                        .map(move |(later, _)| (first.is_none(), waiters, later))
                })
            })
        });
        let (timed_out, waiters, later) = succeeded(&rt, program);
        assert!(timed_out, "nothing was sent before the timeout");
        assert!(
            counted_as(waiters, 0),
            "the canceled receive left interest behind: {waiters:?}"
        );
        assert_eq!(later, b"late".to_vec());
        assert_nothing_registered(&rt);
    }

    fn a_receive_waiting_on_a_connected_socket_fails_with_connection_refused_when_the_peer_is_gone()
    {
        // A port nobody listens on: bound, then closed.
        let gone = std::net::UdpSocket::bind(localhost())
            .and_then(|socket| socket.local_addr())
            .expect("a free port");
        let rt = rt();
        let probe = rt.io_probe();
        let program = UdpSocket::bind(localhost()).flat_map(move |socket| {
            socket.connect(gone).flat_map(move |()| {
                // The receive waits first; the send's ICMP "port
                // unreachable" then makes the socket report an error, and
                // nothing else: the error must end the waiting receive.
                let receiving = Deferred::<()>::new();
                let receive = receiving
                    .complete::<io::Error>(())
                    .product_r(socket.recv(64));
                let send = receiving
                    .get()
                    .product_r(until_io_waiters(probe, 1))
                    .product_r(socket.send(b"anyone?".to_vec()));
                receive.both(send)
            })
        });
        let error = failed(&rt, program);
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{error}");
    }

    fn two_fibers_receiving_one_datagram_each_on_one_socket_both_get_a_datagram_of_a_burst() {
        // As with two acceptors (net_tcp.rs): the fiber woken second must
        // not sleep through the second datagram of a burst.
        let program = UdpSocket::bind(localhost()).flat_map(|socket| {
            socket.local_addr().flat_map(move |to| {
                let socket = Arc::new(socket);
                let sender =
                    Arc::new(std::net::UdpSocket::bind(localhost()).expect("bind a sender"));
                IO::traverse((0..BURST_ROUNDS).collect(), move |n| {
                    let receivers = (0..2)
                        .map(|_| socket.recv_from(64).void())
                        .collect::<Vec<_>>();
                    let sender = sender.clone();
                    let burst = IO::try_blocking(move || {
                        sender.send_to(b"one", to)?;
                        sender.send_to(b"two", to).map(drop)
                    });
                    IO::par_sequence(receivers)
                        .both(burst)
                        .void()
                        .timeout(ROUND_LIMIT)
                        .map_err(move |e| io::Error::new(e.kind(), format!("round {n}: {e}")))
                })
                .void()
            })
        });
        succeeded(&rt(), program);
    }

    fn sending_on_an_unconnected_socket_without_an_address_is_an_io_error_value() {
        let rt = rt();
        // `failed` checks that the error is not the hang limit's.
        failed(
            &rt,
            UdpSocket::bind(localhost()).flat_map(|socket| socket.send(b"x")),
        );
        assert_nothing_registered(&rt);
    }

    fn binding_an_address_in_use_is_an_addr_in_use_error_value() {
        let rt = rt();
        let error = failed(
            &rt,
            UdpSocket::bind(localhost()).flat_map(|first| {
                first
                    .local_addr()
                    .flat_map(move |addr| UdpSocket::bind(addr).map(move |second| (first, second)))
            }),
        );
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert_nothing_registered(&rt);
    }
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
