//! TCP echo throughput over one loopback connection: Spindle's sockets
//! (spindle-net) on exec-wstp and exec-batching, against tokio's.
//!
//! One operation sends [`TOTAL`] bytes (4 MiB) to an echo server in writes
//! of [`CHUNK`] bytes (64 KiB) and reads all of them back, the writer and
//! the reader running concurrently (a fiber each, or a task each), so that
//! the connection is full in both directions. Criterion's throughput is
//! [`TOTAL`] bytes per operation: the bytes echoed (each crosses loopback
//! twice). The rows of group `Net/echo_64KiB_writes_4MiB`:
//!
//! * `wstp`: client and server as fibers on one exec-wstp pool of 2
//!   workers (spindle-net on the workers' mio pollers); the client's
//!   `TcpStream` split with `into_split`, the writer and the reader joined
//!   with `IO::both`.
//! * `batching`: the same program on exec-batching's event loop (one
//!   thread: server, writer and reader fibers all on it, readiness from
//!   the loop's poller once per turn).
//! * `tokio_mt`: the same shape in tokio (`tokio::net`, `into_split`, the
//!   writer and the reader as spawned tasks, the echo server a task) on a
//!   multi_thread runtime with 2 workers.
//! * `tokio_current`: the same on a current_thread runtime (the Spindle
//!   event loop's counterpart).
//!
//! The connection is made and the echo server started once per row,
//! outside the timing; one checked round compares every echoed byte
//! before anything is measured. Each timed operation is one `block_on`.
//! Spindle's echo server reads into a fresh `Vec` per read (`read` returns
//! the bytes and `write_all` takes them by value), tokio's into one
//! reused buffer, as each API is written; the client's chunk is shared,
//! not copied, on both sides.
//!
//! Run: `cargo bench -p benches --bench net` (add `-- --quick` for a short
//! run; keep the machine otherwise idle).

use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use benches::succeeded;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use spindle_core::{IO, IORuntime};
use spindle_exec_batching::EventLoop;
use spindle_exec_wstp::net::{ReadHalf, TcpListener, TcpStream, WriteHalf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes of one write (and the most asked of one read).
const CHUNK: usize = 64 * 1024;
/// Bytes echoed per operation.
const TOTAL: usize = 4 * 1024 * 1024;
/// Worker threads of the multi-threaded runtimes.
const WORKERS: usize = 2;

/// The client's chunk, shared between writes (not copied per write).
#[derive(Clone)]
struct Chunk(Arc<[u8]>);

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn chunk() -> Chunk {
    Chunk((0..CHUNK).map(|i| (i % 251) as u8).collect())
}

/// The bytes of one operation's writes, in order: what the checked round
/// must read back.
fn expected() -> Vec<u8> {
    let chunk = chunk();
    chunk.0.iter().copied().cycle().take(TOTAL).collect()
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Runs `io` on `rt` (any Spindle executor: `IORuntime::block_on`) to its
/// value.
fn run<R: IORuntime, A: Send + 'static>(rt: &R, io: IO<A, io::Error>) -> A {
    succeeded(rt.block_on(io).expect("block_on"))
}

/// Reads and writes back until end of stream.
fn echo(stream: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec(stream, |stream| {
        stream.read(CHUNK).flat_map(move |bytes| {
            if bytes.is_empty() {
                IO::pure(ControlFlow::Break(()))
            } else {
                stream
                    .write_all(bytes)
                    .map(move |()| ControlFlow::Continue(stream))
            }
        })
    })
}

/// A connected client and the echo server's end.
fn connect_pair() -> IO<(TcpStream, TcpStream), io::Error> {
    TcpListener::bind(loopback()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            TcpStream::connect(addr)
                .both(listener.accept())
                .map(|(client, (server, _))| (client, server))
        })
    })
}

/// Writes `TOTAL` bytes in `CHUNK`s.
fn spindle_writer(write: Arc<WriteHalf<TcpStream>>, chunk: Chunk) -> IO<(), io::Error> {
    IO::tail_rec(0usize, move |sent| {
        if sent == TOTAL {
            return IO::pure(ControlFlow::Break(()));
        }
        write
            .write_all(chunk.clone())
            .map(move |()| ControlFlow::Continue(sent + CHUNK))
    })
}

