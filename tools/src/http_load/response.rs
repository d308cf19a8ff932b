//! An incremental HTTP/1.1 response parser: bytes go in as they come off
//! the socket, split anywhere, and it says when one whole response (status
//! line, headers and body) has been read.
//!
//! Bodies are delimited as RFC 9112 section 6.3 says: no body for 1xx, 204
//! and 304 responses (and for the answer to a HEAD request, which the load
//! generator never sends); otherwise `Transfer-Encoding: chunked` (chunk
//! sizes, extensions and trailers), else `Content-Length`, else the body
//! runs until the server closes the connection. An interim 1xx response
//! (other than 101) is skipped: the final response that follows it is the
//! one reported.

use core::fmt;

/// The most bytes a status line and headers, or one chunk-size or trailer
/// line, may take before the response is rejected as malformed.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What went wrong with a response; the connection it came on is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The status line is not `HTTP/1.x NNN reason`.
    StatusLine(String),
    /// A header line has no colon, or a name that is not a token.
    Header(String),
    /// `Content-Length` is not a number, or two of them disagree.
    ContentLength(String),
    /// A `Transfer-Encoding` other than one ending in `chunked`.
    TransferEncoding(String),
    /// A chunk-size line is not hexadecimal, or a chunk's data is not
    /// followed by CRLF.
    Chunk(String),
    /// The status line and headers, or a chunk line, exceed
    /// [`MAX_HEAD_BYTES`].
    TooLong,
    /// The connection ended before the response did.
    UnexpectedEof,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::StatusLine(line) => write!(f, "bad status line {line:?}"),
            ParseError::Header(line) => write!(f, "bad header line {line:?}"),
            ParseError::ContentLength(value) => write!(f, "bad Content-Length {value:?}"),
            ParseError::TransferEncoding(value) => {
                write!(f, "unsupported Transfer-Encoding {value:?}")
            }
            ParseError::Chunk(what) => write!(f, "bad chunked body: {what}"),
            ParseError::TooLong => write!(f, "a head or chunk line over {MAX_HEAD_BYTES} bytes"),
            ParseError::UnexpectedEof => write!(f, "connection closed in the middle of a response"),
        }
    }
}

impl std::error::Error for ParseError {}

/// One complete response, as far as a load generator cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code of the final (non-1xx) response.
    pub status: u16,
    /// How many body bytes it carried (after removing chunk framing).
    pub body_len: u64,
    /// Whether the connection cannot carry another request: the server
    /// sent `Connection: close`, answered with HTTP/1.0 without
    /// `Connection: keep-alive`, or delimited the body by closing.
    pub close: bool,
}

/// The outcome of feeding bytes to a [`ResponseParser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Every byte was consumed and the response is not finished yet.
    NeedMore,
    /// The response ended after the first `consumed` bytes of the input;
    /// any bytes after those belong to something else.
    Done {
        /// The response that was read.
        response: Response,
        /// How many bytes of this input it took.
        consumed: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    ChunkSize,
    ChunkDataEnd,
    Trailer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Head,
    Fixed { remaining: u64 },
    Line(LineKind),
    ChunkData { remaining: u64 },
    UntilClose,
}

/// Reads one HTTP/1.1 response from bytes split at arbitrary places.
///
/// Feed each read to [`ResponseParser::feed`] until it returns
/// [`Progress::Done`]; at end of stream call [`ResponseParser::eof`]. After
/// a response is done, [`ResponseParser::reset`] (or a new parser) reads the
/// next one.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    /// The head, or the current chunk-size/trailer line, read so far.
    line: Vec<u8>,
    status: u16,
    body_len: u64,
    close: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

/// What a parsed head says about the body that follows.
struct Head {
    status: u16,
    close: bool,
    chunked: bool,
    content_length: Option<u64>,
}

impl ResponseParser {
    /// A parser waiting for the first byte of a response.
    pub fn new() -> Self {
        ResponseParser {
            state: State::Head,
            line: Vec::with_capacity(256),
            status: 0,
            body_len: 0,
            close: false,
        }
    }

