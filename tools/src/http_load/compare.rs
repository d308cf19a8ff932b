//! The pieces of `http_compare`: finding and running the `hello_http`
//! server (spindle-effect's example, `--executor batching`) as a child
//! process (killed on every path, by [`ServerProcess`]'s `Drop`), loading
//! it with [`run_load`], and the markdown tables in the shape of the Cats
//! Effect BatchingMacrotaskExecutor discussion. `--versus` (named servers
//! side by side, hello_tokio among them) is [`super::versus`], on the same
//! pieces.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::cli::CompareArgs;
use super::{LoadConfig, LoadReport, Target, connections_label, run_load};

/// The server's modes in table order: the `--mode` value and the row label
/// (the discussion's "batching" and "non-batching").
pub const MODES: [(&str, &str); 2] = [("batching", "batching"), ("macrotask", "non-batching")];

/// How long the server may take to print its `listening on` line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The server binary's path under a target directory.
pub const SERVER_UNDER_TARGET: &str = "release/examples/hello_http";

/// How to build hello_http (the example needs the entry crate's executor
/// and `app` features; `full` has them).
pub const BUILD_HELLO_HTTP: &str =
    "cargo build --release -p spindle-effect --features full --example hello_http";

/// The tokio reference server's path under a target directory.
pub const TOKIO_SERVER_UNDER_TARGET: &str = "release/hello_tokio";

/// How to build hello_tokio.
pub const BUILD_HELLO_TOKIO: &str = "cargo build --release -p spindle-tools --bin hello_tokio";

/// `under_target` (a path below a target directory) below
/// `$CARGO_TARGET_DIR` if set, else below `target` in the current
/// directory.
fn under_target_dir(under_target: &str) -> PathBuf {
    let name = format!("{under_target}{}", std::env::consts::EXE_SUFFIX);
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join(&name),
        None => Path::new("target").join(&name),
    }
}

/// The directory of the running program.
fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
}

/// Where to look for `hello_http` when `--server` is not given, in order:
/// `target/release/examples/hello_http` under the current directory (or
/// under `$CARGO_TARGET_DIR`, if set), then `examples/hello_http` next to
/// the running program and `../release/examples/hello_http` from it (so
/// that `cargo run -p spindle-tools --bin http_compare` finds it from any
/// directory of the workspace).
pub fn server_candidates() -> Vec<PathBuf> {
    let mut out = vec![under_target_dir(SERVER_UNDER_TARGET)];
    if let Some(dir) = exe_dir() {
        let exe_name = format!("hello_http{}", std::env::consts::EXE_SUFFIX);
        let name = format!("{SERVER_UNDER_TARGET}{}", std::env::consts::EXE_SUFFIX);
        out.push(dir.join("examples").join(&exe_name));
        out.push(dir.join("..").join(&name));
    }
    out
}

/// Where to look for `hello_tokio` when `--tokio-server` is not given, in
/// order: `target/release/hello_tokio` under the current directory (or
/// under `$CARGO_TARGET_DIR`), then next to the running program (the same
/// crate builds both).
pub fn tokio_server_candidates() -> Vec<PathBuf> {
    let mut out = vec![under_target_dir(TOKIO_SERVER_UNDER_TARGET)];
    if let Some(dir) = exe_dir() {
        out.push(dir.join(format!("hello_tokio{}", std::env::consts::EXE_SUFFIX)));
    }
    out
}

/// A binary to run: `explicit` if given (it must exist), else the first of
/// `candidates` that exists; the error names `flag`, says what was tried
/// and how to build it (`build`).
pub fn find_binary(
    name: &str,
    flag: &str,
    build: &str,
    explicit: Option<&Path>,
    candidates: &[PathBuf],
) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "{flag} {}: no such file (build it with `{build}`)",
                path.display()
            ))
        };
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
            format!(
                "{name} not found (tried {}); build it with `{build}` or pass {flag} PATH",
                tried.join(", ")
            )
        })
}

/// The hello_http server to run: `explicit` (`--server`) if given, else
/// the first of `candidates` that exists (see [`find_binary`]).
pub fn find_server(explicit: Option<&Path>, candidates: &[PathBuf]) -> Result<PathBuf, String> {
    find_binary(
        "hello_http",
        "--server",
        BUILD_HELLO_HTTP,
        explicit,
        candidates,
    )
}

