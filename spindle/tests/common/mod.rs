//! The harness of the network examples' tests: an example server in a
//! child process, on each executor, with one test body.
//!
//! # The child server
//!
//! A test file includes its example with `#[path]` (the example's `run`,
//! the function its `main` calls) and has one test,
//! [`CHILD_TEST`], that does nothing in an ordinary run. [`ChildServer::start`]
//! runs this same test binary again with only that test selected and the
//! example's command line in [`CHILD_ARGS_ENV`]; the child test then calls
//! the example's `run` with it ([`child_args`]), so the child serves
//! exactly as the example binary does, on the executor its `--executor`
//! names. Its descriptors (`/proc/<pid>/fd`), memory (`VmRSS`), CPU time,
//! stderr and open-file limit are its own. The child exits when its stdin
//! closes, so a parent that dies leaves no server behind; dropping a
//! [`ChildServer`] kills and reaps it.
//!
//! # One body, every executor
//!
//! As tokio's `rt_test!` (and `tests-integration`'s), [`executor_test!`]
//! stamps each test into one module per std executor, every one of which
//! has I/O: `wstp` (two workers), `batching`, `tokio` (a multi-thread
//! runtime with two workers), `tokio_current` (a current-thread runtime)
//! and `single`; in each, `EXECUTOR` is the example's flags that select
//! it. The examples run each through the same generic function, over
//! io-core's `IORuntime`.
//!
//! Every wait is bounded by [`HANG`]: a hang limit, not a performance
//! assertion.

#![allow(dead_code, unused_macros, unused_imports)]

use std::io::{self, BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The bound on every wait of a test.
pub const HANG: Duration = Duration::from_secs(20);

/// The environment variable that carries the child's command line (its
/// arguments separated by spaces; none contains one).
pub const CHILD_ARGS_ENV: &str = "SPINDLE_EXAMPLE_CHILD_ARGS";

/// The environment variable with the child's soft open-file limit.
pub const CHILD_NOFILE_ENV: &str = "SPINDLE_EXAMPLE_CHILD_NOFILE";

/// The name of the test that is the child server in a child process.
pub const CHILD_TEST: &str = "serves_as_the_child_server_process_when_asked";

/// Stamps each test of the block into a module per executor, where
/// `EXECUTOR` is the example's command-line flags for that executor.
///
/// ```ignore
/// executor_test! {
///     fn it_echoes() {
///         let server = ChildServer::start(&args(EXECUTOR, &[]), 0);
///         ...
///     }
/// }
/// ```
macro_rules! executor_test {
    ($($tests:tt)*) => {
        $crate::common::stamp_executor_tests! { wstp, ["--executor", "wstp", "--workers", "2"], $($tests)* }
        $crate::common::stamp_executor_tests! { batching, ["--executor", "batching"], $($tests)* }
        $crate::common::stamp_executor_tests! { tokio, ["--executor", "tokio", "--workers", "2"], $($tests)* }
        $crate::common::stamp_executor_tests! { tokio_current, ["--executor", "tokio", "--flavor", "current-thread"], $($tests)* }
        $crate::common::stamp_executor_tests! { single, ["--executor", "single"], $($tests)* }
    };
}
pub(crate) use executor_test;

/// Stamps the tests into `mod $module` with its executor flags.
macro_rules! stamp_executor_tests {
    ($module:ident, [$($flag:literal),*], $( $(#[$meta:meta])* fn $name:ident() $body:block )*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            /// This module's executor: the example's flags that select it.
            #[allow(dead_code)]
            const EXECUTOR: &[&str] = &[$($flag),*];

            $(
                #[test]
                $(#[$meta])*
                fn $name() $body
            )*
        }
    };
}
pub(crate) use stamp_executor_tests;

/// The executor flags followed by `rest`, as owned strings.
pub fn args(executor: &[&str], rest: &[&str]) -> Vec<String> {
    executor.iter().chain(rest).map(|s| s.to_string()).collect()
}

/// In a child server process: the example's arguments, after lowering the
/// open-file limit if asked and starting the thread that exits the process
/// when stdin closes. `None` in an ordinary test run.
pub fn child_args() -> Option<Vec<String>> {
    let args = std::env::var(CHILD_ARGS_ENV).ok()?;
    let nofile: u64 = std::env::var(CHILD_NOFILE_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if nofile > 0 {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let hard = getrlimit(Resource::Nofile).maximum;
        let limit = Rlimit {
            current: Some(nofile),
            maximum: hard,
        };
        setrlimit(Resource::Nofile, limit).expect("lower the open-file limit");
    }
    // Exit when the parent goes away (its end of our stdin closes).
    thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    Some(
        args.split(' ')
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// Raises this process's soft open-file limit (children inherit it).
pub fn raise_nofile(needed: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|current| current < needed) {
        limit.current = Some(limit.maximum.map_or(needed, |max| max.min(needed)));
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// A child server process; killed when dropped.
pub struct ChildServer {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl ChildServer {
    /// Starts the example with `args` in a child process (with a soft
    /// open-file limit of `nofile`, 0: inherited) and waits for its
    /// `listening on <addr>` line.
    pub fn start(args: &[String], nofile: u64) -> ChildServer {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads", "1"])
            .env(CHILD_ARGS_ENV, args.join(" "))
            .env(CHILD_NOFILE_ENV, nofile.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the child server");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().take(1000) {
                let Ok(line) = line else { break };
                // The harness's "test ... " may precede it on the line.
                if let Some(at) = line.find("listening on ") {
                    let addr = line[at + "listening on ".len()..].trim();
                    let _ = sender.send(addr.parse::<SocketAddr>().expect("an address"));
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let err = child.stderr.take().expect("stderr");
        thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        let addr = match receiver.recv_timeout(HANG) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = stderr.lock().unwrap().join("\n");
                panic!("the child server did not announce its address ({args:?}):\n{stderr}");
            }
        };
        ChildServer {
            child,
            addr,
            stderr,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's open descriptors.
    pub fn descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("read the server's /proc/pid/fd")
            .count()
    }

    /// The child's resident memory in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The child's user and system CPU time so far (all its threads).
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        // Fields after the command name (which ends with the last ')').
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
    }

    /// The names of the child's threads (`/proc/<pid>/task/*/comm`, at
    /// most 15 bytes each).
    pub fn thread_names(&self) -> Vec<String> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).expect("its tasks");
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .map(|name| name.trim_end().to_owned())
            .collect()
    }

    /// The lines the child wrote to stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// A client connection with [`HANG`] as its read and write timeouts.
    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream.set_read_timeout(Some(HANG)).unwrap();
        stream.set_write_timeout(Some(HANG)).unwrap();
        stream
    }

    /// Sends the child the signal `name` (`INT`, `TERM`, ...), as `kill`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// The child's exit status if it has exited (reaped), else `None`.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("wait for the child")
    }

    /// Waits for the child to exit, within [`HANG`]; its exit status.
    pub fn wait_for_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                start.elapsed() < HANG,
                "the child did not exit; its stderr: {:?}",
                self.stderr_lines()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `done` holds (polled), within [`HANG`].
    pub fn wait_until(&self, what: &str, mut done: impl FnMut(&ChildServer) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < HANG,
                "timed out waiting for {what}; the server's stderr: {:?}",
                self.stderr_lines()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