    /// Forgets everything about the previous response (keeping buffers).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.line.clear();
        self.status = 0;
        self.body_len = 0;
        self.close = false;
    }

    /// Consumes `input`, the next bytes of the stream.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, ParseError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Head => {
                    let Some(taken) = self.take_head(&input[pos..])? else {
                        return Ok(Progress::NeedMore);
                    };
                    pos += taken;
                    let head = parse_head(&self.line)?;
                    self.line.clear();
                    if (100..200).contains(&head.status) && head.status != 101 {
                        // An interim response: the final one follows.
                        continue;
                    }
                    self.status = head.status;
                    self.close = head.close;
                    if head.status < 200 || head.status == 204 || head.status == 304 {
                        return Ok(self.done(pos));
                    }
                    if head.chunked {
                        self.state = State::Line(LineKind::ChunkSize);
                    } else if let Some(len) = head.content_length {
                        if len == 0 {
                            return Ok(self.done(pos));
                        }
                        self.state = State::Fixed { remaining: len };
                    } else {
                        self.close = true;
                        self.state = State::UntilClose;
                    }
                }
                State::Fixed { remaining } => {
                    let n = take_body(remaining, input.len() - pos);
                    pos += n;
                    self.body_len += n as u64;
                    if n as u64 == remaining {
                        return Ok(self.done(pos));
                    }
                    self.state = State::Fixed {
                        remaining: remaining - n as u64,
                    };
                    return Ok(Progress::NeedMore);
                }
                State::ChunkData { remaining } => {
                    let n = take_body(remaining, input.len() - pos);
                    pos += n;
                    self.body_len += n as u64;
                    if n as u64 == remaining {
                        self.state = State::Line(LineKind::ChunkDataEnd);
                    } else {
                        self.state = State::ChunkData {
                            remaining: remaining - n as u64,
                        };
                        return Ok(Progress::NeedMore);
                    }
                }
                State::Line(kind) => {
                    let Some(taken) = self.take_line(&input[pos..])? else {
                        return Ok(Progress::NeedMore);
                    };
                    pos += taken;
                    let line = trim_crlf(&self.line);
                    match kind {
                        LineKind::ChunkSize => {
                            let size = parse_chunk_size(line)?;
                            self.state = if size == 0 {
                                State::Line(LineKind::Trailer)
                            } else {
                                State::ChunkData { remaining: size }
                            };
                        }
                        LineKind::ChunkDataEnd => {
                            if !line.is_empty() {
                                return Err(ParseError::Chunk(
                                    "chunk data longer than its size".into(),
                                ));
                            }
                            self.state = State::Line(LineKind::ChunkSize);
                        }
                        LineKind::Trailer => {
                            if line.is_empty() {
                                self.line.clear();
                                return Ok(self.done(pos));
                            }
                        }
                    }
                    self.line.clear();
                }
                State::UntilClose => {
                    self.body_len += (input.len() - pos) as u64;
                    return Ok(Progress::NeedMore);
                }
            }
        }
    }

    /// The stream ended: the response if its body runs until the close,
    /// [`ParseError::UnexpectedEof`] if it was cut short (or never began).
    pub fn eof(&mut self) -> Result<Response, ParseError> {
        match self.state {
            State::UntilClose => match self.done(0) {
                Progress::Done { response, .. } => Ok(response),
                Progress::NeedMore => unreachable!("done always finishes"),
            },
            _ => Err(ParseError::UnexpectedEof),
        }
    }

    /// Whether no byte of a response has been read yet (so that the end of
    /// the stream here is a close between responses, not in one).
    pub fn is_idle(&self) -> bool {
        self.state == State::Head && self.line.is_empty()
    }

    fn done(&mut self, consumed: usize) -> Progress {
        let response = Response {
            status: self.status,
            body_len: self.body_len,
            close: self.close,
        };
        self.reset();
        Progress::Done { response, consumed }
    }

    /// Appends input to the head until the blank line; the number of bytes
    /// of `input` taken once the head is complete.
    fn take_head(&mut self, input: &[u8]) -> Result<Option<usize>, ParseError> {
        let before = self.line.len();
        // Only look at as much input as could still fit in a head.
        let room = MAX_HEAD_BYTES + 4 - before.min(MAX_HEAD_BYTES + 4);
        let chunk = &input[..input.len().min(room)];
        self.line.extend_from_slice(chunk);
        let search_from = before.saturating_sub(3);
        match find(&self.line[search_from..], b"\r\n\r\n") {
            Some(at) => {
                let end = search_from + at + 4;
                if end > MAX_HEAD_BYTES {
                    return Err(ParseError::TooLong);
                }
                self.line.truncate(end);
                Ok(Some(end - before))
            }
            None if self.line.len() >= MAX_HEAD_BYTES => Err(ParseError::TooLong),
            None => Ok(None),
        }
    }

    /// Appends input to the current line until LF; the number of bytes of
    /// `input` taken once the line is complete.
    fn take_line(&mut self, input: &[u8]) -> Result<Option<usize>, ParseError> {
        match input.iter().position(|&b| b == b'\n') {
            Some(at) => {
                self.line.extend_from_slice(&input[..=at]);
                if self.line.len() > MAX_HEAD_BYTES {
                    return Err(ParseError::TooLong);
                }
                Ok(Some(at + 1))
            }
            None => {
                self.line.extend_from_slice(input);
                if self.line.len() > MAX_HEAD_BYTES {
                    return Err(ParseError::TooLong);
                }
                Ok(None)
            }
        }
    }
}