/// The hello_tokio server to run: `explicit` (`--tokio-server`) if given,
/// else the first of `candidates` that exists (see [`find_binary`]).
pub fn find_tokio_server(
    explicit: Option<&Path>,
    candidates: &[PathBuf],
) -> Result<PathBuf, String> {
    find_binary(
        "hello_tokio",
        "--tokio-server",
        BUILD_HELLO_TOKIO,
        explicit,
        candidates,
    )
}

/// What [`first_line`] saw of a server's standard output.
#[derive(Debug)]
pub enum FirstLine {
    /// Its first line (with its line end).
    Line(String),
    /// The output closed before any line.
    Closed,
    /// Reading it failed.
    Failed(std::io::Error),
    /// No line within the time given.
    TimedOut,
}

/// Reads the first line of a server's standard output on a thread of its
/// own, waiting at most `within` for it. The thread then keeps draining
/// the output, so that the server never blocks on a full pipe; it ends
/// when the server's output closes. `Err` if the thread cannot start.
pub fn first_line(stdout: ChildStdout, within: Duration) -> Result<FirstLine, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("server-stdout".into())
        .spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = tx.send(reader.read_line(&mut line).map(|_| line));
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        })
        .map_err(|e| format!("cannot start the stdout reader: {e}"))?;
    Ok(match rx.recv_timeout(within) {
        Ok(Ok(line)) if line.is_empty() => FirstLine::Closed,
        Ok(Ok(line)) => FirstLine::Line(line),
        Ok(Err(e)) => FirstLine::Failed(e),
        Err(_) => FirstLine::TimedOut,
    })
}

/// The address in the server's first line, `listening on <addr>`.
pub fn parse_listening_line(line: &str) -> Result<SocketAddr, String> {
    let line = line.trim_end_matches(['\r', '\n']);
    line.strip_prefix("listening on ")
        .and_then(|addr| addr.trim().parse().ok())
        .ok_or_else(|| format!("expected `listening on <addr>` as the first line, got {line:?}"))
}

/// How to start the server: a program and the arguments before `--mode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments placed before the contract's `--mode ... --addr ...`.
    pub prefix_args: Vec<String>,
}

/// A running server child process: killed and reaped when dropped, so that
/// no path out of the runner (an error, a panic) leaves it behind.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `command` with `args`, stdout piped (stderr shared with the
    /// runner), and waits up to `startup` for its `listening on` line.
    pub fn start(
        command: &ServerCommand,
        args: &[String],
        startup: Duration,
    ) -> Result<ServerProcess, String> {
        let shown = format!("{} {}", command.program.display(), args.join(" "));
        let mut child = Command::new(&command.program)
            .args(&command.prefix_args)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start `{shown}`: {e}"))?;
        let stdout = child.stdout.take();
        // From here on, `Drop` kills the child whatever happens.
        let mut process = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let stdout = stdout.ok_or("the server's stdout was not captured")?;
        let line = match first_line(stdout, startup)? {
            FirstLine::Closed => {
                return Err(format!(
                    "`{shown}` closed its stdout without a `listening on` line{}",
                    process.exit_note()
                ));
            }
            FirstLine::Line(line) => line,
            FirstLine::Failed(e) => return Err(format!("reading `{shown}`'s stdout: {e}")),
            FirstLine::TimedOut => {
                return Err(format!(
                    "`{shown}` printed no `listening on` line within {} s{}",
                    startup.as_secs(),
                    process.exit_note()
                ));
            }
        };
        process.addr = parse_listening_line(&line).map_err(|e| format!("`{shown}`: {e}"))?;
        Ok(process)
    }

    /// The address the server said it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// An error if the server has exited on its own.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("the server exited during the run ({status})")),
            Err(e) => Err(format!("cannot check on the server: {e}")),
        }
    }

    /// Kills the server and waits for it to end.
    pub fn stop(mut self) -> Result<(), String> {
        self.kill_and_reap()
    }

    fn exit_note(&mut self) -> String {
        // Give a crashing server a moment to be reaped for its status.
        std::thread::sleep(Duration::from_millis(50));
        match self.child.try_wait() {
            Ok(Some(status)) => format!(" (it exited: {status})"),
            _ => String::new(),
        }
    }

    fn kill_and_reap(&mut self) -> Result<(), String> {
        if let Ok(Some(_)) = self.child.try_wait() {
            return Ok(());
        }
        let killed = self.child.kill();
        let waited = self.child.wait();
        killed
            .and(waited.map(|_| ()))
            .map_err(|e| format!("cannot stop the server (pid {}): {e}", self.child.id()))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.kill_and_reap();
    }
}

