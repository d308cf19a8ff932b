//! TCP on the event loop: round trips, end of stream and resets, canceled
//! reads, errors as values, and sockets outside their loop. Clients on
//! other threads use blocking std sockets and wait for the loop's waiter
//! count instead of sleeping, so no test depends on timing.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spindle_core::{IO, Outcome};
use spindle_exec_batching::net::{TcpListener, TcpStream};
use spindle_exec_batching::{EventLoop, Handle};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn event_loop() -> EventLoop {
    EventLoop::new().expect("build an event loop")
}

/// Reads until end of stream.
fn read_to_end(stream: TcpStream) -> IO<Vec<u8>, io::Error> {
    IO::tail_rec((stream, Vec::new()), |(stream, buf)| {
        stream.read_into(buf, 64 * 1024).map(move |(buf, n)| {
            if n == 0 {
                ControlFlow::Break(buf)
            } else {
                ControlFlow::Continue((stream, buf))
            }
        })
    })
}

/// Writes back what it reads, until end of stream.
fn echo(stream: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec(stream, |stream| {
        stream.read(16 * 1024).flat_map(move |bytes| {
            if bytes.is_empty() {
                IO::pure(ControlFlow::Break(()))
            } else {
                let written = stream.write_all(bytes);
                written.map(move |()| ControlFlow::Continue(stream))
            }
        })
    })
}

/// Accepts forever, one echo fiber per connection.
fn echo_server(listener: TcpListener) -> IO<(), io::Error> {
    IO::forever(move || {
        listener
            .accept()
            .flat_map(|(stream, _)| echo(stream).attempt().start())
    })
    .void()
}

/// Connects, sends `message` while reading the echo (both at once, so
/// that neither side's buffers fill), and returns what came back.
fn echo_client(addr: SocketAddr, message: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    TcpStream::connect(addr).flat_map(move |stream| {
        let send = stream
            .write_all(message)
            .product_r(stream.shutdown(Shutdown::Write));
        send.both(read_to_end(stream)).map(|((), echoed)| echoed)
    })
}

/// A message of `len` bytes that differ by position and client.
fn message(client: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + client * 7) as u8).collect()
}

#[test]
fn an_echo_server_returns_what_each_of_ten_concurrent_clients_sends() {
    let rt = event_loop();
    let program = TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            echo_server(listener).start().flat_map(move |server| {
                // One large message, so that writes meet full buffers.
                let lengths = [
                    1,
                    10,
                    100,
                    1000,
                    10_000,
                    64 * 1024,
                    3,
                    0,
                    2 * 1024 * 1024,
                    7,
                ];
                let clients = lengths
                    .iter()
                    .enumerate()
                    .map(|(client, &len)| {
                        echo_client(addr, message(client, len))
                            .map(move |echoed| (client, len, echoed))
                    })
                    .collect::<Vec<_>>();
                IO::par_sequence(clients).flat_map(move |results| server.cancel().map_to(results))
            })
        })
    });
    let results = rt
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .expect("the clients succeed");
    assert_eq!(results.len(), 10);
    for (client, len, echoed) in results {
        assert_eq!(echoed.len(), len, "client {client}");
        assert!(
            echoed == message(client, len),
            "client {client}: echoed bytes differ"
        );
    }
    // The server and its connections are gone: nothing left registered.
    assert_eq!(rt.metrics().io_sources, 0);
    assert_eq!(rt.metrics().io_waiters, 0);
}

#[test]
fn a_stream_reports_both_ends_addresses_and_the_listener_its_own() {
    let rt = event_loop();
    let program = TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            let accepted = listener.accept();
            let connected = TcpStream::connect(addr);
            accepted
                .both(connected)
                .flat_map(move |((server, peer), client)| {
                    let client_ends = client.local_addr().both(client.peer_addr());
                    let server_ends = server.local_addr().both(server.peer_addr());
                    client_ends
                        .both(server_ends)
                        .map(move |ends| (addr, peer, ends))
                })
        })
    });
    let (addr, peer, ((client_local, client_peer), (server_local, server_peer))) =
        rt.block_on(program).expect("block_on").succeeded().unwrap();
    assert_eq!(client_peer, addr);
    assert_eq!(server_local, addr);
    assert_eq!(server_peer, client_local);
    assert_eq!(peer, client_local);
}

