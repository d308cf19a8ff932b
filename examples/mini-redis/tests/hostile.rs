//! Hostile and broken input, limits and the shutdown, on every executor,
//! with plain std sockets: each bad frame gets an error reply and a
//! close, the server keeps serving the others, memory stays bounded, the
//! connection limit holds and no descriptor is left open.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use spindle_mini_redis::server::Config;
use support::{TestServer, every_executor};

fn connect(server: &TestServer) -> TcpStream {
    let socket = TcpStream::connect(server.addr).expect("the server accepts");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    socket
}

/// Sends `bytes` and reads until the server closes: everything it sent.
fn send_and_read_to_close(server: &TestServer, bytes: &[u8]) -> String {
    let mut socket = connect(server);
    // The server may close before it has read everything: a reset then.
    let _ = socket.write_all(bytes);
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the reply: {e}"),
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

/// A `PING` on a new connection gets `+PONG`.
fn still_serves(server: &TestServer) {
    let mut socket = connect(server);
    socket.write_all(b"*1\r\n$4\r\nPING\r\n").expect("a write");
    let mut reply = [0u8; 7];
    socket.read_exact(&mut reply).expect("the reply");
    assert_eq!(&reply, b"+PONG\r\n");
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

every_executor! {
    fn a_bad_type_byte_gets_a_protocol_error_and_a_close() {
        let server = TestServer::start(KIND, Config::default());
        let reply = send_and_read_to_close(&server, b"*1\r\n$4\r\nPING\r\n!oops\r\n");
        assert!(reply.starts_with("+PONG\r\n-ERR Protocol error: "), "{reply:?}");
        assert!(reply.contains("'!'"), "the reply names the byte: {reply:?}");
        still_serves(&server);
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    fn negative_and_overflowing_bulk_lengths_get_a_protocol_error() {
        let server = TestServer::start(KIND, Config::default());
        for frame in [
            &b"*1\r\n$-5\r\n"[..],
            b"*1\r\n$9223372036854775808\r\n",
            b"*1\r\n$18446744073709551616\r\n",
            b"*1\r\n$12x\r\n",
            b"*-2\r\n",
        ] {
            let reply = send_and_read_to_close(&server, frame);
            assert!(reply.starts_with("-ERR Protocol error: "), "{frame:?}: {reply:?}");
        }
        still_serves(&server);
        server.stop();
    }

    fn a_declared_one_gibibyte_bulk_is_refused_before_its_bytes_come() {
        let server = TestServer::start(KIND, Config::default());
        let reply = send_and_read_to_close(&server, b"*2\r\n$3\r\nGET\r\n$1073741824\r\n");
        assert!(reply.starts_with("-ERR Protocol error: "), "{reply:?}");
        assert!(reply.contains("1073741824"), "the reply names the length: {reply:?}");
        still_serves(&server);
        server.stop();
    }

    fn a_hundred_thousand_deep_nested_array_is_refused_without_overflowing_a_stack() {
        let server = TestServer::start(KIND, Config::default());
        let deep = b"*1\r\n".repeat(100_000);
        let reply = send_and_read_to_close(&server, &deep);
        assert!(reply.starts_with("-ERR Protocol error: "), "{reply:?}");
        still_serves(&server);
        server.stop();
    }

    fn a_frame_cut_off_by_the_client_closes_only_its_connection() {
        let server = TestServer::start(KIND, Config::default());
        let mut socket = connect(&server);
        socket.write_all(b"*2\r\n$3\r\nGET\r\n$10\r\nabc").expect("a write");
        socket.shutdown(Shutdown::Write).expect("half close");
        let mut rest = Vec::new();
        socket.read_to_end(&mut rest).expect("the server closes");
        assert!(rest.is_empty(), "no reply to an unterminated frame: {rest:?}");
        still_serves(&server);
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    fn a_subscriber_that_never_reads_is_dropped_and_publishers_never_wait() {
        let config = Config {
            subscriber_queue: 16,
            ..Config::default()
        };
        let server = TestServer::start(KIND, config);
        let mut silent = connect(&server);
        silent
            .write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nfeed\r\n")
            .expect("a write");
        // Read the confirmation, then never again.
        let mut confirmation = [0u8; 33];
        silent.read_exact(&mut confirmation).expect("the confirmation");
        assert_eq!(&confirmation[..], &b"*3\r\n$9\r\nsubscribe\r\n$4\r\nfeed\r\n:1\r\n"[..]);
        // 64 KiB messages: the socket's buffers fill, then the queue, then
        // the subscriber is dropped; every PUBLISH is answered.
        let message = vec![b'm'; 64 * 1024];
        let mut publisher = connect(&server);
        let mut request = format!("*3\r\n$7\r\nPUBLISH\r\n$4\r\nfeed\r\n${}\r\n", message.len()).into_bytes();
        request.extend_from_slice(&message);
        request.extend_from_slice(b"\r\n");
        let started = Instant::now();
        let mut received = Vec::new();
        for _ in 0..2_000 {
            publisher.write_all(&request).expect("a publish");
            let mut reply = [0u8; 4];
            publisher.read_exact(&mut reply).expect("its reply");
            received.push(reply);
            if reply == *b":0\r\n" {
                break;
            }
        }
        assert_eq!(received.last(), Some(b":0\r\n"), "the subscriber was dropped");
        assert!(started.elapsed() < Duration::from_secs(30));
        drop(silent);
        let summary = server.stop();
        assert_eq!(summary.dropped_subscribers, 1);
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    fn ten_thousand_connections_with_a_limit_of_250_hold_the_limit_and_leak_no_descriptor() {
        let before = open_descriptors();
        let config = Config {
            max_connections: 250,
            ..Config::default()
        };
        let server = TestServer::start(KIND, config);
        // 300 at once: 250 are served, 50 wait in the backlog.
        let mut held: Vec<TcpStream> = (0..300).map(|_| connect(&server)).collect();
        for socket in &mut held {
            socket.write_all(b"*1\r\n$4\r\nPING\r\n").expect("a write");
        }
        let mut answered = 0;
        for socket in &mut held[..250] {
            let mut reply = [0u8; 7];
            socket.read_exact(&mut reply).expect("served");
            answered += 1;
        }
        assert_eq!(answered, 250);
        // The 251st waits until a served one closes.
        held[250].set_read_timeout(Some(Duration::from_millis(300))).expect("a timeout");
        let mut reply = [0u8; 7];
        assert!(held[250].read_exact(&mut reply).is_err(), "served beyond the limit");
        held[250].set_read_timeout(Some(Duration::from_secs(20))).expect("a timeout");
        drop(held.drain(..250));
        for socket in &mut held {
            socket.read_exact(&mut reply).expect("served after others closed");
            assert_eq!(&reply, b"+PONG\r\n");
        }
        drop(held);
        // Then many short ones, from four threads.
        let addr = server.addr;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..2_425 {
                        let mut socket = TcpStream::connect(addr).expect("a connection");
                        socket.write_all(b"*1\r\n$4\r\nPING\r\n").expect("a write");
                        let mut reply = [0u8; 7];
                        socket.read_exact(&mut reply).expect("a reply");
                        assert_eq!(&reply, b"+PONG\r\n");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a client thread");
        }
        let summary = server.stop();
        assert_eq!(summary.serve.accepted, 10_000);
        assert_eq!(summary.finalized, 10_000);
        assert!(summary.peak_connections <= 250, "{summary:?}");
        assert_eq!(summary.peak_connections, 250, "{summary:?}");
        assert_eq!(open_descriptors(), before, "descriptors left open");
    }

    fn shutdown_closes_idle_connections_at_once_and_runs_every_finalizer_once() {
        let config = Config {
            grace: Duration::from_secs(30),
            ..Config::default()
        };
        let server = TestServer::start(KIND, config);
        let mut idle: Vec<TcpStream> = (0..10).map(|_| connect(&server)).collect();
        for socket in &mut idle {
            socket.write_all(b"*1\r\n$4\r\nPING\r\n").expect("a write");
            let mut reply = [0u8; 7];
            socket.read_exact(&mut reply).expect("served");
        }
        let started = Instant::now();
        let summary = server.stop();
        // Far below the 30-second grace: idle connections did not wait for it.
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert_eq!(summary.serve.accepted, 10);
        assert_eq!(summary.finalized, 10);
        assert_eq!(summary.serve.canceled, 0);
        for socket in &mut idle {
            let mut rest = Vec::new();
            socket.read_to_end(&mut rest).expect("closed by the server");
            assert!(rest.is_empty());
        }
    }
}
