//! The programs of the process tests (and of `examples/app_lifecycle.rs`,
//! which includes this file), by mode:
//!
//! * `ok`: prints `done`, succeeds (exit code 0);
//! * `error`: fails with an error value (1, the error printed);
//! * `panic`: panics in a fiber (101);
//! * `cancel`: cancels itself (130);
//! * `wait`: prints `ready` and waits inside a `bracket` until SIGINT or
//!   SIGTERM cancels it; the release prints `finalizer ran` (130);
//! * `slow-finalizer`: like `wait`, but the release takes an hour, so only
//!   a second signal ends the process (130).

use std::io::Write;
use std::time::Duration;

use spindle_core::IO;

/// The modes [`program`] knows.
pub const MODES: &str = "ok, error, panic, cancel, wait, slow-finalizer";

fn say(line: &'static str) -> IO<(), String> {
    IO::delay(move || {
        println!("{line}");
        let _ = std::io::stdout().flush();
    })
}

/// The program of `mode`; `None` for an unknown mode.
pub fn program(mode: &str) -> Option<IO<(), String>> {
    Some(match mode {
        "ok" => say("done"),
        "error" => IO::raise_error(String::from("the order was refused")),
        "panic" => IO::delay(|| panic!("a bug in a fiber")),
        "cancel" => IO::canceled(),
        "wait" => IO::bracket(say("ready"), |()| IO::never(), |()| say("finalizer ran")),
        "slow-finalizer" => IO::bracket(
            say("ready"),
            |()| IO::never(),
            |()| say("finalizing").product_r(IO::sleep(Duration::from_secs(3600))),
        ),
        _ => return None,
    })
}
