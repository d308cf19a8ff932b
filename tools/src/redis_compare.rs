//! `redis_compare`: named Redis servers one after the other under
//! `redis-benchmark`, SET and GET at each client shape, with the servers'
//! CPU time per request, as one markdown table.
//!
//! # The servers
//!
//! | `--servers` name | command |
//! |---|---|
//! | `tokio_mt` | `mini_redis_tokio --port 0 --nodelay --flavor multi --workers 2` |
//! | `tokio_current` | `mini_redis_tokio --port 0 --nodelay --flavor current` |
//! | `redis` | `redis-server --port PORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no` |
//! | `spindle_wstp` | `mini-redis-server --port 0 --max-connections 250 --executor wstp` |
//! | `spindle_batching` | `mini-redis-server --port 0 --max-connections 250 --executor batching` |
//! | `spindle_tokio` | `mini-redis-server --port 0 --max-connections 250 --executor tokio` |
//!
//! `mini_redis_tokio` is this crate's tokio reference (tokio's mini-redis,
//! the `mini-redis` crate, as a library); `mini-redis-server` is Spindle's
//! (the `spindle-mini-redis` package); both are looked for next to the
//! running program (the same `target/release`), Spindle's also at
//! `--spindle-server PATH`. `redis-server` (the real Redis, for scale) and
//! `redis-benchmark` are looked for on `PATH`. With `--build`, the runner
//! first builds the two binaries into its own target directory (`cargo
//! build --release -p spindle-tools --bin mini_redis_tokio` if a tokio
//! server is chosen, `-p spindle-mini-redis --bin mini-redis-server` if a
//! Spindle server is and `--spindle-server` is not given). A server whose binary is missing is skipped with a message
//! (the table lists it under "not run"); without `--servers` every server
//! is chosen, so the table has all those that exist.
//!
//! `--nodelay` keeps Nagle's algorithm from holding back mini-redis's
//! replies to a pipelined batch (it writes each reply on its own; see
//! `mini_redis_tokio`'s documentation); redis-server sets `TCP_NODELAY`
//! itself, and Spindle's server writes a batch's replies at once.
//!
//! # Connection limits
//!
//! mini-redis serves at most 250 connections at once (a constant of the
//! crate) and leaves the others waiting in the accept queue; Spindle's
//! server has the same limit, given explicitly. redis-benchmark keeps all
//! its `-c` connections open until every request is answered, so with
//! more clients than that it waits forever. A shape with more clients than
//! a server's limit ([`ServerId::max_clients`]) is therefore not run
//! against that server: its row reads `n/a` and the table says why. The
//! default 256 clients are run against redis-server only.
//!
//! The servers that print `listening on 127.0.0.1:PORT` as their first
//! stdout line (both mini-redis binaries) are started with `--port 0` and
//! are ready at that line; redis-server is given a port that was free a
//! moment before and is ready when a connection to it succeeds.
//!
//! # A run
//!
//! A round runs every server in turn, in `--servers` order in even rounds
//! and in the reverse order in odd ones (so that drift of the machine
//! falls on all alike); only one server is up at a time. A server's turn
//! starts it, runs `redis-benchmark -h 127.0.0.1 -p PORT -t set,get -n N
//! -q -c C [-P P]` at each shape (each `--pipeline` P, then each
//! `--clients` C; `-P` only for P > 1), and kills and reaps it. Every
//! child (server or redis-benchmark) is owned by a guard that kills and
//! reaps it when dropped, so no path out of the runner, an error or a
//! panic, leaves a process behind. A redis-benchmark that fails or runs
//! past `--timeout` leaves its shape without figures that round, and a
//! server that dies ends its turn; both are reported under the table.
//!
//! # The figures
//!
//! redis-benchmark's `-q` report gives, per test, the requests per second
//! and the median latency (`SET: 55865.92 requests per second,
//! p50=0.543 msec`; see [`parse_quiet_report`]). The server's CPU time is
//! its process's user plus system time from `/proc/PID/stat` (every
//! thread's, in clock ticks: [`read_cpu_ticks`]) read just before
//! redis-benchmark starts and just after it exits, over the 2 × N requests
//! of both tests; a tick is 10 ms on Linux, so a run should keep the
//! server busy for some tenths of a second at least (the default N of
//! 100,000 does). Outside Linux the column reads `n/a`.
//!
//! Each cell of the table is the median across the rounds (the mean of
//! the middle two for an even count) of the rounds that gave it. The last
//! column is the server's throughput over the reference's at the same
//! shape (`--reference`, default `tokio_mt`, or the first server run
//! without it), the throughput being that of the whole SET-then-GET run,
//! 2 / (1 / SET + 1 / GET) requests per second from the medians.

use std::fmt::Write as _;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli::{ArgError, invalid, pairs};
use crate::http_load::compare::{FirstLine, STARTUP_TIMEOUT, first_line, parse_listening_line};
use crate::http_load::versus::{clock_ticks_per_sec, cpu_per_request, median, read_cpu_ticks};

/// `redis_compare`'s usage text.
pub const USAGE: &str = "\
usage: redis_compare [--servers LIST] [--clients LIST] [--pipeline LIST]
                     [--requests N] [--rounds R] [--reference NAME]
                     [--timeout SECS] [--spindle-server PATH] [--build]

Starts each named server in turn on a free port of 127.0.0.1, runs
`redis-benchmark -t set,get -n N -q -c C [-P P]` against it at each shape,
measures the server's CPU time (/proc/PID/stat) and prints one markdown
table: medians across the rounds, and the throughput against --reference.

  --servers LIST      among tokio_mt, tokio_current, redis, spindle_wstp,
                      spindle_batching, spindle_tokio (default: all; those
                      whose binary is missing are skipped)
  --clients LIST      redis-benchmark's -c values (default 1,50,256)
  --pipeline LIST     redis-benchmark's -P values (default 1)
  --requests N        requests per test, redis-benchmark's -n (default 100000)
  --rounds R          rounds of every server in turn, alternating the order
                      (default 1)
  --reference NAME    the server of the ratio column (default tokio_mt, or
                      the first server run)
  --timeout SECS      the longest one redis-benchmark may run (default 300)
  --spindle-server PATH
                      Spindle's mini-redis-server (default: next to this
                      program)
  --build             first build mini_redis_tokio and mini-redis-server
                      (those the servers need; cargo build --release) into
                      this program's target directory

