//! A key-value server over a line protocol: each connection a stream
//! pipeline (`spindle_effect::stream`), one fiber per connection under a
//! connection limit (`net::serve`), the data in a `MapRef` that every
//! connection shares, an idle timeout per connection, and a graceful
//! shutdown on Ctrl-C (written with IO blocks).
//!
//! ```text
//! kv_server [--port 7379] [--idle-ms 60000] [--grace-ms 5000] [--max-connections 64]
//! ```
//!
//! `cargo run -p spindle-effect --example kv_server`, then
//! `nc 127.0.0.1 7379`. The server listens on 127.0.0.1 (`--port 0`: a
//! port the system picks); the first line on stdout is exactly
//! `listening on <addr>`.
//!
//! # The protocol
//!
//! One command per line; each gets one line of answer, in order:
//!
//! | command | answer |
//! |---|---|
//! | `SET key value` | `OK` (the value is the rest of the line, its words separated by one space) |
//! | `GET key` | `VALUE value`, or `NOT_FOUND` |
//! | `DEL key` | `DELETED`, or `NOT_FOUND` |
//! | `KEYS` | `KEYS`, then every key in order, separated by spaces |
//! | `QUIT` | `BYE`, then the server closes the connection |
//! | anything else | `ERR why`, and the connection goes on |
//!
//! Commands are case-insensitive; keys and values are not. A connection
//! that sends no complete line for `--idle-ms` gets `BYE idle` and is
//! closed. A line over 64 KiB, or one that is not UTF-8, closes its
//! connection after the answers to the lines before it (the server's
//! stderr says why); the others go on.
//!
//! # A connection
//!
//! [`connection`] is one pipeline, compiled to the `IO` that serves the
//! connection:
//!
//! ```text
//! socket.reads(16 KiB) -> text::utf8_decode -> text::lines(64 KiB)
//!   -> map(parse) -> eval_map(execute)        an answer per command, in order
//!   -> timeout_on_pull_to(idle, "BYE idle")   the idle timeout
//!   -> take_through(not "BYE")                QUIT's answer is the last
//!   -> text::utf8_encode -> socket.writes     one write per chunk of answers
//! ```
//!
//! The write pipe pulls the next answers only once it wrote the last, so
//! a command runs only when its answer can be sent (a client that does
//! not read is not read either). The deadline is on each pull of an
//! answer: when no command arrives for `idle`, the pending read is
//! withdrawn and the stream goes on with `BYE idle`, then ends.
//! `take_through` ends it after `BYE`. A bad line fails the pipeline,
//! and `serve` reports its error. When the pipeline ends, the socket's
//! last handle goes and the connection closes.
//!
//! # Shutdown
//!
//! Ctrl-C (or SIGTERM) cancels the main fiber (`app::run`) where it waits
//! for the server's fiber. Its finalizer completes `serve`'s shutdown
//! trigger and waits for the server (a finalizer is not canceled): the
//! server stops accepting (new clients are refused), lets the live
//! connections finish for at most `--grace-ms` (then cancels the rest),
//! and prints what it served. `app::run` reports the canceled main fiber
//! (`canceled` on stderr, exit code 130); [`run`] makes that 0 when the
//! server has drained. A second Ctrl-C exits at once (130).
//!
//! The guide's tutorial builds this program step by step, with the
//! connection written as an IO block over `BufReader`'s line loop. Its
//! combinator form, the same program with `flat_map` and no blocks (and
//! that line loop), is `examples/combinator_forms/kv_server.rs`.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spindle_effect::net::{self, DEFAULT_LINE_LIMIT, ServeConfig, TcpListener, TcpStream};
use spindle_effect::prelude::*;
use spindle_effect::stream::{Stream, text};
use spindle_effect::{Deferred, MapRef, app, wstp::Runtime};

/// The data: a cell per key, shared by every connection.
pub type Store = MapRef<String, String>;

/// A line of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `GET key`
    Get(String),
    /// `SET key value`
    Set(String, String),
    /// `DEL key`
    Del(String),
    /// `KEYS`
    Keys,
    /// `QUIT`
    Quit,
}

/// Parses a line; a malformed one gives the reason of its `ERR` answer.
pub fn parse(line: &str) -> Result<Command, String> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or_default().to_ascii_uppercase();
    let key = words.next().map(str::to_string);
    let value = words.collect::<Vec<_>>().join(" ");
    match (verb.as_str(), key, value.is_empty()) {
        ("GET", Some(key), true) => Ok(Command::Get(key)),
        ("SET", Some(key), false) => Ok(Command::Set(key, value)),
        ("DEL", Some(key), true) => Ok(Command::Del(key)),
        ("KEYS", None, _) => Ok(Command::Keys),
        ("QUIT", None, _) => Ok(Command::Quit),
        ("GET" | "DEL", ..) => Err(format!("usage: {verb} key")),
        ("SET", ..) => Err("usage: SET key value".to_string()),
        ("KEYS" | "QUIT", ..) => Err(format!("usage: {verb}")),
        ("", ..) => Err("empty line".to_string()),
        _ => Err(format!("unknown command {verb}")),
    }
}

