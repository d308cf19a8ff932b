//! A buffered reader over a stream: [`BufReader`], and the line loops
//! [`for_each_line`](BufReader::for_each_line) and
//! [`for_each_line_timeout`](BufReader::for_each_line_timeout).
//!
//! # The idle timeout of a line loop
//!
//! `for_each_line_timeout(idle, f)` bounds each wait for a line without a
//! timer per line: the loop races one *watchdog* fiber for its whole life
//! (the design of the `line_echo` example's connection watchdog). They
//! share one word, the [`IdleClock`]:
//!
//! * before each line the loop *arms* it with a deadline (`idle` after the
//!   executor's monotonic clock now), and reads;
//! * when a line is complete the loop *claims* it: a compare-exchange from
//!   the deadline to `HANDLING`, and the handler runs;
//! * the watchdog sleeps until the deadline; once the clock has passed it,
//!   it swaps the deadline for `TIMED_OUT` (a compare-exchange) and ends,
//!   which wins the race and cancels the loop, waiting in its read
//!   (cancel-safe: a partial line stays in the reader). While a handler
//!   runs the word is `HANDLING`, which the watchdog never swaps: it
//!   sleeps `idle` and looks again.
//!
//! The claim and the swap are exchanges of the same word from the same
//! deadline, so exactly one succeeds: a handler is never canceled by the
//! idle timeout, and a loop that finds the watchdog ahead of it puts the
//! line it just read back at the front of the buffer and ends with
//! [`LinesEnd::IdleTimeout`] itself (whichever of the two ends first, the
//! outcome is the same and no line is lost). A line costs one read of the
//! clock and one compare-exchange; the loop costs one race (two fiber
//! starts) and a timer per `idle` period.

use std::fmt;
use std::io;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_core::untraced::Untraced as _;
use spindle_core::{Either, IO, Outcome};

use crate::sync::lock;

mod ops {
    use spindle_core::untraced::Op;

    pub(super) static READ_UNTIL: Op = Op::new("BufReader::read_until");
    pub(super) static READ_LINE: Op = Op::new("BufReader::read_line");
    pub(super) static READ: Op = Op::new("BufReader::read");
    pub(super) static FOR_EACH_LINE: Op = Op::new("BufReader::for_each_line");
    pub(super) static FOR_EACH_LINE_TIMEOUT: Op = Op::new("BufReader::for_each_line_timeout");
    pub(super) static READ_LINE_TIMEOUT: Op = Op::new("BufReader::read_line_timeout");
    pub(super) static READ_EXACT: Op = Op::new("BufReader::read_exact");
}

/// The sealed part of [`ReadStream`]: how a reader reads from the stream.
pub(crate) mod sealed {
    use spindle_core::IO;
    use std::io;
    use std::sync::{Arc, Mutex};

    /// What [`BufReader`](super::BufReader) needs of a stream.
    pub trait Sealed {
        /// Appends at most `max` bytes to `shared` inside the call that
        /// reads them (never lost to a cancellation); returns how many (0:
        /// end of stream).
        fn read_shared(&self, shared: Arc<Mutex<Vec<u8>>>, max: usize) -> IO<usize, io::Error>;
    }
}

/// A stream a [`BufReader`] reads from: [`TcpStream`](crate::TcpStream),
/// [`UnixStream`](crate::UnixStream), and the [`ReadHalf`](crate::ReadHalf)
/// of either. Sealed: it cannot be implemented outside this crate.
pub trait ReadStream: sealed::Sealed + Send + Sync + 'static {}

/// The line limit of [`BufReader::new`]: 64 KiB.
pub const DEFAULT_LINE_LIMIT: usize = 64 * 1024;

/// How much a reader asks of its stream at a time.
const CHUNK: usize = 8 * 1024;