/// Accepts one connection from a client thread; once the server fiber is
/// suspended reading, the client thread runs `client_then`. Returns the
/// results of two reads.
fn read_twice_while_the_client<F>(client_then: F) -> Outcome<(Vec<u8>, Vec<u8>), io::Error>
where
    F: FnOnce(std::net::TcpStream) + Send + 'static,
{
    let rt = event_loop();
    let handle = rt.handle().clone();
    let accepted = Arc::new(AtomicBool::new(false));
    let accepted_flag = accepted.clone();
    let program = TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let client = std::thread::spawn(move || {
                let stream = std::net::TcpStream::connect(addr).expect("connect");
                // Wait until the server fiber waits in its read.
                while !(accepted.load(Ordering::SeqCst) && handle.metrics().io_waiters == 1) {
                    std::thread::yield_now();
                }
                client_then(stream);
            });
            listener.accept().flat_map(move |(stream, _)| {
                accepted_flag.store(true, Ordering::SeqCst);
                stream.read(1024).flat_map(move |first| {
                    stream.read(1024).map(move |second| {
                        let _ = client.join();
                        (first, second)
                    })
                })
            })
        })
    });
    rt.block_on(program).expect("block_on")
}

#[test]
fn a_peer_that_closes_mid_read_gives_end_of_stream_and_keeps_giving_it() {
    let outcome = read_twice_while_the_client(drop);
    let (first, second) = outcome.succeeded().expect("end of stream is not an error");
    assert!(first.is_empty());
    assert!(second.is_empty());
}

#[test]
fn a_peer_that_resets_mid_read_gives_a_connection_reset_error_value() {
    let outcome = read_twice_while_the_client(|stream| {
        // SO_LINGER 0: closing sends a reset instead of an orderly end.
        socket2::SockRef::from(&stream)
            .set_linger(Some(Duration::ZERO))
            .expect("set SO_LINGER");
        drop(stream);
    });
    let error = outcome.errored().expect("a reset is an error value");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
}

#[test]
fn canceling_a_read_with_a_timeout_deregisters_its_interest_and_a_later_read_works() {
    let rt = event_loop();
    let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
    let program = TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let client = std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(addr).expect("connect");
                let _ = wait_for_go.recv();
                stream.write_all(b"late").expect("write");
                // Keep the connection open until the server has read.
                let mut rest = Vec::new();
                let _ = stream.read_to_end(&mut rest);
            });
            listener.accept().flat_map(move |(stream, _)| {
                let timed_out = stream
                    .read(16)
                    .map(Some)
                    .timeout_to(Duration::from_millis(20), IO::pure(None));
                timed_out.flat_map(move |first| {
                    let waiters = IO::delay(|| Handle::current().map(|h| h.metrics().io_waiters));
                    waiters.flat_map(move |waiters_after_cancel| {
                        let _ = go.send(());
                        stream.read(16).map(move |later| {
                            drop(stream);
                            let _ = client.join();
                            (first, waiters_after_cancel, later)
                        })
                    })
                })
            })
        })
    });
    let (first, waiters, later) = rt.block_on(program).expect("block_on").succeeded().unwrap();
    assert_eq!(first, None, "nothing was sent before the timeout");
    assert_eq!(
        waiters,
        Some(0),
        "the canceled read left no interest behind"
    );
    assert_eq!(later, b"late".to_vec());
}

#[test]
fn binding_an_address_in_use_is_an_io_error_value() {
    let rt = event_loop();
    let program = TcpListener::bind(localhost()).flat_map(|first| {
        first
            .local_addr()
            .flat_map(move |addr| TcpListener::bind(addr).map(move |second| (first, second)))
    });
    let error = rt
        .block_on(program)
        .expect("block_on")
        .errored()
        .expect("the second bind fails");
    assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    assert_eq!(rt.metrics().io_sources, 0);
}

#[test]
fn connecting_to_a_port_nobody_listens_on_is_a_connection_refused_error_value() {
    let free = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let rt = event_loop();
    let error = rt
        .block_on(TcpStream::connect(addr))
        .expect("block_on")
        .errored()
        .expect("nobody listens");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
    assert_eq!(rt.metrics().io_sources, 0);
}

