//! The HTTP/1.1 of `hello_http`, with no I/O and no runtime in it: the
//! request heads it accepts (an incremental, allocation-free scanner that
//! finds where a head ends, and a strict parser of the head once it has
//! all arrived), the [`Framer`] that takes a connection's requests off its
//! bytes (pipelined requests together, bodies skipped), and the exact
//! bytes of every response.
//!
//! Every server that answers like `hello_http` includes this file with
//! `#[path]`: the Spindle server (`server.rs`, on any executor) and the
//! tokio reference of the HTTP benchmark (`tools/src/bin/hello_tokio.rs`),
//! so that both parse the same requests the same way and answer with the
//! same bytes (a test in `tools/tests/hello_tokio.rs` compares them).
//!
//! # Protocol
//!
//! A request is a head (request line, header fields, an empty line; every
//! line ends with CRLF) and a body of exactly `Content-Length` bytes (none
//! without it), as in RFC 9112. The server reads bodies only to skip them.
//!
//! * Request line: `method SP target SP HTTP/d.d`, one space between the
//!   parts. The method is a token; the target is visible ASCII; the
//!   version is `HTTP/1.0` or `HTTP/1.x` (treated as 1.1). Anything else
//!   (a missing version included) is `400 Bad Request`; a well-formed
//!   version of another major number is `505 HTTP Version Not Supported`.
//! * Up to [`MAX_LEADING_EMPTY_LINES`] empty lines before the request line
//!   are skipped (RFC 9112, section 2.2).
//! * Header fields: `name: value`; the name is a token with no space
//!   before the colon, the value visible ASCII, spaces, tabs or bytes
//!   above 0x7F, with the spaces around it dropped. A line folded onto the
//!   next (obsolete line folding), a bare LF or a stray CR is `400`.
//! * `Content-Length`: decimal digits only, parsed with checked
//!   arithmetic; a sign, a list, an empty value, a value past `u64::MAX` or
//!   two different values are `400`. A length within `u64` but above
//!   [`Limits::max_body`] is `413 Content Too Large`.
//! * `Transfer-Encoding` is not implemented: `501 Not Implemented` (`400`
//!   together with `Content-Length`, the classic request-smuggling
//!   ambiguity).
//! * HTTP/1.1 needs exactly one `Host` field (`400` otherwise).
//! * `Connection`: a comma-separated list; `close` asks to close after the
//!   response; HTTP/1.0 closes unless the list has `keep-alive`.
//! * A head longer than [`Limits::max_head`] (counting the empty line that
//!   ends it, not the body) is `431 Request Header Fields Too Large`, found
//!   as soon as that many bytes are buffered without an end.
//!
//! Errors that can be seen before a head is complete are reported at once:
//! a bare LF anywhere, a method byte that cannot be in a token (a TLS
//! handshake sent to the plain-text port, say), or a bad request line once
//! its CRLF has arrived.
//!
//! # Cost
//!
//! [`Scanner::feed`] remembers how far it has looked, so a head trickled
//! in byte by byte is scanned once (linear, not quadratic, in its length),
//! and the full parse runs once per head. All arithmetic on lengths is
//! checked or saturating; no input makes it panic (the tests feed it
//! arbitrary bytes).
//!
//! The design (an incremental search for the end of the head, then one
//! strict pass over it, with the rules of RFC 9110 and RFC 9112) follows
//! the RFCs; hyper and httparse were not consulted for code.
//!
//! # Responses
//!
//! A valid request is answered `200 OK` with `Content-Type: text/plain`
//! and the body [`BODY`] (none for `HEAD`); the response says
//! `Connection: close` when the request asked to close (or was HTTP/1.0
//! without `keep-alive`) and `Connection: keep-alive` to an HTTP/1.0
//! request that stays open. A refused request gets its status, `Connection:
//! close` and the reason as a one-line body ([`error_response`]); a
//! handler that runs out of time, `503` with no body ([`unavailable`]).
//! Answers to pipelined requests are concatenated in request order
//! ([`responses`]), to go out in one write.