/// A buffered reader over a [`ReadStream`], for line-oriented protocols.
///
/// It reads the stream in chunks of up to 8 KiB into a buffer and hands
/// out lines (or pieces ending in any byte) from it. Reads from the reader
/// and from the stream itself must not be mixed: bytes already in the
/// buffer would be skipped. Writes go to the stream directly
/// ([`get_ref`](BufReader::get_ref)).
///
/// # Line limit
///
/// A line (with its delimiter) may be at most the reader's *limit* bytes
/// ([`DEFAULT_LINE_LIMIT`], or [`with_limit`](BufReader::with_limit)): once
/// that many bytes are buffered without a delimiter among them, the read
/// fails with an error of kind `InvalidData` naming the limit, so a peer
/// that never sends a delimiter cannot make the reader grow without bound
/// (the buffer holds at most the limit plus one chunk). The bytes stay in
/// the buffer: every later line read fails the same way, and the
/// connection is best closed.
///
/// # Cancellation
///
/// Bytes are moved from the stream into the buffer inside the non-blocking
/// call that reads them, and taken out of the buffer only when a read
/// completes with them. So a read canceled while it waits (a `timeout`, a
/// lost `race`) leaves every byte it had read in the reader: the next read
/// starts with them, and a line that arrived in parts is returned whole.
///
/// # Concurrency
///
/// The reader shares its buffer with the `IO` values built from it (they
/// may outlive a borrow of the reader). Run one read at a time: two
/// concurrent reads of one reader take lines in an unspecified order.
///
/// ```
/// use spindle_effect::net::{BufReader, TcpListener, TcpStream};
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let rt = Runtime::new()?;
/// let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
///     listener.local_addr().flat_map(move |addr| {
///         let server = listener
///             .accept()
///             .flat_map(|(stream, _)| stream.write_all(b"one\ntwo\n").product_r(IO::pure(stream)));
///         let client = TcpStream::connect(addr).flat_map(|stream| {
///             let reader = BufReader::new(stream);
///             reader.read_line().flat_map(move |one| reader.read_line().map(move |two| (one, two)))
///         });
///         server.both(client).map(|(_stream, lines)| lines)
///     })
/// });
/// let (one, two) = rt.block_on(program)?.succeeded().unwrap();
/// assert_eq!(one.as_deref(), Some("one\n"));
/// assert_eq!(two.as_deref(), Some("two\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BufReader<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    stream: S,
    buffer: Arc<Mutex<Vec<u8>>>,
    limit: usize,
}

impl<S: fmt::Debug> fmt::Debug for BufReader<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufReader")
            .field("stream", &self.inner.stream)
            .field("buffered", &lock(&self.inner.buffer).len())
            .field("limit", &self.inner.limit)
            .finish()
    }
}

fn too_long(limit: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("spindle-net: a line is longer than the limit of {limit} bytes"),
    )
}

impl<S: ReadStream> BufReader<S> {
    /// A reader over `stream` with lines of at most [`DEFAULT_LINE_LIMIT`]
    /// bytes.
    pub fn new(stream: S) -> BufReader<S> {
        BufReader::with_limit(stream, DEFAULT_LINE_LIMIT)
    }

    /// A reader over `stream` with lines of at most `limit` bytes, the
    /// delimiter included (a `limit` of 0 is taken as 1).
    pub fn with_limit(stream: S, limit: usize) -> BufReader<S> {
        BufReader {
            inner: Arc::new(Inner {
                stream,
                buffer: Arc::new(Mutex::new(Vec::new())),
                limit: limit.max(1),
            }),
        }
    }

    /// The stream (to write to it, or read its addresses).
    pub fn get_ref(&self) -> &S {
        &self.inner.stream
    }

    /// The line limit, in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// How many bytes are buffered (read from the stream, not yet handed
    /// out).
    pub fn buffered(&self) -> usize {
        lock(&self.inner.buffer).len()
    }

    /// Reads up to and including the next `byte`, waiting for the stream as
    /// long as needed. At end of stream it returns what is left without a
    /// delimiter, and an empty vector once nothing is left. A piece longer
    /// than the [limit](BufReader#line-limit) is an `InvalidData` error.
    #[track_caller]
    pub fn read_until(&self, byte: u8) -> IO<Vec<u8>, io::Error> {
        self.read_until_untraced(byte).traced_as(&ops::READ_UNTIL)
    }

