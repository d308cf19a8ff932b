//! What the byte streams share: the operations of [`TcpStream`] and
//! [`UnixStream`], written once over [`StreamIo`] (so TCP and Unix streams
//! have the same semantics by construction), and the halves a stream
//! splits into ([`ReadHalf`], [`WriteHalf`]).
//!
//! [`TcpStream`]: crate::TcpStream
//! [`UnixStream`]: crate::UnixStream

use std::fmt;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::buffered::{ReadStream, sealed::Sealed as ReadShared};
use crate::driver::Direction;
use crate::source::{Source, on, retry, retry_exclusive, retry_reads};
use crate::sync::lock;

/// A connected byte stream's non-blocking calls (a TCP stream, system or
/// virtual, and std's `UnixStream`). Public in a private module:
/// unreachable from outside.
pub trait StreamIo: Send + Sync + 'static {
    /// One non-blocking read: appends at most `max` bytes to `buf`; how
    /// many (0: end of stream). On error `buf` is unchanged.
    fn append(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize>;
    /// One non-blocking write.
    fn write_some(&self, buf: &[u8]) -> io::Result<usize>;
    /// `shutdown(2)`.
    fn shutdown_io(&self, how: Shutdown) -> io::Result<()>;
}

impl StreamIo for std::os::unix::net::UnixStream {
    fn append(&self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        append_from(self, buf, max)
    }
    fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn shutdown_io(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

/// Appends at most `max` bytes read from `socket` to `buf`, into its spare
/// capacity (never zeroed first: `recv(2)` writes what it reads); how many
/// (0: end of stream). On error `buf` is unchanged.
pub(crate) fn append_from(socket: &impl AsFd, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    buf.reserve(max);
    let start = buf.len();
    let spare = &mut buf.spare_capacity_mut()[..max];
    let n = socket2::SockRef::from(socket).recv(spare)?;
    // SAFETY: `recv` initialised the first `n` bytes of `spare` (socket2's
    // contract, `n <= spare.len()`), which are the `n` bytes of `buf`'s
    // capacity right after its `start` initialised ones; `reserve` made
    // room for them.
    unsafe { buf.set_len(start + n) };
    Ok(n)
}

/// Appends at most `max` bytes to `buf` (see `TcpStream::read_into`).
pub(crate) fn read_into<T: StreamIo>(
    source: &Arc<Source<T>>,
    buf: Vec<u8>,
    max: usize,
) -> IO<(Vec<u8>, usize), io::Error> {
    retry_reads(
        source,
        Direction::Read,
        buf,
        move |socket, mut buf| match socket.append(&mut buf, max) {
            // Fewer bytes than asked for (not 0: end of stream stays
            // readable): the receive buffer is drained.
            Ok(n) => Ok(((buf, n), n > 0 && n < max)),
            Err(e) => Err((buf, e)),
        },
    )
}

/// Reads exactly `len` bytes (see `TcpStream::read_exact`): end of stream
/// before them is an `UnexpectedEof` error.
pub(crate) fn read_exact<T: StreamIo>(
    source: &Arc<Source<T>>,
    len: usize,
) -> IO<Vec<u8>, io::Error> {
    retry(
        source,
        Direction::Read,
        Vec::with_capacity(len),
        move |socket, mut buf| loop {
            let filled = buf.len();
            if filled == len {
                return Ok(buf);
            }
            match socket.append(&mut buf, len - filled) {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("spindle-net: end of stream after {filled} of {len} bytes"),
                    );
                    return Err((buf, e));
                }
                Ok(_) => {}
                Err(e) => return Err((buf, e)),
            }
        },
    )
}

/// Appends at most `max` bytes to the shared buffer `shared`, inside the
/// call that reads them: bytes are either still in the kernel or in
/// `shared`, whenever the fiber is canceled (the guarantee of
/// `BufReader`). Returns the number read (0: end of stream).
pub(crate) fn read_shared<T: StreamIo>(
    source: &Arc<Source<T>>,
    shared: Arc<Mutex<Vec<u8>>>,
    max: usize,
) -> IO<usize, io::Error> {
    retry_reads(source, Direction::Read, (), move |socket, ()| {
        let mut buf = lock(&shared);
        match socket.append(&mut buf, max) {
            Ok(n) => Ok((n, n > 0 && n < max)),
            Err(e) => Err(((), e)),
        }
    })
}

/// Writes some of `data` (see `TcpStream::write`), holding the socket's
/// write turn.
pub(crate) fn write<T, B>(source: &Arc<Source<T>>, data: B) -> IO<usize, io::Error>
where
    T: StreamIo,
    B: AsRef<[u8]> + Send + 'static,
{
    retry_exclusive(source, Direction::Write, data, |socket, data| {
        socket.write_some(data.as_ref()).map_err(|e| (data, e))
    })
}

