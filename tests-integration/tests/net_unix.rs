//! Unix domain stream sockets on every executor: round trips, end of
//! stream, canceled reads, split halves, addresses, and errors as values (a
//! missing socket, nobody listening, a path in use). Every program is
//! bounded by [`HANG`]: a hang fails the test instead of blocking the run.
#![cfg(unix)]

mod common;

use common::net::*;
use common::{TestRuntime, rt_test};

use std::io;
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_core::IO;
use spindle_net::{UnixListener, UnixStream};

/// A temporary directory named by the executor module and the test.
macro_rules! temp_dir {
    ($test:literal) => {
        TempDir::new(module_path!(), $test)
    };
}

/// Accepts one connection on `listener` at `path`, echoes it, and returns
/// what the client got back for `message`.
fn echo_once(listener: UnixListener, path: PathBuf, message: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    let server = listener.accept().flat_map(|(stream, _)| echo(stream));
    let client = UnixStream::connect(path).flat_map(move |stream| exchange(stream, message));
    server.both(client).map(|((), echoed)| echoed)
}

/// The error of `program` on `rt`, which keeps nothing registered.
fn failed_leaving_nothing<R: TestRuntime, A: Send + 'static>(
    rt: &R,
    program: IO<A, io::Error>,
) -> io::Error {
    let error = failed(rt, program);
    assert_nothing_registered(rt);
    error
}

rt_test! {
    fn an_echo_over_a_unix_socket_returns_a_large_message_whole() {
        let dir = temp_dir!("echo");
        let path = dir.path("sock");
        let message: Vec<u8> = (0..2 * 1024 * 1024).map(|i: u32| (i * 31) as u8).collect();
        let expected = message.clone();
        let program =
            UnixListener::bind(&path).flat_map(move |listener| echo_once(listener, path, message));
        let rt = rt();
        let echoed = succeeded(&rt, program);
        assert_eq!(echoed.len(), expected.len());
        assert!(echoed == expected, "the echoed bytes differ");
        // Listener and streams closed.
        assert_nothing_registered(&rt);
    }

    fn split_halves_of_a_unix_stream_let_one_fiber_read_while_another_writes() {
        let dir = temp_dir!("split");
        let path = dir.path("sock");
        let client_path = path.clone();
        let sent: Vec<u8> = (0..2 * 1024 * 1024).map(|i: u32| (i * 17) as u8).collect();
        let expected = sent.clone();
        let program = UnixListener::bind(&path).flat_map(move |listener| {
            listener
                .accept()
                .both(UnixStream::connect(client_path))
                .flat_map(move |((server, _), client)| {
                    let (reader, writer) = client.into_split();
                    // Dropping the write half shuts the write side down: the
                    // echo ends, and so does the read half's stream.
                    let write = writer.write_all(sent).map(move |()| drop(writer));
                    echo(server)
                        .both(write.both(read_to_end(reader)))
                        .map(|((), ((), echoed))| echoed)
                })
        });
        let echoed = succeeded(&rt(), program);
        assert_eq!(echoed.len(), expected.len());
        assert!(echoed == expected, "the echoed bytes differ");
    }

    fn the_listener_and_the_client_report_the_socket_path() {
        let dir = temp_dir!("addrs");
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
        let (listener_addr, client_peer) = succeeded(&rt(), program);
        assert_eq!(listener_addr.as_pathname(), Some(path.as_path()));
        assert_eq!(client_peer.as_pathname(), Some(path.as_path()));
    }

    fn a_peer_that_shuts_down_its_write_side_gives_end_of_stream_and_keeps_giving_it() {
        let dir = temp_dir!("eos");
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
        let (first, second, third) = succeeded(&rt(), program);
        assert_eq!(first, b"bye".to_vec());
        assert!(second.is_empty(), "end of stream");
        assert!(third.is_empty(), "end of stream again");
    }

    fn canceling_a_read_with_a_timeout_leaves_no_interest_and_a_later_read_gets_the_bytes() {
        let dir = temp_dir!("cancel");
        let path = dir.path("sock");
        let client_path = path.clone();
        let rt = rt();
        let probe = rt.io_probe();
        let program = UnixListener::bind(&path).flat_map(move |listener| {
            listener
                .accept()
                .both(UnixStream::connect(client_path))
                .flat_map(move |((server, _), client)| {
                    let timed_out = server
                        .read(16)
                        .map(Some)
                        .timeout_to(Duration::from_millis(20), IO::pure(None));
                    timed_out.flat_map(move |first| {
                        IO::delay(move || probe.waiters()).flat_map(move |waiters| {
                            client
                                .write_all(b"late")
                                .product_r(server.read(16))
                                .map(move |later| (first, waiters, later))
                        })
                    })
                })
        });
        let (first, waiters, later) = succeeded(&rt, program);
        assert_eq!(first, None, "nothing was sent before the timeout");
        assert!(
            counted_as(waiters, 0),
            "the canceled read left interest behind: {waiters:?}"
        );
        assert_eq!(later, b"late".to_vec());
    }

    fn connecting_to_a_path_with_no_socket_is_a_not_found_error_value() {
        let dir = temp_dir!("missing");
        let error = failed_leaving_nothing(&rt(), UnixStream::connect(dir.path("nobody")));
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    fn connecting_to_a_socket_file_nobody_listens_on_is_a_connection_refused_error_value() {
        let dir = temp_dir!("refused");
        let path = dir.path("sock");
        // A listener bound and closed leaves its socket file behind.
        drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
        assert!(Path::new(&path).exists());
        let error = failed_leaving_nothing(&rt(), UnixStream::connect(path));
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
    }

    fn binding_a_path_in_use_is_an_addr_in_use_error_value() {
        let dir = temp_dir!("inuse");
        let path = dir.path("sock");
        let again = path.clone();
        let error = failed_leaving_nothing(
            &rt(),
            UnixListener::bind(&path).flat_map(move |first| {
                UnixListener::bind(again).map(move |second| (first, second))
            }),
        );
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    }
}

#[test]
fn unix_sockets_made_outside_every_executor_with_io_fail_with_an_io_error_not_a_panic() {
    // TestControl runs programs on virtual time, with no I/O driver.
    use spindle_exec_single::testkit::TestControl;
    let dir = TempDir::new(module_path!(), "outside");
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
