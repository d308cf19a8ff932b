//! A buffered reader over a stream: [`BufReader`].

use std::fmt;
use std::io;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::sync::lock;

mod ops {
    use spindle_core::untraced::Op;

    pub(super) static READ_UNTIL: Op = Op::new("BufReader::read_until");
    pub(super) static READ_LINE: Op = Op::new("BufReader::read_line");
    pub(super) static READ: Op = Op::new("BufReader::read");
    pub(super) static FOR_EACH_LINE: Op = Op::new("BufReader::for_each_line");
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
                return IO::raise_error(too_long(inner.limit));
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
                Err(e) => IO::raise_error(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        })
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
                        IO::raise_error(io::Error::new(
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
}