    fn read_until_untraced(&self, byte: u8) -> IO<Vec<u8>, io::Error> {
        let inner = self.inner.clone();
        // The state: how much of the buffer has been searched already.
        IO::tail_rec_untraced(0usize, move |searched| {
            let mut buf = lock(&inner.buffer);
            let window = buf.len().min(inner.limit);
            let from = searched.min(window);
            if let Some(i) = buf[from..window].iter().position(|&b| b == byte) {
                let piece: Vec<u8> = buf.drain(..from + i + 1).collect();
                return IO::pure(ControlFlow::Break(piece));
            }
            if buf.len() >= inner.limit {
                return IO::raise_error_untraced(too_long(inner.limit));
            }
            drop(buf);
            let shared = inner.buffer.clone();
            let at_end = inner.buffer.clone();
            inner
                .stream
                .read_shared(shared, CHUNK)
                .map_untraced(move |n| {
                    if n == 0 {
                        // End of stream: what is left has no delimiter and
                        // is shorter than the limit (checked above).
                        ControlFlow::Break(std::mem::take(&mut *lock(&at_end)))
                    } else {
                        ControlFlow::Continue(window)
                    }
                })
        })
    }

    /// Reads the next line, up to and including its `\n` (as std's
    /// `BufRead::read_line`; a last line without one is returned as it is).
    /// `None` at end of stream. A line that is not UTF-8 is an error of
    /// kind `InvalidData` (its bytes are consumed); a line longer than the
    /// [limit](BufReader#line-limit) is an `InvalidData` error too.
    #[track_caller]
    pub fn read_line(&self) -> IO<Option<String>, io::Error> {
        self.read_line_untraced().traced_as(&ops::READ_LINE)
    }

    fn read_line_untraced(&self) -> IO<Option<String>, io::Error> {
        self.read_until_untraced(b'\n').flat_map_untraced(|bytes| {
            if bytes.is_empty() {
                return IO::pure(None);
            }
            match String::from_utf8(bytes) {
                Ok(line) => IO::pure(Some(line)),
                Err(e) => IO::raise_error_untraced(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        })
    }

    /// [`read_line`](BufReader::read_line) within `timeout`: when no
    /// complete line has arrived by then, the read is canceled and fails
    /// with an error of kind `TimedOut` (whose inner error is
    /// `spindle_effect::error::TimeoutError`, naming the duration). The
    /// reader stays usable: the part of a line read before the deadline
    /// stays buffered, and the next read returns the line whole (see
    /// [Cancellation](BufReader#cancellation)).
    ///
    /// Each call runs the read on a fiber of its own (`IO::timeout`); for
    /// a loop over many lines, [`for_each_line_timeout`](BufReader::for_each_line_timeout)
    /// costs less.
    #[track_caller]
    pub fn read_line_timeout(&self, timeout: Duration) -> IO<Option<String>, io::Error> {
        self.read_line_untraced()
            .timeout(timeout)
            .traced_as(&ops::READ_LINE_TIMEOUT)
    }

    /// Puts `bytes` back at the front of the buffer (a line the idle loop
    /// read but may not hand out).
    fn unread(&self, bytes: Vec<u8>) {
        let mut buf = lock(&self.inner.buffer);
        buf.splice(0..0, bytes);
    }

    /// Reads at most `max` bytes: from the buffer if it has any, else from
    /// the stream (one read, waiting until some bytes are available). An
    /// empty vector means end of stream (or `max` was 0).
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        let inner = self.inner.clone();
        let take = move |inner: &Inner<S>| {
            let mut buf = lock(&inner.buffer);
            let n = buf.len().min(max);
            buf.drain(..n).collect::<Vec<u8>>()
        };
        IO::defer_untraced(move || {
            if max == 0 || !lock(&inner.buffer).is_empty() {
                return IO::pure(take(&inner));
            }
            let shared = inner.buffer.clone();
            inner
                .stream
                .read_shared(shared, max.min(CHUNK))
                .map_untraced(move |_| take(&inner))
        })
        .traced_as(&ops::READ)
    }

    /// Reads exactly `len` bytes: from the buffer, then from the stream as
    /// often as needed. End of stream before them is an error of kind
    /// `UnexpectedEof` (the bytes stay buffered). Canceled midway, every
    /// byte read stays in the reader (see
    /// [Cancellation](BufReader#cancellation)): the next read starts with
    /// them.
    #[track_caller]
    pub fn read_exact(&self, len: usize) -> IO<Vec<u8>, io::Error> {
        let inner = self.inner.clone();
        IO::tail_rec_untraced((), move |()| {
            let mut buf = lock(&inner.buffer);
            if buf.len() >= len {
                let bytes: Vec<u8> = buf.drain(..len).collect();
                return IO::pure(ControlFlow::Break(bytes));
            }
            let have = buf.len();
            drop(buf);
            inner
                .stream
                .read_shared(inner.buffer.clone(), CHUNK)
                .flat_map_untraced(move |n| {
                    if n == 0 {
                        IO::raise_error_untraced(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("spindle-net: end of stream after {have} of {len} bytes"),
                        ))
                    } else {
                        IO::pure(ControlFlow::Continue(()))
                    }
                })
        })
        .traced_as(&ops::READ_EXACT)
    }

