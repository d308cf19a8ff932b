//! The frame of both programs' `run` (shared through `#[path]`, as the
//! architecture glue is): the start line, exec-single built on the
//! program's clock, the program run on it, how it ended, the allocations
//! made in interrupt handlers, the verdict.
//!
//! A macro, not a function: the main image has a flash budget, and the
//! same frame as a function (even `#[inline(always)]`) made it 164 bytes
//! larger (thumbv7m, tracing compiled out); the macro's expansion is the
//! code each program had written out.

/// `run_frame!(title, clock, remote, program, |e| message, { report })`:
/// prints "`title` `arch::NAME`: start", runs `program()` on exec-single
/// with `clock` and room for `remote` fibers woken by interrupt handlers
/// between two turns (their wake-ups never allocate), prints how it
/// failed if it did (`message`, the text of its error `e`), runs `report`
/// if given (what the program prints after the run), prints the
/// allocations made in interrupt handlers and the verdict. Its value:
/// whether the program returned `true` and the handlers allocated
/// nothing.
macro_rules! run_frame {
    ($title:expr, $clock:expr, $remote:expr, $program:expr, |$e:ident| $message:expr $(, $report:block)? $(,)?) => {{
        use core::sync::atomic::Ordering;
        use spindle_core::{IORuntime, Outcome};
        say!($title, crate::arch::NAME, ": start");
        let passed = match spindle_exec_single::Builder::with_clock($clock)
            .remote_capacity($remote)
            .build()
            .map_err(|_| "the executor could not be built")
            .and_then(|rt| {
                rt.block_on($program())
                    .map_err(|_| "block_on refused the program")
            }) {
            Err(why) => {
                say!("no run: ", why);
                false
            }
            Ok(Outcome::Succeeded(passed)) => passed,
            Ok(Outcome::Errored($e)) => {
                say!("program failed: ", $message);
                false
            }
            Ok(Outcome::Canceled) => {
                say!("program canceled");
                false
            }
            Ok(Outcome::Panicked(p)) => {
                say!("program panicked: ", p.message());
                false
            }
        };
        $($report)?
        let handler_allocs = crate::heap::HANDLER_ALLOCS.load(Ordering::Relaxed);
        say!("allocations in interrupt handlers: ", handler_allocs);
        let passed = passed && handler_allocs == 0;
        say!(
            $title,
            crate::arch::NAME,
            ": ",
            if passed { "ok" } else { "FAILED" }
        );
        passed
    }};
}
