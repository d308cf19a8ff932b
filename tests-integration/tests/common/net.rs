//! What the socket suites (`net_*.rs`) share: loopback addresses, the hang
//! limit, running a socket program to its value or its error, stream
//! helpers (read to end, echo, an echo server and client, messages),
//! temporary directories for Unix sockets, and the ways a test waits until
//! a fiber waits for a socket.
//!
//! # Waiting until a fiber waits
//!
//! Some tests must act (close a peer, complete a callback) only once a
//! fiber is suspended on a socket, so that they test the wake-up and not a
//! call that finds its result at once. They never sleep for that:
//!
//! * where the executor counts its I/O waiters ([`IoProbe`]), they wait
//!   until the count says the fiber waits;
//! * where it does not (exec-tokio: the readiness is tokio's), the fiber
//!   sets a flag (or completes a `Deferred`) right before it waits, and
//!   the test waits for that: the fiber is then waiting or about to, and
//!   each such test asserts only what holds in both cases (the outcome of
//!   the wait), so that it is as strict as the executor allows.
//!
//! Every wait is bounded (by [`HANG`] or a count of cedes) and fails the
//! test when it runs out.

#![allow(dead_code)]

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use spindle_core::{IO, Outcome};
use spindle_net::{ReadHalf, Split, TcpListener, TcpStream, UnixStream, WriteHalf};

use super::{IoProbe, TestRuntime};

/// How long a test program may take before it is failed (a hang limit, not
/// a performance assertion).
pub const HANG: Duration = Duration::from_secs(20);

/// 127.0.0.1 with a port the system picks.
pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `program` on `rt` within [`HANG`]; its value (a failure, a
/// cancellation or a panic fails the test).
pub fn succeeded<R: TestRuntime, A: Send + 'static>(rt: &R, program: IO<A, io::Error>) -> A {
    match rt.run(program.timeout(HANG)) {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("the program failed: {e} ({:?})", e.kind()),
        Outcome::Canceled => panic!("the program was canceled"),
        Outcome::Panicked(p) => panic!("the program panicked: {p:?}"),
    }
}

/// Runs `program` on `rt` within [`HANG`]; its error, which must not be
/// the hang limit's.
pub fn failed<R: TestRuntime, A: Send + 'static>(rt: &R, program: IO<A, io::Error>) -> io::Error {
    let error = rt
        .run(program.timeout(HANG))
        .errored()
        .expect("the program fails with an error value");
    assert_ne!(
        error.kind(),
        io::ErrorKind::TimedOut,
        "the program hung until the hang limit: {error}"
    );
    error
}

/// Asserts that `rt` has no socket registered and no fiber waiting for one,
/// where it counts them.
pub fn assert_nothing_registered<R: TestRuntime>(rt: &R) {
    if let Some(counts) = rt.io_probe().counts() {
        assert_eq!(counts.waiters, 0, "fibers still wait for sockets");
        if let Some(sources) = counts.sources {
            assert_eq!(sources, 0, "sockets are still registered");
        }
    }
}

/// `None`, or `Some(expected)`: what a count read through an [`IoProbe`]
/// must be (exec-tokio counts nothing).
pub fn counted_as(got: Option<usize>, expected: usize) -> bool {
    got.is_none_or(|got| got == expected)
}

/// Reading bytes, the same on every stream type.
pub trait ReadBytes: Send + Sync + 'static {
    /// Appends at most `max` bytes to `buf` (the streams' `read_into`).
    fn read_bytes_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error>;
}

/// Writing bytes, the same on every stream type.
pub trait WriteBytes: Send + Sync + 'static {
    /// Writes all of `data` (the streams' `write_all`).
    fn write_bytes(&self, data: Vec<u8>) -> IO<(), io::Error>;
    /// Shuts the write side down (the peer reads end of stream).
    fn shutdown_write(&self) -> IO<(), io::Error>;
}

impl ReadBytes for TcpStream {
    fn read_bytes_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        TcpStream::read_into(self, buf, max)
    }
}

impl ReadBytes for UnixStream {
    fn read_bytes_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        UnixStream::read_into(self, buf, max)
    }
}

impl<S: Split> ReadBytes for ReadHalf<S> {
    fn read_bytes_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        ReadHalf::read_into(self, buf, max)
    }
}

impl WriteBytes for TcpStream {
    fn write_bytes(&self, data: Vec<u8>) -> IO<(), io::Error> {
        TcpStream::write_all(self, data)
    }
    fn shutdown_write(&self) -> IO<(), io::Error> {
        self.shutdown(Shutdown::Write)
    }
}

impl WriteBytes for UnixStream {
    fn write_bytes(&self, data: Vec<u8>) -> IO<(), io::Error> {
        UnixStream::write_all(self, data)
    }
    fn shutdown_write(&self) -> IO<(), io::Error> {
        self.shutdown(Shutdown::Write)
    }
}

impl<S: Split> WriteBytes for WriteHalf<S> {
    fn write_bytes(&self, data: Vec<u8>) -> IO<(), io::Error> {
        WriteHalf::write_all(self, data)
    }
    fn shutdown_write(&self) -> IO<(), io::Error> {
        self.shutdown()
    }
}

