//! Pipes for bytes and text: UTF-8 decoding and encoding, lines, frames.
//!
//! Each is a function from a stream to a stream, for
//! [`Stream::through`]: `bytes.through(text::utf8_decode).through(|s|
//! text::lines(s, 1024))`. A byte stream is a `Stream<u8, E>` whose chunks
//! are the buffers read (a socket's reads, a file's blocks): the pipes
//! work a chunk at a time and carry what is incomplete (a UTF-8 sequence,
//! a line, a frame) to the next chunk. `lines` bounds its output chunks
//! ([`LINES_PER_CHUNK`]): it cuts a long string over several pulls, so
//! that a consumer frees a chunk's lines before the next are allocated.
//!
//! Bad input is a typed error, [`TextError`], through the stream's error
//! type (`E: From<TextError>`), naming where it was found: invalid UTF-8
//! by its byte offset in the stream, an over-long line or frame by the
//! limit it passed. What the input gave before the bad part is emitted
//! first (the lines before an over-long one, the text before an invalid
//! byte, even in the same chunk); the stream then fails, at its next pull,
//! without pulling its input again, after releasing what it holds.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use spindle_core::IO;

use crate::chunk::Chunk;
use crate::scope::Scope;
use crate::stream::{Step, Stream};

/// What a text pipe found wrong with its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextError {
    /// Bytes that are not UTF-8, starting at this offset of the stream.
    InvalidUtf8 {
        /// Offset of the first invalid byte from the start of the stream.
        offset: u64,
    },
    /// The stream ended inside a UTF-8 sequence.
    TruncatedUtf8 {
        /// Offset of the sequence's first byte.
        offset: u64,
    },
    /// A line longer than the limit (without its line break).
    LineTooLong {
        /// The limit, in bytes.
        limit: usize,
        /// The line's number, from 1.
        line: u64,
    },
    /// A frame whose length prefix is above the limit.
    FrameTooLong {
        /// The limit, in bytes.
        limit: usize,
        /// The length the prefix announced.
        length: u64,
    },
    /// The stream ended inside a frame (or its length prefix).
    TruncatedFrame {
        /// Bytes of the frame (prefix included) that arrived.
        received: usize,
    },
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextError::InvalidUtf8 { offset } => {
                write!(f, "spindle-stream: invalid UTF-8 at byte offset {offset}")
            }
            TextError::TruncatedUtf8 { offset } => write!(
                f,
                "spindle-stream: the stream ended inside a UTF-8 sequence starting at byte offset {offset}"
            ),
            TextError::LineTooLong { limit, line } => {
                write!(
                    f,
                    "spindle-stream: line {line} is longer than the limit of {limit} bytes"
                )
            }
            TextError::FrameTooLong { limit, length } => write!(
                f,
                "spindle-stream: a frame of {length} bytes is longer than the limit of {limit} bytes"
            ),
            TextError::TruncatedFrame { received } => write!(
                f,
                "spindle-stream: the stream ended inside a frame after {received} bytes"
            ),
        }
    }
}

impl core::error::Error for TextError {}

