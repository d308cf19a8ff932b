//! RESP2 frames: the values, a resumable decoder with limits, and an encoder.
//!
//! The frame model follows tokio's mini-redis; limits and error texts follow
//! Redis.
//!
//! # Wire format
//!
//! | frame                | bytes                                 |
//! | -------------------- | ------------------------------------- |
//! | [`Frame::Simple`]    | `+text\r\n`                           |
//! | [`Frame::Error`]     | `-text\r\n`                           |
//! | [`Frame::Integer`]   | `:-42\r\n`                            |
//! | [`Frame::Bulk`]      | `$3\r\nabc\r\n`                       |
//! | [`Frame::Null`]      | `$-1\r\n` (and, when decoding, `*-1\r\n`) |
//! | [`Frame::Array`]     | `*2\r\n` then two frames              |
//!
//! # Decoding
//!
//! [`Decoder::decode`] takes frames off the front of a [`BytesMut`] that the
//! caller keeps appending to. It resumes where it stopped: the finished
//! elements of a partly received array are kept inside the decoder (their
//! bytes are removed from the buffer), a length line or text line is scanned
//! only from where the previous call stopped, and an incomplete bulk payload
//! waits in the buffer, unread, until all of it is there. Each input byte is
//! so looked at a bounded number of times however the input is split.
//!
//! Every length is checked against [`Limits`] as soon as its line is
//! complete, before anything is allocated for it or waited for, and a line
//! that grows past [`Limits::max_line`] without its `\r\n` is an error at
//! once. The decoder has no recursion: nested arrays are kept on a heap stack
//! bounded by [`Limits::max_depth`].
//!
//! A bulk payload shorter than 32 KiB is copied out of the buffer, so that a
//! small value kept for long (a stored key or value) does not keep the whole
//! read buffer it arrived in alive; a larger one is split off the buffer
//! without copying.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// One RESP2 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A simple string, `+OK\r\n`: one line of text without `\r` or `\n`.
    Simple(String),
    /// An error, `-ERR unknown command\r\n`: one line of text.
    Error(String),
    /// A signed 64-bit integer, `:42\r\n`.
    Integer(i64),
    /// A bulk string, `$3\r\nabc\r\n`: any bytes.
    Bulk(Bytes),
    /// The null bulk string `$-1\r\n` (the null array `*-1\r\n` decodes to it
    /// too).
    Null,
    /// An array of frames, `*2\r\n` followed by two frames.
    Array(Vec<Frame>),
}

/// Bounds on what a [`Decoder`] accepts, each checked before the decoder
/// allocates or waits for the bytes that a length declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest bulk string, in bytes (Redis's `proto-max-bulk-len` is
    /// 512 MiB; the default here is 8 MiB).
    pub max_bulk: usize,
    /// The most elements of one array.
    pub max_array: usize,
    /// The deepest nesting of arrays: 1 allows an array of non-arrays, 0 no
    /// arrays at all. Keep it small: a decoded frame is dropped, compared and
    /// printed recursively.
    pub max_depth: usize,
    /// The longest line of a simple string, error, integer or length, counting
    /// its type byte and its `\r\n`.
    pub max_line: usize,
}

impl Default for Limits {
    /// 8 MiB bulks, arrays of 1,048,576 elements, 8 levels of nesting, 64 KiB
    /// lines.
    fn default() -> Limits {
        Limits {
            max_bulk: 8 * 1024 * 1024,
            max_array: 1024 * 1024,
            max_depth: 8,
            max_line: 64 * 1024,
        }
    }
}

/// Which kind of frame a [`FrameError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A simple string (`+`).
    Simple,
    /// An error (`-`).
    Error,
    /// An integer (`:`).
    Integer,
    /// A bulk string (`$`).
    Bulk,
    /// An array (`*`).
    Array,
}

impl FrameKind {
    fn noun(self) -> &'static str {
        match self {
            FrameKind::Simple => "simple string",
            FrameKind::Error => "error string",
            FrameKind::Integer => "integer",
            FrameKind::Bulk => "bulk",
            FrameKind::Array => "array",
        }
    }
}

