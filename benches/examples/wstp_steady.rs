//! Steady-state attribution on one exec-wstp runtime (2 workers on a
//! 2-core machine): `race`, `both` or `deferred_ping_pong`, 10,000
//! operations per run, `REPS` runs on the same runtime, each as a fiber on
//! a worker; prints the median wall time of one run. Unlike `prof` (a new
//! runtime per run, whose thread starts and stops dominate the system
//! calls), the counts of `perf stat -e context-switches` or
//! `strace -f -c -e trace=futex,epoll_wait,write` over it are the pool's
//! steady state: how often a worker sleeps and is woken per operation.
//!
//! ```text
//! cargo build --release -p benches --example wstp_steady
//! perf stat -e task-clock,context-switches,cpu-migrations \
//!     target/release/examples/wstp_steady race 50
//! ```
use benches::fiber_loops::{both, deferred_ping_pong, race};
use spindle_core::IORuntime;

const OPS: i32 = 10_000;

fn main() {
    let name = std::env::args()
        .nth(1)
        .expect("a workload: race, both or deferred_ping_pong");
    let reps: usize = std::env::args()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .expect("a run count");
    let rt = spindle_exec_wstp::Runtime::new().expect("exec-wstp");
    let mut times = Vec::new();
    for _ in 0..reps {
        let io = match name.as_str() {
            "race" => race::<OPS>(),
            "both" => both::<OPS>(),
            "deferred_ping_pong" => deferred_ping_pong::<OPS>(),
            other => panic!("unknown workload {other}"),
        };
        // As the suite: the program as a fiber on a worker.
        let t = std::time::Instant::now();
        let outcome = rt
            .block_on(io.start::<i32>().flat_map(|f| f.join()))
            .expect("runs");
        times.push(t.elapsed().as_nanos());
        let value = outcome.succeeded().and_then(|o| o.succeeded());
        assert_eq!(value, Some(OPS), "{name}: the result");
    }
    times.sort_unstable();
    println!("{name}: median {} ns per {OPS} ops", times[reps / 2]);
}