/// The reports of one comparison: for each connection count, one report
/// per mode (in [`MODES`] order).
#[derive(Debug, Clone)]
pub struct Comparison {
    /// `(connections, [batching, non-batching])`.
    pub runs: Vec<(usize, [LoadReport; 2])>,
}

/// The server's arguments for `mode` under the CLI contract (hello_http
/// on the event loop).
pub fn server_args(mode: &str, args: &CompareArgs) -> Vec<String> {
    let mut out = vec![
        "--executor".to_owned(),
        "batching".to_owned(),
        "--mode".to_owned(),
        mode.to_owned(),
        "--addr".to_owned(),
        args.addr.clone(),
    ];
    if let Some(n) = args.batch_size {
        out.extend(["--batch-size".to_owned(), n.to_string()]);
    }
    if let Some(ms) = args.request_timeout_ms {
        out.extend(["--request-timeout-ms".to_owned(), ms.to_string()]);
    }
    out
}

/// `command` run under `taskset -c cpu` (pinned to one CPU), or as it is.
pub fn pinned(command: ServerCommand, cpu: Option<u32>) -> ServerCommand {
    match cpu {
        None => command,
        Some(cpu) => {
            let mut prefix_args = vec![
                "-c".to_owned(),
                cpu.to_string(),
                command.program.display().to_string(),
            ];
            prefix_args.extend(command.prefix_args);
            ServerCommand {
                program: PathBuf::from("taskset"),
                prefix_args,
            }
        }
    }
}

/// For each mode: starts the server, loads it at every connection count,
/// stops it. `log` gets a line per step (the runner sends it to stderr).
pub fn run_comparison(
    command: &ServerCommand,
    args: &CompareArgs,
    log: &mut dyn FnMut(&str),
) -> Result<Comparison, String> {
    let mut per_mode: Vec<Vec<LoadReport>> = Vec::new();
    for (mode, _) in MODES {
        let mut server = ServerProcess::start(command, &server_args(mode, args), STARTUP_TIMEOUT)?;
        log(&format!("{mode}: server listening on {}", server.addr()));
        let mut reports = Vec::new();
        for &connections in &args.connections {
            log(&format!(
                "{mode}: {}, {:.1} s warm-up + {:.1} s",
                connections_label(connections),
                args.warmup.as_secs_f64(),
                args.duration.as_secs_f64()
            ));
            let mut config =
                LoadConfig::new(Target::local(server.addr()), connections, args.duration);
            config.warmup = args.warmup;
            config.timeout = args.timeout;
            let report = run_load(&config);
            server.check_alive()?;
            log(&format!(
                "{mode}: {} requests, {:.1} requests/sec, {} errors",
                report.requests,
                report.requests_per_sec(),
                report.errors.total()
            ));
            reports.push(report);
        }
        server.stop()?;
        per_mode.push(reports);
    }
    let mut modes = per_mode.into_iter();
    let (batching, macrotask) = (modes.next(), modes.next());
    let runs = args
        .connections
        .iter()
        .zip(
            batching
                .into_iter()
                .flatten()
                .zip(macrotask.into_iter().flatten()),
        )
        .map(|(&c, (b, m))| (c, [b, m]))
        .collect();
    Ok(Comparison { runs })
}

/// Milliseconds with three decimals, or `n/a`.
pub(crate) fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.3} ms", d.as_secs_f64() * 1e3),
    )
}

/// One markdown table: a row per `(label, report)`.
pub fn markdown_table(rows: &[(&str, &LoadReport)]) -> String {
    let mut out = String::from(
        "| executor | total requests | slowest | fastest | average | p50 | p99 | requests/sec | errors |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (label, r) in rows {
        let l = r.latency;
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            r.requests,
            ms(l.map(|l| l.slowest)),
            ms(l.map(|l| l.fastest)),
            ms(l.map(|l| l.average)),
            ms(l.map(|l| l.p50)),
            ms(l.map(|l| l.p99)),
            r.requests_per_sec(),
            r.errors.total(),
        );
    }
    out
}

