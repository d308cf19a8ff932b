//! Command-line parsing for `loadgen` and `http_compare`: `--flag value`
//! or `--flag=value`, errors as values with messages (never a panic).

use std::path::PathBuf;
use std::time::Duration;

pub use crate::cli::ArgError;
use crate::cli::{invalid, pairs};

use super::versus::PairId;
use super::{LoadConfig, MAX_CONNECTIONS, Target};

/// Seconds as `10`, `2.5`, `10s` or `500ms` (at least zero, finite).
pub fn parse_duration(flag: &'static str, value: &str) -> Result<Duration, ArgError> {
    let (number, scale) = if let Some(ms) = value.strip_suffix("ms") {
        (ms, 1e-3)
    } else {
        (value.strip_suffix('s').unwrap_or(value), 1.0)
    };
    let secs = number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .ok_or_else(|| {
            invalid(
                flag,
                value,
                "expected seconds such as 10, 2.5, 10s or 500ms",
            )
        })?;
    Ok(Duration::from_secs_f64(secs))
}

fn parse_positive_duration(flag: &'static str, value: &str) -> Result<Duration, ArgError> {
    let d = parse_duration(flag, value)?;
    if d.is_zero() {
        return Err(invalid(flag, value, "must be more than zero"));
    }
    Ok(d)
}

/// A connection count in `1..=MAX_CONNECTIONS`.
pub fn parse_connections(flag: &'static str, value: &str) -> Result<usize, ArgError> {
    let n = value
        .trim()
        .parse::<usize>()
        .map_err(|_| invalid(flag, value, "expected a whole number"))?;
    if n == 0 {
        return Err(invalid(flag, value, "at least one connection is needed"));
    }
    if n > MAX_CONNECTIONS {
        return Err(invalid(
            flag,
            value,
            format!("at most {MAX_CONNECTIONS} connections (one thread each)"),
        ));
    }
    Ok(n)
}

/// `loadgen`'s usage text.
pub const LOADGEN_USAGE: &str = "\
usage: loadgen --url http://HOST:PORT/PATH [--connections N] [--duration SECS]
               [--warmup SECS] [--timeout SECS] [--json]