The table goes to stdout, progress to stderr. Exit status: 0 when every
run gave its figures, 1 when some did not (the table is still printed) or
nothing could run, 2 for an unusable command line.";

/// The connections mini-redis serves at once (its `MAX_CONNECTIONS`), and
/// Spindle's server with `--max-connections 250`.
pub const MINI_REDIS_MAX_CONNECTIONS: u32 = 250;

/// How often a waiting runner looks at a child again.
const POLL: Duration = Duration::from_millis(10);

/// The servers `redis_compare` knows, by their `--servers` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerId {
    /// tokio's mini-redis on a `multi_thread` runtime of 2 workers.
    TokioMt,
    /// tokio's mini-redis on a `current_thread` runtime.
    TokioCurrent,
    /// The real Redis (`redis-server`).
    Redis,
    /// Spindle's mini-redis on the work-stealing pool.
    SpindleWstp,
    /// Spindle's mini-redis on the batching event loop.
    SpindleBatching,
    /// Spindle's mini-redis on its tokio executor.
    SpindleTokio,
}

/// The program a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// This crate's `mini_redis_tokio`.
    MiniRedisTokio,
    /// `redis-server`, from `PATH`.
    RedisServer,
    /// Spindle's `mini-redis-server` (the `spindle-mini-redis` package).
    SpindleMiniRedis,
}

impl ServerId {
    /// Every server, in the default order.
    pub const ALL: [ServerId; 6] = [
        ServerId::TokioMt,
        ServerId::TokioCurrent,
        ServerId::Redis,
        ServerId::SpindleWstp,
        ServerId::SpindleBatching,
        ServerId::SpindleTokio,
    ];

    /// The server's name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            ServerId::TokioMt => "tokio_mt",
            ServerId::TokioCurrent => "tokio_current",
            ServerId::Redis => "redis",
            ServerId::SpindleWstp => "spindle_wstp",
            ServerId::SpindleBatching => "spindle_batching",
            ServerId::SpindleTokio => "spindle_tokio",
        }
    }

    /// The server of a command-line name.
    pub fn from_name(name: &str) -> Option<ServerId> {
        ServerId::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The program it runs.
    pub fn binary(self) -> Binary {
        match self {
            ServerId::TokioMt | ServerId::TokioCurrent => Binary::MiniRedisTokio,
            ServerId::Redis => Binary::RedisServer,
            _ => Binary::SpindleMiniRedis,
        }
    }

    /// The most redis-benchmark clients it can serve at once (`None`: no
    /// limit below redis-benchmark's own).
    pub fn max_clients(self) -> Option<u32> {
        match self {
            ServerId::Redis => None,
            _ => Some(MINI_REDIS_MAX_CONNECTIONS),
        }
    }

    /// Its arguments: `port` is redis-server's, the others are given
    /// `--port 0` and say their port in their `listening on` line.
    pub fn args(self, port: u16) -> Vec<String> {
        let args: &[&str] = match self {
            ServerId::TokioMt => &[
                "--port",
                "0",
                "--nodelay",
                "--flavor",
                "multi",
                "--workers",
                "2",
            ],
            ServerId::TokioCurrent => &["--port", "0", "--nodelay", "--flavor", "current"],
            ServerId::Redis => {
                return [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
            }
            ServerId::SpindleWstp => &["--executor", "wstp"],
            ServerId::SpindleBatching => &["--executor", "batching"],
            ServerId::SpindleTokio => &["--executor", "tokio"],
        };
        let limit: &[&str] = match self.binary() {
            Binary::SpindleMiniRedis => &["--port", "0", "--max-connections", "250"],
            _ => &[],
        };
        limit.iter().chain(args).map(|s| s.to_string()).collect()
    }
}

impl Binary {
    /// The executable's file name.
    pub fn file_name(self) -> &'static str {
        match self {
            Binary::MiniRedisTokio => "mini_redis_tokio",
            Binary::RedisServer => "redis-server",
            Binary::SpindleMiniRedis => "mini-redis-server",
        }
    }

    /// The command that builds it (`None` for redis-server, which comes
    /// from the system's packages).
    pub fn build_command(self) -> Option<&'static str> {
        match self {
            Binary::MiniRedisTokio => {
                Some("cargo build --release -p spindle-tools --bin mini_redis_tokio")
            }
            Binary::RedisServer => None,
            Binary::SpindleMiniRedis => {
                Some("cargo build --release -p spindle-mini-redis --bin mini-redis-server")
            }
        }
    }
}

/// One load shape: redis-benchmark's `-c` and `-P`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Parallel connections (`-c`).
    pub clients: u32,
    /// Requests per pipeline (`-P`; 1: none).
    pub pipeline: u32,
}

/// `redis_compare`'s parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The servers, in order.
    pub servers: Vec<ServerId>,
    /// The `-c` values.
    pub clients: Vec<u32>,
    /// The `-P` values.
    pub pipelines: Vec<u32>,
    /// Requests per test (`-n`).
    pub requests: u64,
    /// Rounds of every server in turn.
    pub rounds: u32,
    /// The server of the ratio column, if chosen.
    pub reference: Option<ServerId>,
    /// The longest one redis-benchmark may run.
    pub timeout: Duration,
    /// `--spindle-server`, if given.
    pub spindle_server: Option<PathBuf>,
    /// Build the binaries first.
    pub build: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            servers: ServerId::ALL.to_vec(),
            clients: vec![1, 50, 256],
            pipelines: vec![1],
            requests: 100_000,
            rounds: 1,
            reference: None,
            timeout: Duration::from_secs(300),
            spindle_server: None,
            build: false,
        }
    }
}

impl Options {
    /// The shapes in table order: each pipeline depth, then each client
    /// count.
    pub fn shapes(&self) -> Vec<Shape> {
        self.pipelines
            .iter()
            .flat_map(|&pipeline| {
                self.clients
                    .iter()
                    .map(move |&clients| Shape { clients, pipeline })
            })
            .collect()
    }
}

