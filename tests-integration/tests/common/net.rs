//! What the net test files share: the hang limit, an ephemeral localhost
//! address, and running a program on a fresh loop.

#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use spindle_core::{IO, Outcome};
use spindle_exec_batching::EventLoop;

/// How long a test program may take before it is failed (a hang limit, not
/// a performance assertion).
pub const HANG: Duration = Duration::from_secs(20);

/// 127.0.0.1 with a port the system picks.
pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `program` on a new loop, within [`HANG`]; its value and the loop
/// (for its metrics).
pub fn run<A: Send + 'static>(program: IO<A, io::Error>) -> (EventLoop, A) {
    let rt = EventLoop::new().expect("build an event loop");
    let outcome = rt.block_on(program.timeout(HANG)).expect("block_on");
    match outcome {
        Outcome::Succeeded(a) => (rt, a),
        Outcome::Errored(e) => panic!("the program failed: {e} ({:?})", e.kind()),
        Outcome::Canceled => panic!("the program was canceled"),
        Outcome::Panicked(p) => panic!("the program panicked: {p:?}"),
    }
}