/// Empty lines skipped before a request line (more are `400`).
pub const MAX_LEADING_EMPTY_LINES: usize = 8;

/// The bounds a request must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes a head may take, its final empty line included.
    pub max_head: usize,
    /// The largest `Content-Length` accepted.
    pub max_body: u64,
}

impl Default for Limits {
    /// 64 KiB of head, 1 MiB of body.
    fn default() -> Limits {
        Limits {
            max_head: 64 * 1024,
            max_body: 1024 * 1024,
        }
    }
}

/// Why a request is refused: the status of the error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `400 Bad Request`: the head breaks the syntax above.
    BadRequest,
    /// `413 Content Too Large`: `Content-Length` above the body limit.
    ContentTooLarge,
    /// `431 Request Header Fields Too Large`: the head limit.
    HeaderTooLarge,
    /// `501 Not Implemented`: a `Transfer-Encoding`.
    NotImplemented,
    /// `505 HTTP Version Not Supported`: `HTTP/d.d` with a major other
    /// than 1.
    VersionNotSupported,
}

impl Status {
    /// The status line's code and reason phrase.
    pub fn line(self) -> &'static str {
        match self {
            Status::BadRequest => "400 Bad Request",
            Status::ContentTooLarge => "413 Content Too Large",
            Status::HeaderTooLarge => "431 Request Header Fields Too Large",
            Status::NotImplemented => "501 Not Implemented",
            Status::VersionNotSupported => "505 HTTP Version Not Supported",
        }
    }

    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::BadRequest => 400,
            Status::ContentTooLarge => 413,
            Status::HeaderTooLarge => 431,
            Status::NotImplemented => 501,
            Status::VersionNotSupported => 505,
        }
    }
}

/// A refused request: the status and a one-line explanation (the error
/// response's body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    /// The response status.
    pub status: Status,
    /// What was wrong, for the client.
    pub reason: &'static str,
}

const fn reject(status: Status, reason: &'static str) -> Rejection {
    Rejection { status, reason }
}

const BAD_LF: Rejection = reject(Status::BadRequest, "a line ends with LF, not CRLF");

/// A complete, valid request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Bytes of the head, its final empty line included.
    pub head_len: usize,
    /// Bytes of body that follow (from `Content-Length`).
    pub body_len: u64,
    /// The connection closes after the response.
    pub close: bool,
    /// HTTP/1.0 (the response then says `Connection: keep-alive` when it
    /// stays open).
    pub http10: bool,
    /// A `HEAD` request (the response has no body).
    pub head_method: bool,
}

/// What the buffered bytes hold so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// No complete head yet and nothing wrong so far: read more.
    Partial,
    /// A complete head.
    Complete(Request),
    /// A refused request (the connection closes after the error response).
    Rejected(Rejection),
}

/// Finds the end of one request head in a buffer that grows between calls.
///
/// Feed it the bytes from the start of the head (the same prefix each
/// time, with more appended); after [`Parse::Complete`] or
/// [`Parse::Rejected`], [`reset`](Scanner::reset) it for the next head.
#[derive(Debug, Clone, Default)]
pub struct Scanner {
    /// Bytes looked at.
    pos: usize,
    /// Where the line being scanned starts.
    line_start: usize,
    /// Where the request line starts (after skipped empty lines); `None`
    /// while only empty lines have been seen.
    request_start: Option<usize>,
    /// The request line ended and was checked.
    request_line_done: bool,
    /// Empty lines skipped before the request line.
    leading: usize,
}

impl Scanner {
    /// A scanner at the start of a head.
    pub fn new() -> Scanner {
        Scanner::default()
    }

    /// Back to the start, for the next head.
    pub fn reset(&mut self) {
        *self = Scanner::default();
    }

