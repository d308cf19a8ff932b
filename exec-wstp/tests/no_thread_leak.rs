//! Dropping a runtime stops every thread it started: workers and blocking
//! threads. Alone in its file, so that it runs in a process of its own: no
//! other test's threads come and go while it counts.

use std::time::Duration;

use spindle_core::{IO, IORuntime, Outcome, UIO};
use spindle_exec_wstp::Runtime;

/// The names of this process's threads (`/proc/self/task/*/comm`; Linux
/// truncates them to 15 bytes).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("list /proc/self/task")
        .filter_map(|task| {
            let path = task.ok()?.path().join("comm");
            Some(std::fs::read_to_string(path).ok()?.trim_end().to_string())
        })
        .collect()
}

/// The threads whose name starts with `prefix`.
fn named(prefix: &str) -> usize {
    thread_names()
        .iter()
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Whether, within a second, the process is back to `before` threads and
/// none is named `prefix`. (A thread that has been joined can stay listed
/// in `/proc` for a few microseconds while the kernel tears it down; a
/// thread that still runs stays listed.)
fn threads_gone(prefix: &str, before: usize) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        if named(prefix) == 0 && thread_names().len() == before {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn dropping_the_runtime_stops_every_worker_and_blocking_thread() {
    if !std::path::Path::new("/proc/self/task").exists() {
        eprintln!("skipped: no /proc/self/task on this system");
        return;
    }
    // Unique prefixes (at most 15 bytes survive in `comm`).
    const WORKERS: &str = "leakchk";
    let before = thread_names().len();
    assert_eq!(named(WORKERS), 0);

    for round in 0..3 {
        let rt = Runtime::builder()
            .worker_threads(4)
            .thread_name(WORKERS)
            .build()
            .expect("build");
        // Blocking threads: 8 calls at once, each holding its thread a while.
        let io = IO::<u32, ()>::par_traverse((0..8u32).collect(), |i| {
            IO::blocking(move || {
                std::thread::sleep(Duration::from_millis(20));
                i
            })
        })
        .map(|v| v.into_iter().sum::<u32>());
        assert_eq!(rt.block_on(io), Ok(Outcome::Succeeded(28)));
        let blocking = rt.metrics().blocking_threads;
        assert!(blocking >= 1, "round {round}: blocking threads started");
        // Workers are named `leakchk-<i>`, blocking threads `leakchk-blocking`.
        // A thread names itself once it runs: a worker the program did not
        // need may not have run yet, so the count is awaited (10 s at most).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while named(WORKERS) < 4 + blocking && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            named(WORKERS) >= 4 + blocking,
            "round {round}: {:?}",
            thread_names()
        );
        // Sleepers: queued and timer-held fibers are dropped with the runtime.
        for _ in 0..100 {
            rt.spawn(UIO::sleep(Duration::from_secs(3600)))
                .expect("runs");
        }
        drop(rt);
        assert!(
            threads_gone(WORKERS, before),
            "round {round}: threads left after drop: {:?}",
            thread_names()
        );
    }

    // `shutdown` with a timeout that every thread meets stops them as well.
    let rt = Runtime::builder()
        .worker_threads(2)
        .thread_name(WORKERS)
        .build()
        .expect("build");
    assert_eq!(
        rt.block_on(IO::<u32, ()>::blocking(|| 1)),
        Ok(Outcome::Succeeded(1))
    );
    assert_eq!(rt.shutdown(Duration::from_secs(10)), Ok(()));
    assert!(
        threads_gone(WORKERS, before),
        "threads left after shutdown: {:?}",
        thread_names()
    );
}
