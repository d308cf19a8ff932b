//! How the app entry point ends a process: run with one argument.
//!
//! * `ok`: succeeds (exit code 0);
//! * `error`: fails with an error value (1, the error printed);
//! * `panic`: panics in a fiber (101);
//! * `cancel`: cancels itself (130);
//! * `wait`: prints `ready` and waits inside a `bracket` until SIGINT or
//!   SIGTERM cancels it; the release prints `finalizer ran` (130);
//! * `slow-finalizer`: like `wait`, but the release takes an hour, so only
//!   a second signal ends the process (130).
//!
//! ```text
//! cargo run --example app_lifecycle -- wait   # then press Ctrl-C
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use spindle_core::IO;
use spindle_exec_wstp::app;

fn say(line: &'static str) -> IO<(), String> {
    IO::delay(move || {
        println!("{line}");
        let _ = std::io::stdout().flush();
    })
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let program: IO<(), String> = match mode.as_str() {
        "ok" => say("done"),
        "error" => IO::raise_error(String::from("the order was refused")),
        "panic" => IO::delay(|| panic!("a bug in a fiber")),
        "cancel" => IO::canceled(),
        "wait" => IO::bracket(
            say("ready"),
            |_: &()| IO::never(),
            |()| say("finalizer ran"),
        ),
        "slow-finalizer" => IO::bracket(
            say("ready"),
            |_: &()| IO::never(),
            |()| say("finalizing").product_r(IO::sleep(Duration::from_secs(3600))),
        ),
        other => {
            eprintln!("unknown mode {other:?}: ok, error, panic, cancel, wait, slow-finalizer");
            return ExitCode::from(2);
        }
    };
    app::run(program)
}