    /// Looks at the bytes not yet seen. `buf` starts where the head
    /// starts; a shorter `buf` than last time starts the scan over.
    pub fn feed(&mut self, buf: &[u8], limits: &Limits) -> Parse {
        if buf.len() < self.pos {
            self.reset();
        }
        if self.request_start.is_none() && !self.request_line_done {
            if let Some(rejection) = check_method_prefix(&buf[self.line_start..]) {
                return Parse::Rejected(rejection);
            }
        }
        while let Some(offset) = buf[self.pos..].iter().position(|&b| b == b'\n') {
            let lf = self.pos + offset;
            self.pos = lf + 1;
            if lf == 0 || buf[lf - 1] != b'\r' {
                return Parse::Rejected(BAD_LF);
            }
            let line = &buf[self.line_start..lf - 1];
            let line_start = self.line_start;
            self.line_start = self.pos;
            if self.pos > limits.max_head {
                return Parse::Rejected(too_large());
            }
            match self.request_start {
                None if line.is_empty() => {
                    self.leading += 1;
                    if self.leading > MAX_LEADING_EMPTY_LINES {
                        return Parse::Rejected(reject(
                            Status::BadRequest,
                            "too many empty lines before the request line",
                        ));
                    }
                    continue;
                }
                None => {
                    self.request_start = Some(line_start);
                    if let Err(rejection) = request_line(line) {
                        return Parse::Rejected(rejection);
                    }
                    self.request_line_done = true;
                }
                Some(start) if line.is_empty() => {
                    return match parse_head(&buf[start..self.pos], limits) {
                        Ok(request) => Parse::Complete(Request {
                            head_len: self.pos,
                            ..request
                        }),
                        Err(rejection) => Parse::Rejected(rejection),
                    };
                }
                Some(_) => {}
            }
            if self.request_start.is_none() {
                if let Some(rejection) = check_method_prefix(&buf[self.line_start..]) {
                    return Parse::Rejected(rejection);
                }
            }
        }
        self.pos = buf.len();
        if buf.len() > limits.max_head {
            return Parse::Rejected(too_large());
        }
        Parse::Partial
    }
}

fn too_large() -> Rejection {
    reject(
        Status::HeaderTooLarge,
        "the request head is longer than the server accepts",
    )
}

/// Parses `buf` as one whole request (a convenience over [`Scanner`]).
pub fn parse(buf: &[u8], limits: &Limits) -> Parse {
    Scanner::new().feed(buf, limits)
}

/// A token character (RFC 9110, section 5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Rejects a request line whose method, as far as it has arrived, has a
/// byte no token has (an early `400` for binary garbage).
fn check_method_prefix(rest: &[u8]) -> Option<Rejection> {
    for &b in rest.iter().take(64) {
        if b == b' ' {
            return None;
        }
        if b == b'\r' || b == b'\n' {
            return None; // the line's end is checked by the scan
        }
        if !is_tchar(b) {
            return Some(reject(Status::BadRequest, "the method is not a token"));
        }
    }
    None
}

/// Checks a request line (without its CRLF); returns its version as
/// `(is HTTP/1.0)`, and whether the method is `HEAD`.
fn request_line(line: &[u8]) -> Result<(bool, bool), Rejection> {
    const MALFORMED: Rejection = reject(
        Status::BadRequest,
        "the request line is not `method SP target SP HTTP/1.x`",
    );
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(MALFORMED);
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(reject(Status::BadRequest, "the method is not a token"));
    }
    if target.is_empty() || !target.iter().all(|&b| (0x21..=0x7e).contains(&b)) {
        return Err(reject(
            Status::BadRequest,
            "the request target is malformed",
        ));
    }
    let http10 = match version {
        b"HTTP/1.0" => true,
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => false,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(reject(
                Status::VersionNotSupported,
                "only HTTP/1.0 and HTTP/1.1 are served",
            ));
        }
        _ => return Err(MALFORMED),
    };
    Ok((http10, method == b"HEAD"))
}

