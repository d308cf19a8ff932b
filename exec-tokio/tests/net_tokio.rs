//! spindle-net's sockets on exec-tokio, whose readiness is tokio's own I/O
//! driver (`AsyncFd`): round trips over TCP, UDP and Unix sockets, a socket
//! error that wakes a waiting receive, a read canceled by a timeout,
//! closing, split halves, both owned runtime flavors and an attached one,
//! two fibers waiting in one direction of one socket, and errors instead
//! of hangs (a runtime shut down, one built without I/O). Loopback
//! addresses only; every program is bounded by [`HANG`] and every loop in
//! count and time.
#![cfg(unix)]

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle_core::{IO, Outcome};
use spindle_exec_tokio::TokioExecutor;
use spindle_exec_tokio::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};

/// How long a test program may take before it is failed (a hang limit, not
/// a performance assertion).
const HANG: Duration = Duration::from_secs(20);

/// 127.0.0.1 with a port the system picks.
fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// An executor owning a multi-thread runtime of two workers.
fn multi_thread() -> TokioExecutor {
    TokioExecutor::builder()
        .multi_thread(2)
        .build()
        .expect("build a multi-thread executor")
}

/// An executor owning a current-thread runtime.
fn current_thread() -> TokioExecutor {
    TokioExecutor::builder()
        .current_thread()
        .build()
        .expect("build a current-thread executor")
}

/// Runs `program` within [`HANG`] and returns its value.
fn run<A: Send + 'static>(executor: &TokioExecutor, program: IO<A, io::Error>) -> A {
    match executor.block_on(program.timeout(HANG)).expect("block_on") {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("the program failed: {e} ({:?})", e.kind()),
        Outcome::Canceled => panic!("the program was canceled"),
        Outcome::Panicked(p) => panic!("the program panicked: {p:?}"),
    }
}

/// A connected pair of TCP streams on 127.0.0.1: (client, server).
fn pair() -> IO<(TcpStream, TcpStream), io::Error> {
    TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            TcpStream::connect(addr)
                .both(listener.accept())
                .map(|(client, (server, _peer))| (client, server))
        })
    })
}

/// Writes back what it reads, until end of stream, then shuts its write
/// side down.
fn echo(stream: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec(stream, |stream| {
        stream.read(16 * 1024).flat_map(move |bytes| {
            if bytes.is_empty() {
                stream
                    .shutdown(Shutdown::Write)
                    .map(|()| ControlFlow::Break(()))
            } else {
                let written = stream.write_all(bytes);
                written.map(move |()| ControlFlow::Continue(stream))
            }
        })
    })
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

/// A message of `len` bytes that differ by position.
fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// Connects to an echo server fiber, sends `sent` (and shuts down its
/// write side) while it reads the echo, and returns the echo.
fn echo_round_trip(sent: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    pair().flat_map(move |(client, server)| {
        let send = client
            .write_all(sent)
            .product_r(client.shutdown(Shutdown::Write));
        let receive = send.both(read_to_end(client)).map(|((), echoed)| echoed);
        echo(server).both(receive).map(|((), echoed)| echoed)
    })
}

/// A fresh directory for one test's socket files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("spindle-exec-tokio-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make a temporary directory");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_tcp_client_gets_back_every_byte_it_sends_to_an_echo_server_fiber() {
    let executor = multi_thread();
    // Larger than the socket buffers: writes meet full buffers and wait.
    let sent = message(2 * 1024 * 1024);
    let echoed = run(&executor, echo_round_trip(sent.clone()));
    assert_eq!(echoed.len(), sent.len());
    assert!(echoed == sent, "the echoed bytes differ");
}

#[test]
fn a_udp_datagram_sent_to_an_address_arrives_whole_with_the_senders_address() {
    let executor = multi_thread();
    let program = UdpSocket::bind(localhost()).flat_map(|receiver| {
        UdpSocket::bind(localhost()).flat_map(move |sender| {
            receiver.local_addr().flat_map(move |to| {
                sender.local_addr().flat_map(move |from| {
                    // The receive waits first: the datagram comes after.
                    let receive = receiver.recv_from(64);
                    let send = IO::sleep(Duration::from_millis(10))
                        .product_r(sender.send_to(b"ping".to_vec(), to));
                    receive
                        .both(send)
                        .map(move |(received, sent)| (received, sent, from))
                })
            })
        })
    });
    let ((datagram, source), sent, from) = run(&executor, program);
    assert_eq!(sent, 4);
    assert_eq!(datagram, b"ping".to_vec());
    assert_eq!(source, from);
}