/// A whole number above zero.
fn positive(flag: &'static str, value: &str) -> Result<u64, ArgError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(flag, value, "expected a whole number above zero"))
}

/// A comma-separated list of whole numbers above zero, each at most `max`.
fn positive_list(flag: &'static str, value: &str, max: u32) -> Result<Vec<u32>, ArgError> {
    let mut out = Vec::new();
    for item in value.split(',') {
        let n = positive(flag, item.trim())?;
        let n = u32::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| invalid(flag, value, format!("{n} is above {max}")))?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// A server's name.
fn server_name(flag: &'static str, value: &str) -> Result<ServerId, ArgError> {
    ServerId::from_name(value.trim()).ok_or_else(|| {
        let names: Vec<&str> = ServerId::ALL.iter().map(|s| s.name()).collect();
        invalid(flag, value, format!("expected one of {}", names.join(", ")))
    })
}

/// Parses `redis_compare`'s arguments (without the program name).
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, ArgError> {
    let pairs = pairs(
        args,
        &[
            "--servers",
            "--clients",
            "--pipeline",
            "--requests",
            "--rounds",
            "--reference",
            "--timeout",
            "--spindle-server",
        ],
        &["--build"],
    )?;
    let mut out = Options::default();
    for (flag, value) in pairs {
        let v = value.as_deref().unwrap_or_default();
        match flag {
            "--servers" => {
                let mut servers = Vec::new();
                for name in v.split(',') {
                    let server = server_name(flag, name)?;
                    if !servers.contains(&server) {
                        servers.push(server);
                    }
                }
                out.servers = servers;
            }
            // redis-benchmark's own limits are far above these; these keep
            // a typo from opening a million sockets.
            "--clients" => out.clients = positive_list(flag, v, 10_000)?,
            "--pipeline" => out.pipelines = positive_list(flag, v, 10_000)?,
            "--requests" => {
                out.requests = positive(flag, v)?;
                if out.requests > i32::MAX as u64 {
                    return Err(invalid(flag, v, "redis-benchmark takes at most 2^31 - 1"));
                }
            }
            "--rounds" => {
                out.rounds = u32::try_from(positive(flag, v)?)
                    .map_err(|_| invalid(flag, v, "too many rounds"))?;
            }
            "--reference" => out.reference = Some(server_name(flag, v)?),
            "--timeout" => out.timeout = Duration::from_secs(positive(flag, v)?),
            "--spindle-server" => {
                if v.is_empty() {
                    return Err(invalid(flag, v, "expected a path"));
                }
                out.spindle_server = Some(PathBuf::from(v));
            }
            _ => out.build = true,
        }
    }
    if let Some(reference) = out.reference.filter(|r| !out.servers.contains(r)) {
        return Err(invalid(
            "--reference",
            reference.name(),
            "is not among --servers",
        ));
    }
    Ok(out)
}

/// One test's figures in redis-benchmark's quiet report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestFigures {
    /// Requests per second.
    pub requests_per_sec: f64,
    /// The median latency (redis-benchmark 6.2 and later print it).
    pub p50: Option<Duration>,
}

/// The figures of each test in redis-benchmark's `-q` output, in the
/// order the tests first appear.
///
/// The report of a test is a line `TITLE: RATE requests per second,
/// p50=MS msec` (`TITLE: RATE requests per second` before 6.2). Before
/// it, redis-benchmark writes progress (`SET: rps=… (overall: …)
/// avg_msec=…`), each update after a `\r` and on the same line as the
/// report, to stdout even when it is not a terminal; the text is
/// therefore split at `\r` as well as at line ends, progress is skipped,
/// and if a title is reported twice the last report counts.
pub fn parse_quiet_report(text: &str) -> Vec<(String, TestFigures)> {
    let mut out: Vec<(String, TestFigures)> = Vec::new();
    for segment in text.split(['\r', '\n']) {
        let Some((title, figures)) = parse_report_line(segment.trim()) else {
            continue;
        };
        match out.iter_mut().find(|(t, _)| *t == title) {
            Some(entry) => entry.1 = figures,
            None => out.push((title.to_owned(), figures)),
        }
    }
    out
}

/// One `TITLE: RATE requests per second[, p50=MS msec]` segment.
fn parse_report_line(segment: &str) -> Option<(&str, TestFigures)> {
    let (head, tail) = segment.split_once(" requests per second")?;
    // Titles may hold `: ` themselves; the rate follows the last one.
    let (title, rate) = head.rsplit_once(": ")?;
    let requests_per_sec: f64 = rate.trim().parse().ok()?;
    if title.is_empty() || !requests_per_sec.is_finite() || requests_per_sec < 0.0 {
        return None;
    }
    let p50 = tail
        .split_once("p50=")
        .and_then(|(_, rest)| rest.trim().strip_suffix("msec"))
        .and_then(|ms| ms.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3));
    Some((
        title,
        TestFigures {
            requests_per_sec,
            p50,
        },
    ))
}

/// One redis-benchmark run against one server: its SET and GET figures
/// (`None` if the run failed or did not report them) and the server's CPU
/// ticks over the run (`None` if `/proc` could not tell).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The SET test.
    pub set: Option<TestFigures>,
    /// The GET test.
    pub get: Option<TestFigures>,
    /// The server's CPU time over the run, in clock ticks.
    pub cpu_ticks: Option<u64>,
}

/// One server's runs at one shape, one per round that gave figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The server.
    pub server: ServerId,
    /// The shape.
    pub shape: Shape,
    /// The rounds' runs.
    pub samples: Vec<Sample>,
}

/// What a comparison measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The servers that ran, in `--servers` order.
    pub servers: Vec<ServerId>,
    /// What was not run, and why (servers without a binary, shapes beyond
    /// a server's connection limit).
    pub not_run: Vec<String>,
    /// The shapes, in table order.
    pub shapes: Vec<Shape>,
    /// Every server's runs at every shape.
    pub cells: Vec<Cell>,
    /// Requests per test.
    pub requests: u64,
    /// Rounds.
    pub rounds: u32,
    /// The server of the ratio column.
    pub reference: Option<ServerId>,
    /// Clock ticks per second of the CPU times.
    pub ticks_per_sec: u64,
    /// `redis-benchmark --version`.
    pub benchmark_version: String,
    /// What went wrong during the runs (failed runs, dead servers).
    pub failures: Vec<String>,
}

