//! `bench-compare`: the criterion benchmarks of two git revisions, built
//! and run alternately on this machine, compared in JMH-style tables.
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-compare -- \
//!     [--base REV] [--head REV] [--bench NAME] [--filter REGEX] [--rounds N] [--quick]
//!     [--from-runs]
//! ```
//!
//! The logic, and what each flag does, is `spindle_tools::compare`; this
//! is the command line around it. Exit status: 0 with the tables on stdout, 2 for
//! an unusable command line, 1 when the comparison fails (the message says
//! why on stderr).

use std::process::ExitCode;

use spindle_tools::compare::{ArgError, USAGE, parse_args, run};

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(ArgError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("bench-compare: {e} (see bench-compare --help)");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(tables) => {
            print!("{tables}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-compare: error: {e}");
            ExitCode::FAILURE
        }
    }
}
