//! hello_http against bad and hostile clients, over loopback with std
//! `TcpStream` clients, on every executor with I/O.
//!
//! Each test starts its own server: the example's `run` (its `main`) in a
//! child process, this test binary run again (see `common`), with the
//! executor flags of the module the test is stamped into (`wstp::...`,
//! `batching::...`, `tokio::...`, `tokio_current::...`, `single::...`),
//! so that its descriptors (`/proc/<pid>/fd`), memory
//! (`VmRSS`), CPU time, stderr and open-file limit are its own.
//!
//! Every loop is bounded in count, and every wait by [`HANG`]: a hang
//! limit, not a performance assertion.

#![cfg(target_os = "linux")]

mod common;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/hello_http.rs"]
mod hello_http;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::Deref;
use std::thread;
use std::time::{Duration, Instant};

use common::{ChildServer, HANG, executor_test, raise_nofile};
use hello_http::http::BODY;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const GET_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// The child server's settings (as its command line).
#[derive(Clone, Copy)]
struct Settings {
    header_timeout_ms: u64,
    idle_timeout_ms: u64,
    /// The soft open-file limit to set in the child (0: inherit).
    nofile: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            header_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            nofile: 0,
        }
    }
}

#[test]
fn serves_as_the_child_server_process_when_asked() {
    let Some(args) = common::child_args() else {
        return; // an ordinary run: nothing to do
    };
    let code = hello_http::run(args.into_iter());
    panic!("the server ended: {code:?}");
}

/// hello_http in a child process.
struct Server(ChildServer);

impl Deref for Server {
    type Target = ChildServer;
    fn deref(&self) -> &ChildServer {
        &self.0
    }
}

impl Server {
    /// hello_http on `executor` (its flags) with `settings`.
    fn start(executor: &[&str], settings: Settings) -> Server {
        let (header, idle) = (
            settings.header_timeout_ms.to_string(),
            settings.idle_timeout_ms.to_string(),
        );
        let args = common::args(
            executor,
            &["--header-timeout-ms", &header, "--idle-timeout-ms", &idle],
        );
        Server(ChildServer::start(&args, settings.nofile))
    }

    /// Sends `request`, then reads until the server closes.
    fn exchange(&self, request: &[u8]) -> Reply {
        let mut stream = self.connect();
        stream.write_all(request).expect("send");
        read_to_close(&mut stream)
    }

    /// A fresh connection is answered `200` at once.
    fn assert_healthy(&self) {
        let reply = self.exchange(GET_CLOSE);
        assert_eq!(reply.statuses(), [200], "{reply:?}");
    }
}

/// What came back on a connection, and how it ended.
#[derive(Debug)]
struct Reply {
    bytes: Vec<u8>,
    end: End,
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The server closed in order.
    Closed,
    /// The connection was reset.
    Reset,
}

impl Reply {
    /// The status codes of the responses, in order.
    fn statuses(&self) -> Vec<u16> {
        let text = String::from_utf8_lossy(&self.bytes);
        text.match_indices("HTTP/1.1 ")
            .filter_map(|(at, _)| text[at + 9..].get(..3)?.parse().ok())
            .collect()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

fn read_to_close(stream: &mut TcpStream) -> Reply {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < HANG,
            "the server neither answered nor closed"
        );
        match stream.read(&mut buf) {
            Ok(0) => {
                return Reply {
                    bytes,
                    end: End::Closed,
                };
            }
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Reply {
                    bytes,
                    end: End::Reset,
                };
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading from the server: {e} (after {:?})", start.elapsed()),
        }
    }
}

/// Reads until `bytes` ends with `suffix` (one keep-alive response).
fn read_until(stream: &mut TcpStream, suffix: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while !bytes.ends_with(suffix) {
        let n = stream.read(&mut buf).expect("a response");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&bytes));
        bytes.extend_from_slice(&buf[..n]);
    }
    bytes
}

fn post(length: &str) -> Vec<u8> {
    format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n").into_bytes()
}