/// With `std`, a text pipe runs on an `io::Error` stream (a socket's
/// reads): the error is `InvalidData`, carrying the [`TextError`].
#[cfg(feature = "std")]
impl From<TextError> for std::io::Error {
    fn from(e: TextError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// Bad input found inside a chunk: the error, after what the chunk gave
/// before it (the lines before a bad one still go out, as from a reader
/// that reads them one by one).
struct Failed<B, E> {
    before: Chunk<B>,
    error: E,
}

/// A stateful chunk transformation: `step` maps each chunk (it may fail,
/// after emitting what came before the failure), `finish` runs at the end
/// of the input (it may emit a last chunk or fail). A [`cutting`] stage
/// whose cut takes the whole loaded chunk at once.
fn stateful<A, B, E, S, St, Fin>(
    input: Stream<A, E>,
    state: S,
    step: St,
    finish: Fin,
) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    S: Send + 'static,
    St: FnMut(&mut S, Chunk<A>) -> Result<Chunk<B>, Failed<B, E>> + Send + 'static,
    Fin: FnOnce(S) -> Result<Chunk<B>, E> + Send + 'static,
{
    cutting(
        input,
        Stateful {
            state,
            step,
            finish,
            loaded: None,
        },
    )
}

/// The state of [`stateful`]: the chunk loaded and not yet mapped.
struct Stateful<A, S, St, Fin> {
    state: S,
    step: St,
    finish: Fin,
    loaded: Option<Chunk<A>>,
}

impl<A, B, E, S, St, Fin> Cut<A, B, E> for Stateful<A, S, St, Fin>
where
    A: Send + 'static,
    S: Send + 'static,
    St: FnMut(&mut S, Chunk<A>) -> Result<Chunk<B>, Failed<B, E>> + Send + 'static,
    Fin: FnOnce(S) -> Result<Chunk<B>, E> + Send + 'static,
{
    fn load(&mut self, chunk: Chunk<A>) {
        self.loaded = Some(chunk);
    }

    fn cut(&mut self) -> Result<Chunk<B>, Failed<B, E>> {
        match self.loaded.take() {
            Some(chunk) => (self.step)(&mut self.state, chunk),
            None => Ok(Chunk::empty()),
        }
    }

    fn finish(self) -> Result<Chunk<B>, E> {
        (self.finish)(self.state)
    }
}

/// Decodes UTF-8: one string per input chunk (what it completes); a
/// sequence split between chunks is joined. Invalid or truncated input
/// fails the stream with [`TextError`].
pub fn utf8_decode<E>(bytes: Stream<u8, E>) -> Stream<String, E>
where
    E: From<TextError> + Send + 'static,
{
    // State: the incomplete sequence carried over, and the offset of the
    // next byte of the input.
    stateful(
        bytes,
        (Vec::<u8>::new(), 0u64),
        |(pending, offset): &mut (Vec<u8>, u64), chunk: Chunk<u8>| {
            let start = *offset - pending.len() as u64;
            *offset += chunk.len() as u64;
            let mut buf = core::mem::take(pending);
            if buf.is_empty() {
                buf = chunk.into_vec();
            } else {
                buf.extend_from_slice(&chunk);
            }
            // One validation: `String::from_utf8` gives the bytes back
            // with the error.
            match String::from_utf8(buf) {
                Ok(text) => Ok(Chunk::singleton(text)),
                Err(e) if e.utf8_error().error_len().is_none() => {
                    // An incomplete sequence at the end: keep it.
                    let valid = e.utf8_error().valid_up_to();
                    let mut buf = e.into_bytes();
                    *pending = buf.split_off(valid);
                    // Valid up to `valid`: checked again only when a chunk
                    // ends inside a sequence (no `unsafe`).
                    let text = String::from_utf8(buf).unwrap_or_default();
                    Ok(if text.is_empty() {
                        Chunk::empty()
                    } else {
                        Chunk::singleton(text)
                    })
                }
                Err(e) => {
                    let valid = e.utf8_error().valid_up_to();
                    let error = E::from(TextError::InvalidUtf8 {
                        offset: start + valid as u64,
                    });
                    let mut buf = e.into_bytes();
                    buf.truncate(valid);
                    // Valid up to `valid`, as above.
                    let text = String::from_utf8(buf).unwrap_or_default();
                    Err(Failed {
                        before: if text.is_empty() {
                            Chunk::empty()
                        } else {
                            Chunk::singleton(text)
                        },
                        error,
                    })
                }
            }
        },
        |(pending, offset): (Vec<u8>, u64)| {
            if pending.is_empty() {
                Ok(Chunk::empty())
            } else {
                Err(E::from(TextError::TruncatedUtf8 {
                    offset: offset - pending.len() as u64,
                }))
            }
        },
    )
}

/// Encodes strings as UTF-8 bytes (one byte chunk per string).
pub fn utf8_encode<E: Send + 'static>(text: Stream<String, E>) -> Stream<u8, E> {
    text.map_chunks(|strings| {
        let mut bytes = Vec::with_capacity(strings.iter().map(String::len).sum());
        for s in strings {
            bytes.extend_from_slice(s.as_bytes());
        }
        Chunk::from(bytes)
    })
}

/// Splits text into lines, at `\n` (a `\r` before it is dropped); a last
/// line without a line break is emitted at the end. A line longer than
/// `max_line` bytes fails the stream with [`TextError::LineTooLong`]
/// (found as soon as the line passes the limit, without buffering more).
///
/// Lines go out in chunks of at most [`LINES_PER_CHUNK`]: a long input
/// string is cut over several pulls, so that only that many line strings
/// are alive between this stage and its consumer. A consumer that drops
/// each line soon after it gets it then frees every line before the
/// stage allocates many more, and the allocator serves the next ones from
/// what those frees gave back (a per-thread cache, in glibc's case)
/// rather than from its shared heap.
pub fn lines<E>(text: Stream<String, E>, max_line: usize) -> Stream<String, E>
where
    E: From<TextError> + Send + 'static,
{
    cutting(
        text,
        Lines {
            piece: String::new(),
            at: 0,
            pieces: Chunk::empty().into_iter(),
            partial: String::new(),
            number: 1,
            max_line,
        },
    )
}

/// The most lines [`lines`] puts in one chunk.
///
/// Small enough that the chunk's vector of lines (24 bytes a line on
/// 64-bit targets) stays a small allocation: glibc answers a request of
/// 1 KiB or more by first merging the small blocks freed since: at 64
/// lines a chunk (a 1.5 KiB vector) that cost 55 instructions a line, an
/// eighth of a socket's whole lines pipeline. Large enough that a pull
/// (about a hundred instructions) is a small share of a chunk's work.
pub const LINES_PER_CHUNK: usize = 32;

/// The state of [`lines`]: the input string being cut and how far, the
/// rest of its input chunk, and the line carried over from one string to
/// the next.
struct Lines {
    /// The string being cut; `piece[at..]` is not cut yet.
    piece: String,
    at: usize,
    /// The strings of the input chunk after `piece`.
    pieces: crate::chunk::IntoIter<String>,
    /// The start of a line whose break has not come yet.
    partial: String,
    /// The number of the next line, from 1.
    number: u64,
    max_line: usize,
}

impl Lines {
    /// The failure at the current line, after the lines before it.
    fn too_long<E: From<TextError>>(&self, before: Vec<String>) -> Failed<String, E> {
        Failed {
            before: Chunk::from(before),
            error: E::from(TextError::LineTooLong {
                limit: self.max_line,
                line: self.number,
            }),
        }
    }
}

impl<E: From<TextError>> Cut<String, String, E> for Lines {
    fn load(&mut self, chunk: Chunk<String>) {
        self.pieces = chunk.into_iter();
    }