#[test]
fn dropping_a_stream_closes_it_and_removes_it_from_the_poller() {
    let rt = event_loop();
    let program = TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            let client = std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(addr).expect("connect");
                let mut received = Vec::new();
                stream.read_to_end(&mut received).map(|_| received)
            });
            let sources = || IO::delay(|| Handle::current().map_or(0, |h| h.metrics().io_sources));
            let accept = listener.accept();
            accept.flat_map(move |(stream, _)| {
                sources().flat_map(move |with_stream| {
                    drop(stream);
                    sources().map(move |without| {
                        drop(listener);
                        let received = client.join().ok().and_then(Result::ok);
                        (with_stream, without, received)
                    })
                })
            })
        })
    });
    let (with_stream, without, received) =
        rt.block_on(program).expect("block_on").succeeded().unwrap();
    assert_eq!(with_stream, 2, "the listener and the accepted stream");
    assert_eq!(without, 1, "the listener only");
    assert_eq!(received, Some(Vec::new()), "the peer read end of stream");
}

#[test]
fn sockets_made_outside_every_executor_with_io_fail_with_an_io_error_not_a_panic() {
    // TestControl runs programs on virtual time, with no I/O driver.
    use spindle_exec_single::testkit::TestControl;
    let error = TestControl::run(TcpListener::bind(localhost()))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(error.to_string().contains("outside"), "{error}");
    let error = TestControl::run(TcpStream::connect(localhost()))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
}

#[test]
fn a_socket_used_from_another_loop_fails_with_an_io_error() {
    let home = event_loop();
    let listener = home
        .block_on(TcpListener::bind(localhost()))
        .expect("block_on")
        .succeeded()
        .unwrap();
    let other = event_loop();
    let error = other
        .block_on(listener.accept())
        .expect("block_on")
        .errored()
        .expect("the listener belongs to the first loop");
    assert_eq!(error.kind(), io::ErrorKind::Other);
    // It still works on its own loop.
    let addr = home
        .block_on(listener.local_addr())
        .expect("block_on")
        .succeeded()
        .unwrap();
    let round_trip = listener.accept().both(TcpStream::connect(addr)).void();
    assert!(home.block_on(round_trip).expect("block_on").is_succeeded());
}

#[test]
fn connect_host_resolves_localhost_and_connects_to_the_address_that_listens() {
    let rt = event_loop();
    let program = TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            // `localhost` may resolve to ::1 first, where nobody listens:
            // then the next address is tried.
            let host = format!("localhost:{}", addr.port());
            listener
                .accept()
                .both(TcpStream::connect_host(host))
                .flat_map(|((_server, _), client)| client.peer_addr())
        })
    });
    let peer = rt
        .block_on(program.timeout(Duration::from_secs(20)))
        .expect("block_on")
        .succeeded()
        .expect("connected");
    assert!(peer.ip().is_loopback());
    assert_eq!(rt.metrics().io_sources, 0);
}

/// The error of `TcpStream::connect_host(host)`, within a hang limit.
fn connect_host_error(host: String) -> io::Error {
    let rt = event_loop();
    let error = rt
        .block_on(TcpStream::connect_host(host).timeout(Duration::from_secs(20)))
        .expect("block_on")
        .errored()
        .expect("the connection fails with an error value");
    assert_eq!(rt.metrics().io_sources, 0, "no socket left behind");
    error
}

#[test]
fn connect_host_to_a_port_nobody_listens_on_returns_the_last_addresss_connection_refused() {
    let free = std::net::TcpListener::bind(localhost()).unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let error = connect_host_error(format!("localhost:{port}"));
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{error}");
    let error = connect_host_error(format!("127.0.0.1:{port}"));
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{error}");
}

#[test]
fn connect_host_with_no_port_or_a_bad_port_is_an_invalid_input_error_value() {
    for host in ["localhost", "localhost:http", "127.0.0.1:99999", ""] {
        let error = connect_host_error(host.to_string());
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{host:?}: {error}"
        );
    }
}

#[test]
fn connect_host_to_a_name_that_does_not_resolve_is_an_io_error_value_not_a_panic() {
    // `.invalid` is reserved never to resolve (RFC 2606).
    let error = connect_host_error(String::from("name-that-does-not-exist.invalid:80"));
    assert_ne!(error.kind(), io::ErrorKind::TimedOut, "{error}");
}