/// A server's medians at one shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// SET requests/s.
    pub set_rate: Option<f64>,
    /// GET requests/s.
    pub get_rate: Option<f64>,
    /// SET p50.
    pub set_p50: Option<Duration>,
    /// GET p50.
    pub get_p50: Option<Duration>,
    /// Server CPU time per request.
    pub cpu_per_request: Option<Duration>,
}

impl Summary {
    /// The throughput of the whole SET-then-GET run, 2 / (1 / SET + 1 /
    /// GET) (both tests make as many requests).
    pub fn throughput(&self) -> Option<f64> {
        match (self.set_rate, self.get_rate) {
            (Some(set), Some(get)) if set > 0.0 && get > 0.0 => Some(2.0 / (1.0 / set + 1.0 / get)),
            _ => None,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median_f64(values: &mut [f64]) -> Option<f64> {
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The medians of `samples` (see [`Summary`]); `requests` is the runs' -n.
pub fn summarize(samples: &[Sample], requests: u64, ticks_per_sec: u64) -> Summary {
    let rate = |pick: fn(&Sample) -> Option<TestFigures>| {
        let mut v: Vec<f64> = samples
            .iter()
            .filter_map(|s| pick(s).map(|f| f.requests_per_sec))
            .collect();
        median_f64(&mut v)
    };
    let p50 = |pick: fn(&Sample) -> Option<TestFigures>| {
        let mut v: Vec<Duration> = samples
            .iter()
            .filter_map(|s| pick(s).and_then(|f| f.p50))
            .collect();
        median(&mut v)
    };
    let mut cpu: Vec<Duration> = samples
        .iter()
        // Only complete runs: a failed one did not make its 2 × N requests.
        .filter(|s| s.set.is_some() && s.get.is_some())
        .filter_map(|s| cpu_per_request(s.cpu_ticks?, ticks_per_sec, requests.saturating_mul(2)))
        .collect();
    Summary {
        set_rate: rate(|s| s.set),
        get_rate: rate(|s| s.get),
        set_p50: p50(|s| s.set),
        get_p50: p50(|s| s.get),
        cpu_per_request: median(&mut cpu),
    }
}

/// Requests/s with one decimal, or `n/a`.
fn rate_text(rate: Option<f64>) -> String {
    rate.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.1}"))
}

/// Milliseconds with three decimals (redis-benchmark's precision), or
/// `n/a`.
fn ms_text(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.3} ms", d.as_secs_f64() * 1e3),
    )
}

/// Microseconds with two decimals, or `n/a`.
fn micros_text(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.2} µs", d.as_secs_f64() * 1e6),
    )
}

impl Comparison {
    /// The cell of `server` at `shape`.
    pub fn cell(&self, server: ServerId, shape: Shape) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.server == server && c.shape == shape)
    }

    fn summary(&self, server: ServerId, shape: Shape) -> Summary {
        let samples = self.cell(server, shape).map_or(&[][..], |c| &c.samples);
        summarize(samples, self.requests, self.ticks_per_sec)
    }

    /// The server of the ratio column: the chosen one if it ran, else
    /// `tokio_mt` if it ran, else the first that ran.
    pub fn reference_server(&self) -> Option<ServerId> {
        let ran = |s: &ServerId| self.servers.contains(s);
        self.reference
            .filter(ran)
            .or(Some(ServerId::TokioMt).filter(ran))
            .or_else(|| self.servers.first().copied())
    }

    /// The heading, a line on the method, the table, then what was not run
    /// and what failed.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let reference = self.reference_server();
        let ref_name = reference.map_or("n/a", ServerId::name);
        let _ = writeln!(out, "### Redis servers under redis-benchmark\n");
        let _ = writeln!(
            out,
            "{}, `-t set,get -n {} -q` at each shape against one server at a time; \
             {} round{} (every server in turn, the order alternating), medians across them; \
             server CPU: user + system time of the server process over the whole \
             redis-benchmark run, per request (2 × {}; clock ticks of {:.0} ms); \
             last column: requests/s of the SET-then-GET run, 2 / (1/SET + 1/GET), \
             over {ref_name}'s at the same shape\n",
            self.benchmark_version,
            self.requests,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.requests,
            1e3 / self.ticks_per_sec.max(1) as f64,
        );
        let _ = writeln!(
            out,
            "| server | clients | pipeline | SET req/s | GET req/s | SET p50 | GET p50 | \
             server CPU/request | req/s vs {ref_name} |"
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for &shape in &self.shapes {
            let base = reference.and_then(|r| self.summary(r, shape).throughput());
            for &server in &self.servers {
                let s = self.summary(server, shape);
                let ratio = match (s.throughput(), base) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                    _ => "n/a".to_owned(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {ratio} |",
                    server.name(),
                    shape.clients,
                    shape.pipeline,
                    rate_text(s.set_rate),
                    rate_text(s.get_rate),
                    ms_text(s.set_p50),
                    ms_text(s.get_p50),
                    micros_text(s.cpu_per_request),
                );
            }
        }
        if !self.not_run.is_empty() {
            out.push_str("\nnot run:\n");
            for why in &self.not_run {
                let _ = writeln!(out, "- {why}");
            }
        }
        if !self.failures.is_empty() {
            out.push_str("\nfailures:\n");
            for failure in &self.failures {
                let _ = writeln!(out, "- {failure}");
            }
        }
        out
    }
}

/// The directory of the running program.
pub fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
}

/// `name` in one of `PATH`'s directories.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Where each binary is: found, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    /// `mini_redis_tokio`.
    pub mini_redis_tokio: Result<PathBuf, String>,
    /// `redis-server`.
    pub redis_server: Result<PathBuf, String>,
    /// Spindle's `mini-redis-server`.
    pub spindle: Result<PathBuf, String>,
    /// `redis-benchmark`.
    pub redis_benchmark: Result<PathBuf, String>,
}