/// Reads until `TOTAL` bytes are back; keeps them when `keep`.
fn spindle_reader(read: Arc<ReadHalf<TcpStream>>, keep: bool) -> IO<Vec<u8>, io::Error> {
    let start = (Vec::with_capacity(CHUNK), Vec::new(), 0usize);
    IO::tail_rec(start, move |(mut buf, mut kept, got)| {
        buf.clear();
        read.read_into(buf, CHUNK).flat_map(move |(buf, n)| {
            if n == 0 {
                return IO::raise_error(io::ErrorKind::UnexpectedEof.into());
            }
            if keep {
                kept.extend_from_slice(&buf);
            }
            let got = got + n;
            IO::pure(if got >= TOTAL {
                ControlFlow::Break(kept)
            } else {
                ControlFlow::Continue((buf, kept, got))
            })
        })
    })
}

/// A row on a Spindle executor.
fn spindle_row<R: IORuntime>(c: &mut Criterion, name: &str, rt: R) {
    let (client, server) = run(&rt, connect_pair());
    let _ = rt.spawn(echo(server)).expect("spawn the echo server");
    let (read, write) = client.into_split();
    let (read, write, chunk) = (Arc::new(read), Arc::new(write), chunk());
    let round = |keep: bool| {
        spindle_writer(write.clone(), chunk.clone())
            .both(spindle_reader(read.clone(), keep))
            .map(|((), kept)| kept)
    };
    assert!(
        run(&rt, round(true)) == expected(),
        "{name}: echoed bytes differ"
    );
    let mut group = c.benchmark_group("Net/echo_64KiB_writes_4MiB");
    group.throughput(Throughput::Bytes(TOTAL as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function(name, |b| b.iter(|| run(&rt, round(false))));
    group.finish();
}

fn bench_spindle(c: &mut Criterion) {
    let wstp = spindle_exec_wstp::Runtime::builder()
        .worker_threads(WORKERS)
        .build()
        .expect("exec-wstp runtime");
    spindle_row(c, "wstp", wstp);
    spindle_row(c, "batching", EventLoop::new().expect("exec-batching"));
}

/// A row on a tokio runtime.
fn tokio_row(c: &mut Criterion, name: &str, rt: tokio::runtime::Runtime) {
    let (client, server) = rt
        .block_on(async {
            let listener = tokio::net::TcpListener::bind(loopback()).await?;
            let addr = listener.local_addr()?;
            let (client, accepted) =
                tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
            io::Result::Ok((client?, accepted?.0))
        })
        .expect("a tokio connection");
    rt.spawn(async move {
        let mut server = server;
        let mut buf = vec![0u8; CHUNK];
        loop {
            match server.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if server.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let (read, write) = client.into_split();
    let mut halves = Some((read, write));
    let chunk = chunk();
    let mut round = |keep: bool| -> Vec<u8> {
        let (mut read, mut write) = halves.take().expect("the client's halves");
        let chunk = chunk.clone();
        let (kept, read, write) = rt.block_on(async move {
            let writer = tokio::spawn(async move {
                for _ in 0..TOTAL / CHUNK {
                    write.write_all(chunk.as_ref()).await.expect("write");
                }
                write
            });
            let reader = tokio::spawn(async move {
                let (mut buf, mut kept, mut got) = (vec![0u8; CHUNK], Vec::new(), 0);
                while got < TOTAL {
                    let n = read.read(&mut buf).await.expect("read");
                    assert!(n > 0, "the echo server closed");
                    if keep {
                        kept.extend_from_slice(&buf[..n]);
                    }
                    got += n;
                }
                (kept, read)
            });
            let write = writer.await.expect("the writer");
            let (kept, read) = reader.await.expect("the reader");
            (kept, read, write)
        });
        halves = Some((read, write));
        kept
    };
    assert!(round(true) == expected(), "{name}: echoed bytes differ");
    let mut group = c.benchmark_group("Net/echo_64KiB_writes_4MiB");
    group.throughput(Throughput::Bytes(TOTAL as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function(name, |b| b.iter(|| round(false)));
    group.finish();
}

fn bench_tokio(c: &mut Criterion) {
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio multi_thread");
    tokio_row(c, "tokio_mt", multi);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio current_thread");
    tokio_row(c, "tokio_current", current);
}

criterion_group!(net, bench_spindle, bench_tokio);
criterion_main!(net);
