//! Files (`spindle_os::fs`, every call on the executor's blocking pool)
//! against `tokio::fs` (every call on tokio's blocking pool). The data is
//! made once, before any timing, in a directory under the system's
//! temporary directory (`spindle-fs-bench`), and removed when the group
//! ends; the files are in the page cache, so the rows measure the cost of
//! the calls and their hops to the blocking threads, not a disk.
//!
//! * `Files/read_1GiB_64KiB/*`: a [`BIG`] (1 GiB) file read in 64 KiB
//!   chunks, the bytes counted. `spindle_wstp_reads`: `fs::reads(path,
//!   64 KiB)` folded to a byte count, on exec-wstp (2 workers);
//!   `spindle_wstp_file_read`: `File::open(..).use_with` and a loop of
//!   `file.read(64 KiB)` until an empty chunk; `spindle_tokio_reads` and
//!   `spindle_tokio_file_read`: the same on exec-tokio (a tokio
//!   multi_thread(2) runtime); `tokio_mt`: `tokio::fs::File::open` and
//!   `AsyncReadExt::read` into one 64 KiB buffer in a loop, on tokio
//!   multi_thread(2).
//! * `Files/write_1GiB_64KiB/*`: [`BIG`] written in 64 KiB chunks to a file
//!   created (or truncated) by the operation. `spindle_wstp_write_all`:
//!   `File::create(..).use_with` and a loop of `file.write_all(block)`
//!   (written behind the loop: the run ends after the file's close, which
//!   waits for the last write, as tokio's `flush` does);
//!   `spindle_wstp_writes`: `fs::writes` of a stream of the 64 KiB blocks;
//!   `spindle_tokio_write_all`: the loop on exec-tokio; `tokio_mt`:
//!   `tokio::fs::File::create`, `write_all` per block and `flush`, on
//!   tokio multi_thread(2).
//! * `Files/read_10000_small/*`: [`SMALL_FILES`] files of [`SMALL_LEN`]
//!   bytes read one after the other, whole, the bytes counted:
//!   `fs::read` on exec-wstp (`spindle_wstp`) and on exec-tokio
//!   (`spindle_tokio`), `tokio::fs::read` on tokio multi_thread(2)
//!   (`tokio_mt`).
//!
//! Before any timing each row runs once and checks the number of bytes
//! (and the writes check the file's length after their run). The size of
//! the big file is `SPINDLE_FS_BENCH_MIB` MiB when that is set (1024
//! otherwise): a smaller one where 2 GiB of free disk is not at hand.
//!
//! Run: `cargo bench -p benches --bench fs -- --quick` (one group alone:
//! `-- read_1GiB`, `-- write_1GiB`, `-- read_10000`).

use std::cell::Cell;
use std::hint::black_box;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use benches::succeeded;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use spindle_core::{IO, IORuntime};
use spindle_exec_tokio::TokioExecutor;
use spindle_os::fs::{self, File};
use spindle_stream::{Chunk, Stream};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The read and write size of the big-file rows.
const CHUNK: usize = 64 * 1024;
/// The size of the big file (1 GiB unless `SPINDLE_FS_BENCH_MIB` says).
static BIG: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
    let mib = std::env::var("SPINDLE_FS_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&m| m > 0)
        .unwrap_or(1024);
    mib * 1024 * 1024
});
/// Files of the small-files rows.
const SMALL_FILES: usize = 10_000;
/// Bytes of each small file.
const SMALL_LEN: usize = 1024;
/// The block every write row writes.
static BLOCK: [u8; CHUNK] = [0x5a; CHUNK];

/// The directory of this bench's data (made by [`data_dir`]).
fn data_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("spindle-fs-bench");
    std::fs::create_dir_all(&dir).expect("the bench's data directory");
    dir
}

fn wstp() -> spindle_exec_wstp::Runtime {
    spindle_exec_wstp::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("exec-wstp")
}

fn exec_tokio() -> TokioExecutor {
    TokioExecutor::builder()
        .multi_thread(2)
        .build()
        .expect("exec-tokio")
}

fn tokio_mt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio multi_thread")
}

/// A row: when criterion first runs it (a row left out by a filter runs
/// nothing), `prepare()` makes the data and `run()` runs once and is
/// checked; then `run` is timed.
fn row(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    prepare: impl Fn(),
    run: impl Fn() -> u64,
    expected: u64,
) {
    let checked = Cell::new(false);
    group.bench_function(name, |b| {
        if !checked.replace(true) {
            prepare();
            assert_eq!(run(), expected, "{name}");
        }
        b.iter(&run)
    });
}

