//! `http_compare --versus`: named servers side by side, in pairs, under
//! the same closed-loop load, with the servers' CPU time per request.
//!
//! # The pairs
//!
//! | `--pairs` | first server | second server |
//! |---|---|---|
//! | `wstp` | spindle wstp: `hello_http --executor wstp --workers N` | tokio multi_thread: `hello_tokio --flavor multi --workers N` |
//! | `batching` | spindle batching: `hello_http --executor batching --mode batching` | tokio current_thread: `hello_tokio --flavor current` |
//! | `fan-out` | batching: `hello_http --executor batching --mode batching --fan-out F` | macrotask: the same with `--mode macrotask` |
//!
//! The first two put each Spindle executor against the tokio runtime of
//! the same shape (a pool of N workers; one thread), both servers
//! answering with the same bytes (hello_tokio compiles hello_http's
//! `http.rs`). The third is the "batching reframe": a handler that starts
//! F fibers per request and joins them before answering, the workload
//! where batching fiber starts and resumes should show, on one executor
//! in its two modes. `--workers` (default 2) and `--fan-out` (default 8)
//! set N and F; `--request-timeout-ms` goes to every server and
//! `--batch-size` to the event-loop ones.
//!
//! # A run
//!
//! Both servers of a pair are started (each under `taskset -c CPU` with
//! `--server-cpu`, else unpinned) and stay up for the whole pair. At each
//! connection count (default 1, 50 and 256) the pair runs `--rounds`
//! rounds (default 3); a round loads each server once, with
//! [`run_load_observed`]'s warm-up and window, the first server first in
//! even rounds and second in odd ones, so that drift of the machine (heat,
//! other load) falls on both alike. While one server is loaded the other
//! is idle (its threads asleep).
//!
//! # Server CPU per request
//!
//! The server's CPU time is its process's user plus system time, the
//! `utime` and `stime` fields of `/proc/<pid>/stat` (every thread's, in
//! clock ticks: [`clock_ticks_per_sec`]), read when the measured window
//! starts and again when every connection has finished (the interval of
//! the report's `total`); the difference divided by the successful
//! requests of the window is [`cpu_per_request`]. A tick is 10 ms on
//! Linux, so a window should hold at least some seconds of CPU time (the
//! default 10 s does); outside Linux the column reads `n/a`.
//!
//! # The table
//!
//! One table per pair, a row per connection count and server:
//! requests/s over all rounds (their requests over their `total`s), the
//! lowest and highest round, p50 and p99 (the median of the rounds'
//! values: the latencies themselves are not kept across rounds), errors
//! (all rounds) and CPU per request (all rounds' CPU time over all their
//! requests); then the ratios first / second of requests/s and of CPU per
//! request at each count.

use std::fmt::Write as _;
use std::time::Duration;

use super::cli::CompareArgs;
use super::compare::{STARTUP_TIMEOUT, ServerCommand, ServerProcess, ms};
use super::{LoadConfig, LoadReport, Target, WindowEdge, connections_label, run_load_observed};

/// The pairs of servers `--versus` can compare (`--pairs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairId {
    /// spindle wstp against tokio multi_thread.
    WstpTokio,
    /// spindle batching against tokio current_thread.
    BatchingTokio,
    /// hello_http with a fan-out, batching against macrotask.
    FanOut,
}

impl PairId {
    /// Every pair, in the default order.
    pub const ALL: [PairId; 3] = [PairId::WstpTokio, PairId::BatchingTokio, PairId::FanOut];

    /// The pair's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PairId::WstpTokio => "wstp",
            PairId::BatchingTokio => "batching",
            PairId::FanOut => "fan-out",
        }
    }

    /// The pair of a command-line name.
    pub fn from_name(name: &str) -> Option<PairId> {
        PairId::ALL.into_iter().find(|pair| pair.name() == name)
    }
}

/// The binary a named server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// spindle-effect's `hello_http` example.
    HelloHttp,
    /// spindle-tools' `hello_tokio`.
    HelloTokio,
}

/// One server of a pair: its row label, its binary, its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedServer {
    /// The label in the table.
    pub label: String,
    /// Which binary.
    pub binary: Binary,
    /// Its command line (the `listening on` contract's `--addr` included).
    pub args: Vec<String>,
}