/// `batching / non-batching` requests/sec, as `1.53x` (or `n/a` when the
/// non-batching run had none).
pub fn ratio(batching: &LoadReport, non_batching: &LoadReport) -> String {
    let (b, n) = (batching.requests_per_sec(), non_batching.requests_per_sec());
    if n > 0.0 {
        format!("{:.2}x", b / n)
    } else {
        "n/a".to_owned()
    }
}

impl Comparison {
    /// The tables (one per connection count, rows batching and
    /// non-batching) and the requests/sec ratios, as markdown.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (connections, [batching, non_batching]) in &self.runs {
            let _ = writeln!(
                out,
                "### {} ({} s measured after {} s warm-up, per mode)\n",
                connections_label(*connections),
                batching.duration.as_secs_f64(),
                batching.warmup.as_secs_f64(),
            );
            out.push_str(&markdown_table(&[
                (MODES[0].1, batching),
                (MODES[1].1, non_batching),
            ]));
            out.push('\n');
        }
        let ratios: Vec<String> = self
            .runs
            .iter()
            .map(|(c, [b, n])| format!("{}: {}", connections_label(*c), ratio(b, n)))
            .collect();
        let _ = writeln!(
            out,
            "requests/sec, batching / non-batching: {}",
            ratios.join("; ")
        );
        out
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_pinned_server_runs_under_taskset_with_its_own_arguments_after_the_program() {
        let command = ServerCommand {
            program: PathBuf::from("/bin/hello_http"),
            prefix_args: vec!["--x".to_owned()],
        };
        assert_eq!(pinned(command.clone(), None), command);
        let pinned = pinned(command, Some(0));
        assert_eq!(pinned.program, PathBuf::from("taskset"));
        assert_eq!(pinned.prefix_args, ["-c", "0", "/bin/hello_http", "--x"]);
    }

    use super::super::{ErrorCounts, ErrorKind, LatencyStats};
    use super::*;

    fn report(requests: u64, total_ms: u64, errors: u64) -> LoadReport {
        let mut counts = ErrorCounts::default();
        for _ in 0..errors {
            counts.record(ErrorKind::Read, || "read: reset".into());
        }
        let mut nanos: Vec<u64> = (1..=requests).map(|i| i * 1_000).collect();
        LoadReport {
            url: "http://127.0.0.1:1/".into(),
            connections: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            total: Duration::from_millis(total_ms),
            requests,
            errors: counts,
            latency: LatencyStats::from_nanos(&mut nanos),
        }
    }

    #[test]
    fn the_listening_line_gives_the_bound_address() {
        assert_eq!(
            parse_listening_line("listening on 127.0.0.1:43210\n"),
            Ok("127.0.0.1:43210".parse().unwrap())
        );
        assert_eq!(
            parse_listening_line("listening on [::1]:80\r\n"),
            Ok("[::1]:80".parse().unwrap())
        );
        assert!(parse_listening_line("Listening at 127.0.0.1:1").is_err());
        assert!(parse_listening_line("listening on somewhere").is_err());
    }

    #[test]
    fn a_missing_server_is_an_error_that_says_how_to_build_it() {
        let err = find_server(None, &[PathBuf::from("/nonexistent/hello_http")]).unwrap_err();
        assert!(err.contains("/nonexistent/hello_http"), "{err}");
        assert!(
            err.contains(
                "cargo build --release -p spindle-effect --features full --example hello_http"
            ),
            "{err}"
        );
        let err = find_server(Some(Path::new("/nonexistent/x")), &[]).unwrap_err();
        assert!(err.starts_with("--server /nonexistent/x"), "{err}");
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            find_server(None, &[PathBuf::from("/nope"), me.clone()]),
            Ok(me)
        );
    }

    #[test]
    fn a_missing_tokio_server_says_how_to_build_it_and_is_looked_for_next_to_this_program() {
        let err =
            find_tokio_server(None, &[PathBuf::from("/nonexistent/hello_tokio")]).unwrap_err();
        assert!(err.contains("--tokio-server PATH"), "{err}");
        assert!(err.contains(BUILD_HELLO_TOKIO), "{err}");
        let candidates = tokio_server_candidates();
        assert!(
            candidates[0].ends_with("release/hello_tokio"),
            "{candidates:?}"
        );
        let me = std::env::current_exe().unwrap();
        assert!(
            candidates.iter().any(|c| c.parent() == me.parent()),
            "{candidates:?}"
        );
    }

    #[test]
    fn the_default_server_path_is_the_release_example_under_target() {
        let first = &server_candidates()[0];
        assert!(
            first.ends_with("release/examples/hello_http") || first.ends_with("hello_http.exe"),
            "{}",
            first.display()
        );
    }

    #[test]
    fn the_server_gets_the_contract_arguments() {
        let mut args = CompareArgs::default();
        assert_eq!(
            server_args("macrotask", &args),
            [
                "--executor",
                "batching",
                "--mode",
                "macrotask",
                "--addr",
                "127.0.0.1:0"
            ]
        );
        args.batch_size = Some(32);
        assert_eq!(server_args("batching", &args)[6..], ["--batch-size", "32"]);
        args.request_timeout_ms = Some(0);
        assert_eq!(
            server_args("batching", &args)[8..],
            ["--request-timeout-ms", "0"]
        );
    }

    #[test]
    fn a_table_has_a_row_per_mode_with_milliseconds_and_requests_per_second() {
        let table = markdown_table(&[("batching", &report(3, 2000, 0))]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("| executor | total requests | slowest | fastest"));
        // 3 requests of 1, 2 and 3 us in 2 s.
        assert_eq!(
            lines[2],
            "| batching | 3 | 0.003 ms | 0.001 ms | 0.002 ms | 0.002 ms | 0.003 ms | 1.5 | 0 |"
        );
        let empty = markdown_table(&[("non-batching", &report(0, 1000, 3))]);
        assert!(empty.lines().nth(2).unwrap().contains("| n/a |"));
        assert!(empty.ends_with("| 0.0 | 3 |\n"));
    }

    #[test]
    fn the_ratio_is_batching_over_non_batching_requests_per_second() {
        let comparison = Comparison {
            runs: vec![
                (1, [report(150, 1000, 0), report(100, 1000, 0)]),
                (50, [report(90, 1000, 0), report(0, 1000, 5)]),
            ],
        };
        let text = comparison.render();
        assert!(text.contains("### 1 connection ("), "{text}");
        assert!(text.contains("### 50 connections ("), "{text}");
        assert!(text.contains("| non-batching | 100 |"), "{text}");
        assert!(
            text.ends_with(
                "requests/sec, batching / non-batching: 1 connection: 1.50x; 50 connections: n/a\n"
            ),
            "{text}"
        );
    }

    /// The error of starting `program args` as a server.
    #[cfg(unix)]
    fn start_error(program: &str, args: &[&str], startup: Duration) -> String {
        let command = ServerCommand {
            program: PathBuf::from(program),
            prefix_args: args.iter().map(|a| a.to_string()).collect(),
        };
        ServerProcess::start(&command, &[], startup).unwrap_err()
    }

    #[cfg(unix)]
    #[test]
    fn a_server_that_never_says_where_it_listens_is_killed_and_reported() {
        // `sleep` prints nothing: the startup times out and Drop kills it.
        let started = std::time::Instant::now();
        let err = start_error("sleep", &["30"], Duration::from_millis(200));
        assert!(err.contains("no `listening on` line"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[cfg(unix)]
    #[test]
    fn a_server_that_exits_at_once_is_reported_with_its_status() {
        let err = start_error("false", &[], Duration::from_secs(5));
        assert!(err.contains("without a `listening on` line"), "{err}");
        assert!(err.contains("exit status: 1"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_first_line_that_is_not_listening_on_is_an_error() {
        let err = start_error("echo", &["hello"], Duration::from_secs(5));
        assert!(err.contains("got \"hello\""), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn dropping_a_started_server_kills_and_reaps_it() {
        let command = ServerCommand {
            program: PathBuf::from("sh"),
            prefix_args: vec![
                "-c".into(),
                "echo listening on 127.0.0.1:9; exec sleep 30".into(),
            ],
        };
        let server = ServerProcess::start(&command, &[], Duration::from_secs(5)).unwrap();
        assert_eq!(server.addr(), "127.0.0.1:9".parse().unwrap());
        let proc_dir = PathBuf::from(format!("/proc/{}", server.id()));
        assert!(proc_dir.exists());
        drop(server);
        // Killed and waited for: not even a zombie is left.
        assert!(!proc_dir.exists());
    }
}
