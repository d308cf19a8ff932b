//! A line-echo server: every line a client sends comes back to it, on
//! every executor with I/O (the same program on the work-stealing pool,
//! the event loop, tokio and exec-single).
//!
//! ```text
//! line_echo [--executor wstp|batching|tokio|single] [--workers N]
//!           [--flavor multi-thread|current-thread] [--mode batching|macrotask]
//!           [--batch-size N] [--addr 127.0.0.1:0] [--max-line-bytes N] [--idle-timeout-ms N]
//!           [--max-connections N]
//! ```
//!
//! `cargo run -p spindle-effect --features full --example line_echo`, then
//! `nc 127.0.0.1 <port>`.
//!
//! * The executor flags are `hello_http`'s (`examples/support/executor.rs`;
//!   default: the pool with two workers).
//! * `--addr`: where to listen (default `127.0.0.1:0`: a port the system
//!   picks). The first line on stdout is exactly `listening on <addr>`.
//! * `--max-line-bytes`: the longest line, without its line break
//!   (default 65536, spindle-net's `DEFAULT_LINE_LIMIT`).
//! * `--idle-timeout-ms`: a connection that sends no complete line for
//!   this long is closed (default 60000; 0: never).
//! * `--max-connections`: how many connections are served at once; more
//!   wait in the listen backlog until one ends (default 4096).
//!
//! # A connection: a stream pipeline
//!
//! Each connection is one pipeline of `spindle_effect::stream` stages,
//! compiled to the `IO` that serves it:
//!
//! ```text
//! socket.reads(16 KiB)                 chunks of bytes, as they arrive
//!   -> text::utf8_decode               text (a sequence split between reads is joined)
//!   -> text::lines(max_line)           whole lines, without their line breaks
//!   -> timeout_on_pull_to(idle, end)   the idle timeout
//!   -> map(line + "\n")                the echo
//!   -> handle_error_with(refuse)       a bad line: the error line, then linger
//!   -> text::utf8_encode -> socket.writes   one write per chunk of echoes
//! ```
//!
//! The pipeline is pulled from the end: the write pipe asks for the next
//! chunk of echoes only once the last one is written, so answers go out
//! in order, and a client that does not read its echoes is not read
//! either (TCP's flow control; the server buffers at most a read's
//! worth). The connection ends when the client closes its side: the
//! reads end, the pipeline ends, and the socket closes with its last
//! handle.
//!
//! A line over the limit, or one that is not UTF-8, fails `lines` or
//! `utf8_decode` with an `io::Error` of kind `InvalidData`;
//! `handle_error_with` turns it into the line `error: <why>`, followed by
//! [`linger`]: the server shuts its side down and reads and drops what the
//! client still sends for at most [`LINGER`], so that the client's unread
//! bytes do not turn the close into a reset that would lose the error
//! line. Other connections are not affected.
//!
//! The idle timeout is a deadline on each pull of a line
//! (`timeout_on_pull_to`): when no complete line has arrived `idle` after
//! the pipeline asked for one, the pending read is withdrawn and the
//! stream goes on with its fallback, the empty stream, so the connection
//! ends as if the client had closed. The time spent writing an echo is
//! not counted.
//!
//! # The accept loop
//!
//! `listener.incoming()` is the stream of accepts; a failed one (out of
//! descriptors) is printed and followed by a pause, and each connection
//! becomes its pipeline, run at most `--max-connections` at once by
//! `par_join`. A connection's error ends only that connection.

#[path = "support/executor.rs"]
pub(crate) mod executor;

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use spindle_effect::IO;
use spindle_effect::net::{DEFAULT_LINE_LIMIT, TcpListener, TcpStream};
use spindle_effect::stream::{Stream, text};

use executor::{Executor, ExecutorFlags};

/// How long a connection that got an error line is drained before it closes.
pub const LINGER: Duration = Duration::from_secs(1);

/// The sleep after a failed accept (out of descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The most a read of a connection takes at once.
const READ_SIZE: usize = 16 * 1024;

const USAGE: &str = "usage: line_echo [--executor wstp|batching|tokio|single] [--workers N] \
     [--flavor multi-thread|current-thread] [--mode batching|macrotask] [--batch-size N] \
     [--addr 127.0.0.1:0] [--max-line-bytes N] [--idle-timeout-ms N] [--max-connections N]";

/// What each connection is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    /// The longest line, without its line break.
    pub(crate) max_line: usize,
    /// How long a connection may go without a complete line (`None`: no
    /// bound).
    pub(crate) idle_timeout: Option<Duration>,
    /// How many connections are served at once (above 0).
    pub(crate) max_connections: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_line: DEFAULT_LINE_LIMIT,
            idle_timeout: Some(Duration::from_secs(60)),
            max_connections: 4096,
        }
    }
}

/// The command line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// The executor to serve on.
    pub(crate) executor: Executor,
    /// Where to listen.
    pub(crate) addr: SocketAddr,
    /// The line limit and the idle timeout.
    pub(crate) config: Config,
}

