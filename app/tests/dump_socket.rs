//! The dump socket: with `Settings::dump_socket`, a connection to the
//! socket reads the executor's metrics, counters and fiber dump as one
//! JSON document while the program runs, on every std executor; the
//! socket is gone when the program has ended; a path that is taken is an
//! error and the program does not run.
#![cfg(unix)]

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use spindle_app::{Settings, run_with};
use spindle_core::{IO, IORuntime};

/// A socket path of this test process for `name`.
fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spindle-app-{}-{name}.sock", std::process::id()))
}

/// Runs a main program that reads the dump socket at `path` once (on a
/// blocking thread, while the main fiber waits for it) through the entry
/// point of `R`; the document it read, parsed.
fn read_own_dump<R: IORuntime>(path: PathBuf) -> Value {
    let read: Arc<Mutex<Option<String>>> = Arc::default();
    let slot = read.clone();
    let client_path = path.clone();
    let main = IO::<Result<(), String>, String>::blocking(move || {
        let mut stream = UnixStream::connect(&client_path).map_err(|e| e.to_string())?;
        let mut text = String::new();
        stream
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        *slot.lock().expect("the slot") = Some(text);
        Ok::<(), String>(())
    })
    .flat_map(IO::from_result);
    let code = run_with(R::from_env(), main, Settings::new().dump_socket(&path));
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(
        !path.exists(),
        "the socket file is removed when the program ends"
    );
    let text = read
        .lock()
        .expect("the slot")
        .take()
        .expect("the program read the socket");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The document's shape, and the main fiber in it.
fn check(document: &Value, executor: &str) {
    let counters = &document["counters"];
    assert_eq!(counters["executor"], executor, "{document}");
    assert!(
        counters["fibers_started_total"].as_u64() >= Some(1),
        "{document}"
    );
    assert!(
        counters["fibers_live"].as_u64() >= Some(1),
        "the main fiber is live while it reads: {document}"
    );
    assert!(
        counters["workers"]
            .as_array()
            .is_some_and(|w| !w.is_empty())
    );
    assert!(document["dump"]["fibers"].is_array(), "{document}");
    assert!(document["dump"]["executor"].is_object(), "{document}");
    assert!(document["metrics"].as_str().is_some_and(|m| !m.is_empty()));
}

/// A program run through the entry point of `R` reads its own dump
/// socket, and the document names `executor` (which also names the
/// socket file).
fn reads_its_own_dump<R: IORuntime>(executor: &str) {
    let document = read_own_dump::<R>(socket_path(executor));
    check(&document, executor);
}

#[test]
fn a_connection_reads_the_dump_as_json_on_exec_single() {
    reads_its_own_dump::<spindle_exec_single::SingleThreaded<spindle_exec_single::StdClock>>(
        "single",
    );
}

#[test]
fn a_connection_reads_the_dump_as_json_on_exec_wstp() {
    reads_its_own_dump::<spindle_exec_wstp::Runtime>("wstp");
}

#[test]
fn a_connection_reads_the_dump_as_json_on_exec_batching() {
    reads_its_own_dump::<spindle_exec_batching::EventLoop>("batching");
}

#[test]
fn a_connection_reads_the_dump_as_json_on_exec_tokio() {
    reads_its_own_dump::<spindle_exec_tokio::TokioExecutor>("tokio");
}

#[test]
fn a_dump_socket_path_that_is_taken_is_an_error_and_the_program_does_not_run() {
    let path = socket_path("taken");
    std::fs::write(&path, b"not a socket").expect("a file in the way");
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    let main = IO::<(), String>::delay(move || *flag.lock().expect("the flag") = true);
    let code = run_with(
        spindle_exec_wstp::Runtime::from_env(),
        main,
        Settings::new().dump_socket(&path),
    );
    let left = std::fs::read(&path).expect("the file is left alone");
    std::fs::remove_file(&path).expect("clean up");
    assert_eq!(code, ExitCode::from(spindle_app::ERROR_EXIT_CODE));
    assert!(!*ran.lock().expect("the flag"), "the program did not run");
    assert_eq!(left, b"not a socket");
}
