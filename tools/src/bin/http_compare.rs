//! `http_compare`: the HTTP benchmark's runner.
//!
//! Without `--versus`: spindle-effect's `hello_http` on the event loop
//! (`--executor batching`) in batching and macrotask mode under the same
//! closed-loop load, at 1 and 50 connections, printed as the tables of Cats
//! Effect's BatchingMacrotaskExecutor discussion (total requests, slowest,
//! fastest, average, p50, p99, requests/sec) plus the requests/sec ratio
//! batching / non-batching.
//!
//! With `--versus`: named servers side by side in pairs (spindle wstp
//! against tokio multi_thread, spindle batching against tokio
//! current_thread, and hello_http with `--fan-out 8` in batching against
//! macrotask mode), at 1, 50 and 256 connections, in rounds alternating
//! between the two servers of a pair, with requests/s, p50, p99, errors and
//! the server's CPU time per request (see `spindle_tools::http_load::versus`).
//!
//! ```text
//! cargo build --release -p spindle-effect --features full --example hello_http
//! cargo build --release -p spindle-tools --bin hello_tokio --bin http_compare
//! target/release/http_compare [--duration 10] [--warmup 1]
//! target/release/http_compare --versus [--rounds 3] [--pairs wstp,batching,fan-out]
//! ```
//!
//! It builds nothing: it runs the server binaries given by `--server` and
//! `--tokio-server`, or by default `target/release/examples/hello_http` and
//! `target/release/hello_tokio` (see
//! `spindle_tools::http_load::compare::server_candidates`), as child
//! processes that print `listening on <addr>` as their first stdout line,
//! loads them in-process with `spindle_tools::http_load::run_load`, and
//! kills them (on every path: a child is owned by a guard that kills it
//! when dropped). The tables go to stdout, progress to stderr.
//!
//! `--self-test` runs the same steps against a std-only stand-in server
//! (for every server of `--versus` too): this program started again with
//! the hidden first argument `--serve-std-hello`, which follows the
//! servers' command-line contract.

use std::net::SocketAddr;
use std::process::ExitCode;

use spindle_tools::http_load::cli::{ArgError, COMPARE_USAGE, parse_compare_args};
use spindle_tools::http_load::compare::{
    ServerCommand, find_server, find_tokio_server, pinned, run_comparison, server_candidates,
    tokio_server_candidates,
};
use spindle_tools::http_load::hello_server::serve_until_killed;
use spindle_tools::http_load::versus::{Binaries, run_versus};

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
    let stand_in = || match std::env::current_exe() {
        Ok(program) => Ok(ServerCommand {
            program,
            prefix_args: vec![SERVE_STD_HELLO.to_owned()],
        }),
        Err(e) => Err(format!("cannot find this program for --self-test: {e}")),
    };
    let binary = |found: Result<std::path::PathBuf, String>| {
        found.map(|program| ServerCommand {
            program,
            prefix_args: Vec::new(),
        })
    };
    let hello_http = if args.self_test {
        stand_in()
    } else {
        binary(find_server(args.server.as_deref(), &server_candidates()))
    };
    let hello_tokio = match (args.versus, args.self_test) {
        (false, _) => None,
        (true, true) => Some(stand_in()),
        (true, false) => Some(binary(find_tokio_server(
            args.tokio_server.as_deref(),
            &tokio_server_candidates(),
        ))),
    };
    let (hello_http, hello_tokio) = match (hello_http, hello_tokio.transpose()) {
        (Ok(http), Ok(tokio)) => (
            pinned(http, args.server_cpu),
            tokio.map(|tokio| pinned(tokio, args.server_cpu)),
        ),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("http_compare: {e}");
            return ExitCode::FAILURE;
        }
    };
    for command in std::iter::once(&hello_http).chain(&hello_tokio) {
        eprintln!(
            "http_compare: server {} {}",
            command.program.display(),
            command.prefix_args.join(" ")
        );
    }
    let mut log = |line: &str| eprintln!("http_compare: {line}");
    let rendered = match hello_tokio {
        Some(hello_tokio) => {
            let binaries = Binaries {
                hello_http,
                hello_tokio,
            };
            run_versus(&binaries, &args, &mut log).map(|versus| versus.render())
        }
        None => run_comparison(&hello_http, &args, &mut log).map(|c| c.render()),
    };
    match rendered {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("http_compare: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The servers' contract with a std-only server: `--addr` is bound; every
/// other flag of hello_http and hello_tokio (`--executor`, `--workers`,
/// `--mode`, `--batch-size`, `--fan-out`, `--flavor`,
/// `--request-timeout-ms`) is accepted and ignored.
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
            (
                "--executor"
                | "--workers"
                | "--mode"
                | "--batch-size"
                | "--fan-out"
                | "--flavor"
                | "--request-timeout-ms",
                Some(_),
            ) => {}
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