    /// The line-framed read loop: reads line after line and runs `handle`
    /// on each (as [`read_line`](BufReader::read_line) returns it, with its
    /// `\n`), until the end of the stream or until `handle` returns
    /// `ControlFlow::Break`; returns how many lines were handled.
    ///
    /// A line is read only once the handler of the one before has ended,
    /// so a handler that writes a reply answers each line in order (a
    /// line-echo server is one call). An error of a read (a line over the
    /// limit, invalid UTF-8, a reset) or of a handler ends the loop with
    /// that error; canceling it keeps a partly read line in the reader
    /// (see [Cancellation](BufReader#cancellation)).
    ///
    /// ```
    /// use std::ops::ControlFlow;
    ///
    /// use spindle_effect::net::{BufReader, TcpListener, TcpStream};
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let rt = Runtime::new()?;
    /// let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
    ///     listener.local_addr().flat_map(move |addr| {
    ///         // The server echoes each line in capitals, until "bye".
    ///         let server = listener.accept().flat_map(|(stream, _)| {
    ///             let (read, write) = stream.into_split();
    ///             BufReader::new(read).for_each_line(move |line| {
    ///                 if line.trim_end() == "bye" {
    ///                     return IO::pure(ControlFlow::Break(()));
    ///                 }
    ///                 write.write_all(line.to_uppercase()).map(|()| ControlFlow::Continue(()))
    ///             })
    ///         });
    ///         let client = TcpStream::connect(addr).flat_map(|stream| {
    ///             let reader = BufReader::new(stream);
    ///             let ask = reader.get_ref().write_all(b"one\ntwo\nbye\n");
    ///             ask.product_r(reader.read_line().flat_map(move |one| {
    ///                 reader.read_line().map(move |two| (one, two))
    ///             }))
    ///         });
    ///         server.both(client)
    ///     })
    /// });
    /// let (handled, (one, two)) = rt.block_on(program)?.succeeded().unwrap();
    /// assert_eq!(handled, 2);
    /// assert_eq!((one.as_deref(), two.as_deref()), (Some("ONE\n"), Some("TWO\n")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn for_each_line<F>(&self, handle: F) -> IO<u64, io::Error>
    where
        F: FnMut(String) -> IO<ControlFlow<()>, io::Error> + Send + 'static,
    {
        let reader = BufReader {
            inner: self.inner.clone(),
        };
        IO::tail_rec_untraced((0u64, handle), move |(handled, mut handle)| {
            reader
                .read_line_untraced()
                .flat_map_untraced(move |line| match line {
                    None => IO::pure(ControlFlow::Break(handled)),
                    Some(line) => handle(line).map_untraced(move |flow| match flow {
                        ControlFlow::Continue(()) => ControlFlow::Continue((handled + 1, handle)),
                        ControlFlow::Break(()) => ControlFlow::Break(handled),
                    }),
                })
        })
        .traced_as(&ops::FOR_EACH_LINE)
    }

