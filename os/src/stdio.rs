//! The process's standard input, output and error as `IO` values and
//! streams, on every std executor.
//!
//! * Standard input: [`stdin_reads`] (its bytes, a chunk per read, until
//!   its end), [`stdin_lines`] (its UTF-8 lines), and the single reads
//!   [`stdin_read`] and [`stdin_read_line`].
//! * Standard output and error: [`stdout_writes`] and [`stderr_writes`]
//!   (pipes that write every chunk of a byte stream), and the single
//!   writes [`stdout_write_all`] and [`stderr_write_all`].
//!
//! ```no_run
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//! use spindle_effect::stdio;
//! use spindle_effect::stream::Stream;
//!
//! // Echoes standard input upper-cased, a line at a time.
//! let upper = stdio::stdin_lines(64 * 1024)?
//!     .flat_map(|line| Stream::emits(format!("{}\n", line.to_uppercase()).into_bytes()));
//! let rt = Runtime::new()?;
//! rt.block_on(stdio::stdout_writes(upper).compile().drain())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How the calls run
//!
//! The descriptors 0, 1 and 2 are shared with the other processes that
//! hold them (the shell, a pipeline's other commands, the parent): making
//! them non-blocking, so that the I/O driver could watch them, would
//! change them for those processes too, which then fail with `EAGAIN`. So
//! they are left as they are, and every read or write is one blocking call
//! on the executor's blocking pool (the crate's front page says which
//! executors have one; one without makes the call on its own thread), as
//! tokio's `tokio::io::stdin` does. Cats Effect's `Console` and fs2's
//! `io.stdin`/`io.stdout` take the same route on the JVM. No code of
//! these is copied.
//!
//! The calls go through std's `Stdin`, `Stdout` and `Stderr`, so they
//! share their buffers and locks with `println!`, `eprintln!` and the rest
//! of the program:
//!
//! * A whole write ([`stdout_write_all`], one chunk of [`stdout_writes`])
//!   runs under one `lock()` of the stream, flush included: writes of two
//!   fibers (or of a fiber and a `println!`) never interleave inside one,
//!   and what was written is out of the process's buffer when the write's
//!   program completes.
//! * Standard input's reads go through std's buffer: the bytes a
//!   [`stdin_read_line`] buffered are the next [`stdin_reads`] bytes.
//!
//! # Cancellation
//!
//! A read that waits for input cannot be interrupted: a fiber canceled
//! during [`stdin_read`] (or while a stream of standard input waits) is
//! canceled at once, but the call goes on in the pool until input (or its
//! end) comes, and what it then reads is dropped, as with tokio's stdin.
//! Read standard input from one fiber that lives as long as the input is
//! needed.

use std::io::{self, BufRead as _, Read as _};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;

use crate::call;
use spindle_stream::{Chunk, InvalidArgument, Stream, text};

/// The read size of [`stdin_lines`]' stream: 64 KiB.
pub const DEFAULT_CHUNK: usize = 64 * 1024;

/// The operations as traces name them.
mod ops {
    use spindle_core::untraced::Op;

    pub(super) static STDIN_READ: Op = Op::new("stdio::stdin_read");
    pub(super) static STDIN_READ_LINE: Op = Op::new("stdio::stdin_read_line");
    pub(super) static STDOUT_WRITE_ALL: Op = Op::new("stdio::stdout_write_all");
    pub(super) static STDERR_WRITE_ALL: Op = Op::new("stdio::stderr_write_all");
}

