//! Sockets as streams: a connection's reads as a [`Stream`] of byte
//! chunks (one chunk per read, ending at the peer's end of stream), its
//! writes as a pipe that writes every chunk of a byte stream whole, and a
//! UDP socket's datagrams as an endless stream.
//!
//! A read stream holds a clone of the socket, so the connection stays
//! open while the stream lives; the stream does not close it when it
//! ends (the last clone does). Errors are the socket's `io::Error`s.
//!
//! A listener's `incoming()` is the endless stream of its accepts, each
//! as a `Result`: a failed accept (out of descriptors, a connection reset
//! before it was accepted) is an element, not the end, as with tokio's
//! `TcpListenerStream`, so a server decides (log it and pause, or fail
//! the stream with it, as fs2's `Network.server` does). An accept runs only when
//! the stream is pulled: a consumer that is busy (a connection limit
//! reached in `par_join`) leaves the next clients in the listen backlog.

use std::io;
use std::net::SocketAddr;

use spindle_core::IO;
use spindle_stream::{Chunk, InvalidArgument, Stream};

use crate::stream::{ReadHalf, Split, WriteHalf};
use crate::tcp::{TcpListener, TcpStream};
use crate::udp::UdpSocket;
use crate::unix::{UnixListener, UnixStream};

/// A checked read size.
fn read_size(operation: &'static str, n: usize) -> Result<usize, InvalidArgument> {
    InvalidArgument::above_zero(operation, "a read size above 0", n)
}

/// The stream of what `read(max)` reads, until it reads nothing (the end).
fn reads_with<R, F>(reader: R, max: usize, read: F) -> Stream<u8, io::Error>
where
    R: Send + 'static,
    F: Fn(&R, usize) -> IO<Vec<u8>, io::Error> + Send + Sync + 'static,
{
    Stream::unfold_chunk_eval(reader, move |reader| {
        read(&reader, max).map(move |bytes| {
            if bytes.is_empty() {
                None
            } else {
                Some((Chunk::from(bytes), reader))
            }
        })
    })
}

macro_rules! stream_socket {
    ($ty:ty, $name:literal) => {
        impl $ty {
            #[doc = concat!("The bytes read from this ", $name, ", a chunk per read of at most `max` bytes, until the peer's end of stream; `max` must be above 0.")]
            pub fn reads(&self, max: usize) -> Result<Stream<u8, io::Error>, InvalidArgument> {
                let max = read_size("reads", max)?;
                Ok(reads_with(self.clone(), max, |s: &Self, max| s.read(max)))
            }

            #[doc = concat!("A pipe: writes each chunk of `bytes` to this ", $name, " whole (one write turn per chunk), emitting a unit per chunk written.")]
            pub fn writes(&self, bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
                let socket = self.clone();
                bytes.chunks().eval_map(move |chunk| socket.write_all(chunk.into_vec()))
            }
        }
    };
}

stream_socket!(TcpStream, "connection");
stream_socket!(UnixStream, "connection");

impl<S: Split> ReadHalf<S> {
    /// The bytes read from this half, a chunk per read of at most `max`
    /// bytes, until the peer's end of stream; `max` must be above 0.
    pub fn reads(&self, max: usize) -> Result<Stream<u8, io::Error>, InvalidArgument> {
        let max = read_size("reads", max)?;
        Ok(reads_with(self.clone(), max, |s: &Self, max| s.read(max)))
    }
}

impl<S: Split> WriteHalf<S> {
    /// A pipe: writes each chunk of `bytes` to this half whole, emitting a
    /// unit per chunk written.
    pub fn writes(&self, bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
        let half = self.clone();
        bytes
            .chunks()
            .eval_map(move |chunk| half.write_all(chunk.into_vec()))
    }
}

impl TcpListener {
    /// The connections accepted on this listener, each with its peer's
    /// address, or the error of an accept that failed (the stream goes
    /// on after it); without end. The stream holds a clone of the
    /// listener: the socket stays open while the stream lives.
    pub fn incoming(&self) -> Stream<io::Result<(TcpStream, SocketAddr)>, io::Error> {
        let listener = self.clone();
        Stream::repeat_eval(move || listener.accept().attempt())
    }
}

impl UnixListener {
    /// The connections accepted on this listener, each with its peer's
    /// address, or the error of an accept that failed (the stream goes
    /// on after it); without end. The stream holds a clone of the
    /// listener: the socket stays open while the stream lives.
    pub fn incoming(
        &self,
    ) -> Stream<io::Result<(UnixStream, std::os::unix::net::SocketAddr)>, io::Error> {
        let listener = self.clone();
        Stream::repeat_eval(move || listener.accept().attempt())
    }
}

impl UdpSocket {
    /// The datagrams received (at most `max` bytes each, the rest of a
    /// longer one dropped as `recv_from` does) with their senders, without
    /// end; `max` must be above 0.
    pub fn datagrams(
        &self,
        max: usize,
    ) -> Result<Stream<(Vec<u8>, SocketAddr), io::Error>, InvalidArgument> {
        let max = read_size("datagrams", max)?;
        let socket = self.clone();
        Ok(Stream::repeat_eval(move || socket.recv_from(max)))
    }
}
