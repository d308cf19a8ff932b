//! `IO::timeout` on programs whose error type is `std::io::Error`: io-core's
//! `From<TimeoutError> for std::io::Error` (kind `TimedOut`, the
//! `TimeoutError` as its source), on every executor.

mod common;

use common::rt_test;
use spindle_core::error::TimeoutError;
use spindle_core::{IO, Outcome};
use std::io::ErrorKind;
use std::time::Duration;

rt_test! {
    fn a_std_io_error_program_that_times_out_errors_with_kind_timed_out() {
        let read: IO<Vec<u8>, std::io::Error> = IO::never();
        match run(read.timeout(Duration::from_millis(10))) {
            Outcome::Errored(e) => {
                assert_eq!(e.kind(), ErrorKind::TimedOut);
                assert_eq!(e.to_string(), "timed out after 10ms");
                let source = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<TimeoutError>());
                assert_eq!(source, Some(&TimeoutError { after: Duration::from_millis(10) }));
            }
            other => panic!("expected a timeout error, got {other:?}"),
        }
    }

    fn a_std_io_error_program_that_finishes_in_time_keeps_its_value_and_errors() {
        let ok: IO<u32, std::io::Error> = IO::pure(7).timeout(Duration::from_secs(10));
        assert_eq!(run(ok).succeeded(), Some(7));
        let failing: IO<u32, std::io::Error> =
            IO::raise_error(std::io::Error::from(ErrorKind::NotFound)).timeout(Duration::from_secs(10));
        match run(failing) {
            Outcome::Errored(e) => assert_eq!(e.kind(), ErrorKind::NotFound),
            other => panic!("expected the program's own error, got {other:?}"),
        }
    }
}