#[test]
fn a_receive_waiting_on_a_connected_udp_socket_fails_with_connection_refused_when_the_peer_is_gone()
{
    let executor = multi_thread();
    // A port nobody listens on: bound, then closed.
    let gone = std::net::UdpSocket::bind(localhost())
        .and_then(|socket| socket.local_addr())
        .expect("a free port");
    let program = UdpSocket::bind(localhost()).flat_map(move |socket| {
        socket.connect(gone).flat_map(move |()| {
            // The receive waits first; the send's ICMP "port unreachable"
            // then makes the socket report an error, and nothing else.
            let receive = socket.recv(64);
            let send =
                IO::sleep(Duration::from_millis(10)).product_r(socket.send(b"anyone?".to_vec()));
            receive.both(send)
        })
    });
    let outcome = executor.block_on(program.timeout(HANG)).expect("block_on");
    let error = outcome.errored().expect("an error value");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{error}");
}

#[test]
fn a_unix_stream_round_trip_echoes_the_message_through_a_socket_file() {
    let executor = multi_thread();
    let dir = TempDir::new("round-trip");
    let path = dir.path("echo.sock");
    let client_path = path.clone();
    let sent = message(512 * 1024);
    let expected = sent.clone();
    let program = UnixListener::bind(&path).flat_map(move |listener| {
        listener
            .accept()
            .both(UnixStream::connect(client_path))
            .flat_map(move |((server, _), client)| {
                // The server reads the whole message, then writes it back.
                let server = IO::tail_rec((server, Vec::new()), |(server, buf)| {
                    server.read_into(buf, 64 * 1024).map(move |(buf, n)| {
                        if n == 0 {
                            ControlFlow::Break((server, buf))
                        } else {
                            ControlFlow::Continue((server, buf))
                        }
                    })
                })
                .flat_map(|(server, buf)| {
                    server
                        .write_all(buf)
                        .product_r(server.shutdown(Shutdown::Write))
                });
                let client = client
                    .write_all(sent)
                    .product_r(client.shutdown(Shutdown::Write))
                    .product_r(IO::tail_rec((client, Vec::new()), |(client, buf)| {
                        client.read_into(buf, 64 * 1024).map(move |(buf, n)| {
                            if n == 0 {
                                ControlFlow::Break(buf)
                            } else {
                                ControlFlow::Continue((client, buf))
                            }
                        })
                    }));
                server.both(client).map(|((), echoed)| echoed)
            })
    });
    let echoed = run(&executor, program);
    assert_eq!(echoed.len(), expected.len());
    assert!(echoed == expected, "the echoed bytes differ");
}

#[test]
fn a_read_canceled_by_a_timeout_leaves_the_stream_usable_and_a_later_read_gets_the_bytes_sent_after()
 {
    let executor = multi_thread();
    let program = pair().flat_map(|(client, server)| {
        let timed_out = server
            .read(16)
            .map(Some)
            .timeout_to(Duration::from_millis(20), IO::pure(None));
        timed_out.flat_map(move |first| {
            client
                .write_all(b"late")
                .product_r(server.read(16))
                .map(move |later| (first, later))
        })
    });
    let (first, later) = run(&executor, program);
    assert_eq!(first, None, "nothing was sent before the timeout");
    assert_eq!(later, b"late".to_vec());
}

#[test]
fn dropping_a_stream_closes_it_and_the_peer_reads_end_of_stream() {
    let executor = multi_thread();
    let program = pair().flat_map(|(client, server)| {
        // The server's read waits first; then the client goes away.
        let read = server.read(16);
        let close = IO::sleep(Duration::from_millis(10)).map(move |()| drop(client));
        read.both(close).map(|(read, ())| read)
    });
    let read = run(&executor, program);
    assert!(read.is_empty(), "end of stream, got {read:?}");
}

#[test]
fn split_halves_let_one_fiber_read_while_another_writes_on_the_same_stream() {
    let executor = multi_thread();
    // Larger than the socket buffers: the writer waits for room while the
    // reader waits for bytes, on the one socket.
    let sent = message(4 * 1024 * 1024);
    let expected = sent.clone();
    let program = pair().flat_map(move |(client, server)| {
        let (reader, writer) = client.into_split();
        let write = writer
            .write_all(sent)
            .product_r(writer.shutdown())
            .map(move |()| drop(writer));
        let read = IO::tail_rec((reader, Vec::new()), |(reader, buf)| {
            reader.read_into(buf, 64 * 1024).map(move |(buf, n)| {
                if n == 0 {
                    ControlFlow::Break(buf)
                } else {
                    ControlFlow::Continue((reader, buf))
                }
            })
        });
        echo(server)
            .both(write.both(read))
            .map(|((), ((), echoed))| echoed)
    });
    let echoed = run(&executor, program);
    assert_eq!(echoed.len(), expected.len());
    assert!(echoed == expected, "the echoed bytes differ");
}