impl Programs {
    /// Looks for every program (see the module documentation).
    pub fn find(spindle_server: Option<&Path>) -> Programs {
        let dir = exe_dir();
        let beside = |binary: Binary| {
            let name = format!("{}{}", binary.file_name(), std::env::consts::EXE_SUFFIX);
            let path = dir.as_ref().map(|d| d.join(&name));
            match path {
                Some(path) if path.is_file() => Ok(path),
                Some(path) => Err(format!(
                    "{} not found (build it with `{}`, or pass --build)",
                    path.display(),
                    binary.build_command().unwrap_or_default()
                )),
                None => Err("cannot find the directory of this program".to_owned()),
            }
        };
        let spindle = match spindle_server {
            Some(path) if path.is_file() => Ok(path.to_path_buf()),
            Some(path) => Err(format!("--spindle-server {}: no such file", path.display())),
            None => beside(Binary::SpindleMiniRedis),
        };
        let on_path = |name: &str, package: &str| {
            find_in_path(name)
                .ok_or_else(|| format!("{name} not found on PATH (apt-get install {package})"))
        };
        Programs {
            mini_redis_tokio: beside(Binary::MiniRedisTokio),
            redis_server: on_path("redis-server", "redis-server"),
            spindle,
            redis_benchmark: on_path("redis-benchmark", "redis-tools"),
        }
    }

    /// The program of `binary`.
    pub fn of(&self, binary: Binary) -> &Result<PathBuf, String> {
        match binary {
            Binary::MiniRedisTokio => &self.mini_redis_tokio,
            Binary::RedisServer => &self.redis_server,
            Binary::SpindleMiniRedis => &self.spindle,
        }
    }
}

/// Builds the binaries that `options.servers` need (`--build`): `cargo
/// build --release` of each package, in the workspace this crate is in,
/// into the target directory of the running program (the parent of its
/// `release` directory), cargo's output on stderr; Spindle's server not if
/// `--spindle-server` names one. A failed build is reported to `log` and
/// not an error: the servers whose binary is then missing are skipped.
pub fn build(options: &Options, log: &mut dyn FnMut(&str)) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let target_dir = exe_dir().and_then(|d| {
        (d.file_name()? == "release")
            .then(|| d.parent().map(Path::to_path_buf))
            .flatten()
    });
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut binaries: Vec<Binary> = Vec::new();
    for server in &options.servers {
        let binary = server.binary();
        let given = binary == Binary::SpindleMiniRedis && options.spindle_server.is_some();
        if binary.build_command().is_some() && !given && !binaries.contains(&binary) {
            binaries.push(binary);
        }
    }
    for binary in binaries {
        let Some(shown) = binary.build_command() else {
            continue;
        };
        let args: Vec<&str> = shown.split(' ').skip(1).collect();
        let mut command = Command::new(&cargo);
        command.args(&args).current_dir(workspace);
        if let Some(dir) = &target_dir {
            command.env("CARGO_TARGET_DIR", dir);
        }
        log(&format!("building: {shown}"));
        match command.status() {
            Ok(status) if status.success() => {}
            Ok(status) => log(&format!("`{shown}` failed ({status})")),
            Err(e) => log(&format!("cannot run `{shown}`: {e}")),
        }
    }
}

/// A child process that is killed and reaped when dropped.
#[derive(Debug)]
struct Guard {
    child: Child,
}

impl Guard {
    /// Kills the child (if it still runs) and waits for it.
    fn reap(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        // It may exit between the two calls: kill's error is not the
        // answer, wait's is.
        let _ = self.child.kill();
        self.child.wait()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.reap();
    }
}

/// A server up and ready.
#[derive(Debug)]
struct RunningServer {
    guard: Guard,
    addr: SocketAddr,
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

impl RunningServer {
    /// Starts `server` from `program` and waits until it is ready (its
    /// `listening on` line, or for redis-server a connection accepted).
    fn start(server: ServerId, program: &Path) -> Result<RunningServer, String> {
        let redis = server == ServerId::Redis;
        let port = if redis { free_port()? } else { 0 };
        let args = server.args(port);
        let shown = format!("{} {}", program.display(), args.join(" "));
        let child = Command::new(program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(if redis { Stdio::null() } else { Stdio::piped() })
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start `{shown}`: {e}"))?;
        let mut guard = Guard { child };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let addr = if redis {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            loop {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break addr;
                }
                if let Ok(Some(status)) = guard.child.try_wait() {
                    return Err(format!("`{shown}` exited before accepting ({status})"));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "`{shown}` accepted no connection within {} s",
                        STARTUP_TIMEOUT.as_secs()
                    ));
                }
                std::thread::sleep(POLL);
            }
        } else {
            let stdout = guard
                .child
                .stdout
                .take()
                .ok_or("the server's stdout was not captured")?;
            match first_line(stdout, STARTUP_TIMEOUT)? {
                FirstLine::Closed => {
                    let status = guard.reap().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!(
                        "`{shown}` closed its stdout without a `listening on` line ({status})"
                    ));
                }
                FirstLine::Line(line) => {
                    parse_listening_line(&line).map_err(|e| format!("`{shown}`: {e}"))?
                }
                FirstLine::Failed(e) => return Err(format!("reading `{shown}`'s stdout: {e}")),
                FirstLine::TimedOut => {
                    return Err(format!(
                        "`{shown}` printed no `listening on` line within {} s",
                        STARTUP_TIMEOUT.as_secs()
                    ));
                }
            }
        };
        Ok(RunningServer { guard, addr })
    }

    fn pid(&self) -> u32 {
        self.guard.child.id()
    }

    /// `Some(why)` if the server has exited.
    fn exited(&mut self) -> Option<String> {
        match self.guard.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!("exited ({status})")),
            Err(e) => Some(format!("cannot be checked on: {e}")),
        }
    }
}