    /// [`for_each_line`](BufReader::for_each_line) with an idle timeout:
    /// when no complete line arrives within `idle`, the loop ends with
    /// [`LinesEnd::IdleTimeout`], a value the caller tells apart from the
    /// other ends ([`EndOfStream`](LinesEnd::EndOfStream), the peer closed
    /// its side; [`Stopped`](LinesEnd::Stopped), the handler returned
    /// `ControlFlow::Break`). Errors end the loop as in `for_each_line`.
    ///
    /// The idle clock runs while the loop waits for a line: from the start,
    /// and again each time a handler ends, until the line is complete.
    /// Bytes that trickle in without a `\n` do not reset it (a peer that
    /// sends a byte a second is idle). A handler's own time is not counted,
    /// and a handler is never canceled by the idle timeout (wrap it in
    /// `timeout` to bound it).
    ///
    /// After an idle timeout the reader and its stream stay open and
    /// usable: a line that was partly read stays buffered, and the next
    /// read returns it whole. To close the connection, drop the reader
    /// (and the stream's other handles), or shut the write side down
    /// after a goodbye. It costs one read of the executor's clock per line,
    /// and per loop one race (two fiber starts) with a watchdog fiber that
    /// sleeps on a timer once per idle period.
    ///
    /// The handler runs on a fiber of the loop's own (the loop races its
    /// watchdog); a handler that cancels itself cancels the caller, as in
    /// `for_each_line`.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    ///
    /// use spindle_effect::net::{BufReader, LinesEnd, TcpListener, TcpStream};
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let rt = Runtime::new()?;
    /// let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
    ///     listener.local_addr().flat_map(move |addr| {
    ///         // The server echoes lines until the client stays silent for 50 ms.
    ///         let server = listener.accept().flat_map(|(stream, _)| {
    ///             let (read, write) = stream.into_split();
    ///             let idle = Duration::from_millis(50);
    ///             BufReader::new(read).for_each_line_timeout(idle, move |line| {
    ///                 write.write_all(line).map(|()| ControlFlow::Continue(()))
    ///             })
    ///         });
    ///         let client = TcpStream::connect(addr).flat_map(|stream| {
    ///             let reader = BufReader::new(stream);
    ///             // One line, then silence (the stream stays open).
    ///             reader.get_ref().write_all(b"ping\n").product_r(reader.read_line())
    ///                 .map(move |echo| (echo, reader))
    ///         });
    ///         server.both(client).map(|(end, (echo, _reader))| (end, echo))
    ///     })
    /// });
    /// let (end, echo) = rt.block_on(program)?.succeeded().unwrap();
    /// assert_eq!(echo.as_deref(), Some("ping\n"));
    /// assert_eq!(end, LinesEnd::IdleTimeout { handled: 1, idle: Duration::from_millis(50) });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn for_each_line_timeout<F>(&self, idle: Duration, handle: F) -> IO<LinesEnd, io::Error>
    where
        F: FnMut(String) -> IO<ControlFlow<()>, io::Error> + Send + 'static,
    {
        let clock = Arc::new(IdleClock::new());
        let reader = BufReader {
            inner: self.inner.clone(),
        };
        let lines_clock = clock.clone();
        let lines = IO::tail_rec_untraced(handle, move |mut handle| {
            let (clock, reader) = (
                lines_clock.clone(),
                BufReader {
                    inner: reader.inner.clone(),
                },
            );
            IO::monotonic().flat_map_untraced(move |now| {
                clock.arm(now, idle);
                reader
                    .read_line_untraced()
                    .flat_map_untraced(move |line| match line {
                        None => IO::pure(ControlFlow::Break(LinesEnd::EndOfStream {
                            handled: clock.handled(),
                        })),
                        Some(line) => {
                            if !clock.claim() {
                                // The watchdog is ahead: the line stays
                                // for the next read (module doc).
                                reader.unread(line.into_bytes());
                                return IO::pure(ControlFlow::Break(LinesEnd::IdleTimeout {
                                    handled: clock.handled(),
                                    idle,
                                }));
                            }
                            handle(line).map_untraced(move |flow| match flow {
                                ControlFlow::Continue(()) => {
                                    clock.count();
                                    ControlFlow::Continue(handle)
                                }
                                ControlFlow::Break(()) => ControlFlow::Break(LinesEnd::Stopped {
                                    handled: clock.handled(),
                                }),
                            })
                        }
                    })
            })
        });
        let timed_out = clock.clone();
        lines
            .race_outcome(watchdog(clock, idle))
            .flat_map_untraced(move |first| match first {
                Either::Left(outcome) => rejoin(outcome),
                Either::Right(outcome) => rejoin(outcome.map(move |()| LinesEnd::IdleTimeout {
                    handled: timed_out.handled(),
                    idle,
                })),
            })
            .traced_as(&ops::FOR_EACH_LINE_TIMEOUT)
    }
}

