//! Unix domain stream sockets on the event loop: round trips, end of
//! stream, canceled reads, addresses, and errors as values (a missing
//! socket, nobody listening, a path in use). Every program is bounded by
//! [`HANG`]: a hang fails the test instead of blocking the run.
#![cfg(unix)]

mod common;
use common::*;

use std::io;
use std::net::Shutdown;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_core::IO;
use spindle_exec_batching::net::{UnixListener, UnixStream};
use spindle_exec_batching::{EventLoop, Handle};

/// A fresh directory for one test's socket files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("spindle-unix-{}-{test}", std::process::id()));
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

/// Runs `program` on a new loop, within [`HANG`], and returns its error.
fn run_error<A: Send + 'static>(program: IO<A, io::Error>) -> io::Error {
    let rt = EventLoop::new().expect("build an event loop");
    let error = rt
        .block_on(program.timeout(HANG))
        .expect("block_on")
        .errored()
        .expect("the program fails with an error value");
    assert_eq!(rt.metrics().io_sources, 0, "nothing left registered");
    error
}

/// Reads until end of stream.
fn read_to_end(stream: UnixStream) -> IO<Vec<u8>, io::Error> {
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
fn echo(stream: UnixStream) -> IO<(), io::Error> {
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

/// Accepts one connection on `listener` at `path`, echoes it, and returns
/// what the client got back for `message`.
fn echo_once(listener: UnixListener, path: PathBuf, message: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    let server = listener.accept().flat_map(|(stream, _)| echo(stream));
    let client = UnixStream::connect(path).flat_map(move |stream| {
        let send = stream
            .write_all(message)
            .product_r(stream.shutdown(Shutdown::Write));
        send.both(read_to_end(stream)).map(|((), echoed)| echoed)
    });
    server.both(client).map(|((), echoed)| echoed)
}

#[test]
fn an_echo_over_a_unix_socket_returns_a_large_message_whole() {
    let dir = TempDir::new("echo");
    let path = dir.path("sock");
    let message: Vec<u8> = (0..2 * 1024 * 1024).map(|i: u32| (i * 31) as u8).collect();
    let expected = message.clone();
    let program =
        UnixListener::bind(&path).flat_map(move |listener| echo_once(listener, path, message));
    let (rt, echoed) = run(program);
    assert_eq!(echoed.len(), expected.len());
    assert!(echoed == expected, "the echoed bytes differ");
    assert_eq!(rt.metrics().io_sources, 0, "listener and streams closed");
    assert_eq!(rt.metrics().io_waiters, 0);
}

#[test]
fn the_listener_and_the_client_report_the_socket_path() {
    let dir = TempDir::new("addrs");
    let path = dir.path("sock");
    let client_path = path.clone();
    let program = UnixListener::bind(&path).flat_map(move |listener| {
        listener.local_addr().flat_map(move |listener_addr| {
            listener
                .accept()
                .both(UnixStream::connect(client_path))
                .flat_map(move |((_server, _peer), client)| {
                    client
                        .peer_addr()
                        .map(move |client_peer| (listener_addr, client_peer))
                })
        })
    });
    let (_rt, (listener_addr, client_peer)) = run(program);
    assert_eq!(listener_addr.as_pathname(), Some(path.as_path()));
    assert_eq!(client_peer.as_pathname(), Some(path.as_path()));
}

#[test]
fn a_peer_that_shuts_down_its_write_side_gives_end_of_stream_and_keeps_giving_it() {
    let dir = TempDir::new("eos");
    let path = dir.path("sock");
    let client_path = path.clone();
    let program = UnixListener::bind(&path).flat_map(move |listener| {
        let server = listener.accept().flat_map(|(stream, _)| {
            stream.read(64).flat_map(move |first| {
                stream.read(64).flat_map(move |second| {
                    stream.read(64).map(move |third| (first, second, third))
                })
            })
        });
        let client = UnixStream::connect(client_path).flat_map(|stream| {
            stream
                .write_all(b"bye")
                .product_r(stream.shutdown(Shutdown::Write))
                .map_to(stream)
        });
        server.both(client).map(|(reads, client)| {
            drop(client);
            reads
        })
    });
    let (_rt, (first, second, third)) = run(program);
    assert_eq!(first, b"bye".to_vec());
    assert!(second.is_empty(), "end of stream");
    assert!(third.is_empty(), "end of stream again");
}

#[test]
fn canceling_a_read_with_a_timeout_leaves_no_interest_and_a_later_read_gets_the_bytes() {
    let dir = TempDir::new("cancel");
    let path = dir.path("sock");
    let client_path = path.clone();
    let program = UnixListener::bind(&path).flat_map(move |listener| {
        listener
            .accept()
            .both(UnixStream::connect(client_path))
            .flat_map(|((server, _), client)| {
                let timed_out = server
                    .read(16)
                    .map(Some)
                    .timeout_to(Duration::from_millis(20), IO::pure(None));
                timed_out.flat_map(move |first| {
                    let waiters = IO::delay(|| Handle::current().map(|h| h.metrics().io_waiters));
                    waiters.flat_map(move |waiters| {
                        client
                            .write_all(b"late")
                            .product_r(server.read(16))
                            .map(move |later| (first, waiters, later))
                    })
                })
            })
    });
    let (_rt, (first, waiters, later)) = run(program);
    assert_eq!(first, None, "nothing was sent before the timeout");
    assert_eq!(waiters, Some(0), "the canceled read left no interest");
    assert_eq!(later, b"late".to_vec());
}

#[test]
fn connecting_to_a_path_with_no_socket_is_a_not_found_error_value() {
    let dir = TempDir::new("missing");
    let error = run_error(UnixStream::connect(dir.path("nobody")));
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
}

#[test]
fn connecting_to_a_socket_file_nobody_listens_on_is_a_connection_refused_error_value() {
    let dir = TempDir::new("refused");
    let path = dir.path("sock");
    // A listener bound and closed leaves its socket file behind.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    assert!(Path::new(&path).exists());
    let error = run_error(UnixStream::connect(path));
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
}

#[test]
fn binding_a_path_in_use_is_an_addr_in_use_error_value() {
    let dir = TempDir::new("inuse");
    let path = dir.path("sock");
    let again = path.clone();
    let error = run_error(
        UnixListener::bind(&path)
            .flat_map(move |first| UnixListener::bind(again).map(move |second| (first, second))),
    );
    assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
}

#[test]
fn unix_sockets_made_outside_every_executor_with_io_fail_with_an_io_error_not_a_panic() {
    // TestControl runs programs on virtual time, with no I/O driver.
    use spindle_exec_single::testkit::TestControl;
    let dir = TempDir::new("outside");
    let error = TestControl::run(UnixListener::bind(dir.path("sock")))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(!dir.path("sock").exists(), "no socket file was made");
    let error = TestControl::run(UnixStream::connect(dir.path("sock")))
        .expect("the program ends")
        .errored()
        .expect("no driver runs here");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
}