/// Reads all of `source` on a thread of its own (so that a child never
/// blocks on a full pipe), handing the text back when it closes.
fn read_all(mut source: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = source.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// The arguments of one redis-benchmark run.
pub fn benchmark_args(addr: SocketAddr, shape: Shape, requests: u64) -> Vec<String> {
    let mut args = vec![
        "-h".to_owned(),
        addr.ip().to_string(),
        "-p".to_owned(),
        addr.port().to_string(),
        "-t".to_owned(),
        "set,get".to_owned(),
        "-n".to_owned(),
        requests.to_string(),
        "-q".to_owned(),
        "-c".to_owned(),
        shape.clients.to_string(),
    ];
    if shape.pipeline > 1 {
        args.extend(["-P".to_owned(), shape.pipeline.to_string()]);
    }
    args
}

/// Runs redis-benchmark with `args`, for at most `timeout` and only while
/// `server` is up (redis-benchmark itself waits forever for a server that
/// is gone); its stdout, or why it failed (with the end of its stderr).
fn run_benchmark(
    program: &Path,
    args: &[String],
    timeout: Duration,
    server: &mut RunningServer,
) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start redis-benchmark: {e}"))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let mut guard = Guard { child };
    let stdout = read_all(stdout.ok_or("redis-benchmark's stdout was not captured")?);
    let stderr = read_all(stderr.ok_or("redis-benchmark's stderr was not captured")?);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match guard.child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = guard.reap();
                return Err(format!(
                    "redis-benchmark ran past --timeout {} s and was killed",
                    timeout.as_secs()
                ));
            }
            Ok(None) => {
                if let Some(why) = server.exited() {
                    let _ = guard.reap();
                    return Err(format!(
                        "the server {why} during the run (redis-benchmark was killed)"
                    ));
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(format!("cannot wait for redis-benchmark: {e}")),
        }
    };
    let out = stdout.recv().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        let err = stderr.recv().unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "redis-benchmark failed ({status}): {}",
            tail.join(" / ")
        ))
    }
}

/// `redis-benchmark --version`'s line, or `redis-benchmark`.
fn benchmark_version(program: &Path) -> String {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|out| {
            let line = String::from_utf8(out.stdout)
                .ok()?
                .lines()
                .next()?
                .trim()
                .to_owned();
            (!line.is_empty()).then_some(line)
        })
        .unwrap_or_else(|| "redis-benchmark".to_owned())
}