/// Whether a field value byte is allowed (RFC 9110, section 5.5).
fn is_value_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// Parses a `Content-Length` value: digits only, checked arithmetic.
pub fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// Parses a whole head: `head` starts at the request line and ends with
/// the empty line's CRLF. `head_len` of the result is left 0 (the scanner
/// fills it in).
fn parse_head(head: &[u8], limits: &Limits) -> Result<Request, Rejection> {
    let body = head.strip_suffix(b"\r\n").unwrap_or(head);
    let mut lines = body.split(|&b| b == b'\n').map(|line| {
        // Every line ended with CRLF (the scanner checked each LF).
        line.strip_suffix(b"\r").unwrap_or(line)
    });
    let (http10, head_method) = request_line(lines.next().unwrap_or(b""))?;
    let mut body_len: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut hosts = 0usize;
    let (mut asks_close, mut asks_keep_alive) = (false, false);
    for line in lines {
        if line.is_empty() {
            // The split's last piece (after the final field's LF).
            continue;
        }
        if matches!(line[0], b' ' | b'\t') {
            return Err(reject(
                Status::BadRequest,
                "obsolete line folding is not accepted",
            ));
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(reject(Status::BadRequest, "a header line has no colon"));
        };
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(reject(Status::BadRequest, "a header name is not a token"));
        }
        let value = trim_ows(&line[colon + 1..]);
        if !value.iter().all(|&b| is_value_byte(b)) {
            return Err(reject(
                Status::BadRequest,
                "a header value has a control character",
            ));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let Some(n) = content_length(value) else {
                return Err(reject(
                    Status::BadRequest,
                    "Content-Length is not a decimal number that fits in 64 bits",
                ));
            };
            if body_len.is_some_and(|previous| previous != n) {
                return Err(reject(
                    Status::BadRequest,
                    "two different Content-Length values",
                ));
            }
            body_len = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts = hosts.saturating_add(1);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for option in value.split(|&b| b == b',').map(trim_ows) {
                if option.eq_ignore_ascii_case(b"close") {
                    asks_close = true;
                } else if option.eq_ignore_ascii_case(b"keep-alive") {
                    asks_keep_alive = true;
                }
            }
        }
    }
    // An explicit `close` wins over `keep-alive`, whatever their order.
    let close = asks_close || (http10 && !asks_keep_alive);
    if transfer_encoding {
        return Err(if body_len.is_some() {
            reject(
                Status::BadRequest,
                "both Transfer-Encoding and Content-Length",
            )
        } else {
            reject(Status::NotImplemented, "Transfer-Encoding is not supported")
        });
    }
    if !http10 && hosts != 1 {
        return Err(reject(
            Status::BadRequest,
            "an HTTP/1.1 request needs exactly one Host field",
        ));
    }
    let body_len = body_len.unwrap_or(0);
    if body_len > limits.max_body {
        return Err(reject(
            Status::ContentTooLarge,
            "the body is longer than the server accepts",
        ));
    }
    Ok(Request {
        head_len: 0,
        body_len,
        close,
        http10,
        head_method,
    })
}

/// The body of every `200 OK`.
pub const BODY: &[u8] = b"Hello, World!";

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n";
const OK_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 13\r\n\r\n";
const OK_KEEP_ALIVE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 13\r\n\r\n";

/// How to answer one valid request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The response closes the connection.
    pub close: bool,
    /// The request was HTTP/1.0.
    pub http10: bool,
    /// The request was `HEAD` (no body).
    pub head_method: bool,
}

impl Reply {
    /// The answer to `request`.
    pub fn of(request: &Request) -> Reply {
        Reply {
            close: request.close,
            http10: request.http10,
            head_method: request.head_method,
        }
    }

    /// Appends the response's bytes to `out`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.close {
            OK_CLOSE
        } else if self.http10 {
            OK_KEEP_ALIVE
        } else {
            OK
        });
        if !self.head_method {
            out.extend_from_slice(BODY);
        }
    }
}