/// Two servers compared side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Which pair.
    pub id: PairId,
    /// The heading of its table.
    pub title: String,
    /// The first and the second server.
    pub servers: [NamedServer; 2],
}

/// `--addr` and `--request-timeout-ms`, which every server takes.
fn common_args(args: &CompareArgs) -> Vec<String> {
    let mut out = vec!["--addr".to_owned(), args.addr.clone()];
    if let Some(ms) = args.request_timeout_ms {
        out.extend(["--request-timeout-ms".to_owned(), ms.to_string()]);
    }
    out
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// hello_http on the event loop in `mode` (with `--fan-out`, if any).
fn event_loop(label: &str, mode: &str, fan_out: Option<u32>, args: &CompareArgs) -> NamedServer {
    let mut out = strings(&["--executor", "batching", "--mode", mode]);
    if let Some(n) = args.batch_size {
        out.extend(["--batch-size".to_owned(), n.to_string()]);
    }
    if let Some(n) = fan_out {
        out.extend(["--fan-out".to_owned(), n.to_string()]);
    }
    out.extend(common_args(args));
    NamedServer {
        label: label.to_owned(),
        binary: Binary::HelloHttp,
        args: out,
    }
}

/// The servers of `id` with the settings of `args`.
pub fn pair(id: PairId, args: &CompareArgs) -> Pair {
    let workers = args.workers.to_string();
    let with_common = |mut head: Vec<String>| {
        head.extend(common_args(args));
        head
    };
    match id {
        PairId::WstpTokio => Pair {
            id,
            title: format!("spindle wstp vs tokio multi_thread, {workers} workers each"),
            servers: [
                NamedServer {
                    label: "spindle wstp".to_owned(),
                    binary: Binary::HelloHttp,
                    args: with_common(strings(&["--executor", "wstp", "--workers", &workers])),
                },
                NamedServer {
                    label: "tokio multi_thread".to_owned(),
                    binary: Binary::HelloTokio,
                    args: with_common(strings(&["--flavor", "multi", "--workers", &workers])),
                },
            ],
        },
        PairId::BatchingTokio => Pair {
            id,
            title: "spindle batching (the event loop, batching mode) vs tokio current_thread"
                .to_owned(),
            servers: [
                event_loop("spindle batching", "batching", None, args),
                NamedServer {
                    label: "tokio current_thread".to_owned(),
                    binary: Binary::HelloTokio,
                    args: with_common(strings(&["--flavor", "current"])),
                },
            ],
        },
        PairId::FanOut => Pair {
            id,
            title: format!(
                "the batching reframe: hello_http --fan-out {} on the event loop, batching vs macrotask",
                args.fan_out
            ),
            servers: [
                event_loop("batching", "batching", Some(args.fan_out), args),
                event_loop("macrotask", "macrotask", Some(args.fan_out), args),
            ],
        },
    }
}

/// The commands of the two binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// How to start hello_http.
    pub hello_http: ServerCommand,
    /// How to start hello_tokio.
    pub hello_tokio: ServerCommand,
}

impl Binaries {
    fn command(&self, binary: Binary) -> &ServerCommand {
        match binary {
            Binary::HelloHttp => &self.hello_http,
            Binary::HelloTokio => &self.hello_tokio,
        }
    }
}

/// The CPU time a process has used, `utime + stime` in clock ticks, from
/// the text of its `/proc/<pid>/stat` (fields 14 and 15; counted after the
/// command name, which is in parentheses and may itself hold spaces and
/// parentheses, so the fields start after the last `)`).
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state (3), ppid, pgrp, session, tty_nr, tpgid,
    // flags, minflt, cminflt, majflt, cmajflt, utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The CPU time of process `pid` so far, in clock ticks (`None` where
/// `/proc` cannot tell).
pub fn read_cpu_ticks(pid: u32) -> Option<u64> {
    parse_cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Clock ticks per second of `/proc`'s CPU times (`getconf CLK_TCK`; 100,
/// Linux's `USER_HZ` on every architecture it runs, if that fails).
pub fn clock_ticks_per_sec() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok()?.trim().parse().ok())
        .filter(|&hz| hz > 0)
        .unwrap_or(100)
}