Closed-loop HTTP/1.1 load: N keep-alive connections (one thread each), one
request outstanding per connection. Latency runs from writing a request to
reading the last byte of its response body.

  --url URL          the target (http:// only)
  --connections N    connections, 1..=10000 (default 1)
  --duration SECS    the measured window (default 10; 10, 2.5, 10s, 500ms)
  --warmup SECS      unrecorded load before the window (default 0)
  --timeout SECS     connect/read/write timeout per operation (default 10)
  --json             one JSON object instead of the text summary

Exit status: 0 if any request succeeded, 1 if every request failed,
2 for a bad command line.";

/// `loadgen`'s parsed command line.
#[derive(Debug, Clone)]
pub struct LoadgenArgs {
    /// The run to make.
    pub config: LoadConfig,
    /// Print JSON instead of the text summary.
    pub json: bool,
}

/// Parses `loadgen`'s arguments (without the program name).
pub fn parse_loadgen_args(args: impl IntoIterator<Item = String>) -> Result<LoadgenArgs, ArgError> {
    let pairs = pairs(
        args,
        &[
            "--url",
            "--connections",
            "--duration",
            "--warmup",
            "--timeout",
        ],
        &["--json"],
    )?;
    let mut url = None;
    let (mut connections, mut duration) = (1, Duration::from_secs(10));
    let (mut warmup, mut timeout) = (Duration::ZERO, Duration::from_secs(10));
    let mut json = false;
    for (flag, value) in pairs {
        let v = value.as_deref().unwrap_or_default();
        match flag {
            "--url" => url = Some(Target::parse(v).map_err(|e| invalid(flag, v, e.to_string()))?),
            "--connections" => connections = parse_connections(flag, v)?,
            "--duration" => duration = parse_positive_duration(flag, v)?,
            "--warmup" => warmup = parse_duration(flag, v)?,
            "--timeout" => timeout = parse_positive_duration(flag, v)?,
            _ => json = true,
        }
    }
    let target = url.ok_or(ArgError::Required("--url"))?;
    let mut config = LoadConfig::new(target, connections, duration);
    config.warmup = warmup;
    config.timeout = timeout;
    Ok(LoadgenArgs { config, json })
}

/// `http_compare`'s usage text.
pub const COMPARE_USAGE: &str = "\
usage: http_compare [--server PATH] [--duration SECS] [--warmup SECS]
                    [--connections LIST] [--addr ADDR] [--batch-size N]
                    [--request-timeout-ms N] [--server-cpu CPU]
                    [--timeout SECS] [--self-test]
       http_compare --versus [--rounds N] [--pairs LIST] [--workers N]
                    [--fan-out N] [--tokio-server PATH] [the flags above]

Without --versus: runs hello_http (spindle-effect's example) on the event
loop once per mode (batching, then macrotask), loads it at each connection
count and prints one markdown table per count plus the requests/sec ratio
batching / non-batching.

With --versus: named servers side by side, in pairs, each pair's two
servers loaded in alternating rounds at each connection count; one table
per pair with requests/s, p50, p99, errors and the server's CPU time per
request (user + system, from /proc/<pid>/stat over the measured window):
  wstp      spindle wstp (--workers) vs tokio multi_thread (--workers)
  batching  spindle batching vs tokio current_thread
  fan-out   hello_http --fan-out N on the event loop, batching vs macrotask

Build the servers first:
  cargo build --release -p spindle-effect --features full --example hello_http
  cargo build --release -p spindle-tools --bin hello_tokio

  --server PATH        the hello_http binary (default: the first that exists of
                       target/release/examples/hello_http under the current
                       directory, then next to this program)
  --duration SECS      measured window per run (default 10)
  --warmup SECS        unrecorded load before each window (default 1)
  --connections LIST   comma-separated counts (default 1,50; --versus: 1,50,256)
  --addr ADDR          passed to the servers as --addr (default 127.0.0.1:0)
  --batch-size N       passed to the event-loop servers as --batch-size
                       (default: unset)
  --request-timeout-ms N
                       passed to every server as --request-timeout-ms (default:
                       unset; 0 handles requests on the connection's fiber)
  --server-cpu CPU     runs the servers under `taskset -c CPU` (run this
                       program itself on another CPU, e.g. `taskset -c 1`,
                       so that the load does not compete with the server);
                       unset: unpinned
  --timeout SECS       socket timeout of the load generator (default 10)
  --self-test          use a std-only stand-in server (this program itself)
                       instead of hello_http and hello_tokio, to check the runner
  --versus             compare the named servers (above)
  --rounds N           --versus: rounds per connection count (default 3)
  --pairs LIST         --versus: comma-separated pairs (default wstp,batching,fan-out)
  --workers N          --versus: workers of spindle wstp and tokio multi_thread
                       (default 2)
  --fan-out N          --versus: fibers per request of the fan-out pair (default 8)
  --tokio-server PATH  --versus: the hello_tokio binary (default: the first that
                       exists of target/release/hello_tokio, then next to this
                       program)";

/// The connection counts of `http_compare` by default.
pub const DEFAULT_CONNECTIONS: [usize; 2] = [1, 50];

/// The connection counts of `http_compare --versus` by default.
pub const VERSUS_CONNECTIONS: [usize; 3] = [1, 50, 256];

/// `http_compare`'s parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareArgs {
    /// `--server`, if given.
    pub server: Option<PathBuf>,
    /// The measured window of each run.
    pub duration: Duration,
    /// The warm-up before each run.
    pub warmup: Duration,
    /// The connection counts, one table each.
    pub connections: Vec<usize>,
    /// The server's `--addr`.
    pub addr: String,
    /// The server's `--batch-size`, if given.
    pub batch_size: Option<u32>,
    /// The server's `--request-timeout-ms`, if given.
    pub request_timeout_ms: Option<u64>,
    /// The CPU to pin the server to (`taskset -c`), if given.
    pub server_cpu: Option<u32>,
    /// The load generator's socket timeout.
    pub timeout: Duration,
    /// Run against the std-only stand-in instead of hello_http.
    pub self_test: bool,
    /// Compare the named servers side by side (`--versus`).
    pub versus: bool,
    /// `--versus`: rounds per connection count.
    pub rounds: u32,
    /// `--versus`: the pairs to run, in order.
    pub pairs: Vec<PairId>,
    /// `--versus`: the workers of the multi-threaded servers.
    pub workers: u32,
    /// `--versus`: the fibers per request of the fan-out pair.
    pub fan_out: u32,
    /// `--versus`: `--tokio-server`, if given.
    pub tokio_server: Option<PathBuf>,
}

impl Default for CompareArgs {
    fn default() -> Self {
        CompareArgs {
            server: None,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            connections: DEFAULT_CONNECTIONS.to_vec(),
            addr: "127.0.0.1:0".to_owned(),
            batch_size: None,
            request_timeout_ms: None,
            server_cpu: None,
            timeout: Duration::from_secs(10),
            self_test: false,
            versus: false,
            rounds: 3,
            pairs: PairId::ALL.to_vec(),
            workers: 2,
            fan_out: 8,
            tokio_server: None,
        }
    }
}

/// A whole number above zero.
fn positive(flag: &'static str, value: &str) -> Result<u32, ArgError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(flag, value, "expected a whole number above zero"))
}

/// Parses `http_compare`'s arguments (without the program name).
pub fn parse_compare_args(args: impl IntoIterator<Item = String>) -> Result<CompareArgs, ArgError> {
    let pairs = pairs(
        args,
        &[
            "--server",
            "--duration",
            "--warmup",
            "--connections",
            "--addr",
            "--batch-size",
            "--request-timeout-ms",
            "--server-cpu",
            "--timeout",
            "--rounds",
            "--pairs",
            "--workers",
            "--fan-out",
            "--tokio-server",
        ],
        &["--self-test", "--versus"],
    )?;
    let mut out = CompareArgs::default();
    let mut connections = None;
    // The flags that only mean something with --versus.
    let mut versus_only = None;
    for (flag, value) in pairs {
        let v = value.as_deref().unwrap_or_default();
        match flag {
            "--server" => out.server = Some(PathBuf::from(v)),
            "--duration" => out.duration = parse_positive_duration(flag, v)?,
            "--warmup" => out.warmup = parse_duration(flag, v)?,
            "--connections" => {
                connections = Some(
                    v.split(',')
                        .map(|n| parse_connections(flag, n))
                        .collect::<Result<_, _>>()?,
                );
            }
            "--addr" => {
                if v.is_empty() {
                    return Err(invalid(flag, v, "expected HOST:PORT"));
                }
                out.addr = v.to_owned();
            }
            "--batch-size" => out.batch_size = Some(positive(flag, v)?),
            "--request-timeout-ms" => {
                let n = v
                    .parse::<u64>()
                    .map_err(|_| invalid(flag, v, "expected a whole number of milliseconds"))?;
                out.request_timeout_ms = Some(n);
            }
            "--server-cpu" => {
                let n = v
                    .parse::<u32>()
                    .map_err(|_| invalid(flag, v, "expected a CPU number"))?;
                out.server_cpu = Some(n);
            }
            "--timeout" => out.timeout = parse_positive_duration(flag, v)?,
            "--self-test" => out.self_test = true,
            "--versus" => out.versus = true,
            versus_flag => {
                versus_only = Some((versus_flag, v.to_owned()));
                match versus_flag {
                    "--rounds" => out.rounds = positive(flag, v)?,
                    "--workers" => out.workers = positive(flag, v)?,
                    "--fan-out" => out.fan_out = positive(flag, v)?,
                    "--tokio-server" => out.tokio_server = Some(PathBuf::from(v)),
                    _ => {
                        let mut chosen = Vec::new();
                        for name in v.split(',') {
                            let pair = PairId::from_name(name.trim()).ok_or_else(|| {
                                invalid(flag, v, "expected pairs among wstp, batching, fan-out")
                            })?;
                            if !chosen.contains(&pair) {
                                chosen.push(pair);
                            }
                        }
                        out.pairs = chosen;
                    }
                }
            }
        }
    }
    if let Some((flag, value)) = versus_only.filter(|_| !out.versus) {
        return Err(invalid(flag, &value, "only with --versus"));
    }
    let default = if out.versus {
        &VERSUS_CONNECTIONS[..]
    } else {
        &DEFAULT_CONNECTIONS[..]
    };
    out.connections = connections.unwrap_or_else(|| default.to_vec());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn compare_passes_the_request_timeout_and_pins_the_server_only_when_asked() {
        let parsed = parse_compare_args(args("--request-timeout-ms 0 --server-cpu 1")).unwrap();
        assert_eq!(parsed.request_timeout_ms, Some(0));
        assert_eq!(parsed.server_cpu, Some(1));
        let default = parse_compare_args(Vec::new()).unwrap();
        assert_eq!(
            (default.request_timeout_ms, default.server_cpu),
            (None, None)
        );
        assert!(parse_compare_args(args("--server-cpu x")).is_err());
        assert!(parse_compare_args(args("--request-timeout-ms -1")).is_err());
    }

    #[test]
    fn loadgen_takes_every_flag_in_both_spellings() {
        let parsed = parse_loadgen_args(args(
            "--url http://127.0.0.1:9/x --connections=50 --duration 2.5 --warmup=500ms \
             --timeout 3s --json",
        ))
        .unwrap();
        let c = &parsed.config;
        assert_eq!(c.target.path, "/x");
        assert_eq!(c.connections, 50);
        assert_eq!(c.duration, Duration::from_millis(2500));
        assert_eq!(c.warmup, Duration::from_millis(500));
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert!(parsed.json);
    }

    #[test]
    fn loadgen_defaults_to_one_connection_for_ten_seconds_without_warm_up() {
        let parsed = parse_loadgen_args(args("--url http://127.0.0.1:9/")).unwrap();
        assert_eq!(parsed.config.connections, 1);
        assert_eq!(parsed.config.duration, Duration::from_secs(10));
        assert_eq!(parsed.config.warmup, Duration::ZERO);
        assert!(!parsed.json);
    }

    #[test]
    fn bad_loadgen_command_lines_are_errors_that_name_the_problem() {
        let err = |line: &str| parse_loadgen_args(args(line)).unwrap_err();
        assert_eq!(
            err("--url http://127.0.0.1:9/ --conections 5"),
            ArgError::Unknown("--conections".into())
        );
        assert_eq!(err("--connections 5"), ArgError::Required("--url"));
        assert_eq!(err("--url"), ArgError::MissingValue("--url"));
        assert_eq!(err("--url http://127.0.0.1:9/ -h"), ArgError::Help);
        let zero = err("--url http://127.0.0.1:9/ --connections 0").to_string();
        assert!(zero.contains("at least one connection"), "{zero}");
        let url = err("--url localhost:80").to_string();
        assert!(
            url.starts_with("invalid --url") && url.contains("http://"),
            "{url}"
        );
        for line in [
            "--url http://127.0.0.1:9/ --connections many",
            "--url http://127.0.0.1:9/ --connections 10001",
            "--url http://127.0.0.1:9/ --duration 0",
            "--url http://127.0.0.1:9/ --duration -1",
            "--url http://127.0.0.1:9/ --warmup soon",
            "--url http://127.0.0.1:9/ --json=yes",
            "--url http://127.0.0.1:9/ stray",
        ] {
            let e = err(line);
            assert!(
                matches!(e, ArgError::Invalid { .. } | ArgError::Unknown(_)),
                "{line}: {e:?}"
            );
        }
    }

    #[test]
    fn durations_read_seconds_with_optional_units() {
        let d = |v| parse_duration("--duration", v);
        assert_eq!(d("10"), Ok(Duration::from_secs(10)));
        assert_eq!(d("0.25s"), Ok(Duration::from_millis(250)));
        assert_eq!(d("750ms"), Ok(Duration::from_millis(750)));
        assert!(d("inf").is_err() && d("NaN").is_err() && d("").is_err());
    }

    #[test]
    fn http_compare_defaults_to_ten_seconds_at_one_and_fifty_connections() {
        let parsed = parse_compare_args(Vec::new()).unwrap();
        assert_eq!(parsed, CompareArgs::default());
        assert_eq!(parsed.connections, vec![1, 50]);
        assert_eq!(parsed.duration, Duration::from_secs(10));
    }

    #[test]
    fn http_compare_reads_its_flags_and_rejects_bad_ones() {
        let parsed = parse_compare_args(args(
            "--server /x/hello_http --duration 3 --warmup 0 --connections 1,8,50 \
             --batch-size 64 --addr 127.0.0.1:0 --self-test",
        ))
        .unwrap();
        assert_eq!(parsed.server, Some(PathBuf::from("/x/hello_http")));
        assert_eq!(parsed.connections, vec![1, 8, 50]);
        assert_eq!(parsed.batch_size, Some(64));
        assert!(parsed.self_test);
        for line in [
            "--connections 1,0",
            "--connections ,",
            "--batch-size 0",
            "--duration 0s",
            "--mode batching",
        ] {
            assert!(parse_compare_args(args(line)).is_err(), "{line}");
        }
    }

    #[test]
    fn versus_reads_its_rounds_pairs_workers_fan_out_and_tokio_server() {
        let parsed = parse_compare_args(args(
            "--versus --rounds 2 --pairs fan-out,wstp,wstp --workers 4 --fan-out 16 \
             --tokio-server /x/hello_tokio --server-cpu 0",
        ))
        .unwrap();
        assert!(parsed.versus);
        assert_eq!(parsed.rounds, 2);
        assert_eq!(parsed.pairs, [PairId::FanOut, PairId::WstpTokio]);
        assert_eq!((parsed.workers, parsed.fan_out), (4, 16));
        assert_eq!(parsed.tokio_server, Some(PathBuf::from("/x/hello_tokio")));
        assert_eq!(parsed.server_cpu, Some(0));
        assert_eq!(parsed.connections, VERSUS_CONNECTIONS);
    }

    #[test]
    fn versus_defaults_to_every_pair_three_rounds_and_one_fifty_and_256_connections() {
        let parsed = parse_compare_args(args("--versus")).unwrap();
        assert_eq!(parsed.pairs, PairId::ALL);
        assert_eq!(parsed.rounds, 3);
        assert_eq!((parsed.workers, parsed.fan_out), (2, 8));
        assert_eq!(parsed.connections, [1, 50, 256]);
        assert_eq!(parsed.server_cpu, None, "unpinned unless asked");
        let chosen = parse_compare_args(args("--versus --connections 8")).unwrap();
        assert_eq!(chosen.connections, [8]);
    }

    #[test]
    fn versus_flags_without_versus_and_bad_values_are_errors() {
        for line in [
            "--rounds 2",
            "--pairs wstp",
            "--workers 2",
            "--fan-out 8",
            "--tokio-server /x",
            "--versus --rounds 0",
            "--versus --workers 0",
            "--versus --fan-out x",
            "--versus --pairs wstp,rayon",
            "--versus --pairs ",
            "--versus=yes",
        ] {
            let e = parse_compare_args(args(line));
            assert!(e.is_err(), "{line}: {e:?}");
        }
        let e = parse_compare_args(args("--rounds 2"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("only with --versus"), "{e}");
    }
}