/// Writes all of `data` (see `TcpStream::write_all`), holding the
/// socket's write turn from the first byte to the last: no other write of
/// the socket comes in between.
pub(crate) fn write_all<T, B>(source: &Arc<Source<T>>, data: B) -> IO<(), io::Error>
where
    T: StreamIo,
    B: AsRef<[u8]> + Send + 'static,
{
    retry_exclusive(
        source,
        Direction::Write,
        (data, 0usize),
        |socket, (data, mut written)| loop {
            let rest = &data.as_ref()[written..];
            if rest.is_empty() {
                return Ok(());
            }
            match socket.write_some(rest) {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::WriteZero,
                        "spindle-net: the socket accepted no more bytes",
                    );
                    return Err(((data, written), e));
                }
                Ok(n) => written += n,
                Err(e) => return Err(((data, written), e)),
            }
        },
    )
}

/// Shuts down one side or both (see `TcpStream::shutdown`).
pub(crate) fn shutdown<T: StreamIo>(source: &Arc<Source<T>>, how: Shutdown) -> IO<(), io::Error> {
    on(source, move |socket| socket.shutdown_io(how))
}

/// The operations as traces name them.
mod ops {
    use spindle_core::untraced::Op;

    pub(super) static READ: Op = Op::new("ReadHalf::read");
    pub(super) static READ_INTO: Op = Op::new("ReadHalf::read_into");
    pub(super) static READ_EXACT: Op = Op::new("ReadHalf::read_exact");
    pub(super) static WRITE: Op = Op::new("WriteHalf::write");
    pub(super) static WRITE_ALL: Op = Op::new("WriteHalf::write_all");
    pub(super) static SHUTDOWN: Op = Op::new("WriteHalf::shutdown");
}

/// A stream that splits into a [`ReadHalf`] and a [`WriteHalf`]:
/// [`TcpStream`](crate::TcpStream) and [`UnixStream`](crate::UnixStream).
/// Sealed: it cannot be implemented outside this crate.
pub trait Split: sealed::Split + Sized + Send + Sync + 'static {}

pub(crate) mod sealed {
    use super::{Arc, Source, StreamIo};

    /// What splitting needs of a stream: its registered socket, and the
    /// stream rebuilt from it (`reunite`).
    pub trait Split {
        /// The std socket type.
        type Io: StreamIo;
        /// The registered socket.
        fn source(&self) -> &Arc<Source<Self::Io>>;
        /// The stream of a registered socket.
        fn from_source(source: Arc<Source<Self::Io>>) -> Self;
    }
}

/// The reading half of a split stream: reads in one fiber while the
/// [`WriteHalf`] writes in another. Made by `TcpStream::into_split` (or
/// `UnixStream::into_split`).
///
/// A [`BufReader`](crate::BufReader) reads from it as from the stream.
/// A cheap handle (`Clone`): clones read the same socket (see
/// [Sharing](crate#sharing) for what reads from two fibers at once mean).
/// The socket closes when every handle of it (both halves, their clones,
/// and every `IO` value built from them) is dropped.
pub struct ReadHalf<S: Split> {
    source: Arc<Source<S::Io>>,
}

/// The writing half of a split stream.
///
/// A cheap handle (`Clone`): hand a clone to each fiber that writes, no
/// `Arc` needed. Writes through clones are each whole: a
/// [`write_all`](WriteHalf::write_all) holds the socket's write turn from
/// its first byte to its last, so another fiber's write never lands in
/// the middle of it; writers that find the turn taken wait for it and are
/// woken in arrival order (see [Sharing](crate#sharing)).
///
/// Dropping the last clone (and every `IO` value built from them: a write
/// in flight finishes first) shuts the write side down, so the peer reads
/// end of stream, as tokio's `OwnedWriteHalf` does; the read half reads
/// on. [`shutdown`](WriteHalf::shutdown) on any clone shuts it down for
/// all of them at once (writes after it fail with `BrokenPipe`).
pub struct WriteHalf<S: Split> {
    side: Arc<WriteSide<S>>,
}

impl<S: Split> Clone for ReadHalf<S> {
    fn clone(&self) -> Self {
        ReadHalf {
            source: self.source.clone(),
        }
    }
}

impl<S: Split> Clone for WriteHalf<S> {
    fn clone(&self) -> Self {
        WriteHalf {
            side: self.side.clone(),
        }
    }
}

/// What a [`WriteHalf`] shares with its clones and the writes built from
/// them: the write side is shut down when the last of them is dropped.
struct WriteSide<S: Split> {
    source: Arc<Source<S::Io>>,
    /// Cleared by [`ReadHalf::reunite`]: the stream writes on.
    shutdown_on_drop: AtomicBool,
}

