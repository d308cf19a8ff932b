//! The combinator form of `examples/kv_server.rs`: the same program with
//! `flat_map` and no IO blocks, to compare the two.
//!
//! A key-value server over a line protocol: one fiber per connection
//! under a connection limit (`net::serve`), the data in a `MapRef` that
//! every connection shares, an idle timeout per connection, and a
//! graceful shutdown on Ctrl-C. The protocol, the options and the
//! shutdown are in `examples/kv_server.rs`.
//!
//! ```text
//! cargo run -p spindle-effect --example kv_server_combinators
//! ```

use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spindle_effect::net::{self, BufReader, ServeConfig, TcpListener, TcpStream, WriteHalf};
use spindle_effect::prelude::*;
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

/// Runs a command against the store and writes its answer; `Break` after
/// `QUIT`.
pub fn execute(
    command: Result<Command, String>,
    store: Store,
    out: WriteHalf<TcpStream>,
) -> IO<ControlFlow<()>, io::Error> {
    let flow = if command == Ok(Command::Quit) {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    };
    let answer = match command {
        Ok(Command::Get(key)) => store.at(key).get().map(|value| match value {
            Some(value) => format!("VALUE {value}"),
            None => "NOT_FOUND".to_string(),
        }),
        Ok(Command::Set(key, value)) => store.at(key).set(Some(value)).map_to("OK".to_string()),
        Ok(Command::Del(key)) => store.at(key).get_and_set(None).map(|old| match old {
            Some(_) => "DELETED".to_string(),
            None => "NOT_FOUND".to_string(),
        }),
        Ok(Command::Keys) => store.keys().map(|keys| {
            keys.iter()
                .fold("KEYS".to_string(), |answer, key| answer + " " + key)
        }),
        Ok(Command::Quit) => IO::pure("BYE".to_string()),
        Err(why) => IO::pure(format!("ERR {why}")),
    };
    answer
        .flat_map(move |answer| out.write_all(answer + "\n"))
        .map_to(flow)
}

/// Serves one connection: a command per line, until `QUIT`, the client's
/// end of stream, or `idle` without a line (then `BYE idle`). The
/// connection closes when its halves are dropped, at the end.
pub fn connection(stream: TcpStream, store: Store, idle: Duration) -> IO<(), io::Error> {
    let (input, out) = stream.into_split();
    let answers = out.clone();
    BufReader::new(input)
        .for_each_line_timeout(idle, move |line| {
            execute(parse(&line), store.clone(), answers.clone())
        })
        .flat_map(move |end| {
            if end.is_idle_timeout() {
                out.write_all("BYE idle\n")
            } else {
                IO::unit()
            }
        })
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
    let config = ServeConfig::builder()
        .max_connections(options.max_connections)
        .grace_period(options.grace)
        .on_error(|failure| eprintln!("kv_server: {failure}"))
        .build();
    let config = match config {
        Ok(config) => config,
        Err(e) => return IO::raise_error(e.into()),
    };
    TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], options.port))).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            println!("listening on {addr}");
            let store = Store::new();
            let stop = Deferred::new();
            let serving = net::serve(listener, config, stop.get(), move |stream, _peer| {
                connection(stream, store.clone(), options.idle)
            });
            let server = serving.map(move |summary| {
                println!("stopped after serving {} connection(s)", summary.accepted);
                drained.store(true, Ordering::SeqCst);
            });
            server.start().flat_map(move |server| {
                // Ctrl-C cancels this fiber while it waits here; the
                // finalizer stops the server and waits while its
                // connections finish.
                let shutdown = stop.complete(()).product_r(server.join_void());
                (server.join_void().on_cancel(shutdown))
                    // The server stopped on its own: it could not accept
                    // any more.
                    .product_r(server.join_with_never())
            })
        })
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
