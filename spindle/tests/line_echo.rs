//! The `line_echo` example over loopback with std `TcpStream` clients, on
//! every executor with I/O: its `run` in a child process (see `common`),
//! stamped per executor (`wstp::...`, `batching::...`, `tokio::...`,
//! `tokio_current::...`, `single::...`).
//!
//! Every loop is bounded in count, and every wait by [`HANG`].

#![cfg(target_os = "linux")]

mod common;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/line_echo.rs"]
mod line_echo;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{ChildServer, HANG, executor_test, raise_nofile};

#[test]
fn serves_as_the_child_server_process_when_asked() {
    let Some(args) = common::child_args() else {
        return; // an ordinary run: nothing to do
    };
    let code = line_echo::run(args.into_iter());
    panic!("the server ended: {code:?}");
}

/// line_echo on `executor` (its flags) with `rest` of a command line.
fn start(executor: &[&str], rest: &[&str]) -> ChildServer {
    ChildServer::start(&common::args(executor, rest), 0)
}

/// A client with a buffered reader over its connection.
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn new(server: &ChildServer) -> Client {
        let stream = server.connect();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client { stream, reader }
    }

    fn send(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).expect("send");
    }

    /// The next line from the server (empty at end of stream).
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a line");
        line
    }

    /// Everything until the server closes; `Err` if it reset instead.
    fn rest(&mut self) -> std::io::Result<String> {
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest)?;
        Ok(String::from_utf8_lossy(&rest).into_owned())
    }
}

/// Sends `text` as a line and checks its echo.
fn client_echo(client: &mut Client, text: &str) {
    client.send(&format!("{text}\n"));
    assert_eq!(client.line(), format!("{text}\n"));
}

executor_test! {
    fn each_line_comes_back_in_order_also_when_sent_in_pieces_or_together() {
        let server = start(EXECUTOR, &["--max-line-bytes", "1024"]);
        let mut client = Client::new(&server);
        client.send("hello\n");
        assert_eq!(client.line(), "hello\n");
        client.send("one\ntwo\n");
        assert_eq!((client.line(), client.line()), ("one\n".into(), "two\n".into()));
        for piece in ["thr", "e", "e\n"] {
            client.send(piece);
            thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(client.line(), "three\n");
        // A line of exactly the limit, its newline included.
        let full = format!("{}\n", "x".repeat(1023));
        client.send(&full);
        assert_eq!(client.line(), full);
        // Closing our side ends the connection: the server closes too.
        client.stream.shutdown(Shutdown::Write).unwrap();
        assert_eq!(client.rest().expect("an orderly close"), "");
    }

    fn a_line_over_the_limit_gets_an_error_and_a_close_while_other_clients_are_served() {
        let server = start(EXECUTOR, &["--max-line-bytes", "1024"]);
        let mut good = Client::new(&server);
        good.send("before\n");
        assert_eq!(good.line(), "before\n");
        let mut bad = Client::new(&server);
        bad.send(&format!("{}\n", "y".repeat(4096)));
        let answer = bad.rest().expect("an error line and an orderly close, not a reset");
        assert!(
            answer.starts_with("error: ") && answer.contains("1024") && answer.ends_with('\n'),
            "{answer:?}"
        );
        assert_eq!(answer.lines().count(), 1, "{answer:?}");
        // The other connection, and a new one, are still served.
        good.send("after\n");
        assert_eq!(good.line(), "after\n");
        let mut fresh = Client::new(&server);
        fresh.send("fresh\n");
        assert_eq!(fresh.line(), "fresh\n");
    }

    fn a_line_that_is_not_utf8_gets_an_error_and_a_close_after_the_lines_before_it() {
        let server = start(EXECUTOR, &[]);
        let mut client = Client::new(&server);
        client.stream.write_all(b"fine\nbad \xff\n").expect("send");
        assert_eq!(client.line(), "fine\n");
        let answer = client.rest().expect("an error line and an orderly close, not a reset");
        assert!(
            answer.starts_with("error: ") && answer.contains("UTF-8") && answer.ends_with('\n'),
            "{answer:?}"
        );
        assert_eq!(answer.lines().count(), 1, "{answer:?}");
    }

    fn a_client_beyond_the_connection_limit_waits_until_a_connection_ends() {
        let server = start(EXECUTOR, &["--max-connections", "1"]);
        let mut first = Client::new(&server);
        client_echo(&mut first, "first");
        // Connected (the kernel's backlog), but not served yet.
        let mut second = Client::new(&server);
        second.send("second\n");
        second.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut early = String::new();
        assert!(second.reader.read_line(&mut early).is_err(), "answered: {early:?}");
        second.stream.set_read_timeout(Some(HANG)).unwrap();
        first.stream.shutdown(Shutdown::Write).unwrap();
        assert_eq!(first.rest().expect("an orderly close"), "");
        assert_eq!(second.line(), "second\n");
    }

    fn two_hundred_concurrent_clients_each_get_their_own_lines_back_and_leave_no_descriptor() {
        const CLIENTS: usize = 200;
        const ROUNDS: usize = 10;
        raise_nofile(1024);
        let server = start(EXECUTOR, &[]);
        let baseline = server.descriptors();
        let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::new(&server)).collect();
        for round in 0..ROUNDS {
            // Every client's line is in flight before any echo is read.
            for (i, client) in clients.iter_mut().enumerate() {
                client.send(&format!("client {i} round {round}\n"));
            }
            for (i, client) in clients.iter_mut().enumerate() {
                assert_eq!(client.line(), format!("client {i} round {round}\n"));
            }
        }
        // Four threads at once, a burst of short connections each.
        let addr = server.addr;
        let workers: Vec<_> = (0..4)
            .map(|t| {
                thread::spawn(move || {
                    for i in 0..50 {
                        let stream = TcpStream::connect(addr).unwrap();
                        stream.set_read_timeout(Some(HANG)).unwrap();
                        let mut reader = BufReader::new(stream.try_clone().unwrap());
                        (&stream).write_all(format!("{t}/{i}\n").as_bytes()).unwrap();
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        assert_eq!(line, format!("{t}/{i}\n"));
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        drop(clients);
        server.wait_until("every connection to close", |s| s.descriptors() <= baseline);
    }

    fn an_idle_client_is_closed_by_the_idle_timeout_and_an_active_one_is_not() {
        let server = start(EXECUTOR, &["--idle-timeout-ms", "400"]);
        let mut idle = Client::new(&server);
        let start = Instant::now();
        let mut active = Client::new(&server);
        // Ten lines 100 ms apart: never 400 ms without one.
        for i in 0..10 {
            active.send(&format!("{i}\n"));
            assert_eq!(active.line(), format!("{i}\n"));
            thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(idle.rest().expect("an orderly close"), "");
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(300) && elapsed < HANG,
            "closed after {elapsed:?}"
        );
        active.send("still here\n");
        assert_eq!(active.line(), "still here\n");
    }
}