/// Parses the arguments after the program name; `Err("")` for `--help`.
pub(crate) fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut executor = ExecutorFlags::default();
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut config = Config::default();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        if executor.take(&flag, &mut value)? {
            continue;
        }
        match flag.as_str() {
            "--addr" => {
                let text = value()?;
                addr = text
                    .parse()
                    .map_err(|e| format!("bad address {text:?}: {e}"))?;
            }
            "--max-line-bytes" => {
                let text = value()?;
                config.max_line = text
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| format!("bad line limit {text:?}: expected bytes above zero"))?;
            }
            "--idle-timeout-ms" => {
                let text = value()?;
                let ms: u64 = text
                    .parse()
                    .map_err(|e| format!("bad idle timeout {text:?}: {e}"))?;
                config.idle_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "--max-connections" => {
                let text = value()?;
                config.max_connections =
                    text.parse()
                        .ok()
                        .filter(|&n: &usize| n > 0)
                        .ok_or_else(|| {
                            format!("bad connection limit {text:?}: expected a number above zero")
                        })?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        executor: executor.resolve()?,
        addr,
        config,
    })
}

/// The bytes `socket` reads, as a stream.
fn reads(socket: &TcpStream) -> Stream<u8, io::Error> {
    match socket.reads(READ_SIZE) {
        Ok(bytes) => bytes,
        Err(refused) => Stream::raise_error(io::Error::other(refused)),
    }
}

/// After an error line: shuts the write side down, then reads and drops
/// what the client still sends, until it closes, an error, or [`LINGER`]
/// passes.
fn linger(socket: TcpStream) -> IO<(), io::Error> {
    let rest = reads(&socket).compile().drain().attempt().void();
    socket
        .shutdown(Shutdown::Write)
        .product_r(rest.timeout_to(LINGER, IO::unit()))
}

/// What a failed pipeline sends instead of its echoes: for a bad line
/// (`InvalidData`), the line `error: <why>`, then [`linger`]; any other
/// error (a reset) ends the connection with it.
fn refuse(error: io::Error, socket: TcpStream) -> Stream<String, io::Error> {
    if error.kind() != io::ErrorKind::InvalidData {
        return Stream::raise_error(error);
    }
    Stream::emit(format!("error: {error}\n")).append(Stream::exec(linger(socket)))
}

/// The lines, ended quietly once `idle` passes without one (`None`: never).
fn until_idle(
    lines: Stream<String, io::Error>,
    idle: Option<Duration>,
) -> Stream<String, io::Error> {
    match idle {
        Some(idle) => lines.timeout_on_pull_to(idle, Stream::empty()),
        None => lines,
    }
}

/// Echoes one connection's lines until it closes, sends a bad line, or
/// stays idle too long (see the module doc).
pub(crate) fn connection(socket: TcpStream, config: Config) -> IO<(), io::Error> {
    let (refused, out) = (socket.clone(), socket.clone());
    reads(&socket)
        .through(text::utf8_decode)
        .through(|text| text::lines(text, config.max_line))
        .through(|lines| until_idle(lines, config.idle_timeout))
        .map(|line| line + "\n")
        .handle_error_with(move |error| refuse(error, refused))
        .through(text::utf8_encode)
        .through(|echoes| out.writes(echoes))
        .compile()
        .drain()
}

/// The connections `listener` accepts; a failed accept is printed and
/// followed by a pause.
fn accepted(listener: &TcpListener) -> Stream<TcpStream, io::Error> {
    listener
        .incoming()
        .eval_map(|accepted| match accepted {
            Ok((socket, _peer)) => IO::pure(Some(socket)),
            Err(e) => {
                eprintln!("line_echo: accept failed: {e}");
                IO::sleep(ACCEPT_BACKOFF).map(|()| None)
            }
        })
        .filter_map(|socket| socket)
}

/// Binds `addr`, calls `bound` with the address bound, then serves every
/// connection, at most `config.max_connections` at once (an error ends
/// only its connection).
pub(crate) fn server<F>(addr: SocketAddr, config: Config, bound: F) -> IO<(), io::Error>
where
    F: FnOnce(SocketAddr) -> io::Result<()> + Send + 'static,
{
    TcpListener::bind(addr).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let announce = IO::defer(move || IO::from_result(bound(addr)));
            let connections = accepted(&listener)
                .map(move |socket| {
                    Stream::<(), _>::exec(connection(socket, config).attempt().void())
                })
                .par_join(config.max_connections);
            match connections {
                Ok(served) => announce.product_r(served.compile().drain()),
                Err(refused) => IO::raise_error(io::Error::other(refused)),
            }
        })
    })
}

/// Prints the first line of the contract, flushed at once.
fn announce(bound: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {bound}").and_then(|()| out.flush())
}

/// The program for a command line (without the program name); exit code 2
/// for an unusable one.
pub(crate) fn run(args: impl Iterator<Item = String>) -> ExitCode {
    let options = match parse_options(args) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("line_echo: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let program = server(options.addr, options.config, announce);
    options.executor.run(program)
}

fn main() -> ExitCode {
    run(std::env::args().skip(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Result<Options, String> {
        parse_options(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_options_take_the_executor_the_line_limit_and_the_idle_timeout() {
        let parsed = options(&[
            "--executor",
            "batching",
            "--max-line-bytes",
            "1024",
            "--idle-timeout-ms",
            "0",
        ])
        .unwrap();
        assert!(matches!(parsed.executor, Executor::Batching { .. }));
        assert_eq!(
            parsed.config,
            Config {
                max_line: 1024,
                idle_timeout: None,
                ..Config::default()
            }
        );
        assert_eq!(options(&[]).unwrap().config, Config::default());
        for bad in [
            &["--max-line-bytes", "0"][..],
            &["--max-connections", "0"],
            &["--idle-timeout-ms", "soon"],
            &["--mode", "batching"],
            &["--port", "1"],
        ] {
            assert!(options(bad).is_err(), "{bad:?}");
        }
    }
}