/// CPU time per request: `ticks` clock ticks (at `ticks_per_sec`) spread
/// over `requests`; `None` without requests or ticks per second.
pub fn cpu_per_request(ticks: u64, ticks_per_sec: u64, requests: u64) -> Option<Duration> {
    if requests == 0 || ticks_per_sec == 0 {
        return None;
    }
    let nanos =
        u128::from(ticks) * 1_000_000_000 / (u128::from(ticks_per_sec) * u128::from(requests));
    Some(Duration::from_nanos(
        u64::try_from(nanos).unwrap_or(u64::MAX),
    ))
}

/// One server's load run: the report, and the server's CPU ticks over the
/// measured interval (`None` if `/proc` could not tell).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The load generator's report.
    pub report: LoadReport,
    /// The server's CPU time over the window, in clock ticks.
    pub cpu_ticks: Option<u64>,
}

/// A connection count's runs of both servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Connections of every run.
    pub connections: usize,
    /// The first server's runs and the second's, one per round.
    pub runs: [Vec<Run>; 2],
}

/// One pair's results.
#[derive(Debug, Clone, PartialEq)]
pub struct PairResult {
    /// The pair.
    pub pair: Pair,
    /// One cell per connection count.
    pub cells: Vec<Cell>,
}

/// What `--versus` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Versus {
    /// One result per pair.
    pub pairs: Vec<PairResult>,
    /// Rounds per connection count.
    pub rounds: u32,
    /// The measured window of each run.
    pub duration: Duration,
    /// The warm-up of each run.
    pub warmup: Duration,
    /// The CPU the servers were pinned to, if any.
    pub server_cpu: Option<u32>,
    /// Clock ticks per second of the CPU times.
    pub ticks_per_sec: u64,
}

/// Loads `server` once as `config` says, sampling its CPU time at the
/// window's edges.
fn measure(server: &ServerProcess, config: &LoadConfig) -> Run {
    let pid = server.id();
    let (mut before, mut after) = (None, None);
    let report = run_load_observed(config, &mut |edge| match edge {
        WindowEdge::Start => before = read_cpu_ticks(pid),
        WindowEdge::End => after = read_cpu_ticks(pid),
    });
    let cpu_ticks = before
        .zip(after)
        .map(|(before, after)| after.saturating_sub(before));
    Run { report, cpu_ticks }
}

/// Runs every pair of `args.pairs` (see the module documentation); `log`
/// gets a line per step.
pub fn run_versus(
    binaries: &Binaries,
    args: &CompareArgs,
    log: &mut dyn FnMut(&str),
) -> Result<Versus, String> {
    let ticks_per_sec = clock_ticks_per_sec();
    let mut pairs = Vec::new();
    for &id in &args.pairs {
        let pair = pair(id, args);
        let mut servers = Vec::with_capacity(2);
        for server in &pair.servers {
            let process = ServerProcess::start(
                binaries.command(server.binary),
                &server.args,
                STARTUP_TIMEOUT,
            )?;
            log(&format!(
                "{}: server listening on {}",
                server.label,
                process.addr()
            ));
            servers.push(process);
        }
        let mut cells = Vec::new();
        for &connections in &args.connections {
            let mut runs = [Vec::new(), Vec::new()];
            for round in 0..args.rounds {
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for i in order {
                    let (label, server) = (&pair.servers[i].label, &mut servers[i]);
                    log(&format!(
                        "{label}: {}, round {} of {}",
                        connections_label(connections),
                        round + 1,
                        args.rounds
                    ));
                    let mut config =
                        LoadConfig::new(Target::local(server.addr()), connections, args.duration);
                    config.warmup = args.warmup;
                    config.timeout = args.timeout;
                    let run = measure(server, &config);
                    server.check_alive()?;
                    log(&format!(
                        "{label}: {:.1} requests/s, {} errors",
                        run.report.requests_per_sec(),
                        run.report.errors.total()
                    ));
                    runs[i].push(run);
                }
            }
            cells.push(Cell { connections, runs });
        }
        for server in servers {
            server.stop()?;
        }
        pairs.push(PairResult { pair, cells });
    }
    Ok(Versus {
        pairs,
        rounds: args.rounds,
        duration: args.duration,
        warmup: args.warmup,
        server_cpu: args.server_cpu,
        ticks_per_sec,
    })
}

