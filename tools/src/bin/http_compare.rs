//! `http_compare`: exec-batching's `hello_http` server in batching and
//! macrotask mode under the same closed-loop load, at 1 and 50 connections,
//! printed as the tables of Cats Effect's BatchingMacrotaskExecutor
//! discussion (total requests, slowest, fastest, average, p50, p99,
//! requests/sec) plus the requests/sec ratio batching / non-batching.
//!
//! ```text
//! cargo build --release -p spindle-exec-batching --example hello_http
//! cargo run --release -p spindle-tools --bin http_compare -- [--duration 10] [--warmup 1]
//! ```
//!
//! It builds nothing: it runs the server binary given by `--server`, or by
//! default `target/release/examples/hello_http` (see
//! `spindle_tools::http_load::compare::server_candidates`), as a child
//! process per mode with `--mode batching|macrotask --addr 127.0.0.1:0`,
//! reads its first stdout line `listening on <addr>`, loads it in-process
//! with `spindle_tools::http_load::run_load`, and kills it (on every path:
//! the child is owned by a guard that kills it when dropped). The tables go
//! to stdout, progress to stderr.
//!
//! `--self-test` runs the same steps against a std-only stand-in server:
//! this program started again with the hidden first argument
//! `--serve-std-hello`, which follows hello_http's command-line contract.

use std::net::SocketAddr;
use std::process::ExitCode;

use spindle_tools::http_load::cli::{ArgError, COMPARE_USAGE, parse_compare_args};
use spindle_tools::http_load::compare::{
    ServerCommand, find_server, pinned, run_comparison, server_candidates,
};
use spindle_tools::http_load::hello_server::serve_until_killed;

/// The hidden first argument that makes this program the stand-in server.
const SERVE_STD_HELLO: &str = "--serve-std-hello";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(SERVE_STD_HELLO) {
        args.remove(0);
        return stand_in_server(&args);
    }
    let args = match parse_compare_args(args) {
        Ok(args) => args,
        Err(ArgError::Help) => {
            println!("{COMPARE_USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("http_compare: {e} (see http_compare --help)");
            return ExitCode::from(2);
        }
    };
    let command = if args.self_test {
        match std::env::current_exe() {
            Ok(program) => ServerCommand {
                program,
                prefix_args: vec![SERVE_STD_HELLO.to_owned()],
            },
            Err(e) => {
                eprintln!("http_compare: cannot find this program for --self-test: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match find_server(args.server.as_deref(), &server_candidates()) {
            Ok(program) => ServerCommand {
                program,
                prefix_args: Vec::new(),
            },
            Err(e) => {
                eprintln!("http_compare: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    let command = pinned(command, args.server_cpu);
    eprintln!(
        "http_compare: server {} {}",
        command.program.display(),
        command.prefix_args.join(" ")
    );
    match run_comparison(&command, &args, &mut |line| {
        eprintln!("http_compare: {line}")
    }) {
        Ok(comparison) => {
            print!("{}", comparison.render());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("http_compare: {e}");
            ExitCode::FAILURE
        }
    }
}

/// hello_http's contract with a std-only server: `--mode` and
/// `--batch-size` are accepted and ignored, `--addr` is bound.
fn stand_in_server(args: &[String]) -> ExitCode {
    let mut addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next();
        match (flag.as_str(), value) {
            ("--addr", Some(v)) => match v.parse() {
                Ok(a) => addr = a,
                Err(e) => {
                    eprintln!("stand-in server: bad --addr {v:?}: {e}");
                    return ExitCode::from(2);
                }
            },
            ("--mode" | "--batch-size", Some(_)) => {}
            _ => {
                eprintln!("stand-in server: unexpected argument {flag:?}");
                return ExitCode::from(2);
            }
        }
    }
    match serve_until_killed(addr) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("stand-in server: {e}");
            ExitCode::FAILURE
        }
    }
}