executor_test! {
    fn the_server_runs_on_the_executor_its_flags_name() {
        let server = Server::start(EXECUTOR, Settings::default());
        server.assert_healthy();
        // exec-wstp's workers are threads `spindle-worker-N` (a new thread
        // takes its name once it runs: wait for it); the single-threaded
        // loops run on the child's main thread, exec-tokio on threads of
        // its own name.
        let workers = |s: &ChildServer| {
            let names = s.thread_names();
            names.iter().filter(|n| n.starts_with("spindle-worker")).count()
        };
        if EXECUTOR.contains(&"wstp") {
            server.wait_until("two pool workers", |s| workers(s) == 2);
        } else {
            assert_eq!(workers(&server), 0, "{:?}", server.thread_names());
        }
    }

    fn a_keep_alive_connection_gets_an_answer_per_request_until_it_asks_to_close() {
        let server = Server::start(EXECUTOR, Settings::default());
        let mut client = server.connect();
        for _ in 0..3 {
            client.write_all(GET).unwrap();
            let bytes = read_until(&mut client, BODY);
            assert!(bytes.starts_with(b"HTTP/1.1 200 OK\r\n"));
        }
        client.write_all(GET_CLOSE).unwrap();
        let reply = read_to_close(&mut client);
        let text = reply.text();
        assert_eq!(reply.end, End::Closed);
        assert!(text.contains("Content-Length: 13\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("Hello, World!"), "{text}");
    }

    fn a_content_length_that_used_to_wrap_is_413_without_a_spin_and_the_next_connection_is_served_at_once()
     {
        let server = Server::start(EXECUTOR, Settings::default());
        let reply = server.exchange(&post("18446744073709551559"));
        assert_eq!(reply.statuses(), [413], "{reply:?}");
        assert!(reply.text().contains("Connection: close\r\n"));
        // u64::MAX with a stray byte after the head: refused, and the byte
        // cannot reach a next request (the connection closes).
        let mut request = post("18446744073709551615");
        request.push(b'X');
        let reply = server.exchange(&request);
        assert_eq!(reply.statuses(), [413], "{reply:?}");
        let before = server.cpu();
        let start = Instant::now();
        server.assert_healthy();
        thread::sleep(Duration::from_millis(300));
        let (cpu, wall) = (server.cpu() - before, start.elapsed());
        assert!(
            cpu < wall / 2,
            "the server spins: {cpu:?} of CPU in {wall:?}"
        );
    }

    fn bad_negative_or_overflowing_content_lengths_are_400() {
        let server = Server::start(EXECUTOR, Settings::default());
        for length in ["-1", "+5", "abc", "", "5, 6", "99999999999999999999"] {
            let reply = server.exchange(&post(length));
            assert_eq!(reply.statuses(), [400], "{length:?}: {reply:?}");
        }
        server.assert_healthy();
    }

    fn garbage_and_request_lines_without_a_version_are_400() {
        let server = Server::start(EXECUTOR, Settings::default());
        for request in [
            &b"GET /\r\n\r\n"[..],
            b"hello there\r\n\r\n",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
            b"GET / HTTP/1.1\nHost: x\n\n",
            b"GET / HTTP/1.1\r\n\r\n",
        ] {
            let reply = server.exchange(request);
            assert_eq!(reply.statuses(), [400], "{request:?}: {reply:?}");
            assert!(reply.text().contains("Connection: close\r\n"), "{reply:?}");
        }
        let reply = server.exchange(b"GET / HTTP/2.0\r\n\r\n");
        assert_eq!(reply.statuses(), [505], "{reply:?}");
        let reply =
            server.exchange(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(reply.statuses(), [501], "{reply:?}");
        server.assert_healthy();
    }

    fn a_head_over_the_limit_is_431_and_a_100_kib_post_is_served_with_the_request_after_it() {
        let server = Server::start(EXECUTOR, Settings::default());
        let mut huge = b"GET / HTTP/1.1\r\nHost: x\r\nX-Filler: ".to_vec();
        huge.resize(70 * 1024, b'a');
        huge.extend_from_slice(b"\r\n\r\n");
        let reply = server.exchange(&huge);
        assert_eq!(reply.statuses(), [431], "{:?}", &reply.text());
        // A head with no end at all, past the limit.
        let reply = server.exchange(&vec![b'A'; 70 * 1024]);
        assert_eq!(reply.statuses(), [431], "{reply:?}");
        // 100 KiB of body does not count against the head limit, and is
        // skipped exactly: the pipelined request after it is answered.
        let mut request = post("102400");
        request.extend(std::iter::repeat_n(b'b', 100 * 1024));
        request.extend_from_slice(GET_CLOSE);
        let reply = server.exchange(&request);
        assert_eq!(reply.statuses(), [200, 200], "{reply:?}");
        assert_eq!(reply.end, End::Closed);
    }

    fn a_body_over_its_own_limit_is_413_and_one_cut_short_gets_a_close_without_an_answer() {
        let server = Server::start(EXECUTOR, Settings::default());
        let reply = server.exchange(&post("2000000"));
        assert_eq!(reply.statuses(), [413], "{reply:?}");
        let mut stream = server.connect();
        let mut request = post("100");
        request.extend_from_slice(b"only ten b");
        stream.write_all(&request).unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let reply = read_to_close(&mut stream);
        assert!(reply.bytes.is_empty(), "{reply:?}");
        server.assert_healthy();
    }

    fn pipelined_requests_are_answered_in_order_and_http_1_0_keeps_alive_only_when_asked() {
        let server = Server::start(EXECUTOR, Settings::default());
        let mut requests = GET.to_vec();
        requests.extend_from_slice(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
        requests.extend_from_slice(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
        requests.extend_from_slice(GET_CLOSE);
        requests.extend_from_slice(GET); // after the close: never answered
        let reply = server.exchange(&requests);
        assert_eq!(reply.statuses(), [200, 200, 200, 200], "{reply:?}");
        let text = reply.text();
        // The HEAD answer has no body, so the second status line follows the
        // first body directly, and only the last response closes.
        assert_eq!(text.matches("Hello, World!").count(), 3, "{text}");
        assert_eq!(text.matches("Connection: close").count(), 1, "{text}");
        assert!(text.ends_with("Connection: close\r\nContent-Length: 13\r\n\r\nHello, World!"));

        let reply = server.exchange(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!((reply.statuses(), reply.end), (vec![200], End::Closed));
        let mut stream = server.connect();
        for _ in 0..3 {
            stream
                .write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                .unwrap();
            let bytes = read_until(&mut stream, BODY);
            assert!(String::from_utf8_lossy(&bytes).contains("Connection: keep-alive\r\n"));
        }
    }

    fn a_client_trickling_a_head_is_closed_by_the_header_timeout() {
        let server = Server::start(EXECUTOR, Settings {
            header_timeout_ms: 600,
            idle_timeout_ms: 10_000,
            ..Settings::default()
        });
        let mut stream = server.connect();
        let mut writer = stream.try_clone().unwrap();
        let start = Instant::now();
        let trickle = thread::spawn(move || {
            let head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            for byte in head {
                if writer.write_all(&[*byte]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
        let reply = read_to_close(&mut stream);
        let elapsed = start.elapsed();
        assert!(reply.bytes.is_empty(), "{reply:?}");
        assert!(
            elapsed >= Duration::from_millis(500) && elapsed < Duration::from_secs(5),
            "closed after {elapsed:?}"
        );
        trickle.join().unwrap();
        server.assert_healthy();
    }

    fn idle_keep_alive_connections_a_thousand_of_them_too_are_closed_by_the_idle_timeout() {
        raise_nofile(4096);
        let server = Server::start(EXECUTOR, Settings {
            header_timeout_ms: 10_000,
            idle_timeout_ms: 700,
            ..Settings::default()
        });
        let baseline = server.descriptors();
        // One that was served first.
        let mut stream = server.connect();
        let start = Instant::now();
        stream.write_all(GET).unwrap();
        read_until(&mut stream, BODY);
        let reply = read_to_close(&mut stream);
        let elapsed = start.elapsed();
        assert!(reply.bytes.is_empty(), "{reply:?}");
        assert!(
            elapsed >= Duration::from_millis(600) && elapsed < Duration::from_secs(5),
            "closed after {elapsed:?}"
        );
        // A thousand that never send anything.
        let idle: Vec<TcpStream> = (0..1000).map(|_| server.connect()).collect();
        server.wait_until("the server to accept them", |s| {
            s.descriptors() >= baseline + 900
        });
        server.wait_until("the idle timeout to close them all", |s| {
            s.descriptors() <= baseline
        });
        drop(idle);
        server.assert_healthy();
    }

    fn a_connection_reset_mid_request_leaves_the_server_healthy() {
        let server = Server::start(EXECUTOR, Settings::default());
        let baseline = server.descriptors();
        for partial in [
            &b"GET / HTTP/1.1\r\nHo"[..],
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc",
            GET, // reset while the answer is on its way
        ] {
            let stream = socket2::Socket::from(server.connect());
            (&stream).write_all(partial).unwrap();
            stream.set_linger(Some(Duration::ZERO)).unwrap();
            drop(stream); // closing with linger 0 sends a reset
        }
        server.assert_healthy();
        server.wait_until("the reset connections to be closed", |s| {
            s.descriptors() <= baseline
        });
    }

    fn accept_under_descriptor_exhaustion_backs_off_logs_at_most_once_a_second_and_recovers() {
        const LIMIT: u64 = 64;
        let server = Server::start(EXECUTOR, Settings {
            nofile: LIMIT,
            ..Settings::default()
        });
        // More connections than the server has descriptors: the kernel
        // completes them into the listen queue; the server takes what fits.
        let mut clients: Vec<TcpStream> = (0..(LIMIT as usize + 40))
            .map(|_| server.connect())
            .collect();
        for client in &mut clients {
            client.write_all(GET).unwrap();
        }
        server.wait_until("the server to run out of descriptors", |s| {
            s.stderr_lines().iter().any(|l| l.contains("accept failed"))
        });
        let (cpu, start) = (server.cpu(), Instant::now());
        thread::sleep(Duration::from_millis(2500));
        let (cpu, wall) = (server.cpu() - cpu, start.elapsed());
        assert!(cpu < wall / 2, "accept spins: {cpu:?} of CPU in {wall:?}");
        let lines: Vec<String> = server
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains("accept failed"))
            .collect();
        assert!(
            (1..=4).contains(&lines.len()),
            "{} log lines in about 2.5 s: {lines:?}",
            lines.len()
        );
        if lines.len() > 1 {
            assert!(
                lines[1].contains("more failures since the last report"),
                "{lines:?}"
            );
        }
        // Free the descriptors (all but the last few clients, which were
        // queued): the server recovers and serves them, and a new one.
        let keep = 8;
        drop(clients.drain(..clients.len() - keep));
        server.wait_until("a queued connection to be answered", |_| {
            let mut last = clients.last().unwrap();
            let mut buf = [0u8; 4096];
            last.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            matches!(last.read(&mut buf), Ok(n) if n > 0)
        });
        drop(clients);
        server.assert_healthy();
    }

    fn a_thousand_connections_and_a_burst_of_short_ones_leak_no_descriptor_and_no_memory() {
        const SHORT: usize = 20_000;
        raise_nofile(4096);
        let server = Server::start(EXECUTOR, Settings::default());
        let baseline = server.descriptors();
        let cycle = |count: usize| {
            let mut open: Vec<TcpStream> = (0..count).map(|_| server.connect()).collect();
            for stream in &mut open {
                stream.write_all(GET).unwrap();
            }
            for stream in &mut open {
                read_until(stream, BODY);
            }
            drop(open);
        };
        // Warm up (the reactor's table and the allocator reach their size).
        cycle(1000);
        let burst = |count: usize| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let addr = server.addr;
                    thread::spawn(move || {
                        for _ in 0..count / 4 {
                            let mut stream = TcpStream::connect(addr).unwrap();
                            stream.set_read_timeout(Some(HANG)).unwrap();
                            stream.write_all(GET_CLOSE).unwrap();
                            let reply = read_to_close(&mut stream);
                            assert_eq!(reply.statuses(), [200]);
                        }
                    })
                })
                .collect();
            for worker in workers {
                worker.join().unwrap();
            }
        };
        burst(1000);
        server.wait_until("warm-up connections to close", |s| {
            s.descriptors() <= baseline
        });
        let (descriptors, rss) = (server.descriptors(), server.rss_kib());

        cycle(1000);
        burst(SHORT);
        server.wait_until("every connection to close", |s| {
            s.descriptors() <= descriptors
        });
        let grown = server.rss_kib().saturating_sub(rss);
        assert!(grown < 16 * 1024, "RSS grew by {grown} KiB");
        server.assert_healthy();
    }
}