/// The answer to `QUIT`, the last one a connection gets.
pub const BYE: &str = "BYE";

/// The most a read of a connection takes at once.
const READ_SIZE: usize = 16 * 1024;

/// Runs a command against the store: its answer, without the line break.
pub fn execute(command: Result<Command, String>, store: Store) -> IO<String, io::Error> {
    IO::block(async move {
        Ok(match command {
            Ok(Command::Get(key)) => match store.at(key).get().value().await {
                Some(value) => format!("VALUE {value}"),
                None => "NOT_FOUND".to_string(),
            },
            Ok(Command::Set(key, value)) => {
                store.at(key).set(Some(value)).value().await;
                "OK".to_string()
            }
            Ok(Command::Del(key)) => match store.at(key).get_and_set(None).value().await {
                Some(_) => "DELETED".to_string(),
                None => "NOT_FOUND".to_string(),
            },
            Ok(Command::Keys) => (store.keys().value().await.iter())
                .fold("KEYS".to_string(), |answer, key| answer + " " + key),
            Ok(Command::Quit) => BYE.to_string(),
            Err(why) => format!("ERR {why}"),
        })
    })
}

/// Serves one connection: a command per line, until `QUIT`, the client's
/// end of stream, or `idle` without a line (then `BYE idle`); see the
/// module doc for the pipeline.
pub fn connection(socket: TcpStream, store: Store, idle: Duration) -> IO<(), io::Error> {
    let bytes = match socket.reads(READ_SIZE) {
        Ok(bytes) => bytes,
        Err(refused) => return IO::raise_error(io::Error::other(refused)),
    };
    bytes
        .through(text::utf8_decode)
        .through(|text| text::lines(text, DEFAULT_LINE_LIMIT))
        .map(|line| parse(&line))
        .eval_map(move |command| execute(command, store.clone()))
        .timeout_on_pull_to(idle, Stream::emit(format!("{BYE} idle")))
        .take_through(|answer| answer != BYE)
        .map(|answer| answer + "\n")
        .through(text::utf8_encode)
        .through(|answers| socket.writes(answers))
        .compile()
        .drain()
}

/// The command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The port on 127.0.0.1 (0: one the system picks).
    pub port: u16,
    /// How long a connection may go without a complete line.
    pub idle: Duration,
    /// How long the live connections get to finish after Ctrl-C.
    pub grace: Duration,
    /// How many connections are served at once (more wait to be accepted).
    pub max_connections: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            port: 7379,
            idle: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            max_connections: 64,
        }
    }
}

const USAGE: &str =
    "usage: kv_server [--port N] [--idle-ms N] [--grace-ms N] [--max-connections N]";

/// Parses the arguments after the program name.
pub fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options::default();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a number"))?;
        match flag.as_str() {
            "--port" => options.port = u16::try_from(n).map_err(|_| format!("no port {n}"))?,
            "--idle-ms" => options.idle = Duration::from_millis(n.max(1)),
            "--grace-ms" => options.grace = Duration::from_millis(n),
            "--max-connections" => options.max_connections = n.try_into().unwrap_or(usize::MAX),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(options)
}

/// The server: serves on `options.port` until Ctrl-C cancels it, then
/// shuts down gracefully and sets `drained` (see the module doc).
pub fn server(options: Options, drained: Arc<AtomicBool>) -> IO<(), io::Error> {
    IO::block(async move {
        let config = ServeConfig::builder()
            .max_connections(options.max_connections)
            .grace_period(options.grace)
            .on_error(|failure| eprintln!("kv_server: {failure}"))
            .build()?;
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], options.port))).await?;
        println!("listening on {}", listener.local_addr().await?);
        let store = Store::new();
        let stop = Deferred::new();
        let serving = net::serve(listener, config, stop.get(), move |stream, _peer| {
            connection(stream, store.clone(), options.idle)
        });
        let stopped = IO::block(async move {
            let summary = serving.await?;
            println!("stopped after serving {} connection(s)", summary.accepted);
            drained.store(true, Ordering::SeqCst);
            Ok(())
        });
        let server = stopped.start().value().await;
        // Ctrl-C cancels this fiber while it waits here; the finalizer
        // stops the server and waits while its connections finish.
        let shutdown = stop.complete(()).product_r(server.join_void());
        server.join_void().on_cancel(shutdown).value().await;
        // The server stopped on its own: it could not accept any more.
        server.join_with_never().await
    })
}

/// The program for a command line (without the program name): exit code 0
/// after a graceful shutdown, 2 for an unusable command line.
pub fn run(args: impl Iterator<Item = String>) -> ExitCode {
    let options = match parse_options(args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("kv_server: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let drained = Arc::new(AtomicBool::new(false));
    let code = app::run(Runtime::from_env(), server(options, drained.clone()));
    // Ctrl-C canceled the main fiber (130): after a graceful shutdown, 0.
    if drained.load(Ordering::SeqCst) {
        ExitCode::SUCCESS
    } else {
        code
    }
}

fn main() -> ExitCode {
    run(std::env::args().skip(1))
}