/// Why the bytes received are not RESP2 within the [`Limits`].
///
/// Its [`Display`](fmt::Display) text is one line, without `\r` or `\n`, fit
/// to follow `-ERR ` in a reply: `Protocol error: invalid bulk length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A frame starts with a byte other than `+`, `-`, `:`, `$` and `*`.
    BadType {
        /// The byte received.
        byte: u8,
    },
    /// A line grew past [`Limits::max_line`] bytes without its `\r\n`.
    LineTooLong {
        /// [`Limits::max_line`].
        limit: usize,
    },
    /// A line holds a `\n` that does not follow a `\r`.
    LoneLineFeed,
    /// A line holds a `\r` that is not followed by `\n`.
    LoneCarriageReturn,
    /// The text of a simple string or error is not UTF-8.
    NotUtf8 {
        /// [`FrameKind::Simple`] or [`FrameKind::Error`].
        kind: FrameKind,
    },
    /// An integer line is not a decimal `i64` (an optional `-` and digits).
    InvalidInteger,
    /// A bulk or array length line has no digits at all: `$\r\n`.
    EmptyLength {
        /// [`FrameKind::Bulk`] or [`FrameKind::Array`].
        kind: FrameKind,
    },
    /// A bulk or array length is not an optional `-` followed by digits.
    InvalidLength {
        /// [`FrameKind::Bulk`] or [`FrameKind::Array`].
        kind: FrameKind,
    },
    /// A bulk or array length is negative and not -1 (which is null).
    NegativeLength {
        /// [`FrameKind::Bulk`] or [`FrameKind::Array`].
        kind: FrameKind,
        /// The length received.
        len: i64,
    },
    /// A bulk or array length does not fit in an `i64`.
    LengthOverflow {
        /// [`FrameKind::Bulk`] or [`FrameKind::Array`].
        kind: FrameKind,
    },
    /// A bulk length is above [`Limits::max_bulk`].
    BulkTooLong {
        /// The length declared.
        len: u64,
        /// [`Limits::max_bulk`].
        limit: usize,
    },
    /// An array length is above [`Limits::max_array`].
    ArrayTooLong {
        /// The length declared.
        len: u64,
        /// [`Limits::max_array`].
        limit: usize,
    },
    /// An array is nested deeper than [`Limits::max_depth`].
    TooDeep {
        /// [`Limits::max_depth`].
        limit: usize,
    },
    /// A bulk's payload is not followed by exactly `\r\n`.
    MissingBulkCrlf {
        /// The bulk's declared length.
        len: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match *self {
            FrameError::BadType { byte } => {
                if byte.is_ascii_graphic() {
                    write!(f, "invalid type byte '{}' (0x{byte:02x})", char::from(byte))
                } else {
                    write!(f, "invalid type byte 0x{byte:02x}")
                }
            }
            FrameError::LineTooLong { limit } => {
                write!(f, "line longer than the limit of {limit} bytes")
            }
            FrameError::LoneLineFeed => f.write_str("'\\n' without '\\r' before it"),
            FrameError::LoneCarriageReturn => f.write_str("'\\r' not followed by '\\n'"),
            FrameError::NotUtf8 { kind } => write!(f, "{} is not UTF-8", kind.noun()),
            FrameError::InvalidInteger => f.write_str("invalid integer"),
            FrameError::EmptyLength { kind } => write!(f, "empty {} length", kind.noun()),
            FrameError::InvalidLength { kind } => write!(f, "invalid {} length", kind.noun()),
            FrameError::NegativeLength { kind, len } => {
                write!(f, "negative {} length {len}", kind.noun())
            }
            FrameError::LengthOverflow { kind } => {
                write!(f, "{} length does not fit in 64 bits", kind.noun())
            }
            FrameError::BulkTooLong { len, limit } => {
                write!(f, "bulk length {len} above the limit of {limit} bytes")
            }
            FrameError::ArrayTooLong { len, limit } => {
                write!(f, "array length {len} above the limit of {limit} elements")
            }
            FrameError::TooDeep { limit } => write!(f, "array nested deeper than {limit}"),
            FrameError::MissingBulkCrlf { len } => {
                write!(f, "expected '\\r\\n' after a bulk of {len} bytes")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Bulks at least this long are split off the read buffer without copying.
const SHARE_BULKS_FROM: usize = 32 * 1024;

/// The most elements reserved for an array before they arrive.
const MAX_PREALLOCATED: usize = 1024;

/// An array whose header has been decoded and some of whose elements have
/// not.
#[derive(Debug)]
struct PartialArray {
    /// Elements still to come: at least 1.
    remaining: usize,
    items: Vec<Frame>,
}

/// A resumable RESP2 decoder. One per connection.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    /// Arrays under construction, outermost first; never longer than
    /// `limits.max_depth`.
    stack: Vec<PartialArray>,
    /// A bulk's header has been taken off the buffer: its payload and
    /// `\r\n` are awaited.
    bulk: Option<usize>,
    /// How many bytes of the line at the front of the buffer are known to
    /// hold neither `\r` nor `\n`.
    scanned: usize,
    /// The error returned, returned again by every later call.
    failed: Option<FrameError>,
    /// Bytes looked at, for tests of the decoder's linearity.
    #[cfg(test)]
    examined: u64,
}

impl Default for Decoder {
    /// A decoder with the default [`Limits`].
    fn default() -> Decoder {
        Decoder::new(Limits::default())
    }
}

impl Decoder {
    /// A decoder that nothing has been fed to, enforcing `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            stack: Vec::new(),
            bulk: None,
            scanned: 0,
            failed: None,
            #[cfg(test)]
            examined: 0,
        }
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Decodes the next complete frame from the front of `buf`, removing from
    /// `buf` every byte it consumed.
    ///
    /// `Ok(None)`: more bytes are needed. What was consumed so far is kept
    /// inside the decoder (the finished elements of a partly received array,
    /// a bulk's length); the rest (a partial line, a partial bulk payload)
    /// stays in `buf`. Call again with the same buffer once more bytes have
    /// been appended to its end; the caller must not remove or change bytes
    /// in between.
    ///
    /// `Err`: the bytes are not RESP2 within the limits. The stream cannot be
    /// resynchronised: the error is returned again by every later call, and
    /// the connection should be answered with `-ERR {error}` and closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.decode_inner(buf);
        if let Err(error) = &result {
            self.failed = Some(error.clone());
            self.stack = Vec::new();
            self.bulk = None;
            self.scanned = 0;
        }
        result
    }

    /// Removes the empty lines (`\r\n`) at the front of `buf` when no frame
    /// is in progress: between requests, Redis ignores an empty line (an
    /// empty inline command), and `redis-cli --pipe` sends one before its
    /// closing `ECHO`. `false` while `buf` is one `\r` whose `\n` has not
    /// come yet (decode nothing then: a `\r` is not a type byte).
    pub fn skip_empty_lines(&mut self, buf: &mut BytesMut) -> bool {
        if self.is_mid_frame() || self.failed.is_some() {
            return true;
        }
        let mut blank = 0;
        while buf[blank..].starts_with(b"\r\n") {
            blank += 2;
        }
        if blank > 0 {
            self.examine(blank);
            let _ = buf.split_to(blank);
            self.scanned = 0;
        }
        buf.as_ref() != b"\r"
    }

    /// True when the decoder holds part of a frame (for "connection closed
    /// in the middle of a frame"): the header of an array or bulk has been
    /// consumed, but not the whole frame.
    ///
    /// A frame's first line, while incomplete, is left in the buffer: a
    /// connection closed while `is_mid_frame() || !buf.is_empty()` ended in
    /// the middle of a frame.
    pub fn is_mid_frame(&self) -> bool {
        !self.stack.is_empty() || self.bulk.is_some()
    }

    /// Counts bytes looked at (tests only).
    #[inline(always)]
    fn examine(&mut self, _bytes: usize) {
        #[cfg(test)]
        {
            self.examined = self
                .examined
                .saturating_add(u64::try_from(_bytes).unwrap_or(u64::MAX));
        }
    }

    fn decode_inner(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        loop {
            let frame = match self.bulk {
                Some(len) => match self.take_bulk(buf, len)? {
                    Some(data) => {
                        self.bulk = None;
                        Frame::Bulk(data)
                    }
                    None => return Ok(None),
                },
                None => match self.next_line_frame(buf)? {
                    Step::Need => return Ok(None),
                    Step::Again => continue,
                    Step::Frame(frame) => frame,
                },
            };
            // Hand the finished frame to the array it belongs to, closing
            // every array that it completes.
            let mut frame = frame;
            loop {
                let Some(top) = self.stack.last_mut() else {
                    return Ok(Some(frame));
                };
                top.items.push(frame);
                top.remaining = top.remaining.saturating_sub(1);
                if top.remaining > 0 {
                    break;
                }
                let Some(done) = self.stack.pop() else {
                    break;
                };
                frame = Frame::Array(done.items);
            }
        }
    }

    /// Decodes the frame or header whose line is at the front of `buf`.
    fn next_line_frame(&mut self, buf: &mut BytesMut) -> Result<Step, FrameError> {
        let Some(&ty) = buf.first() else {
            return Ok(Step::Need);
        };
        let kind = match ty {
            b'+' => FrameKind::Simple,
            b'-' => FrameKind::Error,
            b':' => FrameKind::Integer,
            b'$' => FrameKind::Bulk,
            b'*' => FrameKind::Array,
            byte => return Err(FrameError::BadType { byte }),
        };
        let Some(cr) = self.find_line_end(buf)? else {
            return Ok(Step::Need);
        };
        let line = buf.get(1..cr).unwrap_or_default();
        let step = match kind {
            FrameKind::Simple | FrameKind::Error => {
                let text = std::str::from_utf8(line)
                    .map_err(|_| FrameError::NotUtf8 { kind })?
                    .to_owned();
                Step::Frame(if kind == FrameKind::Simple {
                    Frame::Simple(text)
                } else {
                    Frame::Error(text)
                })
            }
            FrameKind::Integer => Step::Frame(Frame::Integer(
                parse_i64(line).ok_or(FrameError::InvalidInteger)?,
            )),
            FrameKind::Bulk => match parse_length(line, kind)? {
                None => Step::Frame(Frame::Null),
                Some(len) => {
                    let limit = self.limits.max_bulk;
                    if len > u64::try_from(limit).unwrap_or(u64::MAX) {
                        return Err(FrameError::BulkTooLong { len, limit });
                    }
                    // Fits: it is at most `limit`.
                    let len = usize::try_from(len).unwrap_or(limit);
                    self.bulk = Some(len);
                    Step::Again
                }
            },
            FrameKind::Array => match parse_length(line, kind)? {
                None => Step::Frame(Frame::Null),
                Some(len) => {
                    let limit = self.limits.max_array;
                    if len > u64::try_from(limit).unwrap_or(u64::MAX) {
                        return Err(FrameError::ArrayTooLong { len, limit });
                    }
                    if self.stack.len() >= self.limits.max_depth {
                        return Err(FrameError::TooDeep {
                            limit: self.limits.max_depth,
                        });
                    }
                    let len = usize::try_from(len).unwrap_or(limit);
                    if len == 0 {
                        Step::Frame(Frame::Array(Vec::new()))
                    } else {
                        self.stack.push(PartialArray {
                            remaining: len,
                            items: Vec::with_capacity(len.min(MAX_PREALLOCATED)),
                        });
                        Step::Again
                    }
                }
            },
        };
        buf.advance(cr.saturating_add(2).min(buf.len()));
        Ok(step)
    }

    /// Finds the `\r` of the `\r\n` that ends the line at the front of `buf`
    /// (whose first byte is a valid type byte), scanning only bytes that no
    /// earlier call has scanned.
    fn find_line_end(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let max_line = self.limits.max_line;
        // A `\r` at index `p` makes a line of `p + 2` bytes: only indexes
        // below `max_line - 1` can hold it.
        let window_end = buf.len().min(max_line.saturating_sub(1));
        let start = self.scanned.max(1);
        let window = buf.get(start..window_end).unwrap_or_default();
        match window.iter().position(|&b| b == b'\r' || b == b'\n') {
            Some(offset) => {
                self.examine(offset + 1);
                let p = start + offset;
                if buf.get(p) == Some(&b'\n') {
                    return Err(FrameError::LoneLineFeed);
                }
                match buf.get(p + 1) {
                    None => {
                        // Look at the `\r` again when its `\n` may be there.
                        self.scanned = p;
                        Ok(None)
                    }
                    Some(b'\n') => {
                        self.examine(1);
                        self.scanned = 0;
                        Ok(Some(p))
                    }
                    Some(_) => Err(FrameError::LoneCarriageReturn),
                }
            }
            None => {
                self.examine(window.len());
                if buf.len() >= max_line.saturating_sub(1) {
                    // A byte other than `\r` sits where the line's last `\r`
                    // could at the latest.
                    return Err(FrameError::LineTooLong { limit: max_line });
                }
                self.scanned = buf.len().max(start);
                Ok(None)
            }
        }
    }

    /// Takes a bulk payload of `len` bytes and its `\r\n` off the front of
    /// `buf`, once all of them are there.
    fn take_bulk(&mut self, buf: &mut BytesMut, len: usize) -> Result<Option<Bytes>, FrameError> {
        let Some(need) = len.checked_add(2) else {
            return Err(FrameError::BulkTooLong {
                len: u64::try_from(len).unwrap_or(u64::MAX),
                limit: self.limits.max_bulk,
            });
        };
        if buf.len() < need {
            // Report a missing `\r` as soon as its place is filled.
            if buf.get(len).is_some_and(|&b| b != b'\r') {
                return Err(FrameError::MissingBulkCrlf { len });
            }
            return Ok(None);
        }
        if buf.get(len..need) != Some(b"\r\n".as_slice()) {
            return Err(FrameError::MissingBulkCrlf { len });
        }
        self.examine(need);
        let data = if len < SHARE_BULKS_FROM {
            let data = Bytes::copy_from_slice(buf.get(..len).unwrap_or_default());
            buf.advance(need);
            data
        } else {
            let data = buf.split_to(len).freeze();
            buf.advance(2);
            data
        };
        Ok(Some(data))
    }
}