/// One server's rounds at one connection count, summarized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// All rounds' requests over all their `total`s.
    pub requests_per_sec: f64,
    /// The lowest round's requests/s.
    pub min_requests_per_sec: f64,
    /// The highest round's requests/s.
    pub max_requests_per_sec: f64,
    /// The median of the rounds' p50.
    pub p50: Option<Duration>,
    /// The median of the rounds' p99.
    pub p99: Option<Duration>,
    /// All rounds' errors.
    pub errors: u64,
    /// All rounds' CPU time over all their requests (`None` if a round's
    /// CPU time is unknown, or there were no requests).
    pub cpu_per_request: Option<Duration>,
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for none.
pub fn median(values: &mut [Duration]) -> Option<Duration> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2),
    }
}

/// Summarizes one server's `runs` (see [`Summary`]).
pub fn summarize(runs: &[Run], ticks_per_sec: u64) -> Summary {
    let requests: u64 = runs.iter().map(|r| r.report.requests).sum();
    let seconds: f64 = runs.iter().map(|r| r.report.total.as_secs_f64()).sum();
    let rates: Vec<f64> = runs.iter().map(|r| r.report.requests_per_sec()).collect();
    let mut p50: Vec<Duration> = runs
        .iter()
        .filter_map(|r| r.report.latency.map(|l| l.p50))
        .collect();
    let mut p99: Vec<Duration> = runs
        .iter()
        .filter_map(|r| r.report.latency.map(|l| l.p99))
        .collect();
    let ticks: Option<u64> = runs.iter().map(|r| r.cpu_ticks).sum();
    Summary {
        requests_per_sec: if seconds > 0.0 {
            requests as f64 / seconds
        } else {
            0.0
        },
        min_requests_per_sec: rates.iter().copied().reduce(f64::min).unwrap_or(0.0),
        max_requests_per_sec: rates.iter().copied().reduce(f64::max).unwrap_or(0.0),
        p50: median(&mut p50),
        p99: median(&mut p99),
        errors: runs.iter().map(|r| r.report.errors.total()).sum(),
        cpu_per_request: ticks.and_then(|ticks| cpu_per_request(ticks, ticks_per_sec, requests)),
    }
}

/// Microseconds with two decimals, or `n/a`.
fn micros(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.2} µs", d.as_secs_f64() * 1e6),
    )
}

/// `a / b` as `1.53x`, or `n/a`.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".to_owned(),
    }
}

