//! Standard input, output and error (`spindle_os::stdio`) on every
//! executor, through a child process: the test runs this test binary again,
//! filtered to the same test, with a variable in its environment that
//! makes it the child. The child's program reads its standard input's
//! first line with `stdin_read_line`, the rest as a stream of lines, and
//! writes them upper-cased to standard output through `stdout_writes`;
//! then two fibers write a long line each at once (`stdout_write_all`),
//! and it says it is done on standard error. The parent feeds the input
//! through a pipe and checks the output, the order and wholeness of the
//! writes, and the exit status.
#![cfg(unix)]

mod common;

use common::net::HANG;
use common::rt_test;

use std::io::{Read as _, Write as _};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use spindle_core::{IO, Outcome};
use spindle_os::stdio;
use spindle_stream::Stream;

/// Set (to the test's full name) in the child's environment.
const CHILD: &str = "SPINDLE_OS_STDIO_TEST_CHILD";

/// The length of each of the two lines written at once.
const LONG: usize = 200_000;

/// What the parent writes to the child's standard input.
const INPUT: &str = "hello\nwörld\r\n\nlast line without a break";

/// The child's program: see the module documentation.
fn child_program() -> IO<(), std::io::Error> {
    let first = stdio::stdin_read_line(1024).flat_map(|line| {
        let line = line.unwrap_or_default();
        stdio::stdout_write_all(format!("first: {}\n", line.to_uppercase()))
    });
    let rest = stdio::stdin_lines(1024)
        .expect("1024 > 0")
        .flat_map(|line| Stream::emits(format!("{}\n", line.to_uppercase()).into_bytes()));
    let long = |byte: u8| {
        let mut line = vec![byte; LONG];
        line.push(b'\n');
        stdio::stdout_write_all(line)
    };
    first
        .product_r(stdio::stdout_writes(rest).compile().drain())
        .product_r(long(b'a').both(long(b'b')))
        .product_r(stdio::stderr_write_all("child done\n"))
}

/// Runs the child of the test `name` with `INPUT` on its standard input;
/// its exit status, standard output (after libtest's `running 1 test`
/// line) and standard error. Killed after [`HANG`].
fn run_child(name: &str) -> (ExitStatus, String, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD, name)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child");
    let mut input = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        // Dropped at the end: the child reads the end of its input.
        input.write_all(INPUT.as_bytes())
    });
    let read_all = |mut from: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            from.read_to_string(&mut text).map(|_| text)
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not exit within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    writer
        .join()
        .expect("the writer")
        .expect("write the child's input");
    let stdout = stdout.join().expect("the reader").expect("read stdout");
    let stderr = stderr.join().expect("the reader").expect("read stderr");
    let program_stdout = stdout
        .split_once("running 1 test\n")
        .map_or(stdout.as_str(), |(_, rest)| rest)
        .to_string();
    (status, program_stdout, stderr)
}

rt_test! {
    fn a_child_reads_its_input_lines_and_writes_them_upper_cased_whole_and_in_order() {
        const TEST: &str =
            "a_child_reads_its_input_lines_and_writes_them_upper_cased_whole_and_in_order";
        let module = module_path!().split_once("::").map_or(module_path!(), |(_, m)| m);
        let name = format!("{module}::{TEST}");
        if std::env::var(CHILD).is_ok_and(|v| v == name) {
            let code = match rt().run(child_program()) {
                Outcome::Succeeded(()) => 0,
                Outcome::Errored(e) => {
                    eprintln!("child failed: {e}");
                    3
                }
                Outcome::Canceled => {
                    eprintln!("child canceled");
                    4
                }
                Outcome::Panicked(p) => {
                    eprintln!("child panicked: {p:?}");
                    5
                }
            };
            std::process::exit(code);
        }

        let (status, stdout, stderr) = run_child(&name);
        assert!(status.success(), "exit status {status}; stderr: {stderr}");
        assert!(stderr.contains("child done\n"), "stderr: {stderr}");
        let mut lines = stdout.split_inclusive('\n');
        let head: Vec<&str> = lines.by_ref().take(4).collect();
        assert_eq!(
            head,
            ["first: HELLO\n", "WÖRLD\n", "\n", "LAST LINE WITHOUT A BREAK\n"],
            "stdout: {stdout:.200}"
        );
        // The two long lines, each whole (one `write_all` is never cut by
        // the other), in either order.
        let mut long: Vec<&str> = lines.collect();
        assert_eq!(long.len(), 2, "two long lines");
        long.sort();
        for (line, byte) in long.iter().zip(['a', 'b']) {
            assert_eq!(line.len(), LONG + 1);
            assert!(line[..LONG].chars().all(|c| c == byte), "a line of {byte}s was interleaved");
        }
    }
}