/// What decoding the line at the front of the buffer gave.
enum Step {
    /// A complete frame.
    Frame(Frame),
    /// A header was consumed: go on decoding.
    Again,
    /// The line is incomplete.
    Need,
}

/// Parses an optional `-` followed by one or more ASCII digits, without
/// overflow (also the digits of a command's integer argument, `cmd`).
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(b - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

/// Parses a bulk or array length: `None` for -1 (null).
fn parse_length(text: &[u8], kind: FrameKind) -> Result<Option<u64>, FrameError> {
    if text.is_empty() {
        return Err(FrameError::EmptyLength { kind });
    }
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(FrameError::InvalidLength { kind });
    }
    let len = parse_i64(text).ok_or(FrameError::LengthOverflow { kind })?;
    match len {
        -1 => Ok(None),
        _ => u64::try_from(len)
            .map(Some)
            .map_err(|_| FrameError::NegativeLength { kind, len }),
    }
}

impl Frame {
    /// Appends this frame's wire form to `out`.
    ///
    /// The text of a simple string or error is written on one line: each
    /// `\r` or `\n` in it is written as a space (as Redis does for its
    /// error replies). Nested arrays are walked without recursion.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut open: Vec<std::slice::Iter<'_, Frame>> = Vec::new();
        let mut next = Some(self);
        while let Some(frame) = next {
            match frame {
                Frame::Simple(text) => encode_simple(out, text),
                Frame::Error(text) => encode_error(out, text),
                Frame::Integer(value) => encode_integer(out, *value),
                Frame::Bulk(data) => encode_bulk(out, data),
                Frame::Null => encode_null(out),
                Frame::Array(items) => {
                    encode_array_header(out, items.len());
                    open.push(items.iter());
                }
            }
            next = None;
            while let Some(items) = open.last_mut() {
                if let Some(item) = items.next() {
                    next = Some(item);
                    break;
                }
                open.pop();
            }
        }
    }

    /// An array of bulk strings: what a client sends as a command.
    pub fn array_of_bulks<I, B>(items: I) -> Frame
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        Frame::Array(
            items
                .into_iter()
                .map(|item| Frame::Bulk(item.into()))
                .collect(),
        )
    }
}

