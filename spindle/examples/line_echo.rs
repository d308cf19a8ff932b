//! A line-echo server: every line a client sends comes back to it, on
//! every executor with I/O (the same program on the work-stealing pool,
//! the event loop, tokio and exec-single).
//!
//! ```text
//! line_echo [--executor wstp|batching|tokio|single] [--workers N]
//!           [--flavor multi-thread|current-thread] [--mode batching|macrotask]
//!           [--batch-size N] [--addr 127.0.0.1:0] [--max-line-bytes N] [--idle-timeout-ms N]
//! ```
//!
//! `cargo run -p spindle-effect --features full --example line_echo`, then
//! `nc 127.0.0.1 <port>`.
//!
//! * The executor flags are `hello_http`'s (`examples/support/executor.rs`;
//!   default: the pool with two workers).
//! * `--addr`: where to listen (default `127.0.0.1:0`: a port the system
//!   picks). The first line on stdout is exactly `listening on <addr>`.
//! * `--max-line-bytes`: the longest line, its `\n` included (default
//!   65536, spindle-net's `DEFAULT_LINE_LIMIT`).
//! * `--idle-timeout-ms`: a connection that sends no complete line for
//!   this long is closed (default 60000; 0: never).
//!
//! # A connection
//!
//! One fiber per connection, which splits its stream
//! (`TcpStream::into_split`) and runs
//! `BufReader::with_limit(read_half, limit).for_each_line(..)`, writing
//! each line back on the write half before the next is read (so answers
//! come in order, and a client that does not read its echoes is not read
//! either: TCP's flow control, no buffering in the server). The
//! connection ends when the client closes its side (the server closes its
//! own when the write half is dropped).
//!
//! A line over the limit, or one that is not UTF-8, gets the line
//! `error: <why>` and the connection closes; the server reads and drops
//! what the client still sends for at most [`LINGER`] first, so that the
//! client's unread bytes do not turn the close into a reset that would
//! lose the error line. Other connections are not affected.
//!
//! The idle timeout is a watchdog fiber raced against the connection's
//! (as in `hello_http`'s server): each line moves a deadline on the
//! executor's monotonic clock; the watchdog sleeps until the deadline
//! (`IO::sleep`) and, once the clock passes it, wins the race, which
//! cancels the connection's fiber (its pending read is withdrawn) and
//! closes the socket.

#[path = "support/executor.rs"]
pub(crate) mod executor;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle_effect::IO;
use spindle_effect::net::{BufReader, DEFAULT_LINE_LIMIT, ReadHalf, TcpListener, TcpStream};

use executor::{Executor, ExecutorFlags};

/// How long a connection that got an error line is drained before it closes.
pub const LINGER: Duration = Duration::from_secs(1);

/// The sleep after a failed accept (out of descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const USAGE: &str = "usage: line_echo [--executor wstp|batching|tokio|single] [--workers N] \
     [--flavor multi-thread|current-thread] [--mode batching|macrotask] [--batch-size N] \
     [--addr 127.0.0.1:0] [--max-line-bytes N] [--idle-timeout-ms N]";

/// What each connection is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    /// The longest line, its `\n` included.
    pub(crate) max_line: usize,
    /// How long a connection may go without a complete line (`None`: no
    /// bound).
    pub(crate) idle_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_line: DEFAULT_LINE_LIMIT,
            idle_timeout: Some(Duration::from_secs(60)),
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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A connection's idle deadline, in nanoseconds of the executor's
/// monotonic clock.
#[derive(Clone, Default)]
struct Deadline(Arc<AtomicU64>);

impl Deadline {
    /// Moves the deadline to `after` from `now`.
    fn set(&self, now: Duration, after: Duration) {
        let at = nanos(now).saturating_add(nanos(after));
        self.0.store(at, Ordering::Relaxed);
    }

    /// `after` from now, as a program.
    fn restart(&self, after: Duration) -> IO<(), io::Error> {
        let deadline = self.clone();
        IO::monotonic().map(move |now| deadline.set(now, after))
    }
}

