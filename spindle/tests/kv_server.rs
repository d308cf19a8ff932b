//! The `kv_server` example and its combinator form over loopback, with std
//! `TcpStream` clients: each form's `run` in a child process (see
//! `common`), the same checks stamped for both (`blocks::...`,
//! `combinators::...`): the commands from two clients, malformed lines,
//! the idle timeout, the connection limit, and the graceful shutdown on
//! SIGINT.
//!
//! Every wait is bounded by [`HANG`].

#![cfg(target_os = "linux")]

mod common;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/kv_server.rs"]
mod kv_server;
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/combinator_forms/kv_server.rs"]
mod kv_server_combinators;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use common::{ChildServer, HANG};

#[test]
fn serves_as_the_child_server_process_when_asked() {
    let Some(mut args) = common::child_args() else {
        return; // an ordinary run: nothing to do
    };
    let form = args.remove(0);
    let code = match form.as_str() {
        "blocks" => kv_server::run(args.into_iter()),
        "combinators" => kv_server_combinators::run(args.into_iter()),
        other => panic!("no form {other}"),
    };
    eprintln!("the server ended: {code:?}");
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
}

/// Stamps each test into `mod blocks` and `mod combinators`, where `FORM`
/// names the form of the example the child runs.
macro_rules! form_test {
    (@module $module:ident, $form:literal, $(fn $name:ident() $body:block)*) => {
        mod $module {
            use super::*;

            /// This module's form of the example.
            const FORM: &str = $form;

            $(
                #[test]
                fn $name() $body
            )*
        }
    };
    ($($tests:tt)*) => {
        form_test!(@module blocks, "blocks", $($tests)*);
        form_test!(@module combinators, "combinators", $($tests)*);
    };
}

/// The example in `form`, on a port the system picks, with `rest` of a
/// command line.
fn start(form: &str, rest: &[&str]) -> ChildServer {
    ChildServer::start(&common::args(&[form, "--port", "0"], rest), 0)
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

    fn send(&mut self, line: &str) {
        self.stream
            .write_all(format!("{line}\n").as_bytes())
            .expect("send");
    }

    /// The next line from the server, without its `\n` (empty at end of
    /// stream).
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a line");
        line.trim_end_matches('\n').to_string()
    }

    /// Sends a command and reads its answer.
    fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.line()
    }

    /// Everything until the server closes.
    fn rest(&mut self) -> String {
        let mut rest = String::new();
        self.reader
            .read_to_string(&mut rest)
            .expect("an orderly close");
        rest
    }
}

form_test! {
    fn sets_gets_and_deletes_are_seen_by_every_client_in_order() {
        let server = start(FORM, &[]);
        let mut a = Client::new(&server);
        let mut b = Client::new(&server);
        assert_eq!(a.ask("SET greeting hello   world"), "OK");
        assert_eq!(b.ask("GET greeting"), "VALUE hello world");
        assert_eq!(b.ask("set count 1"), "OK", "commands are case-insensitive");
        assert_eq!(a.ask("KEYS"), "KEYS count greeting");
        assert_eq!(b.ask("DEL greeting"), "DELETED");
        assert_eq!(a.ask("GET greeting"), "NOT_FOUND");
        assert_eq!(a.ask("DEL greeting"), "NOT_FOUND");
        assert_eq!(a.ask("SET count 2"), "OK");
        assert_eq!(b.ask("GET count"), "VALUE 2");
        // QUIT: a goodbye, then the server closes.
        assert_eq!(a.ask("QUIT"), "BYE");
        assert_eq!(a.rest(), "");
        assert_eq!(b.ask("KEYS"), "KEYS count");
    }

    fn a_malformed_line_gets_an_err_answer_and_the_connection_goes_on() {
        let server = start(FORM, &[]);
        let mut client = Client::new(&server);
        let answers = [
            ("FROB x", "ERR unknown command FROB"),
            ("GET", "ERR usage: GET key"),
            ("GET a b", "ERR usage: GET key"),
            ("SET k", "ERR usage: SET key value"),
            ("KEYS k", "ERR usage: KEYS"),
            ("", "ERR empty line"),
        ];
        for (line, answer) in answers {
            assert_eq!(client.ask(line), answer, "{line:?}");
        }
        assert_eq!(client.ask("SET k v"), "OK");
        assert_eq!(client.ask("GET k"), "VALUE v");
    }

    fn an_idle_connection_gets_a_goodbye_and_is_closed_and_an_active_one_is_not() {
        let server = start(FORM, &["--idle-ms", "500"]);
        let mut idle = Client::new(&server);
        let started = Instant::now();
        let mut active = Client::new(&server);
        // A command every 100 ms for 800 ms: never 500 ms without one.
        for i in 0..8 {
            assert_eq!(active.ask(&format!("SET n {i}")), "OK");
            thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(idle.rest(), "BYE idle\n");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(400) && elapsed < HANG,
            "closed after {elapsed:?}"
        );
        assert_eq!(active.ask("GET n"), "VALUE 7");
    }

    fn a_client_beyond_the_connection_limit_waits_until_a_connection_ends() {
        let server = start(FORM, &["--max-connections", "1"]);
        let mut first = Client::new(&server);
        assert_eq!(first.ask("SET a 1"), "OK");
        // Connected (the kernel's backlog), but not served yet.
        let mut second = Client::new(&server);
        second.send("GET a");
        second.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut early = String::new();
        assert!(second.reader.read_line(&mut early).is_err(), "answered: {early:?}");
        second.stream.set_read_timeout(Some(HANG)).unwrap();
        assert_eq!(first.ask("QUIT"), "BYE");
        assert_eq!(second.line(), "VALUE 1");
    }

    fn sigint_stops_accepting_lets_a_live_connection_finish_and_exits_with_0() {
        let mut server = start(FORM, &["--grace-ms", "20000"]);
        let mut live = Client::new(&server);
        assert_eq!(live.ask("SET a 1"), "OK");
        server.signal("INT");
        // New clients are refused once the server has stopped accepting.
        server.wait_until("the listener to close", |s| TcpStream::connect(s.addr).is_err());
        // The live connection is still served, and the process waits for it.
        assert_eq!(live.ask("GET a"), "VALUE 1");
        thread::sleep(Duration::from_millis(200));
        assert!(server.try_wait().is_none(), "exited with a connection still live");
        assert_eq!(live.ask("QUIT"), "BYE");
        let status = server.wait_for_exit();
        assert_eq!(status.code(), Some(0), "{:?}", server.stderr_lines());
    }
}