impl<T: ReadBytes> ReadBytes for Arc<T> {
    fn read_bytes_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        T::read_bytes_into(self, buf, max)
    }
}

impl<T: WriteBytes> WriteBytes for Arc<T> {
    fn write_bytes(&self, data: Vec<u8>) -> IO<(), io::Error> {
        T::write_bytes(self, data)
    }
    fn shutdown_write(&self) -> IO<(), io::Error> {
        T::shutdown_write(self)
    }
}

/// Reads until end of stream.
pub fn read_to_end<S: ReadBytes>(stream: S) -> IO<Vec<u8>, io::Error> {
    IO::tail_rec((stream, Vec::new()), |(stream, buf)| {
        stream.read_bytes_into(buf, 64 * 1024).map(move |(buf, n)| {
            if n == 0 {
                ControlFlow::Break(buf)
            } else {
                ControlFlow::Continue((stream, buf))
            }
        })
    })
}

/// Writes back what it reads, until end of stream (then drops the stream,
/// which closes it).
pub fn echo<S: ReadBytes + WriteBytes>(stream: S) -> IO<(), io::Error> {
    IO::tail_rec(stream, |stream| {
        stream
            .read_bytes_into(Vec::new(), 16 * 1024)
            .flat_map(move |(bytes, n)| {
                if n == 0 {
                    IO::pure(ControlFlow::Break(()))
                } else {
                    let written = stream.write_bytes(bytes);
                    written.map(move |()| ControlFlow::Continue(stream))
                }
            })
    })
}

/// Accepts forever, one echo fiber per connection.
pub fn echo_server(listener: TcpListener) -> IO<(), io::Error> {
    IO::forever(move || {
        listener
            .accept()
            .flat_map(|(stream, _)| echo(stream).attempt().start())
    })
    .void()
}

/// Sends `message` on `stream` and shuts its write side down, while it
/// reads the echo (both at once, so that neither side's buffers fill);
/// returns what came back.
pub fn exchange<S: ReadBytes + WriteBytes>(stream: S, message: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    let stream = Arc::new(stream);
    let send = stream
        .write_bytes(message)
        .product_r(stream.shutdown_write());
    send.both(read_to_end(stream)).map(|((), echoed)| echoed)
}

/// Connects, sends `message` while reading the echo, and returns what came
/// back.
pub fn echo_client(addr: SocketAddr, message: Vec<u8>) -> IO<Vec<u8>, io::Error> {
    TcpStream::connect(addr).flat_map(move |stream| exchange(stream, message))
}

/// A connected TCP pair on 127.0.0.1: (the accepted end, the connecting
/// end).
pub fn tcp_pair() -> IO<(TcpStream, TcpStream), io::Error> {
    TcpListener::bind(localhost()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            listener
                .accept()
                .both(TcpStream::connect(addr))
                .map(|((server, _), client)| (server, client))
        })
    })
}

/// A message of `len` bytes that differ by position and client.
pub fn message(client: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + client * 7) as u8).collect()
}

/// A fresh directory for one test's socket files, removed when dropped.
/// Named by the test and its executor module, so that the stamped copies
/// of one test never share a path.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory for the test `test` (pass `module_path!()`
    /// and the test's name).
    pub fn new(module: &str, test: &str) -> TempDir {
        let module = module.replace("::", "-");
        let dir = std::env::temp_dir().join(format!(
            "spindle-net-{}-{module}-{test}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make a temporary directory");
        TempDir(dir)
    }

    /// The path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// On a thread: spins (yielding) until `done` holds; fails the test after
/// [`HANG`].
pub fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < HANG, "gave up waiting for {what}");
        std::thread::yield_now();
    }
}

/// On a thread: waits until a fiber has set `armed` right before it waits
/// for a socket and, where the executor counts its waiters, until `waiters`
/// fibers wait (see the [module documentation](self)). Bounded by
/// [`HANG`].
pub fn wait_until_waiting(armed: &AtomicBool, probe: &IoProbe, waiters: usize) {
    wait_for("the fiber to wait for its socket", || {
        armed.load(Ordering::SeqCst) && probe.waiters().is_none_or(|now| now == waiters)
    });
}

/// A program that cedes until `waiters` fibers wait for a socket, where the
/// executor counts them (at once where it does not); fails after 100,000
/// cedes.
pub fn until_io_waiters(probe: IoProbe, waiters: usize) -> IO<(), io::Error> {
    const MAX_CEDES: u32 = 100_000;
    IO::tail_rec(0u32, move |ceded| {
        let now = probe.waiters();
        if now.is_none_or(|now| now == waiters) {
            IO::pure(ControlFlow::Break(()))
        } else if ceded == MAX_CEDES {
            IO::raise_error(io::Error::other(format!(
                "still {now:?} I/O waiters after {MAX_CEDES} cedes (expected {waiters})"
            )))
        } else {
            IO::cede().map_to(ControlFlow::Continue(ceded + 1))
        }
    })
}