/// Completes once the clock passes `deadline`.
fn watchdog(deadline: Deadline) -> IO<(), io::Error> {
    IO::tail_rec((), move |()| {
        let deadline = deadline.clone();
        IO::monotonic().flat_map(move |now| {
            let (at, now) = (deadline.0.load(Ordering::Relaxed), nanos(now));
            if now >= at {
                IO::pure(ControlFlow::Break(()))
            } else {
                IO::sleep(Duration::from_nanos(at - now)).map_to(ControlFlow::Continue(()))
            }
        })
    })
}

/// Reads and drops what the client still sends, until it closes, an error,
/// or [`LINGER`] passes.
fn drain(reader: BufReader<ReadHalf<TcpStream>>) -> IO<(), io::Error> {
    let drain = IO::tail_rec(reader, |reader| {
        reader.read(64 * 1024).map(move |bytes| {
            if bytes.is_empty() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(reader)
            }
        })
    });
    drain.attempt().void().timeout_to(LINGER, IO::unit())
}

/// Echoes one connection's lines until it closes, sends a bad line, or
/// stays idle too long.
pub(crate) fn connection(stream: TcpStream, config: Config) -> IO<(), io::Error> {
    let (read, write) = stream.into_split();
    // Shared by the line handler and the error path after the loop; the
    // write side shuts down when the last of them is dropped.
    let write = Arc::new(write);
    let reader = BufReader::with_limit(read, config.max_line);
    let deadline = Deadline::default();
    let echo = {
        let (write, deadline) = (write.clone(), deadline.clone());
        reader.for_each_line(move |line| {
            let echoed = write.write_all(line).map(|()| ControlFlow::Continue(()));
            match config.idle_timeout {
                Some(idle) => deadline.restart(idle).product_r(echoed),
                None => echoed,
            }
        })
    };
    let serve = echo.attempt().flat_map(move |ended| match ended {
        Ok(_lines) => IO::unit(),
        // A line over the limit or not UTF-8: say so, then close.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => write
            .write_all(format!("error: {e}\n"))
            .product_r(write.shutdown())
            .product_r(drain(reader)),
        Err(e) => IO::raise_error(e),
    });
    match config.idle_timeout {
        None => serve,
        Some(idle) => deadline
            .restart(idle)
            .product_r(serve.race(watchdog(deadline)))
            .void(),
    }
}

/// Binds `addr`, calls `bound` with the address bound, then accepts
/// forever, a fiber per connection (whose error ends only that fiber).
pub(crate) fn server<F>(addr: SocketAddr, config: Config, bound: F) -> IO<(), io::Error>
where
    F: FnOnce(SocketAddr) -> io::Result<()> + Send + 'static,
{
    TcpListener::bind(addr).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let announce = IO::defer(move || match bound(addr) {
                Ok(()) => IO::unit(),
                Err(e) => IO::raise_error(e),
            });
            let accept_loop = IO::tail_rec(listener, move |listener| {
                listener.accept().attempt().flat_map(move |accepted| {
                    let next = ControlFlow::<(), _>::Continue(listener);
                    match accepted {
                        Ok((stream, _peer)) => connection(stream, config)
                            .attempt()
                            .void()
                            .start()
                            .map_to(next),
                        Err(e) => {
                            eprintln!("line_echo: accept failed: {e}");
                            IO::sleep(ACCEPT_BACKOFF).map_to(next)
                        }
                    }
                })
            });
            announce.product_r(accept_loop)
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
                idle_timeout: None
            }
        );
        assert_eq!(options(&[]).unwrap().config, Config::default());
        for bad in [
            &["--max-line-bytes", "0"][..],
            &["--idle-timeout-ms", "soon"],
            &["--mode", "batching"],
            &["--port", "1"],
        ] {
            assert!(options(bad).is_err(), "{bad:?}");
        }
    }
}
