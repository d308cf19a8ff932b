//! `loadgen`: closed-loop HTTP/1.1 load from N keep-alive connections, one
//! thread each, std only (see `spindle_tools::http_load` for how latency
//! is measured).
//!
//! ```text
//! cargo run --release -p spindle-tools --bin loadgen -- \
//!     --url http://127.0.0.1:8080/ --connections 50 --duration 10 [--warmup 1] [--json]
//! ```
//!
//! Exit status: 0 if any request succeeded, 1 if every request failed, 2 for
//! a bad command line.

use std::process::ExitCode;

use spindle_tools::http_load::cli::{ArgError, LOADGEN_USAGE, parse_loadgen_args};
use spindle_tools::http_load::run_load;

fn main() -> ExitCode {
    let args = match parse_loadgen_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(ArgError::Help) => {
            println!("{LOADGEN_USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("loadgen: {e} (see loadgen --help)");
            return ExitCode::from(2);
        }
    };
    let report = run_load(&args.config);
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.summary());
    }
    if report.all_failed() {
        eprintln!("loadgen: every request failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