impl<S: Split> fmt::Debug for ReadHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadHalf").finish_non_exhaustive()
    }
}

impl<S: Split> fmt::Debug for WriteHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteHalf").finish_non_exhaustive()
    }
}

/// Splits a stream (for the streams' `into_split`).
pub(crate) fn split<S: Split>(stream: S) -> (ReadHalf<S>, WriteHalf<S>) {
    let source = stream.source().clone();
    (
        ReadHalf {
            source: source.clone(),
        },
        WriteHalf {
            side: Arc::new(WriteSide {
                source,
                shutdown_on_drop: AtomicBool::new(true),
            }),
        },
    )
}

/// The halves given to [`ReadHalf::reunite`] came from two streams; both
/// are handed back.
pub struct ReuniteError<S: Split>(pub ReadHalf<S>, pub WriteHalf<S>);

impl<S: Split> fmt::Debug for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReuniteError(..)")
    }
}

impl<S: Split> fmt::Display for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("spindle-net: the two halves are not of the same stream")
    }
}

impl<S: Split> std::error::Error for ReuniteError<S> {}

impl<S: Split> ReadHalf<S> {
    /// Reads at most `max` bytes, waiting until some are available; an
    /// empty vector means end of stream.
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        read_into(&self.source, Vec::new(), max)
            .map_untraced(|(buf, _)| buf)
            .traced_as(&ops::READ)
    }

    /// Appends at most `max` bytes to `buf`, waiting until some are
    /// available; the buffer and the number read (0: end of stream).
    #[track_caller]
    pub fn read_into(&self, buf: Vec<u8>, max: usize) -> IO<(Vec<u8>, usize), io::Error> {
        read_into(&self.source, buf, max).traced_as(&ops::READ_INTO)
    }

    /// Reads exactly `len` bytes, waiting as often as needed; end of
    /// stream before them is an `UnexpectedEof` error. Canceled midway, the
    /// bytes it had read are lost (use a [`BufReader`](crate::BufReader)'s
    /// `read_exact` to keep them).
    #[track_caller]
    pub fn read_exact(&self, len: usize) -> IO<Vec<u8>, io::Error> {
        read_exact(&self.source, len).traced_as(&ops::READ_EXACT)
    }

    /// The stream again, from its two halves; [`ReuniteError`] (with both
    /// halves) if they are not of the same stream.
    ///
    /// Clones of either half that are still alive go on working on the
    /// same socket; once reunited, dropping the write half's clones no
    /// longer shuts the write side down (the stream owns it again).
    pub fn reunite(self, write: WriteHalf<S>) -> Result<S, ReuniteError<S>> {
        if !Arc::ptr_eq(&self.source, &write.side.source) {
            return Err(ReuniteError(self, write));
        }
        write.side.shutdown_on_drop.store(false, Ordering::Relaxed);
        drop(write);
        Ok(S::from_source(self.source))
    }
}

impl<S: Split> WriteHalf<S> {
    /// Writes some of `data`, waiting until the socket accepts any;
    /// returns how many bytes were written.
    #[track_caller]
    pub fn write<B>(&self, data: B) -> IO<usize, io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        let side = self.side.clone();
        write(&side.source, data)
            .map_untraced(move |n| {
                drop(side);
                n
            })
            .traced_as(&ops::WRITE)
    }

    /// Writes all of `data`, waiting as often as the socket needs. The
    /// bytes go out whole: a write from another fiber (through a clone)
    /// waits until this one is done, and writers that wait go in arrival
    /// order.
    #[track_caller]
    pub fn write_all<B>(&self, data: B) -> IO<(), io::Error>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        let side = self.side.clone();
        write_all(&side.source, data)
            .map_untraced(move |()| drop(side))
            .traced_as(&ops::WRITE_ALL)
    }

    /// Shuts down the write side now (the peer reads end of stream), for
    /// every clone: later writes fail (`BrokenPipe`).
    #[track_caller]
    pub fn shutdown(&self) -> IO<(), io::Error> {
        shutdown(&self.side.source, Shutdown::Write).traced_as(&ops::SHUTDOWN)
    }
}

impl<S: Split> Drop for WriteSide<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop.load(Ordering::Relaxed) {
            // Not connected any more, or shut down already: nothing to do.
            let _ = self.source.shutdown_io(Shutdown::Write);
        }
    }
}

impl<S: Split> ReadShared for ReadHalf<S> {
    fn read_shared(&self, shared: Arc<Mutex<Vec<u8>>>, max: usize) -> IO<usize, io::Error> {
        read_shared(&self.source, shared, max)
    }
}

impl<S: Split> ReadStream for ReadHalf<S> {}