/// Appends a simple string reply, `+text\r\n`; each `\r` or `\n` in `text`
/// is written as a space.
pub fn encode_simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    push_line_text(out, s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends an error reply, `-text\r\n`; each `\r` or `\n` in `text` is
/// written as a space.
pub fn encode_error(out: &mut Vec<u8>, s: &str) {
    out.push(b'-');
    push_line_text(out, s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends an integer reply, `:value\r\n`.
pub fn encode_integer(out: &mut Vec<u8>, value: i64) {
    out.push(b':');
    if value < 0 {
        out.push(b'-');
    }
    push_decimal(out, value.unsigned_abs());
    out.extend_from_slice(b"\r\n");
}

/// Appends a bulk string reply, `$len\r\n` then `data` then `\r\n`.
pub fn encode_bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.reserve(data.len().saturating_add(24));
    out.push(b'$');
    push_decimal(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the null reply, `$-1\r\n`.
pub fn encode_null(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// Appends an array header, `*len\r\n`, to be followed by `len` replies.
pub fn encode_array_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'*');
    push_decimal(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// Appends `text`, writing each `\r` or `\n` as a space.
fn push_line_text(out: &mut Vec<u8>, text: &[u8]) {
    if text.iter().any(|&b| b == b'\r' || b == b'\n') {
        out.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    } else {
        out.extend_from_slice(text);
    }
}

/// Appends `value` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut value: u64) {
    // u64::MAX has 20 digits.
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
        start -= 1;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes every frame of `input` fed in pieces of the given sizes (the
    /// last piece is the rest), and asserts the whole input was consumed.
    fn decode_in_pieces(input: &[u8], sizes: &[usize], limits: Limits) -> Vec<Frame> {
        let mut decoder = Decoder::new(limits);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        let mut rest = input;
        let mut sizes = sizes.iter();
        while !rest.is_empty() {
            let size = sizes.next().copied().unwrap_or(rest.len()).min(rest.len());
            let (piece, tail) = rest.split_at(size);
            rest = tail;
            buf.extend_from_slice(piece);
            while let Some(frame) = decoder.decode(&mut buf).expect("valid input") {
                frames.push(frame);
            }
        }
        assert!(buf.is_empty(), "bytes left over: {buf:?}");
        assert!(!decoder.is_mid_frame());
        frames
    }

    fn decode_all(input: &[u8]) -> Vec<Frame> {
        decode_in_pieces(input, &[], Limits::default())
    }

    /// The first error decoding `input` in one piece.
    fn decode_error(input: &[u8], limits: Limits) -> FrameError {
        let mut decoder = Decoder::new(limits);
        let mut buf = BytesMut::from(input);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error in {input:?}"),
                Err(error) => return error,
            }
        }
    }

    fn encoded(frame: &Frame) -> Vec<u8> {
        let mut out = Vec::new();
        frame.encode(&mut out);
        out
    }

    fn bulk(data: &'static [u8]) -> Frame {
        Frame::Bulk(Bytes::from_static(data))
    }

    /// A small deterministic generator (xorshift) for split points.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    const PIPELINE: &[u8] = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n\
        *2\r\n$3\r\nGET\r\n$3\r\nkey\r\n\
        +OK\r\n-ERR wrong\r\n:-42\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n\
        *2\r\n*2\r\n:1\r\n+a\r\n*1\r\n$2\r\n\r\n\r\n\
        *1\r\n$4\r\nPING\r\n";

    fn pipeline_frames() -> Vec<Frame> {
        vec![
            Frame::array_of_bulks([&b"SET"[..], b"key", b"value"].map(Bytes::from_static)),
            Frame::array_of_bulks([&b"GET"[..], b"key"].map(Bytes::from_static)),
            Frame::Simple("OK".into()),
            Frame::Error("ERR wrong".into()),
            Frame::Integer(-42),
            Frame::Null,
            Frame::Null,
            Frame::Array(vec![]),
            bulk(b""),
            Frame::Array(vec![
                Frame::Array(vec![Frame::Integer(1), Frame::Simple("a".into())]),
                Frame::Array(vec![bulk(b"\r\n")]),
            ]),
            Frame::array_of_bulks([Bytes::from_static(b"PING")]),
        ]
    }

    #[test]
    fn each_frame_type_decodes_from_its_wire_form() {
        assert_eq!(decode_all(PIPELINE), pipeline_frames());
    }

    #[test]
    fn encoding_writes_the_exact_wire_format() {
        assert_eq!(encoded(&Frame::Simple("OK".into())), b"+OK\r\n");
        assert_eq!(encoded(&Frame::Error("ERR x".into())), b"-ERR x\r\n");
        assert_eq!(encoded(&Frame::Integer(0)), b":0\r\n");
        assert_eq!(
            encoded(&Frame::Integer(i64::MIN)),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(
            encoded(&Frame::Integer(i64::MAX)),
            b":9223372036854775807\r\n"
        );
        assert_eq!(encoded(&bulk(b"abc")), b"$3\r\nabc\r\n");
        assert_eq!(encoded(&bulk(b"")), b"$0\r\n\r\n");
        assert_eq!(encoded(&Frame::Null), b"$-1\r\n");
        assert_eq!(encoded(&Frame::Array(vec![])), b"*0\r\n");
        assert_eq!(
            encoded(&Frame::Array(vec![
                Frame::Integer(7),
                Frame::Array(vec![bulk(b"x")]),
                Frame::Null
            ])),
            b"*3\r\n:7\r\n*1\r\n$1\r\nx\r\n$-1\r\n"
        );
    }

    #[test]
    fn the_free_encoders_write_what_frame_encode_writes() {
        let mut out = Vec::new();
        encode_array_header(&mut out, 6);
        encode_simple(&mut out, "PONG");
        encode_error(&mut out, "ERR no");
        encode_integer(&mut out, 1234567890);
        encode_bulk(&mut out, b"hello");
        encode_null(&mut out);
        encode_array_header(&mut out, 0);
        let frame = Frame::Array(vec![
            Frame::Simple("PONG".into()),
            Frame::Error("ERR no".into()),
            Frame::Integer(1234567890),
            bulk(b"hello"),
            Frame::Null,
            Frame::Array(vec![]),
        ]);
        assert_eq!(out, encoded(&frame));
    }

    #[test]
    fn encode_then_decode_gives_back_the_frame() {
        let frames = pipeline_frames();
        let mut wire = Vec::new();
        for frame in &frames {
            frame.encode(&mut wire);
        }
        assert_eq!(decode_all(&wire), frames);
        let big = Frame::Bulk(Bytes::from(vec![b'\n'; SHARE_BULKS_FROM + 5]));
        assert_eq!(decode_all(&encoded(&big)), vec![big]);
    }

    #[test]
    fn integers_at_the_ends_of_i64_round_trip() {
        for value in [i64::MIN, i64::MIN + 1, -1, 0, 1, 9, 10, i64::MAX] {
            let frame = Frame::Integer(value);
            assert_eq!(decode_all(&encoded(&frame)), vec![frame]);
        }
    }

    #[test]
    fn simple_and_error_text_with_line_breaks_is_encoded_on_one_line() {
        assert_eq!(encoded(&Frame::Simple("a\r\nb".into())), b"+a  b\r\n");
        let mut out = Vec::new();
        encode_error(&mut out, "ERR\nbad\r");
        assert_eq!(out, b"-ERR bad \r\n");
    }

    #[test]
    fn a_pipelined_buffer_decodes_the_same_at_every_split_point() {
        let expected = pipeline_frames();
        for split in 0..=PIPELINE.len() {
            assert_eq!(
                decode_in_pieces(PIPELINE, &[split], Limits::default()),
                expected,
                "split at {split}"
            );
        }
        for first in 0..=PIPELINE.len() {
            for second in [1, 2, 3, 5, 8] {
                assert_eq!(
                    decode_in_pieces(PIPELINE, &[first, second], Limits::default()),
                    expected,
                    "split at {first} and {second} later"
                );
            }
        }
    }

    #[test]
    fn a_pipelined_buffer_decodes_the_same_byte_by_byte_and_in_random_pieces() {
        let expected = pipeline_frames();
        let ones = vec![1; PIPELINE.len()];
        assert_eq!(
            decode_in_pieces(PIPELINE, &ones, Limits::default()),
            expected
        );
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..500 {
            let sizes: Vec<usize> = (0..PIPELINE.len()).map(|_| rng.below(12)).collect();
            assert_eq!(
                decode_in_pieces(PIPELINE, &sizes, Limits::default()),
                expected
            );
        }
    }

    #[test]
    fn an_incomplete_array_keeps_its_finished_elements_and_their_bytes_are_consumed() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nGET\r\n$1\r\nk"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert!(decoder.is_mid_frame());
        // The header, the finished element and the second one's header are
        // gone; the second one's partial payload waits.
        assert_eq!(&buf[..], b"k");
        buf.extend_from_slice(b"\r\n:5");
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert_eq!(&buf[..], b":5");
        buf.extend_from_slice(b"\r\n+next");
        assert_eq!(
            decoder.decode(&mut buf),
            Ok(Some(Frame::Array(vec![
                bulk(b"GET"),
                bulk(b"k"),
                Frame::Integer(5)
            ])))
        );
        assert!(!decoder.is_mid_frame());
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert!(
            !decoder.is_mid_frame(),
            "a partial first line stays in the buffer"
        );
        assert_eq!(&buf[..], b"+next");
    }

    #[test]
    fn empty_lines_between_requests_are_skipped_and_a_lone_carriage_return_waits() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"\r\n\r\n*1\r\n$4\r\nPING\r\n\r"[..]);
        assert!(decoder.skip_empty_lines(&mut buf));
        let ping = Frame::array_of_bulks(["PING"]);
        assert_eq!(decoder.decode(&mut buf), Ok(Some(ping)));
        assert!(
            !decoder.skip_empty_lines(&mut buf),
            "a lone '\\r' waits for its '\\n'"
        );
        buf.extend_from_slice(b"\n");
        assert!(decoder.skip_empty_lines(&mut buf));
        assert!(buf.is_empty());
        // Inside a frame an empty line is the frame's business.
        let mut partial = BytesMut::from(&b"*2\r\n"[..]);
        assert_eq!(decoder.decode(&mut partial), Ok(None));
        partial.extend_from_slice(b"\r\n");
        assert!(decoder.skip_empty_lines(&mut partial));
        assert_eq!(partial.as_ref(), b"\r\n");
    }

    #[test]
    fn an_empty_buffer_needs_more_bytes() {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.decode(&mut BytesMut::new()), Ok(None));
        assert!(!decoder.is_mid_frame());
    }

    #[test]
    fn limits_default_to_8_mib_bulks_a_mebi_elements_depth_8_and_64_kib_lines() {
        let limits = Limits::default();
        assert_eq!(limits.max_bulk, 8 * 1024 * 1024);
        assert_eq!(limits.max_array, 1024 * 1024);
        assert_eq!(limits.max_depth, 8);
        assert_eq!(limits.max_line, 64 * 1024);
        assert_eq!(Decoder::new(limits).limits(), limits);
        assert_eq!(Decoder::default().limits(), limits);
    }

    #[test]
    fn a_bulk_declared_above_the_limit_is_an_error_before_its_bytes_arrive() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"$1073741824\r\n"[..]);
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::BulkTooLong {
                len: 1 << 30,
                limit: 8 * 1024 * 1024
            })
        );
        let limits = Limits {
            max_bulk: 3,
            ..Limits::default()
        };
        assert_eq!(
            decode_error(b"$4\r\n", limits),
            FrameError::BulkTooLong { len: 4, limit: 3 }
        );
        assert_eq!(
            decode_in_pieces(b"$3\r\nabc\r\n", &[], limits),
            vec![bulk(b"abc")]
        );
    }

    #[test]
    fn an_array_declared_above_the_limit_is_an_error_before_its_elements_arrive() {
        let limits = Limits {
            max_array: 2,
            ..Limits::default()
        };
        assert_eq!(
            decode_error(b"*3\r\n", limits),
            FrameError::ArrayTooLong { len: 3, limit: 2 }
        );
        assert_eq!(
            decode_error(b"*9223372036854775807\r\n", Limits::default()),
            FrameError::ArrayTooLong {
                len: i64::MAX as u64,
                limit: 1024 * 1024
            }
        );
        assert_eq!(
            decode_in_pieces(b"*2\r\n:1\r\n:2\r\n", &[], limits),
            vec![Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)])]
        );
    }

    #[test]
    fn a_large_declared_array_reserves_little_before_its_elements_arrive() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"*1000000\r\n"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        let reserved = decoder
            .stack
            .iter()
            .map(|a| a.items.capacity())
            .sum::<usize>();
        assert!(reserved <= MAX_PREALLOCATED, "reserved {reserved}");
    }

    #[test]
    fn a_hundred_thousand_deep_nested_array_is_an_error_at_depth_nine_without_recursion() {
        let input = b"*1\r\n".repeat(100_000);
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&input[..]);
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::TooDeep { limit: 8 })
        );
        // The error came at the ninth header: eight were consumed.
        assert_eq!(buf.len(), input.len() - 8 * 4);
        // Fed byte by byte, too.
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        let mut result = Ok(None);
        for &b in &input {
            buf.extend_from_slice(&[b]);
            result = decoder.decode(&mut buf);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(FrameError::TooDeep { limit: 8 }));
    }

    #[test]
    fn arrays_nested_as_deep_as_the_limit_are_accepted() {
        let mut input = b"*1\r\n".repeat(8);
        input.extend_from_slice(b":1\r\n");
        let mut expected = Frame::Integer(1);
        for _ in 0..8 {
            expected = Frame::Array(vec![expected]);
        }
        assert_eq!(decode_all(&input), vec![expected]);
        let none = Limits {
            max_depth: 0,
            ..Limits::default()
        };
        assert_eq!(
            decode_error(b"*0\r\n", none),
            FrameError::TooDeep { limit: 0 }
        );
        assert_eq!(decode_in_pieces(b"*-1\r\n", &[], none), vec![Frame::Null]);
    }

    #[test]
    fn a_line_without_crlf_longer_than_the_limit_is_an_error_without_waiting() {
        let limits = Limits {
            max_line: 10,
            ..Limits::default()
        };
        // Eight bytes could still end with "\r\n" within ten.
        let mut decoder = Decoder::new(limits);
        let mut buf = BytesMut::from(&b"+abcdefg"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        buf.extend_from_slice(b"h");
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::LineTooLong { limit: 10 })
        );
        // A `\r` past the limit does not save it.
        assert_eq!(
            decode_error(b"$123456789\r\n", limits),
            FrameError::LineTooLong { limit: 10 }
        );
        // The default limit holds against a flood without a line end.
        let flood = vec![b'1'; 70_000];
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b":"[..]);
        let mut result = Ok(None);
        for chunk in flood.chunks(1000) {
            buf.extend_from_slice(chunk);
            result = decoder.decode(&mut buf);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(FrameError::LineTooLong { limit: 64 * 1024 }));
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_accepted() {
        let limits = Limits {
            max_line: 10,
            ..Limits::default()
        };
        let ones = vec![1; 10];
        assert_eq!(
            decode_in_pieces(b"+abcdefg\r\n", &ones, limits),
            vec![Frame::Simple("abcdefg".into())]
        );
        assert_eq!(
            decode_in_pieces(b":1234567\r\n", &ones, limits),
            vec![Frame::Integer(1234567)]
        );
    }

    #[test]
    fn an_unknown_type_byte_is_an_error_as_soon_as_it_arrives() {
        for byte in [b'x', b'P', b' ', b'\r', b'\n', 0, 0xff, b'%', b'_'] {
            let mut decoder = Decoder::default();
            let mut buf = BytesMut::from(&[byte][..]);
            assert_eq!(decoder.decode(&mut buf), Err(FrameError::BadType { byte }));
        }
        // Inline commands are not RESP2.
        assert_eq!(
            decode_error(b"PING\r\n", Limits::default()),
            FrameError::BadType { byte: b'P' }
        );
        // An element of an array too.
        assert_eq!(
            decode_error(b"*2\r\n:1\r\nx", Limits::default()),
            FrameError::BadType { byte: b'x' }
        );
    }

    #[test]
    fn minus_one_lengths_decode_as_null() {
        assert_eq!(
            decode_all(b"$-1\r\n*-1\r\n"),
            vec![Frame::Null, Frame::Null]
        );
        assert_eq!(
            decode_all(b"*2\r\n$-1\r\n*-1\r\n"),
            vec![Frame::Array(vec![Frame::Null, Frame::Null])]
        );
    }

    #[test]
    fn a_negative_length_other_than_minus_one_is_an_error() {
        assert_eq!(
            decode_error(b"$-2\r\n", Limits::default()),
            FrameError::NegativeLength {
                kind: FrameKind::Bulk,
                len: -2
            }
        );
        assert_eq!(
            decode_error(b"*-9223372036854775808\r\n", Limits::default()),
            FrameError::NegativeLength {
                kind: FrameKind::Array,
                len: i64::MIN
            }
        );
    }

    #[test]
    fn a_length_that_overflows_i64_is_an_error() {
        for input in [
            &b"$9223372036854775808\r\n"[..],
            b"$99999999999999999999999\r\n",
            b"$-9223372036854775809\r\n",
        ] {
            assert_eq!(
                decode_error(input, Limits::default()),
                FrameError::LengthOverflow {
                    kind: FrameKind::Bulk
                }
            );
        }
        assert_eq!(
            decode_error(b"*18446744073709551616\r\n", Limits::default()),
            FrameError::LengthOverflow {
                kind: FrameKind::Array
            }
        );
    }

    #[test]
    fn a_length_with_non_digits_is_an_error() {
        for input in [
            &b"$abc\r\n"[..],
            b"$-\r\n",
            b"$+3\r\n",
            b"$ 3\r\n",
            b"$3 \r\n",
            b"$--1\r\n",
            b"$1-\r\n",
        ] {
            assert_eq!(
                decode_error(input, Limits::default()),
                FrameError::InvalidLength {
                    kind: FrameKind::Bulk
                },
                "{input:?}"
            );
        }
        assert_eq!(
            decode_error(b"*x\r\n", Limits::default()),
            FrameError::InvalidLength {
                kind: FrameKind::Array
            }
        );
    }

    #[test]
    fn an_empty_length_is_an_error() {
        assert_eq!(
            decode_error(b"$\r\n", Limits::default()),
            FrameError::EmptyLength {
                kind: FrameKind::Bulk
            }
        );
        assert_eq!(
            decode_error(b"*\r\n", Limits::default()),
            FrameError::EmptyLength {
                kind: FrameKind::Array
            }
        );
    }

    #[test]
    fn a_simple_or_error_line_that_is_not_utf8_is_an_error() {
        assert_eq!(
            decode_error(b"+ok\xff\r\n", Limits::default()),
            FrameError::NotUtf8 {
                kind: FrameKind::Simple
            }
        );
        assert_eq!(
            decode_error(b"-ERR \xc3\r\n", Limits::default()),
            FrameError::NotUtf8 {
                kind: FrameKind::Error
            }
        );
        assert_eq!(
            decode_all("+caf\u{e9}\r\n".as_bytes()),
            vec![Frame::Simple("caf\u{e9}".into())]
        );
    }

    #[test]
    fn a_bulk_not_followed_by_crlf_is_an_error() {
        for input in [
            &b"$3\r\nabcd\r\n"[..],
            b"$3\r\nabc\rx",
            b"$3\r\nabc\n\r",
            b"$0\r\nx\r\n",
        ] {
            assert!(
                matches!(
                    decode_error(input, Limits::default()),
                    FrameError::MissingBulkCrlf { .. }
                ),
                "{input:?}"
            );
        }
        // As soon as the byte after the payload is there and is not `\r`.
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"$3\r\nabcX"[..]);
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::MissingBulkCrlf { len: 3 })
        );
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"$3\r\nabc\r"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert!(decoder.is_mid_frame());
    }

    #[test]
    fn an_integer_that_is_not_a_valid_i64_is_an_error() {
        for input in [
            &b":\r\n"[..],
            b":-\r\n",
            b":+1\r\n",
            b":1a\r\n",
            b": 1\r\n",
            b":1.5\r\n",
            b":9223372036854775808\r\n",
            b":-9223372036854775809\r\n",
        ] {
            assert_eq!(
                decode_error(input, Limits::default()),
                FrameError::InvalidInteger,
                "{input:?}"
            );
        }
    }

    #[test]
    fn a_bare_line_feed_is_an_error() {
        assert_eq!(
            decode_error(b"+OK\n", Limits::default()),
            FrameError::LoneLineFeed
        );
        assert_eq!(
            decode_error(b"*1\n", Limits::default()),
            FrameError::LoneLineFeed
        );
        assert_eq!(
            decode_error(b"$3\r\nabc\r\n:1\n\r\n", Limits::default()),
            FrameError::LoneLineFeed
        );
    }

    #[test]
    fn a_carriage_return_not_followed_by_a_line_feed_is_an_error() {
        assert_eq!(
            decode_error(b"+O\rK\r\n", Limits::default()),
            FrameError::LoneCarriageReturn
        );
        // Fed apart, the `\r` waits for the next byte.
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b":12\r"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        buf.extend_from_slice(b"\r");
        assert_eq!(
            decoder.decode(&mut buf),
            Err(FrameError::LoneCarriageReturn)
        );
    }

    #[test]
    fn after_an_error_the_decoder_keeps_returning_it() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"*2\r\n:1\r\n?"[..]);
        let error = FrameError::BadType { byte: b'?' };
        assert_eq!(decoder.decode(&mut buf), Err(error.clone()));
        assert!(!decoder.is_mid_frame());
        buf.clear();
        buf.extend_from_slice(b"+OK\r\n");
        assert_eq!(decoder.decode(&mut buf), Err(error));
    }

    #[test]
    fn error_texts_name_what_was_wrong_and_the_limit() {
        let bulk = FrameKind::Bulk;
        let cases = [
            (
                FrameError::BadType { byte: b'x' },
                "Protocol error: invalid type byte 'x' (0x78)",
            ),
            (
                FrameError::BadType { byte: b'\r' },
                "Protocol error: invalid type byte 0x0d",
            ),
            (
                FrameError::LineTooLong { limit: 65536 },
                "Protocol error: line longer than the limit of 65536 bytes",
            ),
            (
                FrameError::LoneLineFeed,
                "Protocol error: '\\n' without '\\r' before it",
            ),
            (
                FrameError::LoneCarriageReturn,
                "Protocol error: '\\r' not followed by '\\n'",
            ),
            (
                FrameError::NotUtf8 {
                    kind: FrameKind::Simple,
                },
                "Protocol error: simple string is not UTF-8",
            ),
            (
                FrameError::NotUtf8 {
                    kind: FrameKind::Error,
                },
                "Protocol error: error string is not UTF-8",
            ),
            (
                FrameError::InvalidInteger,
                "Protocol error: invalid integer",
            ),
            (
                FrameError::EmptyLength { kind: bulk },
                "Protocol error: empty bulk length",
            ),
            (
                FrameError::InvalidLength { kind: bulk },
                "Protocol error: invalid bulk length",
            ),
            (
                FrameError::InvalidLength {
                    kind: FrameKind::Array,
                },
                "Protocol error: invalid array length",
            ),
            (
                FrameError::NegativeLength {
                    kind: bulk,
                    len: -5,
                },
                "Protocol error: negative bulk length -5",
            ),
            (
                FrameError::LengthOverflow { kind: bulk },
                "Protocol error: bulk length does not fit in 64 bits",
            ),
            (
                FrameError::BulkTooLong {
                    len: 1073741824,
                    limit: 8388608,
                },
                "Protocol error: bulk length 1073741824 above the limit of 8388608 bytes",
            ),
            (
                FrameError::ArrayTooLong {
                    len: 2000000,
                    limit: 1048576,
                },
                "Protocol error: array length 2000000 above the limit of 1048576 elements",
            ),
            (
                FrameError::TooDeep { limit: 8 },
                "Protocol error: array nested deeper than 8",
            ),
            (
                FrameError::MissingBulkCrlf { len: 3 },
                "Protocol error: expected '\\r\\n' after a bulk of 3 bytes",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn error_texts_are_one_line_for_every_type_byte() {
        for byte in 0..=u8::MAX {
            let text = FrameError::BadType { byte }.to_string();
            assert!(!text.contains(['\r', '\n']), "{text:?}");
        }
    }

    #[test]
    fn array_of_bulks_builds_an_array_of_bulk_frames() {
        assert_eq!(
            Frame::array_of_bulks(["GET", "k"]),
            Frame::Array(vec![bulk(b"GET"), bulk(b"k")])
        );
        assert_eq!(
            Frame::array_of_bulks(Vec::<Vec<u8>>::new()),
            Frame::Array(vec![])
        );
    }

    #[test]
    fn a_million_element_array_fed_in_seven_byte_pieces_is_decoded_in_linear_work() {
        const N: usize = 1_000_000;
        let mut input = b"*1000000\r\n".to_vec();
        for _ in 0..N {
            input.extend_from_slice(b"$1\r\na\r\n");
        }
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        let mut calls = 0u64;
        let started = std::time::Instant::now();
        for piece in input.chunks(7) {
            buf.extend_from_slice(piece);
            calls += 1;
            if let Some(frame) = decoder.decode(&mut buf).expect("valid input") {
                frames.push(frame);
            }
        }
        let elapsed = started.elapsed();
        assert_eq!(frames.len(), 1);
        let Some(Frame::Array(items)) = frames.pop() else {
            panic!("not an array");
        };
        assert_eq!(items.len(), N);
        assert!(items.iter().all(|item| *item == bulk(b"a")));
        // Every byte is looked at about once, plus a `\r` looked at again
        // when a piece ended between it and its `\n`.
        let bound = input.len() as u64 + calls;
        assert!(
            decoder.examined <= bound,
            "examined {} bytes of {} in {calls} calls",
            decoder.examined,
            input.len()
        );
        assert!(elapsed.as_secs() < 20, "took {elapsed:?}");
    }

    #[test]
    fn a_long_line_fed_byte_by_byte_is_scanned_once() {
        let mut input = b"+".to_vec();
        input.extend(std::iter::repeat_n(b'a', 60_000));
        input.extend_from_slice(b"\r\n");
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        let mut frame = None;
        for &b in &input {
            buf.extend_from_slice(&[b]);
            if let Some(f) = decoder.decode(&mut buf).expect("valid input") {
                frame = Some(f);
            }
        }
        assert_eq!(frame, Some(Frame::Simple("a".repeat(60_000))));
        assert!(
            decoder.examined <= input.len() as u64 + 2,
            "{}",
            decoder.examined
        );
    }

    #[test]
    fn a_large_bulk_fed_byte_by_byte_is_not_rescanned() {
        let payload = vec![b'\r'; 100_000];
        let mut input = b"$100000\r\n".to_vec();
        input.extend_from_slice(&payload);
        input.extend_from_slice(b"\r\n");
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        let mut frame = None;
        for &b in &input {
            buf.extend_from_slice(&[b]);
            if let Some(f) = decoder.decode(&mut buf).expect("valid input") {
                frame = Some(f);
            }
        }
        assert_eq!(frame, Some(Frame::Bulk(Bytes::from(payload))));
        assert!(
            decoder.examined <= input.len() as u64 + 8,
            "{}",
            decoder.examined
        );
    }
}