/// Runs the comparison `options` describe with `programs` (see the module
/// documentation); `log` gets a line per step. An error only when nothing
/// can run (no redis-benchmark, no server).
pub fn run(
    options: &Options,
    programs: &Programs,
    log: &mut dyn FnMut(&str),
) -> Result<Comparison, String> {
    let benchmark = programs.redis_benchmark.clone()?;
    let mut servers = Vec::new();
    let mut not_run = Vec::new();
    for &server in &options.servers {
        match programs.of(server.binary()) {
            Ok(_) => servers.push(server),
            Err(why) => {
                log(&format!("skipping {}: {why}", server.name()));
                not_run.push(format!("{}: {why}", server.name()));
            }
        }
    }
    if servers.is_empty() {
        return Err("no server to run".to_owned());
    }
    let shapes = options.shapes();
    let over_limit = |server: ServerId, shape: Shape| {
        server.max_clients().is_some_and(|max| shape.clients > max)
    };
    for &server in &servers {
        let over: Vec<String> = shapes
            .iter()
            .filter(|&&shape| over_limit(server, shape))
            .map(|shape| format!("-c {} -P {}", shape.clients, shape.pipeline))
            .collect();
        if let (false, Some(max)) = (over.is_empty(), server.max_clients()) {
            let why = format!(
                "{} at {}: more clients than the {max} connections it serves at once \
                 (redis-benchmark would wait forever for the others)",
                server.name(),
                over.join(", ")
            );
            log(&format!("skipping {why}"));
            not_run.push(why);
        }
    }
    let mut cells: Vec<Cell> = servers
        .iter()
        .flat_map(|&server| {
            shapes.iter().map(move |&shape| Cell {
                server,
                shape,
                samples: Vec::new(),
            })
        })
        .collect();
    let mut failures = Vec::new();
    for round in 0..options.rounds {
        let mut order = servers.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for server in order {
            let name = server.name();
            let program = match programs.of(server.binary()) {
                Ok(program) => program,
                Err(_) => continue,
            };
            let mut running = match RunningServer::start(server, program) {
                Ok(running) => running,
                Err(e) => {
                    log(&format!("{name}: {e}"));
                    failures.push(format!("{name}, round {}: {e}", round + 1));
                    continue;
                }
            };
            log(&format!(
                "{name}: listening on {} (pid {}), round {} of {}",
                running.addr,
                running.pid(),
                round + 1,
                options.rounds
            ));
            for &shape in shapes.iter().filter(|&&shape| !over_limit(server, shape)) {
                let args = benchmark_args(running.addr, shape, options.requests);
                let before = read_cpu_ticks(running.pid());
                let outcome = run_benchmark(&benchmark, &args, options.timeout, &mut running);
                let after = read_cpu_ticks(running.pid());
                let at = format!(
                    "{name}, -c {} -P {}, round {}",
                    shape.clients,
                    shape.pipeline,
                    round + 1
                );
                let ran = outcome.is_ok();
                let sample = match outcome {
                    Ok(text) => {
                        let report = parse_quiet_report(&text);
                        let find = |t: &str| report.iter().find(|(n, _)| n == t).map(|(_, f)| *f);
                        let sample = Sample {
                            set: find("SET"),
                            get: find("GET"),
                            cpu_ticks: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
                        };
                        if sample.set.is_none() || sample.get.is_none() {
                            let text = text.replace('\r', "\n");
                            let tail: Vec<&str> = text.lines().rev().take(3).collect();
                            failures.push(format!(
                                "{at}: no SET and GET report in redis-benchmark's output (it ended: {:?})",
                                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                            ));
                        }
                        sample
                    }
                    Err(e) => {
                        failures.push(format!("{at}: {e}"));
                        Sample {
                            set: None,
                            get: None,
                            cpu_ticks: None,
                        }
                    }
                };
                log(&format!(
                    "{at}: SET {} req/s, GET {} req/s, {} server CPU ticks",
                    rate_text(sample.set.map(|f| f.requests_per_sec)),
                    rate_text(sample.get.map(|f| f.requests_per_sec)),
                    sample
                        .cpu_ticks
                        .map_or_else(|| "n/a".to_owned(), |t| t.to_string())
                ));
                if let Some(cell) = cells
                    .iter_mut()
                    .find(|c| c.server == server && c.shape == shape)
                {
                    cell.samples.push(sample);
                }
                if let Some(why) = running.exited() {
                    log(&format!("{name}: the server {why}; its turn ends"));
                    if ran {
                        failures.push(format!("{at}: then the server {why}; its turn ended"));
                    }
                    break;
                }
            }
            // Kill and reap before the next server starts.
            drop(running);
        }
    }
    Ok(Comparison {
        servers,
        not_run,
        shapes,
        cells,
        requests: options.requests,
        rounds: options.rounds,
        reference: options.reference,
        ticks_per_sec: clock_ticks_per_sec(),
        benchmark_version: benchmark_version(&benchmark),
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-benchmark 7.0.15 `-t set,get -n 20000 -q -c 50` against
    /// redis-server 7.0.15, stdout as captured to a file (progress after
    /// `\r`s, padded with spaces, on the report's line).
    const CAPTURED_C50: &str = " \rSET: rps=0.0 (overall: 0.0) avg_msec=-nan (overall: -nan)\r                                                          \rSET: rps=55391.5 (overall: 55177.6) avg_msec=0.594 (overall: 0.594)\r                                                                    \rSET: 55865.92 requests per second, p50=0.543 msec\n \rGET: rps=29406.4 (overall: 49871.6) avg_msec=0.689 (overall: 0.689)\r                                                                    \rGET: rps=36740.0 (overall: 41623.1) avg_msec=0.778 (overall: 0.738)\r                                                                    \rGET: 40567.95 requests per second, p50=0.567 msec\n\n";

    /// The same with `-c 1 -P 16`: too fast for more than one progress
    /// update.
    const CAPTURED_P16: &str = " \rSET: rps=0.0 (overall: inf) avg_msec=0.039 (overall: 0.039)\r                                                            \rSET: 555555.56 requests per second, p50=0.023 msec\n \rGET: 588235.25 requests per second, p50=0.023 msec\n\n";

    fn figures(rate: f64, p50_ms: f64) -> TestFigures {
        TestFigures {
            requests_per_sec: rate,
            p50: Some(Duration::from_secs_f64(p50_ms / 1e3)),
        }
    }

    fn args(list: &[&str]) -> Result<Options, ArgError> {
        parse_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn a_quiet_redis_benchmark_report_gives_the_rate_and_p50_of_each_test() {
        assert_eq!(
            parse_quiet_report(CAPTURED_C50),
            vec![
                ("SET".to_owned(), figures(55865.92, 0.543)),
                ("GET".to_owned(), figures(40567.95, 0.567)),
            ]
        );
        assert_eq!(
            parse_quiet_report(CAPTURED_P16),
            vec![
                ("SET".to_owned(), figures(555555.56, 0.023)),
                ("GET".to_owned(), figures(588235.25, 0.023)),
            ]
        );
    }

    #[test]
    fn progress_updates_are_not_reports_and_the_last_report_of_a_test_counts() {
        let progress_only =
            " \rSET: rps=55391.5 (overall: 55177.6) avg_msec=0.594 (overall: 0.594)\r";
        assert!(parse_quiet_report(progress_only).is_empty());
        let twice = "SET: 1.00 requests per second, p50=9.000 msec\r\nSET: 2.50 requests per second, p50=0.100 msec\n";
        assert_eq!(
            parse_quiet_report(twice),
            vec![("SET".to_owned(), figures(2.5, 0.1))]
        );
    }

    #[test]
    fn a_report_without_p50_from_an_older_redis_benchmark_still_gives_the_rate() {
        let old = "SET: 117647.06 requests per second\nGET: 120481.93 requests per second\n";
        let parsed = parse_quiet_report(old);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].1.requests_per_sec, 117647.06);
        assert_eq!(parsed[0].1.p50, None);
        // Titles with spaces and colons, as some of redis-benchmark's tests
        // have, keep the rate after the last colon.
        let titled =
            "LPUSH (needed to benchmark LRANGE): 90909.09 requests per second, p50=0.279 msec\n";
        assert_eq!(
            parse_quiet_report(titled),
            vec![(
                "LPUSH (needed to benchmark LRANGE)".to_owned(),
                figures(90909.09, 0.279)
            )]
        );
    }

    #[test]
    fn error_lines_and_garbage_give_no_figures() {
        for text in [
            "",
            "WARNING: Could not fetch server CONFIG\n",
            "Error: Connection reset by peer\n",
            "SET: lots requests per second, p50=0.1 msec\n",
            ": 5.0 requests per second\n",
            "SET: -5.0 requests per second\n",
        ] {
            assert!(parse_quiet_report(text).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn the_defaults_are_every_server_at_1_50_and_256_clients_without_pipelining() {
        let o = args(&[]).unwrap();
        assert_eq!(o, Options::default());
        assert_eq!(o.servers, ServerId::ALL.to_vec());
        assert_eq!(
            o.shapes(),
            [1, 50, 256].map(|clients| Shape {
                clients,
                pipeline: 1
            })
        );
        assert_eq!((o.requests, o.rounds, o.build), (100_000, 1, false));
    }

    #[test]
    fn the_flags_choose_servers_shapes_requests_rounds_and_the_reference() {
        let o = args(&[
            "--servers",
            "redis,tokio_mt,redis",
            "--clients=1,50",
            "--pipeline",
            "1,16",
            "--requests",
            "20000",
            "--rounds",
            "3",
            "--reference",
            "redis",
            "--build",
            "--spindle-server",
            "/x/mini-redis-server",
        ])
        .unwrap();
        assert_eq!(o.servers, vec![ServerId::Redis, ServerId::TokioMt]);
        assert_eq!(
            o.shapes(),
            vec![
                Shape {
                    clients: 1,
                    pipeline: 1
                },
                Shape {
                    clients: 50,
                    pipeline: 1
                },
                Shape {
                    clients: 1,
                    pipeline: 16
                },
                Shape {
                    clients: 50,
                    pipeline: 16
                },
            ]
        );
        assert_eq!((o.requests, o.rounds), (20_000, 3));
        assert_eq!(o.reference, Some(ServerId::Redis));
        assert!(o.build);
        assert_eq!(
            o.spindle_server,
            Some(PathBuf::from("/x/mini-redis-server"))
        );
        for id in ServerId::ALL {
            assert_eq!(ServerId::from_name(id.name()), Some(id));
        }
    }

    #[test]
    fn unusable_command_lines_are_errors() {
        for list in [
            &["--servers", "memcached"][..],
            &["--servers", ""],
            &["--clients", "0"],
            &["--clients", "1,,2"],
            &["--pipeline", "x"],
            &["--requests", "0"],
            &["--requests", "3000000000"],
            &["--rounds", "-1"],
            &["--reference", "tokio_mt", "--servers", "redis"],
            &["--timeout", "0"],
            &["--build=yes"],
            &["--requests"],
            &["stray"],
        ] {
            assert!(args(list).is_err(), "{list:?}");
        }
        assert_eq!(args(&["-h"]), Err(ArgError::Help));
    }

    #[test]
    fn each_server_runs_its_binary_with_its_flags() {
        assert_eq!(
            ServerId::TokioMt.args(1),
            [
                "--port",
                "0",
                "--nodelay",
                "--flavor",
                "multi",
                "--workers",
                "2"
            ]
        );
        assert_eq!(
            ServerId::TokioCurrent.args(1),
            ["--port", "0", "--nodelay", "--flavor", "current"]
        );
        assert_eq!(
            ServerId::Redis.args(6390),
            [
                "--port",
                "6390",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no"
            ]
        );
        assert_eq!(
            ServerId::SpindleBatching.args(1),
            [
                "--port",
                "0",
                "--max-connections",
                "250",
                "--executor",
                "batching"
            ]
        );
        assert_eq!(ServerId::TokioMt.max_clients(), Some(250));
        assert_eq!(ServerId::SpindleWstp.max_clients(), Some(250));
        assert_eq!(ServerId::Redis.max_clients(), None);
        assert_eq!(ServerId::SpindleTokio.binary(), Binary::SpindleMiniRedis);
        assert_eq!(ServerId::TokioCurrent.binary(), Binary::MiniRedisTokio);
        assert_eq!(ServerId::Redis.binary().build_command(), None);
        let addr = SocketAddr::from(([127, 0, 0, 1], 7000));
        let one = Shape {
            clients: 50,
            pipeline: 1,
        };
        assert_eq!(
            benchmark_args(addr, one, 20_000).join(" "),
            "-h 127.0.0.1 -p 7000 -t set,get -n 20000 -q -c 50"
        );
        let piped = Shape {
            clients: 1,
            pipeline: 16,
        };
        assert!(
            benchmark_args(addr, piped, 5)
                .join(" ")
                .ends_with("-c 1 -P 16")
        );
    }

    fn sample(set: f64, get: f64, ticks: Option<u64>) -> Sample {
        Sample {
            set: Some(figures(set, 0.2)),
            get: Some(figures(get, 0.3)),
            cpu_ticks: ticks,
        }
    }

    #[test]
    fn a_cell_gives_the_medians_of_its_rounds_and_cpu_over_both_tests() {
        let samples = [
            sample(100.0, 300.0, Some(2)),
            sample(300.0, 100.0, Some(6)),
            sample(200.0, 200.0, Some(4)),
            Sample {
                set: None,
                get: None,
                cpu_ticks: Some(1000),
            },
        ];
        let s = summarize(&samples, 1_000, 100);
        assert_eq!((s.set_rate, s.get_rate), (Some(200.0), Some(200.0)));
        assert_eq!(s.set_p50, Some(Duration::from_micros(200)));
        // 4 ticks = 40 ms over 2 × 1,000 requests = 20 µs; the failed run
        // is not counted.
        assert_eq!(s.cpu_per_request, Some(Duration::from_micros(20)));
        assert_eq!(s.throughput(), Some(200.0));
        assert_eq!(median_f64(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median_f64(&mut []), None);
        let none = summarize(&[], 1_000, 100);
        assert_eq!(none.throughput(), None);
        assert_eq!(none.cpu_per_request, None);
    }

    #[test]
    fn the_table_has_a_row_per_shape_and_server_and_a_ratio_to_the_reference() {
        let shape = Shape {
            clients: 50,
            pipeline: 1,
        };
        let comparison = Comparison {
            servers: vec![ServerId::TokioMt, ServerId::Redis],
            not_run: vec!["spindle_wstp: not built".to_owned()],
            shapes: vec![shape],
            cells: vec![
                Cell {
                    server: ServerId::TokioMt,
                    shape,
                    samples: vec![sample(1_000.0, 1_000.0, Some(20))],
                },
                Cell {
                    server: ServerId::Redis,
                    shape,
                    samples: vec![sample(3_000.0, 1_500.0, None)],
                },
            ],
            requests: 10_000,
            rounds: 1,
            reference: None,
            ticks_per_sec: 100,
            benchmark_version: "redis-benchmark 7.0.15".to_owned(),
            failures: vec!["redis, -c 50 -P 1, round 1: boom".to_owned()],
        };
        let text = comparison.render();
        assert!(
            text.starts_with("### Redis servers under redis-benchmark\n"),
            "{text}"
        );
        assert!(text.contains("| req/s vs tokio_mt |"), "{text}");
        assert!(
            text.contains(
                "| tokio_mt | 50 | 1 | 1000.0 | 1000.0 | 0.200 ms | 0.300 ms | 10.00 µs | 1.00x |\n"
            ),
            "{text}"
        );
        // 2 / (1/3000 + 1/1500) = 2000 req/s, twice tokio_mt's.
        assert!(
            text.contains(
                "| redis | 50 | 1 | 3000.0 | 1500.0 | 0.200 ms | 0.300 ms | n/a | 2.00x |\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("not run:\n- spindle_wstp: not built\n"),
            "{text}"
        );
        assert!(
            text.contains("failures:\n- redis, -c 50 -P 1, round 1: boom\n"),
            "{text}"
        );
        let chosen = Comparison {
            reference: Some(ServerId::Redis),
            ..comparison
        };
        assert!(chosen.render().contains(
            "| tokio_mt | 50 | 1 | 1000.0 | 1000.0 | 0.200 ms | 0.300 ms | 10.00 µs | 0.50x |"
        ));
    }
}