/// One read of standard input: at most `max` bytes (empty at its end).
fn read_stdin(max: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; max];
    loop {
        match io::stdin().lock().read(&mut bytes) {
            Ok(n) => {
                bytes.truncate(n);
                return Ok(bytes);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// One line of standard input, without its `\n` or `\r\n`; `None` at its
/// end; an error (kind `InvalidData`) past `max_line` bytes or for invalid
/// UTF-8.
fn read_stdin_line(max_line: usize) -> io::Result<Option<String>> {
    let too_long = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a line of standard input is longer than the limit of {max_line} bytes"),
        )
    };
    let stdin = io::stdin();
    let mut stdin = stdin.lock();
    let mut line = Vec::new();
    let (mut read_any, mut ended_by_break) = (false, false);
    loop {
        let available = match stdin.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (taken, found) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        // One byte past the limit may be the `\r` of a `\r\n`.
        if line.len() + taken > max_line.saturating_add(1) {
            return Err(too_long());
        }
        line.extend_from_slice(&available[..taken]);
        stdin.consume(taken + usize::from(found));
        read_any = true;
        if found {
            ended_by_break = true;
            break;
        }
    }
    if !read_any {
        return Ok(None);
    }
    if ended_by_break && line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.len() > max_line {
        return Err(too_long());
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes all of `bytes` to `stream` under its lock, and flushes.
fn write_locked(mut stream: impl io::Write, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes)?;
    stream.flush()
}

/// One read of standard input: at most `max` bytes (above 0), fewer if
/// fewer are there; empty at the end of the input. `max` 0 reads nothing.
#[track_caller]
pub fn stdin_read(max: usize) -> IO<Vec<u8>, io::Error> {
    call(&ops::STDIN_READ, move || {
        if max == 0 {
            Ok(Vec::new())
        } else {
            read_stdin(max)
        }
    })
}

/// The next line of standard input (`\n` or `\r\n` ends it, and is not
/// part of it; a last line without one counts too); `None` at the end of
/// the input. A line longer than `max_line` bytes is an error of kind
/// `InvalidData` (what was read of it is gone), and so is one that is not
/// UTF-8.
#[track_caller]
pub fn stdin_read_line(max_line: usize) -> IO<Option<String>, io::Error> {
    call(&ops::STDIN_READ_LINE, move || read_stdin_line(max_line))
}

/// The bytes of standard input, a chunk per read of at most `chunk_size`
/// bytes (above 0; [`DEFAULT_CHUNK`] is a good size), until its end. Each
/// read is one call on the blocking pool (see the [module
/// documentation](self)); the stream does not close standard input.
pub fn stdin_reads(chunk_size: usize) -> Result<Stream<u8, io::Error>, InvalidArgument> {
    let chunk_size =
        InvalidArgument::above_zero("stdio::stdin_reads", "a chunk size above 0", chunk_size)?;
    Ok(Stream::unfold_chunk_eval((), move |()| {
        IO::try_blocking_untraced(move || read_stdin(chunk_size)).map_untraced(|bytes| {
            if bytes.is_empty() {
                None
            } else {
                Some((Chunk::from(bytes), ()))
            }
        })
    }))
}

/// The lines of standard input, as UTF-8 text (`\n` or `\r\n` ends a
/// line; a last line without one is emitted too), until its end. A line
/// longer than `max_line` bytes (above 0) fails the stream, as invalid
/// UTF-8 does, with an error that names the limit or the byte offset
/// (`spindle_stream::text`).
pub fn stdin_lines(max_line: usize) -> Result<Stream<String, io::Error>, InvalidArgument> {
    let max_line =
        InvalidArgument::above_zero("stdio::stdin_lines", "a line limit above 0", max_line)?;
    let bytes = stdin_reads(DEFAULT_CHUNK)?;
    Ok(text::lines(text::utf8_decode(bytes), max_line))
}

/// Writes all of `bytes` to standard output and flushes it, under one
/// lock of it: another write (a fiber's, a `println!`) never comes in the
/// middle. An error if standard output is closed (kind `BrokenPipe`) or
/// full (a disk).
#[track_caller]
pub fn stdout_write_all(bytes: impl Into<Vec<u8>>) -> IO<(), io::Error> {
    let bytes = bytes.into();
    call(&ops::STDOUT_WRITE_ALL, move || {
        write_locked(io::stdout().lock(), &bytes)
    })
}

/// Writes all of `bytes` to standard error under one lock of it (standard
/// error is not buffered), as [`stdout_write_all`] does.
#[track_caller]
pub fn stderr_write_all(bytes: impl Into<Vec<u8>>) -> IO<(), io::Error> {
    let bytes = bytes.into();
    call(&ops::STDERR_WRITE_ALL, move || {
        write_locked(io::stderr().lock(), &bytes)
    })
}

/// A pipe: writes each chunk of `bytes` to standard output, whole and
/// flushed under one lock (as [`stdout_write_all`]), emitting a unit per
/// chunk written. The stream does not close standard output.
pub fn stdout_writes(bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
    bytes.chunks().eval_map(|chunk| {
        let bytes = chunk.into_vec();
        IO::try_blocking_untraced(move || write_locked(io::stdout().lock(), &bytes))
    })
}

/// A pipe: writes each chunk of `bytes` to standard error, as
/// [`stdout_writes`] writes to standard output.
pub fn stderr_writes(bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
    bytes.chunks().eval_map(|chunk| {
        let bytes = chunk.into_vec();
        IO::try_blocking_untraced(move || write_locked(io::stderr().lock(), &bytes))
    })
}