/// A Spindle row: `program()` on `rt`.
fn spindle_row<R: IORuntime>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    prepare: impl Fn(),
    rt: &R,
    program: impl Fn() -> IO<u64, std::io::Error>,
    expected: u64,
) {
    let run = || succeeded(rt.block_on(program()).expect("a run"));
    row(group, name, prepare, run, expected);
}

/// A tokio row: `future()` on `rt`.
fn tokio_row<F: Future<Output = std::io::Result<u64>>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    prepare: impl Fn(),
    rt: &tokio::runtime::Runtime,
    future: impl Fn() -> F,
    expected: u64,
) {
    let run = || rt.block_on(future()).expect("tokio run");
    row(group, name, prepare, run, expected);
}

// ----- reading a big file -----------------------------------------------

/// `fs::reads` folded to a byte count.
fn spindle_reads(path: &Path) -> IO<u64, std::io::Error> {
    fs::reads(path, CHUNK)
        .expect("a chunk size above 0")
        .compile()
        .fold_chunks(0u64, |n, chunk: Chunk<u8>| n + chunk.len() as u64)
}

/// `File::open` and a loop of `read(64 KiB)`.
fn spindle_file_read(path: &Path) -> IO<u64, std::io::Error> {
    fn go(file: File, total: u64) -> IO<u64, std::io::Error> {
        file.read(CHUNK).flat_map(move |bytes| {
            if bytes.is_empty() {
                IO::pure(total)
            } else {
                go(file, total + bytes.len() as u64)
            }
        })
    }
    File::open(path).use_with(|file| go(file, 0))
}

async fn tokio_read(path: PathBuf) -> std::io::Result<u64> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += black_box(&buf[..n]).len() as u64;
    }
}

/// Makes `path` a file of `len` bytes, unless it is one already.
fn make_big_file(path: &Path, len: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == len) {
        return;
    }
    let mut file = std::fs::File::create(path).expect("the big file");
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        file.write_all(&BLOCK[..n]).expect("the big file's bytes");
        left -= n as u64;
    }
}

fn read_big(c: &mut Criterion) {
    let big = *BIG;
    let path = data_dir().join("big");
    let made = Cell::new(false);
    let prepare = || {
        if !made.replace(true) {
            make_big_file(&path, big);
        }
    };
    let mut group = c.benchmark_group("Files/read_1GiB_64KiB");
    group.throughput(Throughput::Bytes(big));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let rt = wstp();
    let program = || spindle_reads(&path);
    spindle_row(&mut group, "spindle_wstp_reads", prepare, &rt, program, big);
    let program = || spindle_file_read(&path);
    spindle_row(
        &mut group,
        "spindle_wstp_file_read",
        prepare,
        &rt,
        program,
        big,
    );
    drop(rt);
    let rt = exec_tokio();
    let program = || spindle_reads(&path);
    spindle_row(
        &mut group,
        "spindle_tokio_reads",
        prepare,
        &rt,
        program,
        big,
    );
    let program = || spindle_file_read(&path);
    spindle_row(
        &mut group,
        "spindle_tokio_file_read",
        prepare,
        &rt,
        program,
        big,
    );
    drop(rt);
    let rt = tokio_mt();
    let future = || tokio_read(path.clone());
    tokio_row(&mut group, "tokio_mt", prepare, &rt, future, big);
    group.finish();
    if made.get() {
        let _ = std::fs::remove_file(&path);
    }
}

// ----- writing a big file -----------------------------------------------

/// `File::create` and a loop of `write_all(block)`; the file's length.
fn spindle_write_all(path: &Path, len: u64) -> IO<u64, std::io::Error> {
    fn go(file: File, left: u64) -> IO<(), std::io::Error> {
        if left == 0 {
            return IO::pure(());
        }
        let n = left.min(CHUNK as u64) as usize;
        file.write_all(&BLOCK[..n])
            .flat_map(move |()| go(file, left - n as u64))
    }
    let written = File::create(path).use_with(move |file| go(file, len));
    written.product_r(fs::metadata(path).map(|m| m.len()))
}