/// The program of an outcome of the line loop's race: its value or error,
/// its panic raised again, and a cancellation (the handler canceled
/// itself) as the caller's own.
fn rejoin(outcome: Outcome<LinesEnd, io::Error>) -> IO<LinesEnd, io::Error> {
    outcome.embed(IO::canceled().flat_map_untraced(|()| IO::never()))
}

/// How a [`BufReader::for_each_line_timeout`] loop ended, with how many
/// lines it handled (lines whose handler returned `Continue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinesEnd {
    /// The peer closed its side, and every line was handled.
    EndOfStream {
        /// Lines handled.
        handled: u64,
    },
    /// The handler returned `ControlFlow::Break` (that line is not
    /// counted).
    Stopped {
        /// Lines handled.
        handled: u64,
    },
    /// No complete line arrived within `idle`; the reader and its stream
    /// are still open (a partial line stays buffered).
    IdleTimeout {
        /// Lines handled.
        handled: u64,
        /// The idle timeout the loop was given.
        idle: Duration,
    },
}

impl LinesEnd {
    /// Lines handled before the loop ended.
    pub fn handled(&self) -> u64 {
        match *self {
            LinesEnd::EndOfStream { handled }
            | LinesEnd::Stopped { handled }
            | LinesEnd::IdleTimeout { handled, .. } => handled,
        }
    }

    /// Whether the loop ended by its idle timeout.
    pub fn is_idle_timeout(&self) -> bool {
        matches!(self, LinesEnd::IdleTimeout { .. })
    }
}

/// The word a line loop and its watchdog share (module documentation).
struct IdleClock {
    /// A deadline (nanoseconds of the executor's monotonic clock), or
    /// [`HANDLING`], or [`TIMED_OUT`].
    word: AtomicU64,
    /// Lines handled (written by the loop only).
    handled: AtomicU64,
}

/// A handler runs: no deadline.
const HANDLING: u64 = u64::MAX;
/// The watchdog took the deadline: the loop ends.
const TIMED_OUT: u64 = u64::MAX - 1;
/// The latest deadline a word can hold.
const LATEST: u64 = TIMED_OUT - 1;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl IdleClock {
    fn new() -> IdleClock {
        IdleClock {
            word: AtomicU64::new(HANDLING),
            handled: AtomicU64::new(0),
        }
    }

    /// The loop, before it reads a line (the word is `HANDLING`: only the
    /// loop leaves that state).
    fn arm(&self, now: Duration, idle: Duration) {
        let at = nanos(now).saturating_add(nanos(idle)).min(LATEST);
        self.word.store(at, Ordering::SeqCst);
    }

    /// The loop, with a complete line: true if it may hand it out (the
    /// watchdog has not taken the deadline).
    fn claim(&self) -> bool {
        let at = self.word.load(Ordering::SeqCst);
        at <= LATEST
            && self
                .word
                .compare_exchange(at, HANDLING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// The watchdog at `now`: `Ok(())` if it took the deadline (the loop
    /// is over), else how long to sleep before it looks again.
    fn expire(&self, now: Duration, idle: Duration) -> Result<(), Duration> {
        let at = self.word.load(Ordering::SeqCst);
        if at == HANDLING {
            return Err(idle);
        }
        if at == TIMED_OUT {
            return Ok(());
        }
        let now = nanos(now);
        if now < at {
            return Err(Duration::from_nanos(at - now));
        }
        match self
            .word
            .compare_exchange(at, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => Ok(()),
            // The loop claimed a line (or armed anew) meanwhile: look again.
            Err(_) => Err(Duration::ZERO),
        }
    }

    fn count(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }

    fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }
}

/// Ends once it has taken the loop's deadline (module documentation).
fn watchdog(clock: Arc<IdleClock>, idle: Duration) -> IO<(), io::Error> {
    IO::tail_rec_untraced((), move |()| {
        let clock = clock.clone();
        IO::monotonic().flat_map_untraced(move |now| match clock.expire(now, idle) {
            Ok(()) => IO::pure(ControlFlow::Break(())),
            Err(wait) if wait.is_zero() => IO::pure(ControlFlow::Continue(())),
            Err(wait) => IO::sleep(wait).map_untraced(|()| ControlFlow::Continue(())),
        })
    })
}
