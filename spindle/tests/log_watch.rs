//! The `log_watch` example in a child process (this test binary run
//! again, as the network examples' tests do: see `common`), on every
//! executor: it follows a log, runs a command per matching line, reloads
//! its settings on SIGHUP, keeps the old ones when the new ones are bad,
//! and leaves no command running when it is terminated.
//!
//! Every wait is bounded by [`HANG`].

#![cfg(target_os = "linux")]

mod common;

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/log_watch.rs"]
mod log_watch;

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{CHILD_ARGS_ENV, CHILD_TEST, HANG, executor_test};

#[test]
fn serves_as_the_child_server_process_when_asked() {
    let Some(args) = common::child_args() else {
        return; // an ordinary run: nothing to do
    };
    let code = log_watch::run(args.into_iter());
    // The parent reads the exit code: exit with the watcher's own.
    let number = (0..=u8::MAX).find(|&n| std::process::ExitCode::from(n) == code);
    std::process::exit(number.map_or(1, i32::from));
}

/// A directory of the test's own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let path =
            std::env::temp_dir().join(format!("spindle-log-watch-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The watcher in a child process, its stdout and stderr lines collected.
struct Watcher {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// Collects the lines of `from` into the returned list, on a thread.
fn collect(from: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let into = lines.clone();
    thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push(line);
        }
    });
    lines
}

impl Watcher {
    /// Starts the watcher on `executor` for `dir`'s `app.log` and
    /// `watch.conf`, and waits for its `watching` line.
    fn start(executor: &[&str], dir: &Dir) -> Watcher {
        let log = dir.path("app.log");
        let settings = dir.path("watch.conf");
        let mut args: Vec<String> = executor.iter().map(|s| s.to_string()).collect();
        args.extend([
            "--log".into(),
            log.display().to_string(),
            "--settings".into(),
            settings.display().to_string(),
        ]);
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads", "1"])
            .env(CHILD_ARGS_ENV, args.join(" "))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the watcher");
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        let watcher = Watcher {
            child,
            stdout,
            stderr,
        };
        watcher.wait_for_line("its `watching` line", |line| line.contains("watching "));
        watcher
    }

    /// Waits until a line of stdout satisfies `found`.
    fn wait_for_line(&self, what: &str, found: impl Fn(&str) -> bool) {
        self.wait_until(what, || {
            self.stdout.lock().unwrap().iter().any(|l| found(l))
        });
    }

    /// Waits until `done` holds (polled), within [`HANG`].
    fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < HANG,
                "timed out waiting for {what}; stdout {:?}, stderr {:?}",
                self.stdout.lock().unwrap(),
                self.stderr.lock().unwrap()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends the watcher the signal `name`, as `kill`.
    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the watcher to exit, within [`HANG`].
    fn wait_for_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < HANG, "the watcher did not exit");
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The pids of the watcher's children (from `/proc`).
    fn children(&self) -> Vec<u32> {
        let parent = self.child.id();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
                let after = &stat[stat.rfind(')')? + 1..];
                let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
                (ppid == parent).then_some(pid)
            })
            .collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Appends `line` and a line break to the file at `path`.
fn append(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

executor_test! {
    fn a_matching_line_runs_the_command_and_a_hangup_reloads_the_settings() {
        let dir = Dir::new(&format!("reload-{}", EXECUTOR.join("-")));
        let (log, settings, alerts) = (dir.path("app.log"), dir.path("watch.conf"), dir.path("alerts"));
        std::fs::write(&log, "ERROR from before the start\n").unwrap();
        std::fs::write(
            &settings,
            format!("pattern = ERROR\ncommand = printf 'e:%s\\n' \"$1\" >> {}\n", alerts.display()),
        )
        .unwrap();
        let mut watcher = Watcher::start(EXECUTOR, &dir);
        append(&log, "INFO all is well");
        append(&log, "ERROR disk full");
        watcher.wait_for_line("the command's report", |l| l.contains("): ERROR disk full"));
        std::fs::write(
            &settings,
            format!("pattern = WARN\ncommand = printf 'w:%s\\n' \"$LOG_LINE\" >> {}\n", alerts.display()),
        )
        .unwrap();
        watcher.signal("HUP");
        watcher.wait_for_line("the reload", |l| l == "settings reloaded: pattern WARN");
        append(&log, "ERROR no longer watched");
        append(&log, "WARN memory low");
        watcher.wait_for_line("the second report", |l| l.contains("): WARN memory low"));
        let written = std::fs::read_to_string(&alerts).unwrap();
        assert_eq!(written, "e:ERROR disk full\nw:WARN memory low\n");
        watcher.signal("TERM");
        let status = watcher.wait_for_exit();
        assert_eq!(status.code(), Some(130), "canceled by SIGTERM");
    }

    fn bad_settings_on_a_hangup_are_reported_and_the_old_ones_kept() {
        let dir = Dir::new(&format!("bad-{}", EXECUTOR.join("-")));
        let (log, settings) = (dir.path("app.log"), dir.path("watch.conf"));
        std::fs::write(&log, "").unwrap();
        std::fs::write(&settings, "pattern = ERROR\ncommand = true\n").unwrap();
        let watcher = Watcher::start(EXECUTOR, &dir);
        std::fs::write(&settings, "pattern = ERROR\ncommand = true\nconcurrency = none\n").unwrap();
        watcher.signal("HUP");
        watcher.wait_until("the refusal", || {
            watcher.stderr.lock().unwrap().iter().any(|l| {
                l.starts_with("settings not reloaded: ") && l.contains("line 3: concurrency")
            })
        });
        append(&log, "ERROR still watched");
        watcher.wait_for_line("the report", |l| l.contains("): ERROR still watched"));
    }

    fn a_terminated_watcher_leaves_no_command_running() {
        let dir = Dir::new(&format!("term-{}", EXECUTOR.join("-")));
        let (log, settings) = (dir.path("app.log"), dir.path("watch.conf"));
        std::fs::write(&log, "").unwrap();
        std::fs::write(&settings, "pattern = SLOW\ncommand = sleep 30\nconcurrency = 2\n").unwrap();
        let mut watcher = Watcher::start(EXECUTOR, &dir);
        append(&log, "SLOW one");
        append(&log, "SLOW two");
        append(&log, "SLOW three: waits for a place");
        watcher.wait_until("two commands running", || watcher.children().len() == 2);
        let commands = watcher.children();
        watcher.signal("TERM");
        watcher.wait_for_exit();
        for pid in commands {
            assert!(!Path::new(&format!("/proc/{pid}")).exists(), "command {pid} killed and reaped");
        }
    }
}