/// `fs::writes` of a stream of the blocks; the file's length.
fn spindle_writes(path: &Path, len: u64) -> IO<u64, std::io::Error> {
    let blocks = Stream::unfold_chunk(len, |left| {
        (left > 0).then(|| {
            let n = left.min(CHUNK as u64) as usize;
            (Chunk::from(BLOCK[..n].to_vec()), left - n as u64)
        })
    });
    fs::writes(path, blocks)
        .compile()
        .drain()
        .product_r(fs::metadata(path).map(|m| m.len()))
}

async fn tokio_write(path: PathBuf, len: u64) -> std::io::Result<u64> {
    let mut file = tokio::fs::File::create(&path).await?;
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        file.write_all(&BLOCK[..n]).await?;
        left -= n as u64;
    }
    file.flush().await?;
    drop(file);
    Ok(tokio::fs::metadata(&path).await?.len())
}

fn write_big(c: &mut Criterion) {
    let big = *BIG;
    let path = data_dir().join("written");
    let mut group = c.benchmark_group("Files/write_1GiB_64KiB");
    group.throughput(Throughput::Bytes(big));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let rt = wstp();
    let program = || spindle_write_all(&path, big);
    spindle_row(
        &mut group,
        "spindle_wstp_write_all",
        || {},
        &rt,
        program,
        big,
    );
    let program = || spindle_writes(&path, big);
    spindle_row(&mut group, "spindle_wstp_writes", || {}, &rt, program, big);
    drop(rt);
    let rt = exec_tokio();
    let program = || spindle_write_all(&path, big);
    spindle_row(
        &mut group,
        "spindle_tokio_write_all",
        || {},
        &rt,
        program,
        big,
    );
    drop(rt);
    let rt = tokio_mt();
    let future = || tokio_write(path.clone(), big);
    tokio_row(&mut group, "tokio_mt", || {}, &rt, future, big);
    group.finish();
    let _ = std::fs::remove_file(&path);
}

// ----- reading many small files -----------------------------------------

/// `fs::read` of each path in turn; the bytes read.
fn spindle_small(paths: Arc<Vec<PathBuf>>) -> IO<u64, std::io::Error> {
    fn go(paths: Arc<Vec<PathBuf>>, i: usize, total: u64) -> IO<u64, std::io::Error> {
        match paths.get(i) {
            None => IO::pure(total),
            Some(path) => {
                fs::read(path).flat_map(move |bytes| go(paths, i + 1, total + bytes.len() as u64))
            }
        }
    }
    go(paths, 0, 0)
}

async fn tokio_small(paths: Arc<Vec<PathBuf>>) -> std::io::Result<u64> {
    let mut total = 0u64;
    for path in paths.iter() {
        total += tokio::fs::read(path).await?.len() as u64;
    }
    Ok(total)
}

fn read_small(c: &mut Criterion) {
    let dir = data_dir().join("small");
    let paths: Arc<Vec<PathBuf>> = Arc::new(
        (0..SMALL_FILES)
            .map(|i| dir.join(format!("{i:05}")))
            .collect(),
    );
    let made = Cell::new(false);
    let prepare = || {
        if !made.replace(true) {
            std::fs::create_dir_all(&dir).expect("the small files' directory");
            for path in paths.iter() {
                if !std::fs::metadata(path).is_ok_and(|m| m.len() == SMALL_LEN as u64) {
                    std::fs::write(path, &BLOCK[..SMALL_LEN]).expect("a small file");
                }
            }
        }
    };
    let expected = (SMALL_FILES * SMALL_LEN) as u64;
    let mut group = c.benchmark_group("Files/read_10000_small");
    group.throughput(Throughput::Elements(SMALL_FILES as u64));
    group.sample_size(10);
    let rt = wstp();
    let program = || spindle_small(paths.clone());
    spindle_row(&mut group, "spindle_wstp", prepare, &rt, program, expected);
    drop(rt);
    let rt = exec_tokio();
    let program = || spindle_small(paths.clone());
    spindle_row(&mut group, "spindle_tokio", prepare, &rt, program, expected);
    drop(rt);
    let rt = tokio_mt();
    let future = || tokio_small(paths.clone());
    tokio_row(&mut group, "tokio_mt", prepare, &rt, future, expected);
    group.finish();
    if made.get() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

criterion_group!(benches, read_big, write_big, read_small);
criterion_main!(benches);
