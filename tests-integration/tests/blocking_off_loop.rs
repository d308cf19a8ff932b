//! `IO::blocking` on every std executor: the call runs off the threads
//! that run fibers, so the other fibers keep running while it blocks
//! (exec-single included: on the system clock it has a blocking pool).

mod common;

use common::rt_test;

use std::sync::mpsc;
use std::time::Duration;

use spindle_core::IO;

/// How long the blocking call waits for the other fiber before it gives
/// up (a hang guard: the test fails, it does not hang).
const LIMIT: Duration = Duration::from_secs(10);

rt_test! {
    fn a_blocking_call_leaves_the_executor_free_to_run_the_fiber_it_waits_for() {
        let (send, receive) = mpsc::channel::<u32>();
        // The blocking call waits for a message only another fiber sends:
        // made on the executor's own thread, it would wait out the limit.
        let blocked: IO<Result<u32, mpsc::RecvTimeoutError>, ()> =
            IO::blocking(move || receive.recv_timeout(LIMIT));
        let sender = IO::sleep(Duration::from_millis(5)).product_r(IO::delay(move || {
            let _ = send.send(42);
        }));
        let outcome = run(blocked.both(sender));
        let (received, ()) = outcome.succeeded().expect("both finish");
        assert_eq!(received, Ok(42), "the other fiber ran while the call blocked");
    }
}
