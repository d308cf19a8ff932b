//! Profiling harness for `spindle_os::fs` against `tokio::fs`, whole
//! processes (for `perf` and `farm-bench`): `RUNS` times on one runtime,
//! either 1,000 small files of 1 KiB read one after the other (`wstp`,
//! `exec_tokio`, `tokio`) or 64 MiB written in 64 KiB `write_all`s to one
//! file (`write_wstp`, `write_exec_tokio`, `write_tokio`).
//!
//! ```text
//! cargo build --release -p benches --example fs_prof
//! perf stat target/release/examples/fs_prof wstp|exec_tokio|tokio [RUNS]
//! perf stat target/release/examples/fs_prof write_wstp|write_exec_tokio|write_tokio [RUNS]
//! ```
//!
//! The files live in a directory under the system's temporary directory,
//! removed at the end.

use std::path::{Path, PathBuf};

use spindle_core::{IO, IORuntime};
use spindle_os::fs::{self, File};

/// Small files of the read workloads.
const FILES: usize = 1_000;
/// 64 KiB writes of the write workloads (64 MiB).
const WRITES: usize = 1024;
/// What each write writes.
static BLOCK: [u8; 65_536] = [0x5a; 65_536];

/// `fs::read` of each path in turn; the bytes read.
fn read_all(paths: Vec<PathBuf>) -> IO<usize, std::io::Error> {
    paths.into_iter().fold(IO::pure(0usize), |acc, path| {
        acc.flat_map(move |n| fs::read(path).map(move |bytes| n + bytes.len()))
    })
}

/// [`WRITES`] blocks written to `path`; the bytes written.
fn write_all(path: PathBuf) -> IO<usize, std::io::Error> {
    File::create(path).use_with(|file| {
        (0..WRITES).fold(IO::pure(0usize), move |acc, _| {
            let file = file.clone();
            acc.flat_map(move |n| {
                file.write_all(BLOCK.to_vec())
                    .map(move |()| n + BLOCK.len())
            })
        })
    })
}

/// The Spindle workload `write` (or the reads) `runs` times on `rt`.
fn on<R: IORuntime>(rt: R, runs: usize, write: bool, dir: &Path, paths: &[PathBuf]) -> usize {
    (0..runs)
        .map(|_| {
            let program = if write {
                write_all(dir.join("big"))
            } else {
                read_all(paths.to_vec())
            };
            rt.block_on(program)
                .expect("a run")
                .succeeded()
                .expect("done")
        })
        .sum()
}

/// The tokio workload `write` (or the reads) `runs` times.
fn on_tokio(runs: usize, write: bool, dir: &Path, paths: &[PathBuf]) -> usize {
    use tokio::io::AsyncWriteExt as _;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio");
    (0..runs)
        .map(|_| {
            rt.block_on(async {
                let mut n = 0;
                if write {
                    let mut file = tokio::fs::File::create(dir.join("big"))
                        .await
                        .expect("create");
                    for _ in 0..WRITES {
                        file.write_all(&BLOCK).await.expect("write");
                        n += BLOCK.len();
                    }
                    file.flush().await.expect("flush");
                } else {
                    for path in paths {
                        n += tokio::fs::read(path).await.expect("read").len();
                    }
                }
                n
            })
        })
        .sum()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().expect("a workload: see the module doc");
    let runs: usize = args
        .next()
        .map_or(10, |n| n.parse().expect("a number of runs"));
    let dir = std::env::temp_dir().join(format!("spindle-fs-prof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let write = which.starts_with("write_");
    let paths: Vec<PathBuf> = (0..FILES).map(|i| dir.join(format!("f{i}"))).collect();
    if !write {
        for path in &paths {
            std::fs::write(path, [7u8; 1024]).expect("a file");
        }
    }
    let total = match which.trim_start_matches("write_") {
        "wstp" => on(
            spindle_exec_wstp::Runtime::builder()
                .worker_threads(2)
                .build()
                .expect("exec-wstp"),
            runs,
            write,
            &dir,
            &paths,
        ),
        "exec_tokio" => on(
            spindle_exec_tokio::TokioExecutor::builder()
                .multi_thread(2)
                .build()
                .expect("exec-tokio"),
            runs,
            write,
            &dir,
            &paths,
        ),
        "tokio" => on_tokio(runs, write, &dir, &paths),
        other => panic!("unknown workload {other}"),
    };
    std::fs::remove_dir_all(&dir).expect("clean up");
    let each = if write {
        WRITES * BLOCK.len()
    } else {
        FILES * 1024
    };
    assert_eq!(total, runs * each);
}