/// The answers to `replies`, in order, as one buffer.
pub fn responses(replies: &[Reply]) -> Vec<u8> {
    let mut out = Vec::with_capacity(replies.len() * (OK_KEEP_ALIVE.len() + BODY.len()));
    for reply in replies {
        reply.write_to(&mut out);
    }
    out
}

/// The error response to a refused request (it always closes).
pub fn error_response(rejection: &Rejection) -> Vec<u8> {
    let body = format!("{}\n", rejection.reason);
    format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        rejection.status.line(),
        body.len()
    )
    .into_bytes()
}

/// The answer to requests whose handler ran out of time (`close`: the last
/// of them asked to close).
pub fn unavailable(close: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n".to_vec();
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// What a connection waits for when it needs more bytes (its timeouts
/// depend on it: see the servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// No request begun.
    Idle,
    /// The rest of a head (part of one is buffered).
    Head,
    /// More of a body being skipped.
    Body,
}

/// What one [`Framer::take`] found: the requests to answer now, in order,
/// and possibly a refused request after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The complete requests (heads and bodies), in order.
    pub replies: Vec<Reply>,
    /// A request the parser refused, after `replies`: answered with
    /// [`error_response`], then the connection closes.
    pub rejection: Option<Rejection>,
    /// The last reply closes the connection (nothing after it is read).
    pub close: bool,
}

impl Batch {
    /// Nothing to answer yet.
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.rejection.is_none()
    }
}

/// One connection's requests as its bytes arrive.
///
/// Bytes read from the connection are appended to
/// [`buffer`](Framer::buffer); [`take`](Framer::take) then takes every
/// complete request off its front (several when they were pipelined),
/// skipping their bodies: a body's bytes are dropped as they arrive, never
/// kept beyond one read, so a large body costs no memory. A request is
/// complete once its whole body has been skipped.
#[derive(Debug, Clone, Default)]
pub struct Framer {
    buf: Vec<u8>,
    scanner: Scanner,
    /// The request whose body is being skipped, and the bytes left of it.
    pending: Option<(Reply, u64)>,
}

impl Framer {
    /// A framer whose buffer starts with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Framer {
        Framer {
            buf: Vec::with_capacity(capacity),
            ..Framer::default()
        }
    }

    /// The buffer to append the connection's bytes to.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// What the connection waits for, if it has to read more.
    pub fn waiting_for(&self) -> Wait {
        if self.pending.is_some() {
            Wait::Body
        } else if self.buf.is_empty() {
            Wait::Idle
        } else {
            Wait::Head
        }
    }

    /// Takes the complete requests (and the body bytes skipped) off the
    /// front of the buffer; stops after a request that closes the
    /// connection and at a refused one.
    pub fn take(&mut self, limits: &Limits) -> Batch {
        let mut batch = Batch {
            replies: Vec::new(),
            rejection: None,
            close: false,
        };
        let mut consumed = 0usize;
        loop {
            if let Some((reply, left)) = self.pending.as_mut() {
                let available = self.buf.len() - consumed;
                let take = usize::try_from(*left).map_or(available, |left| left.min(available));
                consumed += take;
                *left -= take as u64;
                if *left > 0 {
                    break;
                }
                let reply = *reply;
                self.pending = None;
                batch.replies.push(reply);
                if reply.close {
                    batch.close = true;
                    break;
                }
            }
            match self.scanner.feed(&self.buf[consumed..], limits) {
                Parse::Partial => break,
                Parse::Rejected(rejection) => {
                    batch.rejection = Some(rejection);
                    break;
                }
                Parse::Complete(request) => {
                    self.scanner.reset();
                    consumed += request.head_len;
                    self.pending = Some((Reply::of(&request), request.body_len));
                }
            }
        }
        self.buf.drain(..consumed);
        batch
    }
}