    /// Cuts up to [`LINES_PER_CHUNK`] lines from what the last input chunk
    /// holds; fewer (none, even) when its strings run out first.
    fn cut(&mut self) -> Result<Chunk<String>, Failed<String, E>> {
        let mut out = Vec::new();
        loop {
            let rest = &self.piece.as_bytes()[self.at..];
            // The line break, found by `memchr` (a vectorized search:
            // `str::find` costed twice the rest of the pipe per line).
            if let Some(found) = memchr::memchr(b'\n', rest) {
                let end = self.at + found;
                let line = if self.partial.is_empty() {
                    // The whole line is in this string: one allocation of
                    // its exact length. (`\n` and `\r` are ASCII: the
                    // slice's ends are character boundaries.)
                    let text = &self.piece[self.at..end];
                    let text = text.strip_suffix('\r').unwrap_or(text);
                    if text.len() > self.max_line {
                        return Err(self.too_long(out));
                    }
                    String::from(text)
                } else {
                    self.partial.push_str(&self.piece[self.at..end]);
                    if self.partial.ends_with('\r') {
                        self.partial.pop();
                    }
                    if self.partial.len() > self.max_line {
                        return Err(self.too_long(out));
                    }
                    core::mem::take(&mut self.partial)
                };
                if out.capacity() == 0 {
                    out.reserve_exact(LINES_PER_CHUNK);
                }
                out.push(line);
                self.number += 1;
                self.at = end + 1;
                if out.len() == LINES_PER_CHUNK {
                    return Ok(Chunk::from(out));
                }
                continue;
            }
            // No break in the rest of this string: it starts a line.
            self.partial.push_str(&self.piece[self.at..]);
            // A line break may still come: `\r` is not counted yet.
            if self.partial.trim_end_matches('\r').len() > self.max_line {
                return Err(self.too_long(out));
            }
            // Done with the string (a read's buffer, often): it is freed
            // before the next input chunk is pulled.
            self.at = 0;
            let Some(next) = self.pieces.next() else {
                self.piece = String::new();
                return Ok(Chunk::from(out));
            };
            self.piece = next;
        }
    }