fn take_body(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn trim_crlf(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, ParseError> {
    let size = line.split(|&b| b == b';').next().unwrap_or_default();
    let size = size.trim_ascii();
    let text = core::str::from_utf8(size)
        .ok()
        .filter(|s| !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    text.and_then(|s| u64::from_str_radix(s, 16).ok())
        .ok_or_else(|| ParseError::Chunk(format!("chunk size {:?}", lossy(line))))
}

fn is_token(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn parse_head(head: &[u8]) -> Result<Head, ParseError> {
    let mut lines = head.split(|&b| b == b'\n').map(trim_crlf);
    let status_line = lines.next().unwrap_or_default();
    let bad_status = || ParseError::StatusLine(lossy(status_line));
    let mut parts = status_line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let minor = match version {
        b"HTTP/1.1" => 1,
        b"HTTP/1.0" => 0,
        _ => return Err(bad_status()),
    };
    let code = parts.next().unwrap_or_default();
    if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) {
        return Err(bad_status());
    }
    let status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    if status < 100 {
        return Err(bad_status());
    }

    let mut close = minor == 0;
    let mut chunked = false;
    let mut content_length: Option<u64> = None;
    for line in lines.filter(|l| !l.is_empty()) {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| ParseError::Header(lossy(line)))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !is_token(name) {
            return Err(ParseError::Header(lossy(line)));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let text = core::str::from_utf8(value).unwrap_or("");
            let len = (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<u64>().ok())
                .flatten()
                .ok_or_else(|| ParseError::ContentLength(lossy(value)))?;
            if content_length.is_some_and(|old| old != len) {
                return Err(ParseError::ContentLength(lossy(value)));
            }
            content_length = Some(len);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            if !last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Err(ParseError::TransferEncoding(lossy(value)));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for option in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if option.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if option.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                    close = false;
                }
            }
        }
    }
    Ok(Head {
        status,
        close,
        chunked,
        content_length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

    /// Feeds `stream` in pieces cut at `cuts` and collects every response
    /// (and the position in the stream where each one ended).
    fn feed_in_pieces(stream: &[u8], cuts: &[usize]) -> Vec<(Response, usize)> {
        let mut parser = ResponseParser::new();
        let mut out = Vec::new();
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(stream.len());
        for w in bounds.windows(2) {
            let mut piece = &stream[w[0]..w[1]];
            let mut offset = w[0];
            while !piece.is_empty() {
                match parser.feed(piece).expect("valid stream") {
                    Progress::NeedMore => break,
                    Progress::Done { response, consumed } => {
                        offset += consumed;
                        out.push((response, offset));
                        piece = &piece[consumed..];
                    }
                }
            }
        }
        out
    }

    fn ok(body_len: u64) -> Response {
        Response {
            status: 200,
            body_len,
            close: false,
        }
    }

    #[test]
    fn a_content_length_response_in_one_read_is_done_with_every_byte_consumed() {
        let mut parser = ResponseParser::new();
        assert_eq!(
            parser.feed(HELLO),
            Ok(Progress::Done {
                response: ok(13),
                consumed: HELLO.len()
            })
        );
        assert!(parser.is_idle());
    }

    #[test]
    fn a_response_split_at_every_possible_place_parses_the_same() {
        for cut in 1..HELLO.len() {
            assert_eq!(
                feed_in_pieces(HELLO, &[cut]),
                vec![(ok(13), HELLO.len())],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_response_fed_one_byte_at_a_time_is_done_only_at_its_last_byte() {
        let mut parser = ResponseParser::new();
        for (i, byte) in HELLO.iter().enumerate() {
            let progress = parser.feed(core::slice::from_ref(byte)).unwrap();
            if i + 1 < HELLO.len() {
                assert_eq!(progress, Progress::NeedMore, "byte {i}");
            } else {
                assert_eq!(
                    progress,
                    Progress::Done {
                        response: ok(13),
                        consumed: 1
                    }
                );
            }
        }
    }

    #[test]
    fn the_blank_line_split_across_reads_ends_the_head() {
        let end_of_head = HELLO.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        for cut in end_of_head..end_of_head + 4 {
            assert_eq!(feed_in_pieces(HELLO, &[cut]), vec![(ok(13), HELLO.len())]);
        }
    }

    #[test]
    fn back_to_back_responses_in_one_read_are_reported_one_by_one() {
        let stream = [HELLO, HELLO, HELLO].concat();
        let ends: Vec<usize> = (1..=3).map(|i| i * HELLO.len()).collect();
        let got = feed_in_pieces(&stream, &[5, HELLO.len() + 70]);
        assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), ends);
    }

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        7\r\nHello, \r\n6;ext=1\r\nWorld!\r\n0\r\nX-Trailer: yes\r\n\r\n";

    #[test]
    fn a_chunked_body_split_at_every_chunk_boundary_counts_its_data_bytes() {
        for cut in 1..CHUNKED.len() {
            assert_eq!(
                feed_in_pieces(CHUNKED, &[cut]),
                vec![(ok(13), CHUNKED.len())],
                "cut at {cut}"
            );
        }
        let every_byte: Vec<usize> = (1..CHUNKED.len()).collect();
        assert_eq!(
            feed_in_pieces(CHUNKED, &every_byte),
            vec![(ok(13), CHUNKED.len())]
        );
    }

    #[test]
    fn chunked_wins_over_content_length() {
        let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n\
            2\r\nhi\r\n0\r\n\r\n";
        assert_eq!(feed_in_pieces(stream, &[]), vec![(ok(2), stream.len())]);
    }

    #[test]
    fn chunk_data_longer_than_its_size_is_an_error() {
        let stream =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n";
        assert!(matches!(
            ResponseParser::new().feed(stream),
            Err(ParseError::Chunk(_))
        ));
    }

    #[test]
    fn a_no_content_response_has_no_body_even_with_a_content_length() {
        let stream = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
        let got = feed_in_pieces(stream, &[]);
        assert_eq!(got[0].0.status, 204);
        assert_eq!(got[0].0.body_len, 0);
    }

    #[test]
    fn an_interim_100_continue_is_skipped_for_the_final_response() {
        let stream = [b"HTTP/1.1 100 Continue\r\n\r\n".as_slice(), HELLO].concat();
        assert_eq!(feed_in_pieces(&stream, &[10]), vec![(ok(13), stream.len())]);
    }

    #[test]
    fn connection_close_and_http_1_0_mark_the_connection_as_done() {
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(feed_in_pieces(close, &[])[0].0.close);
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(feed_in_pieces(old, &[])[0].0.close);
        let old_keep = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        assert!(!feed_in_pieces(old_keep, &[])[0].0.close);
    }

    #[test]
    fn a_body_without_length_runs_until_the_connection_closes() {
        let mut parser = ResponseParser::new();
        let head = b"HTTP/1.1 200 OK\r\n\r\nsome";
        assert_eq!(parser.feed(head), Ok(Progress::NeedMore));
        assert_eq!(parser.feed(b" bytes"), Ok(Progress::NeedMore));
        assert_eq!(
            parser.eof(),
            Ok(Response {
                status: 200,
                body_len: 10,
                close: true
            })
        );
    }

    #[test]
    fn the_end_of_the_stream_inside_a_response_is_an_unexpected_eof() {
        let mut parser = ResponseParser::new();
        assert_eq!(
            parser.feed(&HELLO[..HELLO.len() - 1]),
            Ok(Progress::NeedMore)
        );
        assert!(!parser.is_idle());
        assert_eq!(parser.eof(), Err(ParseError::UnexpectedEof));
        assert_eq!(ResponseParser::new().eof(), Err(ParseError::UnexpectedEof));
    }

    #[test]
    fn malformed_heads_are_errors_not_panics() {
        // Each case with an error of the variant it must give.
        let any = String::new;
        let cases: [(&[u8], ParseError); 6] = [
            (b"HTTX/1.1 200 OK\r\n\r\n", ParseError::StatusLine(any())),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", ParseError::StatusLine(any())),
            (
                b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                ParseError::Header(any()),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                ParseError::ContentLength(any()),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                ParseError::ContentLength(any()),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                ParseError::TransferEncoding(any()),
            ),
        ];
        for (stream, expected) in cases {
            let err = ResponseParser::new().feed(stream).unwrap_err();
            assert_eq!(
                core::mem::discriminant(&err),
                core::mem::discriminant(&expected),
                "{:?} gave {err:?}",
                lossy(stream)
            );
        }
    }

    #[test]
    fn a_head_that_never_ends_is_rejected_once_it_exceeds_the_limit() {
        let mut parser = ResponseParser::new();
        let filler = vec![b'a'; 4096];
        assert_eq!(
            parser.feed(b"HTTP/1.1 200 OK\r\nX: "),
            Ok(Progress::NeedMore)
        );
        let mut result = Ok(Progress::NeedMore);
        for _ in 0..(MAX_HEAD_BYTES / filler.len() + 1) {
            result = parser.feed(&filler);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(ParseError::TooLong));
    }
}
