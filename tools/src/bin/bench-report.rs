//! Regenerates BENCHMARKS.md's suite section and `benches/suite.svg` from
//! criterion's results of the `suite.*` groups; see
//! [`spindle_tools::report`].
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-report -- \
//!     [--criterion DIR] [--out BENCHMARKS.md] [--svg benches/suite.svg] [--command TEXT]
//! ```

use std::process::ExitCode;

use spindle_tools::report::{self, Invocation};

fn main() -> ExitCode {
    let options = match report::parse_args(std::env::args().skip(1)) {
        Ok(Invocation::Help) => {
            print!("{}", report::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(options)) => options,
        Err(e) => {
            eprintln!("bench-report: {e}");
            return ExitCode::from(2);
        }
    };
    match report::run(&options) {
        Ok(summary) => {
            let what = if summary.appended {
                "appended a `## Suite` section to"
            } else if summary.changed {
                "updated the suite section of"
            } else {
                "left unchanged"
            };
            println!(
                "bench-report: {} results in {} workloads; {what} {}; chart in {}",
                summary.results,
                summary.workloads,
                options.out.display(),
                options.svg.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-report: error: {e}");
            ExitCode::FAILURE
        }
    }
}