    /// The end: a last line without a break.
    fn finish(self) -> Result<Chunk<String>, E> {
        Ok(if self.partial.is_empty() {
            Chunk::empty()
        } else {
            Chunk::singleton(self.partial)
        })
    }
}

/// A pipe that cuts its input into outputs a bounded batch at a time
/// ([`cutting`]): `load` takes an input chunk, `cut` gives the next outputs
/// of what is loaded (none once it is used up; at most a batch), `finish`
/// the last outputs at the end of the input, or the error of input that
/// ended too early.
trait Cut<A, B, E>: Send + 'static {
    fn load(&mut self, chunk: Chunk<A>);
    fn cut(&mut self) -> Result<Chunk<B>, Failed<B, E>>;
    fn finish(self) -> Result<Chunk<B>, E>;
}

/// The stream of what `cutter` cuts from `input`: a pull emits the next
/// batch of what the loaded input chunk holds, and pulls the input only
/// once that is used up. The stage keeps its box from pull to pull.
fn cutting<A, B, E, C>(input: Stream<A, E>, cutter: C) -> Stream<B, E>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    C: Cut<A, B, E>,
{
    Stream::from_boxed(Box::new(Cutting {
        input: Some(input),
        cutter,
        marker: core::marker::PhantomData,
    }))
}

/// The state of [`cutting`].
struct Cutting<A, B, E, C> {
    /// The rest of the input; `None` once it has ended.
    input: Option<Stream<A, E>>,
    cutter: C,
    marker: core::marker::PhantomData<fn() -> B>,
}

impl<A, B, E, C> crate::stream::Pull<B, E> for Cutting<A, B, E, C>
where
    A: Send + 'static,
    B: Send + 'static,
    E: Send + 'static,
    C: Cut<A, B, E>,
{
    fn pull(mut self: Box<Self>, scope: &Scope<E>) -> IO<Step<B, E>, E> {
        match self.cutter.cut() {
            Ok(out) if !out.is_empty() => {
                return IO::pure(Step::Emit(out, Stream::from_boxed(self)));
            }
            Ok(_) => {}
            Err(failed) => return failed.into_step(),
        }
        // The input chunk is used up: the next one.
        let Some(input) = self.input.take() else {
            return IO::pure(Step::Done);
        };
        let scope_after = scope.clone();
        input.step(scope).flat_map(move |next| match next {
            Step::Emit(chunk, rest) => {
                self.input = Some(rest);
                self.cutter.load(chunk);
                self.pull(&scope_after)
            }
            Step::Done => match self.cutter.finish() {
                Ok(last) if last.is_empty() => IO::pure(Step::Done),
                Ok(last) => IO::pure(Step::Emit(last, Stream::empty())),
                Err(error) => IO::raise_error(error),
            },
        })
    }
}

impl<B: Send + 'static, E: Send + 'static> Failed<B, E> {
    /// The pull's result: the elements before the failure, then the
    /// failure at the next pull (the input is not pulled again).
    fn into_step(self) -> IO<Step<B, E>, E> {
        if self.before.is_empty() {
            IO::raise_error(self.error)
        } else {
            IO::pure(Step::Emit(self.before, Stream::raise_error(self.error)))
        }
    }
}

/// Frames: each a 4-byte big-endian length, then that many bytes. A
/// length above `max_frame` fails the stream with
/// [`TextError::FrameTooLong`] before any of the frame is buffered; input
/// that ends inside a frame fails with [`TextError::TruncatedFrame`].
///
/// A frame that lies whole in one input chunk is copied out of it once; a
/// frame across chunks is gathered as its bytes come. Frames go out at
/// most [`FRAMES_PER_CHUNK`] a chunk, as `lines` bounds its chunks.
pub fn length_delimited<E>(bytes: Stream<u8, E>, max_frame: usize) -> Stream<Vec<u8>, E>
where
    E: From<TextError> + Send + 'static,
{
    cutting(
        bytes,
        Frames {
            chunk: Vec::new(),
            at: 0,
            header: [0; 4],
            header_len: 0,
            partial: None,
            max_frame,
        },
    )
}

/// The most frames [`length_delimited`] puts in one chunk (see
/// [`LINES_PER_CHUNK`]).
pub const FRAMES_PER_CHUNK: usize = 32;