impl Versus {
    /// One markdown table per pair, with the ratios under it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let pinning = match self.server_cpu {
            Some(cpu) => format!("servers pinned to CPU {cpu}"),
            None => "servers unpinned".to_owned(),
        };
        for result in &self.pairs {
            let [first, second] = &result.pair.servers;
            let _ = writeln!(out, "### {}\n", result.pair.title);
            let _ = writeln!(
                out,
                "{pinning}; {} round{} of {} s (after {} s of warm-up) per server and connection \
                 count, the servers alternating; server CPU: user + system time of the server \
                 process over the measured window, per successful request\n",
                self.rounds,
                if self.rounds == 1 { "" } else { "s" },
                self.duration.as_secs_f64(),
                self.warmup.as_secs_f64(),
            );
            out.push_str(
                "| connections | server | requests/s | rounds min–max | p50 | p99 | errors | server CPU/request |\n\
                 |---:|---|---:|---:|---:|---:|---:|---:|\n",
            );
            let mut rate_ratios = Vec::new();
            let mut cpu_ratios = Vec::new();
            for cell in &result.cells {
                let summaries = [
                    summarize(&cell.runs[0], self.ticks_per_sec),
                    summarize(&cell.runs[1], self.ticks_per_sec),
                ];
                for (server, s) in result.pair.servers.iter().zip(&summaries) {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {:.1} | {:.1}–{:.1} | {} | {} | {} | {} |",
                        cell.connections,
                        server.label,
                        s.requests_per_sec,
                        s.min_requests_per_sec,
                        s.max_requests_per_sec,
                        ms(s.p50),
                        ms(s.p99),
                        s.errors,
                        micros(s.cpu_per_request),
                    );
                }
                let label = connections_label(cell.connections);
                let [a, b] = summaries;
                rate_ratios.push(format!(
                    "{label}: {}",
                    ratio(Some(a.requests_per_sec), Some(b.requests_per_sec))
                ));
                let cpu = |s: Summary| s.cpu_per_request.map(|d| d.as_secs_f64());
                cpu_ratios.push(format!("{label}: {}", ratio(cpu(a), cpu(b))));
            }
            let _ = writeln!(
                out,
                "\nrequests/s, {} / {}: {}",
                first.label,
                second.label,
                rate_ratios.join("; ")
            );
            let _ = writeln!(
                out,
                "server CPU/request, {} / {}: {}\n",
                first.label,
                second.label,
                cpu_ratios.join("; ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ErrorCounts, ErrorKind, LatencyStats};
    use super::*;

    fn report(requests: u64, total_ms: u64, errors: u64, p50_us: u64) -> LoadReport {
        let mut counts = ErrorCounts::default();
        for _ in 0..errors {
            counts.record(ErrorKind::Read, || "read: reset".into());
        }
        let mut nanos: Vec<u64> = vec![p50_us * 1_000; requests as usize];
        LoadReport {
            url: "http://127.0.0.1:1/".into(),
            connections: 1,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            total: Duration::from_millis(total_ms),
            requests,
            errors: counts,
            latency: LatencyStats::from_nanos(&mut nanos),
        }
    }

    fn run(requests: u64, total_ms: u64, cpu_ticks: Option<u64>) -> Run {
        Run {
            report: report(requests, total_ms, 0, 100),
            cpu_ticks,
        }
    }

    #[test]
    fn the_cpu_time_is_utime_plus_stime_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (hello (http) x) S 1 4242 4242 0 -1 4194560 1234 0 5 0 \
                    731 96 0 0 20 0 3 0 123456 1000000 500 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(731 + 96));
        assert_eq!(parse_cpu_ticks("4242 (short) S 1 2"), None);
        assert_eq!(parse_cpu_ticks("no parentheses at all"), None);
        assert_eq!(parse_cpu_ticks("1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_s_cpu_time_can_be_read_and_does_not_go_backwards() {
        let me = std::process::id();
        let before = read_cpu_ticks(me).expect("/proc/self/stat");
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(read_cpu_ticks(me).unwrap() >= before);
        assert!(clock_ticks_per_sec() > 0);
    }

    #[test]
    fn cpu_per_request_is_the_ticks_as_time_over_the_requests() {
        // 250 ticks at 100 Hz = 2.5 s over 100,000 requests = 25 us.
        assert_eq!(
            cpu_per_request(250, 100, 100_000),
            Some(Duration::from_micros(25))
        );
        // 1 tick at 100 Hz over 3 requests: 3.333... ms, rounded down.
        assert_eq!(
            cpu_per_request(1, 100, 3),
            Some(Duration::from_nanos(3_333_333))
        );
        assert_eq!(cpu_per_request(0, 100, 10), Some(Duration::ZERO));
        assert_eq!(cpu_per_request(10, 100, 0), None);
        assert_eq!(cpu_per_request(10, 0, 10), None);
        // No overflow at the extremes.
        assert!(cpu_per_request(u64::MAX, 1, 1).is_some());
    }

    #[test]
    fn a_summary_pools_requests_and_cpu_over_the_rounds_and_takes_median_latencies() {
        let runs = [
            run(1_000, 1_000, Some(10)),
            run(3_000, 1_000, Some(20)),
            Run {
                report: report(2_000, 2_000, 2, 300),
                cpu_ticks: Some(30),
            },
        ];
        let s = summarize(&runs, 100);
        // 6,000 requests in 4 s.
        assert_eq!(s.requests_per_sec, 1_500.0);
        assert_eq!(
            (s.min_requests_per_sec, s.max_requests_per_sec),
            (1_000.0, 3_000.0)
        );
        assert_eq!(s.errors, 2);
        // 60 ticks = 0.6 s over 6,000 requests = 100 us.
        assert_eq!(s.cpu_per_request, Some(Duration::from_micros(100)));
        assert_eq!(s.p50, Some(Duration::from_micros(100)));
        // A round without a CPU reading makes the pooled figure unknown.
        let unknown = summarize(&[run(10, 1_000, Some(1)), run(10, 1_000, None)], 100);
        assert_eq!(unknown.cpu_per_request, None);
        assert_eq!(
            median(&mut [Duration::from_micros(1), Duration::from_micros(4)]),
            Some(Duration::from_nanos(2_500))
        );
    }

    #[test]
    fn each_pair_runs_the_servers_it_names_with_the_shared_flags() {
        let mut args = CompareArgs {
            versus: true,
            workers: 3,
            fan_out: 8,
            batch_size: Some(32),
            request_timeout_ms: Some(0),
            ..CompareArgs::default()
        };
        let common = ["--addr", "127.0.0.1:0", "--request-timeout-ms", "0"];
        let wstp = pair(PairId::WstpTokio, &args);
        assert_eq!(wstp.servers[0].binary, Binary::HelloHttp);
        assert_eq!(
            wstp.servers[0].args,
            [&["--executor", "wstp", "--workers", "3"][..], &common].concat()
        );
        assert_eq!(wstp.servers[1].binary, Binary::HelloTokio);
        assert_eq!(
            wstp.servers[1].args,
            [&["--flavor", "multi", "--workers", "3"][..], &common].concat()
        );
        let batching = pair(PairId::BatchingTokio, &args);
        assert_eq!(
            batching.servers[0].args,
            [
                &[
                    "--executor",
                    "batching",
                    "--mode",
                    "batching",
                    "--batch-size",
                    "32"
                ][..],
                &common
            ]
            .concat()
        );
        assert_eq!(
            batching.servers[1].args,
            [&["--flavor", "current"][..], &common].concat()
        );
        args.batch_size = None;
        args.request_timeout_ms = None;
        let fan_out = pair(PairId::FanOut, &args);
        assert_eq!(
            fan_out.servers.each_ref().map(|s| s.args.clone()),
            [
                strings(&[
                    "--executor",
                    "batching",
                    "--mode",
                    "batching",
                    "--fan-out",
                    "8",
                    "--addr",
                    "127.0.0.1:0"
                ]),
                strings(&[
                    "--executor",
                    "batching",
                    "--mode",
                    "macrotask",
                    "--fan-out",
                    "8",
                    "--addr",
                    "127.0.0.1:0"
                ]),
            ]
        );
        assert!(fan_out.title.contains("--fan-out 8"), "{}", fan_out.title);
        for id in PairId::ALL {
            assert_eq!(PairId::from_name(id.name()), Some(id));
        }
    }

    #[test]
    fn the_table_has_a_row_per_count_and_server_and_the_ratios_of_both_figures() {
        let args = CompareArgs::default();
        let versus = Versus {
            pairs: vec![PairResult {
                pair: pair(PairId::WstpTokio, &args),
                cells: vec![Cell {
                    connections: 50,
                    runs: [
                        vec![run(3_000, 1_000, Some(30)), run(1_000, 1_000, Some(10))],
                        vec![run(1_000, 1_000, Some(20)), run(1_000, 1_000, None)],
                    ],
                }],
            }],
            rounds: 2,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            server_cpu: Some(0),
            ticks_per_sec: 100,
        };
        let text = versus.render();
        assert!(
            text.starts_with("### spindle wstp vs tokio multi_thread, 2 workers each\n"),
            "{text}"
        );
        assert!(text.contains("servers pinned to CPU 0; 2 rounds"), "{text}");
        assert!(
            text.contains(
                "| 50 | spindle wstp | 2000.0 | 1000.0–3000.0 | 0.100 ms | 0.100 ms | 0 | 100.00 µs |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 50 | tokio multi_thread | 1000.0 | 1000.0–1000.0 |"),
            "{text}"
        );
        assert!(text.contains("| n/a |\n"), "{text}");
        assert!(
            text.contains("requests/s, spindle wstp / tokio multi_thread: 50 connections: 2.00x\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "server CPU/request, spindle wstp / tokio multi_thread: 50 connections: n/a\n"
            ),
            "{text}"
        );
    }
}
