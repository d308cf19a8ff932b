//! Child processes (`spindle_os::process`) on every executor: arguments,
//! environment and directory, exit codes and signals, errors naming the
//! program, pipes as streams, output limits, and no child left running or
//! unreaped after any test, however its resource ended.
//!
//! Every test holds [`SERIAL`] and ends by checking that this process has
//! no child at all ([`children`]: read from `/proc`), so the tests do not
//! see each other's children.
#![cfg(target_os = "linux")]

mod common;

use common::net::{HANG, failed, succeeded};
use common::rt_test;

use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use spindle_core::IO;
use spindle_os::fs;
use spindle_os::process::{Command, OutputTooLarge, SpawnError, Stdio};
use spindle_stream::Stream;

/// One test at a time (module doc).
static SERIAL: Mutex<()> = Mutex::new(());

/// The pids of this process's children, running or zombie (from each
/// process's `/proc/PID/stat`: the field after the state is the parent).
fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let _state = fields.next();
        if fields.next().and_then(|p| p.parse::<u32>().ok()) == Some(me) {
            found.push(pid);
        }
    }
    found
}

/// Holds [`SERIAL`]; dropped at the end of a passing test, checks that no
/// child is left (running or unreaped).
struct Serial(#[allow(dead_code)] MutexGuard<'static, ()>);

fn serial() -> Serial {
    let guard = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    assert_eq!(children(), Vec::<u32>::new(), "no child before the test");
    Serial(guard)
}

impl Drop for Serial {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_eq!(
                children(),
                Vec::<u32>::new(),
                "no child left, running or zombie"
            );
        }
    }
}

rt_test! {
    fn a_command_runs_with_its_arguments_environment_and_directory_and_its_output_is_collected() {
        let _serial = serial();
        let rt = rt();
        let (output, dir) = succeeded(&rt, fs::temp_dir().use_with(|dir| {
            let path = dir.path().to_path_buf();
            Command::new("sh")
                .args(["-c", "echo \"$1 $GREETING\"; pwd; echo oops >&2; exit 0", "sh", "hello"])
                .env("GREETING", "world")
                .env_remove("HOME")
                .current_dir(&path)
                .output(4096)
                .map(move |output| (output, path))
        }));
        assert!(output.status.success());
        let canonical = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
        let stdout = String::from_utf8(output.stdout).unwrap();
        let mut lines = stdout.lines();
        assert_eq!(lines.next(), Some("hello world"));
        let pwd = lines.next().expect("pwd printed");
        assert!(Path::new(pwd) == dir || Path::new(pwd) == canonical, "{pwd}");
        assert_eq!(output.stderr, b"oops\n");
    }

    fn the_exit_status_of_a_failing_command_carries_its_code() {
        let _serial = serial();
        let rt = rt();
        let status = succeeded(&rt, Command::new("sh").args(["-c", "exit 3"]).status());
        assert!(!status.success());
        assert_eq!(status.code(), Some(3));
    }

    fn a_child_killed_by_a_signal_reports_the_signal_in_its_status() {
        let _serial = serial();
        let rt = rt();
        let status = succeeded(&rt, Command::new("sh").args(["-c", "kill -9 $$"]).status());
        assert_eq!(status.code(), None);
        assert_eq!(status.signal(), Some(9));
    }

    fn a_command_that_does_not_exist_fails_with_not_found_naming_the_program() {
        let _serial = serial();
        let rt = rt();
        let error = failed(&rt, Command::new("spindle-no-such-command").status());
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let spawn = SpawnError::of(&error).expect("a spawn error");
        assert_eq!(spawn.program(), "spindle-no-such-command");
        assert!(error.to_string().starts_with("spawn spindle-no-such-command: "), "{error}");
    }

    fn a_file_that_may_not_be_run_fails_with_permission_denied() {
        let _serial = serial();
        let rt = rt();
        let error = failed(&rt, fs::temp_dir().use_with(|dir| {
            let path = dir.path().join("not-executable");
            fs::write(&path, "#!/bin/sh\necho no\n").product_r(Command::new(path).status())
        }));
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(SpawnError::of(&error).is_some());
    }

    fn a_child_started_in_a_fiber_that_is_canceled_is_killed_and_reaped() {
        let _serial = serial();
        let rt = rt();
        let pid = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = pid.clone();
        let outcome = rt.run(
            Command::new("sleep")
                .arg("30")
                .spawn()
                .use_with(move |child| {
                    seen.store(child.id(), std::sync::atomic::Ordering::SeqCst);
                    child.wait()
                })
                .timeout(Duration::from_millis(100)),
        );
        let error = outcome.errored().expect("the timeout");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        let pid = pid.load(std::sync::atomic::Ordering::SeqCst);
        assert_ne!(pid, 0, "the child was started");
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "killed and reaped");
    }

    fn a_child_still_running_when_its_use_ends_is_killed_and_reaped() {
        let _serial = serial();
        let rt = rt();
        let (pid, running_during) = succeeded(&rt, Command::new("sleep").arg("30").spawn().use_with(|child| {
            child.try_wait().map(move |status| (child.id(), status.is_none()))
        }));
        assert!(running_during);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    fn bytes_piped_into_a_child_come_back_from_its_output_as_a_stream() {
        let _serial = serial();
        let rt = rt();
        let sent: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let (echoed, status) = succeeded(&rt, Command::new("cat")
            .stdin(Stdio::Piped)
            .stdout(Stdio::Piped)
            .spawn()
            .use_with(move |child| {
                let stdin = child.stdin().expect("piped");
                let stdout = child.stdout().expect("piped");
                let input = Stream::iter_chunked(sent, 10_000).expect("10,000 > 0");
                // The writer and the reader run at once: the pipe holds
                // far less than a megabyte.
                let write = stdin.writes(input).compile().drain();
                let read = stdout.reads(4096).expect("4096 > 0").compile().to_vec();
                write.both(read).flat_map(move |((), echoed)| child.wait().map(move |s| (echoed, s)))
            }));
        assert!(status.success());
        assert_eq!(echoed.len(), expected.len());
        assert!(echoed == expected, "the bytes came back in order");
    }

    fn output_past_its_limit_fails_with_output_too_large_and_the_child_is_killed() {
        let _serial = serial();
        let rt = rt();
        let error = failed(&rt, Command::new("yes").output(10_000));
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let too_large = error
            .get_ref()
            .and_then(|e| e.downcast_ref::<OutputTooLarge>())
            .expect("an OutputTooLarge");
        assert_eq!(too_large, &OutputTooLarge { stream: "stdout", limit: 10_000 });
    }

    fn a_child_that_ends_before_it_is_waited_for_still_reports_its_status_to_every_wait() {
        let _serial = serial();
        let rt = rt();
        let codes = succeeded(&rt, Command::new("true").spawn().use_with(|child| {
            let again = child.clone();
            IO::sleep(Duration::from_millis(50))
                .product_r(child.wait())
                .flat_map(move |first| again.wait().map(move |second| (first.code(), second.code())))
        }).timeout(HANG));
        assert_eq!(codes, (Some(0), Some(0)));
    }
}
