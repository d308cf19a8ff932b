// An `IO` is a description: building one runs nothing. A program built
// and dropped is a bug that `#[must_use]` reports (a warning by default,
// an error here).
#![deny(unused_must_use)]

use spindle_effect::IO;

fn log_line(line: &'static str) -> IO<(), std::io::Error> {
    IO::delay(move || println!("{line}"))
}

fn main() {
    // Meant: run it (`rt.block_on(log_line("starting"))`), or chain it
    // into the program that runs (`log_line("starting").product_r(...)`,
    // or `.await` it in an IO block).
    log_line("starting");
}
