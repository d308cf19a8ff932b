//! The server driven by `redis-cli` (Debian's redis-tools), a client
//! nobody here wrote, on every executor: every command, a pipeline, a
//! subscriber receiving what a publisher sends, an expiry on the real
//! clock, error replies.
//!
//! These tests need `redis-cli` on the `PATH`; `.ci/run` installs it and
//! runs them (`cargo test -p spindle-mini-redis -- --include-ignored`).
//! Without it they are ignored by a plain `cargo test`.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use spindle_mini_redis::server::Config;
use support::{Kind, TestServer, every_executor};

/// Runs `redis-cli -p PORT --no-raw ARGS...`; its standard output.
fn cli(server: &TestServer, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &server.port(), "--no-raw"])
        .args(args)
        .output()
        .expect("redis-cli runs (install Debian's redis-tools)");
    assert!(output.status.success(), "redis-cli {args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn start(kind: Kind) -> TestServer {
    TestServer::start(kind, Config::default())
}

every_executor! {
    #[ignore = "needs redis-cli: run by .ci/run with --include-ignored"]
    fn every_command_answers_redis_cli_as_redis_would() {
        let server = start(KIND);
        assert_eq!(cli(&server, &["ping"]), "PONG\n");
        assert_eq!(cli(&server, &["ping", "hello there"]), "\"hello there\"\n");
        assert_eq!(cli(&server, &["echo", "back"]), "\"back\"\n");
        assert_eq!(cli(&server, &["get", "missing"]), "(nil)\n");
        assert_eq!(cli(&server, &["set", "hello", "world"]), "OK\n");
        assert_eq!(cli(&server, &["get", "hello"]), "\"world\"\n");
        assert_eq!(cli(&server, &["SET", "hello", "again"]), "OK\n");
        assert_eq!(cli(&server, &["GeT", "hello"]), "\"again\"\n");
        assert_eq!(cli(&server, &["publish", "nobody", "listens"]), "(integer) 0\n");
        assert_eq!(
            cli(&server, &["get"]),
            "(error) ERR wrong number of arguments for 'get' command\n"
        );
        assert_eq!(cli(&server, &["set", "k", "v", "BOGUS"]), "(error) ERR syntax error\n");
        assert_eq!(
            cli(&server, &["set", "k", "v", "EX", "0"]),
            "(error) ERR invalid expire time in 'set' command\n"
        );
        assert_eq!(
            cli(&server, &["set", "k", "v", "EX", "soon"]),
            "(error) ERR value is not an integer or out of range\n"
        );
        let unknown = cli(&server, &["flushall", "now"]);
        assert!(unknown.starts_with("(error) ERR unknown command 'flushall'"), "{unknown}");
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    #[ignore = "needs redis-cli: run by .ci/run with --include-ignored"]
    fn a_pipeline_of_ten_thousand_commands_gets_every_reply_in_order() {
        let server = start(KIND);
        let mut input = Vec::new();
        for i in 0..10_000 {
            let (key, value) = (format!("key:{i}"), format!("value:{i}"));
            input.extend_from_slice(
                format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n", key.len(), value.len())
                    .as_bytes(),
            );
        }
        let mut pipe = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &server.port(), "--pipe"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli runs");
        pipe.stdin.take().expect("stdin").write_all(&input).expect("the pipe takes the input");
        let output = pipe.wait_with_output().expect("redis-cli ends");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{report}");
        assert!(report.contains("errors: 0, replies: 10000"), "{report}");
        assert_eq!(cli(&server, &["get", "key:0"]), "\"value:0\"\n");
        assert_eq!(cli(&server, &["get", "key:9999"]), "\"value:9999\"\n");
        server.stop();
    }

    #[ignore = "needs redis-cli: run by .ci/run with --include-ignored"]
    fn a_subscriber_receives_what_a_publisher_sends() {
        let server = start(KIND);
        let mut subscriber = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &server.port(), "--no-raw", "subscribe", "news", "weather"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli runs");
        let mut lines = BufReader::new(subscriber.stdout.take().expect("stdout")).lines();
        // redis-cli announces itself first ("Reading messages... (press
        // Ctrl-C to quit)"), then prints each reply's parts on lines.
        let mut next = || loop {
            let line = lines.next().expect("a line").expect("UTF-8");
            if !line.starts_with("Reading messages") {
                return line;
            }
        };
        // Two confirmations of three lines each: kind, channel, count.
        let confirmations: Vec<String> = (0..6).map(|_| next()).collect();
        assert_eq!(confirmations[..3], ["1) \"subscribe\"", "2) \"news\"", "3) (integer) 1"]);
        assert_eq!(confirmations[3..], ["1) \"subscribe\"", "2) \"weather\"", "3) (integer) 2"]);
        assert_eq!(cli(&server, &["publish", "news", "hello subscribers"]), "(integer) 1\n");
        assert_eq!(cli(&server, &["publish", "sports", "nobody here"]), "(integer) 0\n");
        assert_eq!(cli(&server, &["publish", "weather", "sunny"]), "(integer) 1\n");
        let message: Vec<String> = (0..6).map(|_| next()).collect();
        assert_eq!(message[..3], ["1) \"message\"", "2) \"news\"", "3) \"hello subscribers\""]);
        assert_eq!(message[3..], ["1) \"message\"", "2) \"weather\"", "3) \"sunny\""]);
        subscriber.kill().expect("the subscriber stops");
        subscriber.wait().expect("reaped");
        // Its connection ends, and with it its subscriptions.
        let deadline = Instant::now() + Duration::from_secs(10);
        while cli(&server, &["publish", "news", "anyone?"]) != "(integer) 0\n" {
            assert!(Instant::now() < deadline, "the subscription outlived its connection");
            std::thread::sleep(Duration::from_millis(10));
        }
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    #[ignore = "needs redis-cli: run by .ci/run with --include-ignored"]
    fn a_key_set_with_px_expires_on_the_real_clock() {
        let server = start(KIND);
        assert_eq!(cli(&server, &["set", "short", "lived", "PX", "200"]), "OK\n");
        assert_eq!(cli(&server, &["set", "long", "lived", "EX", "3600"]), "OK\n");
        assert_eq!(cli(&server, &["get", "short"]), "\"lived\"\n");
        let deadline = Instant::now() + Duration::from_secs(10);
        while cli(&server, &["get", "short"]) != "(nil)\n" {
            assert!(Instant::now() < deadline, "the key never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(cli(&server, &["get", "long"]), "\"lived\"\n");
        // Set again without an expiry, a key keeps its value.
        assert_eq!(cli(&server, &["set", "again", "1", "PX", "100"]), "OK\n");
        assert_eq!(cli(&server, &["set", "again", "2"]), "OK\n");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cli(&server, &["get", "again"]), "\"2\"\n");
        server.stop();
    }
}