/// The state of [`length_delimited`]: the input chunk being cut and how
/// far, and a frame carried over from one chunk to the next (its length
/// prefix so far, or its bytes so far and its length).
struct Frames {
    chunk: Vec<u8>,
    at: usize,
    header: [u8; 4],
    header_len: usize,
    partial: Option<(Vec<u8>, usize)>,
    max_frame: usize,
}

impl Frames {
    /// The frame's length, if it is within the limit; the failure (after
    /// the frames before it) otherwise.
    fn length<E: From<TextError>>(
        &self,
        prefix: [u8; 4],
        out: &mut Vec<Vec<u8>>,
    ) -> Result<usize, Failed<Vec<u8>, E>> {
        let length = u32::from_be_bytes(prefix) as u64;
        if length > self.max_frame as u64 {
            return Err(Failed {
                before: Chunk::from(core::mem::take(out)),
                error: E::from(TextError::FrameTooLong {
                    limit: self.max_frame,
                    length,
                }),
            });
        }
        // Within `max_frame`, a `usize`.
        Ok(length as usize)
    }
}

impl<E: From<TextError>> Cut<u8, Vec<u8>, E> for Frames {
    fn load(&mut self, chunk: Chunk<u8>) {
        self.chunk = chunk.into_vec();
        self.at = 0;
    }

    fn cut(&mut self) -> Result<Chunk<Vec<u8>>, Failed<Vec<u8>, E>> {
        let mut out = Vec::new();
        while out.len() < FRAMES_PER_CHUNK {
            let rest = &self.chunk[self.at..];
            if let Some((bytes, length)) = &mut self.partial {
                // A frame carried over: its next bytes.
                let take = (*length - bytes.len()).min(rest.len());
                bytes.extend_from_slice(&rest[..take]);
                self.at += take;
                if bytes.len() < *length {
                    break;
                }
                out.push(core::mem::take(bytes));
                self.partial = None;
            } else if self.header_len > 0 || rest.len() < 4 {
                // A length prefix across chunks.
                let take = (4 - self.header_len).min(rest.len());
                self.header[self.header_len..self.header_len + take].copy_from_slice(&rest[..take]);
                self.header_len += take;
                self.at += take;
                if self.header_len < 4 {
                    break;
                }
                self.header_len = 0;
                let length = self.length(self.header, &mut out)?;
                self.partial = Some((Vec::new(), length));
            } else {
                let length = self.length([rest[0], rest[1], rest[2], rest[3]], &mut out)?;
                if rest.len() - 4 >= length {
                    // Whole in this chunk: one copy.
                    out.push(rest[4..4 + length].to_vec());
                    self.at += 4 + length;
                } else {
                    self.partial = Some((rest[4..].to_vec(), length));
                    self.at = self.chunk.len();
                }
            }
        }
        if self.at == self.chunk.len() {
            // Used up: freed before the next input chunk is pulled.
            self.chunk = Vec::new();
            self.at = 0;
        }
        Ok(Chunk::from(out))
    }

    fn finish(self) -> Result<Chunk<Vec<u8>>, E> {
        let received = match &self.partial {
            Some((bytes, _)) => 4 + bytes.len(),
            None => self.header_len,
        };
        if received == 0 {
            Ok(Chunk::empty())
        } else {
            Err(E::from(TextError::TruncatedFrame { received }))
        }
    }
}

impl<A: Send + 'static, E: Send + 'static> Stream<A, E> {
    /// The runs of elements between delimiters (`is_delimiter`), each as a
    /// chunk; delimiters are dropped; a last run without a delimiter after
    /// it is emitted at the end (an empty input gives nothing).
    pub fn split<F>(self, mut is_delimiter: F) -> Stream<Chunk<A>, E>
    where
        F: FnMut(&A) -> bool + Send + 'static,
    {
        stateful(
            self,
            (Chunk::<A>::empty(), false),
            move |(run, seen): &mut (Chunk<A>, bool), chunk: Chunk<A>| {
                let mut out = Chunk::empty();
                for item in chunk {
                    *seen = true;
                    if is_delimiter(&item) {
                        out.push(core::mem::take(run));
                    } else {
                        run.push(item);
                    }
                }
                Ok(out)
            },
            |(run, seen): (Chunk<A>, bool)| {
                Ok(if seen && !run.is_empty() {
                    Chunk::singleton(run)
                } else {
                    Chunk::empty()
                })
            },
        )
    }
}