#[test]
fn sockets_work_on_an_owned_current_thread_runtime_and_on_an_owned_multi_thread_runtime() {
    for (flavor, executor) in [
        ("current-thread", current_thread()),
        ("multi-thread", multi_thread()),
    ] {
        let sent = message(256 * 1024);
        let echoed = run(&executor, echo_round_trip(sent.clone()));
        assert!(echoed == sent, "{flavor}: the echoed bytes differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spindle_listener_on_an_attached_runtime_serves_a_tokio_client_on_the_same_driver() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let executor = TokioExecutor::current().expect("inside tokio");
    let (address_tx, address_rx) = tokio::sync::oneshot::channel();
    let server = TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let _ = address_tx.send(addr);
            listener
                .accept()
                .flat_map(|(stream, _)| echo(stream))
                .map(move |()| drop(listener))
        })
    });
    let served = tokio::spawn(executor.run_async(server.timeout(HANG)));
    let addr = tokio::time::timeout(HANG, address_rx)
        .await
        .expect("the server binds in time")
        .expect("the server sends its address");
    let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    client.write_all(b"through tokio").await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut echoed = Vec::new();
    tokio::time::timeout(HANG, client.read_to_end(&mut echoed))
        .await
        .expect("the echo ends in time")
        .expect("read");
    assert_eq!(echoed, b"through tokio".to_vec());
    let outcome = served.await.expect("the task").expect("runs");
    assert!(
        matches!(outcome, Outcome::Succeeded(())),
        "the server fiber ends: {outcome:?}"
    );
}

#[test]
fn a_socket_used_after_its_executor_and_owned_runtime_were_dropped_fails_with_an_io_error_and_does_not_hang()
 {
    let first = multi_thread();
    // The listener and the server's stream stay open: the read below finds
    // no bytes and no end of stream, so it must wait.
    let (client, server) = run(&first, pair());
    drop(first);
    let second = multi_thread();
    let started = Instant::now();
    let outcome = second
        .block_on(client.read(16).timeout(HANG))
        .expect("block_on");
    let error = outcome
        .errored()
        .expect("the read fails with an error value");
    assert_ne!(
        error.kind(),
        io::ErrorKind::TimedOut,
        "the read failed at once, not at the hang limit: {error}"
    );
    assert!(started.elapsed() < HANG, "the read did not hang");
    drop(server);
}

#[test]
fn making_a_socket_on_an_attached_runtime_without_io_is_an_unsupported_error_not_a_panic() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("a runtime with timers and no I/O");
    let executor = TokioExecutor::builder()
        .handle(runtime.handle().clone())
        .build()
        .expect("attach");
    let outcome = executor
        .block_on(TcpListener::bind(localhost()).timeout(HANG))
        .expect("block_on");
    let error = outcome.errored().expect("an error value");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported, "{error}");
    assert!(error.to_string().contains("enable_io"), "{error}");
}

/// Rounds of the tests of two fibers waiting in one direction of one
/// socket: a lost wake-up shows up in some rounds only.
const ROUNDS: usize = 1000;
/// How long one such round may take.
const ROUND_LIMIT: Duration = Duration::from_secs(5);

/// Runs `round` for each of [`ROUNDS`] rounds, each within
/// [`ROUND_LIMIT`]; an error names the round.
fn rounds(round: impl Fn(usize) -> IO<(), io::Error> + Send + 'static) -> IO<(), io::Error> {
    IO::traverse((0..ROUNDS).collect(), move |n| {
        round(n)
            .timeout(ROUND_LIMIT)
            .map_err(move |e| io::Error::new(e.kind(), format!("round {n}: {e}")))
    })
    .void()
}

// Two fibers wait in the same direction of one socket, each for one
// connection (or datagram), and two arrive at once. The one woken first
// clears tokio's readiness and leaves with the first; if the other had
// found nothing just before they arrived and starts waiting only after
// that clear, it must still see the second one (the `io` module doc of
// the crate: a wait that checks for clears since its snapshot). Without
// that check these tests hang within a few hundred rounds.

#[test]
fn two_fibers_accepting_one_connection_each_on_one_listener_both_get_a_connection_of_a_burst() {
    let executor = multi_thread();
    let program = TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            let listener = Arc::new(listener);
            rounds(move |_| {
                let acceptors = (0..2)
                    .map(|_| listener.accept().map(|(stream, _)| drop(stream)))
                    .collect::<Vec<_>>();
                let clients = IO::try_blocking(move || {
                    (0..2)
                        .map(|_| std::net::TcpStream::connect(addr))
                        .collect::<io::Result<Vec<_>>>()
                });
                IO::par_sequence(acceptors).both(clients).void()
            })
        })
    });
    run(&executor, program);
}

#[test]
fn two_fibers_receiving_one_datagram_each_on_one_udp_socket_both_get_a_datagram_of_a_burst() {
    let executor = multi_thread();
    let program = UdpSocket::bind(localhost()).flat_map(|socket| {
        socket.local_addr().flat_map(move |to| {
            let socket = Arc::new(socket);
            let sender = Arc::new(std::net::UdpSocket::bind(localhost()).expect("bind a sender"));
            rounds(move |_| {
                let receivers = (0..2)
                    .map(|_| socket.recv_from(64).void())
                    .collect::<Vec<_>>();
                let sender = sender.clone();
                let burst = IO::try_blocking(move || {
                    sender.send_to(b"one", to)?;
                    sender.send_to(b"two", to).map(drop)
                });
                IO::par_sequence(receivers).both(burst).void()
            })
        })
    });
    run(&executor, program);
}
