//! hello_http's protocol module (`examples/hello_http/http.rs`): the
//! statuses of the parser's rules, one case each, and properties over
//! arbitrary bytes (it never panics, a head split anywhere parses as the
//! whole one, lengths are exact); the framer's pipelining and body
//! skipping, whatever the reads; the exact response bytes.

#[allow(dead_code)]
#[path = "../examples/hello_http/http.rs"]
mod http;

use http::{
    BODY, Framer, Limits, Parse, Reply, Request, Scanner, Status, Wait, content_length,
    error_response, parse, responses, unavailable,
};
use proptest::prelude::*;

fn limits() -> Limits {
    Limits::default()
}

fn complete(buf: &[u8]) -> Request {
    match parse(buf, &limits()) {
        Parse::Complete(request) => request,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn status(buf: &[u8]) -> Option<Status> {
    match parse(buf, &limits()) {
        Parse::Rejected(rejection) => Some(rejection.status),
        _ => None,
    }
}

#[test]
fn a_simple_get_is_complete_with_its_exact_length_and_no_body() {
    let buf = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT";
    let request = complete(buf);
    assert_eq!(request.head_len, buf.len() - 8);
    assert_eq!(request.body_len, 0);
    assert!(!request.close && !request.http10 && !request.head_method);
}

#[test]
fn a_head_without_its_empty_line_is_partial() {
    for buf in [
        &b""[..],
        b"G",
        b"GET / HTTP/1.1",
        b"GET / HTTP/1.1\r",
        b"GET / HTTP/1.1\r\nHost: x\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r",
    ] {
        assert_eq!(parse(buf, &limits()), Parse::Partial, "{buf:?}");
    }
}

#[test]
fn connection_close_and_http_1_0_close_and_keep_alive_keeps_1_0_open() {
    assert!(complete(b"GET / HTTP/1.1\r\nHost: x\r\nconnection: Close\r\n\r\n").close);
    assert!(complete(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n").close);
    assert!(complete(b"GET / HTTP/1.0\r\n\r\n").close);
    let kept = complete(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert!(!kept.close && kept.http10);
    assert!(complete(b"GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n").close);
    assert!(!complete(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n").close);
}

#[test]
fn a_head_request_is_marked_so_its_answer_has_no_body() {
    assert!(complete(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n").head_method);
}

#[test]
fn content_length_gives_the_body_length_and_repeats_must_agree() {
    let r = complete(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:  5 \r\n\r\n");
    assert_eq!(r.body_len, 5);
    let r =
        complete(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n");
    assert_eq!(r.body_len, 5);
    let two = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    assert_eq!(status(two), Some(Status::BadRequest));
}

#[test]
fn bad_or_overflowing_content_lengths_are_400() {
    for value in [
        "-5",
        "+5",
        "",
        "5a",
        "0x10",
        "5, 5",
        "1 2",
        "18446744073709551616",
        "99999999999999999999999",
    ] {
        let buf = format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n");
        assert_eq!(
            status(buf.as_bytes()),
            Some(Status::BadRequest),
            "{value:?}"
        );
    }
}

#[test]
fn content_lengths_within_u64_but_over_the_body_limit_are_413() {
    for value in ["18446744073709551615", "18446744073709551559", "1048577"] {
        let buf = format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n");
        assert_eq!(
            status(buf.as_bytes()),
            Some(Status::ContentTooLarge),
            "{value:?}"
        );
    }
    let at_limit = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n";
    assert_eq!(complete(at_limit.as_bytes()).body_len, 1 << 20);
}

#[test]
fn content_length_parsing_is_checked_at_the_u64_boundary() {
    assert_eq!(content_length(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(content_length(b"18446744073709551616"), None);
    assert_eq!(content_length(b"00000000000000000000000001"), Some(1));
    assert_eq!(content_length(b""), None);
}

#[test]
fn malformed_request_lines_and_missing_versions_are_400() {
    for buf in [
        &b"GET /\r\n\r\n"[..],
        b"hello\r\n\r\n",
        b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
        b" GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / http/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1x\r\nHost: x\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        assert_eq!(
            status(buf),
            Some(Status::BadRequest),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
}

#[test]
fn garbage_is_refused_before_a_head_could_end() {
    // A TLS ClientHello's first bytes; a request line without version.
    assert_eq!(status(b"\x16\x03\x01\x02\x00"), Some(Status::BadRequest));
    assert_eq!(status(b"GET /\r\nHost"), Some(Status::BadRequest));
    assert_eq!(status(b"GET / HTTP/1.1\nHost"), Some(Status::BadRequest));
}

#[test]
fn another_major_version_is_505() {
    assert_eq!(
        status(b"GET / HTTP/2.0\r\n\r\n"),
        Some(Status::VersionNotSupported)
    );
    // A later HTTP/1 minor version is served as 1.1.
    assert!(!complete(b"GET / HTTP/1.7\r\nHost: x\r\n\r\n").http10);
}

#[test]
fn bad_header_lines_are_400() {
    for buf in [
        &b"GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\r\nName : v\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nA: b\rc\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nA: \x00\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n",
    ] {
        assert_eq!(
            status(buf),
            Some(Status::BadRequest),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
}

#[test]
fn http_1_1_needs_exactly_one_host_and_http_1_0_none() {
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), Some(Status::BadRequest));
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        Some(Status::BadRequest)
    );
    complete(b"GET / HTTP/1.0\r\n\r\n");
}

#[test]
fn transfer_encoding_is_501_and_with_content_length_400() {
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Some(Status::NotImplemented)
    );
    assert_eq!(
        status(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        ),
        Some(Status::BadRequest)
    );
}

#[test]
fn a_few_empty_lines_before_the_request_line_are_skipped_and_many_refused() {
    let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(complete(buf).head_len, buf.len());
    let many = [&b"\r\n".repeat(20)[..], b"GET / HTTP/1.0\r\n\r\n"].concat();
    assert_eq!(status(&many), Some(Status::BadRequest));
}

#[test]
fn a_head_over_the_limit_is_431_whether_or_not_it_has_ended() {
    let limits = Limits {
        max_head: 100,
        max_body: 10,
    };
    let mut long = b"GET / HTTP/1.1\r\nHost: x\r\nX: ".to_vec();
    long.resize(101, b'a');
    assert!(matches!(
        parse(&long, &limits),
        Parse::Rejected(r) if r.status == Status::HeaderTooLarge
    ));
    long.extend_from_slice(b"\r\n\r\n");
    assert!(matches!(
        parse(&long, &limits),
        Parse::Rejected(r) if r.status == Status::HeaderTooLarge
    ));
    // Exactly at the limit, with body bytes beyond it buffered: served.
    let mut exact = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nX: ".to_vec();
    exact.resize(96, b'a');
    exact.extend_from_slice(b"\r\n\r\n");
    assert_eq!(exact.len(), 100);
    exact.extend_from_slice(&[b'b'; 10]);
    assert!(matches!(parse(&exact, &limits), Parse::Complete(r) if r.head_len == 100));
}

/// A valid request head with arbitrary (valid) details.
/// Feeds `bytes` to a framer in reads that end at `ends` (ascending, the
/// last at `bytes.len()`), taking after each; every reply and rejection.
fn frame(bytes: &[u8], ends: &[usize]) -> (Vec<Reply>, Vec<Status>, Framer) {
    let mut framer = Framer::default();
    let (mut replies, mut rejections) = (Vec::new(), Vec::new());
    let mut start = 0;
    for &end in ends {
        framer.buffer().extend_from_slice(&bytes[start..end]);
        start = end;
        let batch = framer.take(&Limits::default());
        replies.extend(batch.replies);
        rejections.extend(batch.rejection.map(|r| r.status));
        if batch.close || !rejections.is_empty() {
            break;
        }
    }
    (replies, rejections, framer)
}

const KEEP: Reply = Reply {
    close: false,
    http10: false,
    head_method: false,
};

#[test]
fn pipelined_requests_come_out_of_the_framer_in_order_with_their_bodies_skipped() {
    let bytes = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\
        POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nGET /\
        HEAD / HTTP/1.1\r\nHost: x\r\n\r\n\
        GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\
        GET /never HTTP/1.1\r\nHost: x\r\n\r\n";
    let (replies, rejections, _) = frame(bytes, &[bytes.len()]);
    let head = Reply {
        head_method: true,
        ..KEEP
    };
    let close = Reply {
        close: true,
        ..KEEP
    };
    // The body `GET /` is skipped, not taken for a request; nothing after
    // the request that closes is read.
    assert_eq!(replies, [KEEP, KEEP, head, close]);
    assert!(rejections.is_empty());
}

#[test]
fn the_framer_waits_for_a_head_then_a_body_then_nothing_and_keeps_no_body_byte() {
    let mut framer = Framer::default();
    assert_eq!(framer.waiting_for(), Wait::Idle);
    framer.buffer().extend_from_slice(b"POST / HTTP/1.1\r\nHo");
    assert!(framer.take(&Limits::default()).is_empty());
    assert_eq!(framer.waiting_for(), Wait::Head);
    framer
        .buffer()
        .extend_from_slice(b"st: x\r\nContent-Length: 100000\r\n\r\n");
    framer.buffer().extend(std::iter::repeat_n(b'b', 60_000));
    assert!(framer.take(&Limits::default()).is_empty());
    assert_eq!(framer.waiting_for(), Wait::Body);
    assert!(
        framer.buffer().is_empty(),
        "body bytes are dropped as they come"
    );
    framer.buffer().extend(std::iter::repeat_n(b'b', 40_000));
    let batch = framer.take(&Limits::default());
    assert_eq!(batch.replies, [KEEP]);
    assert_eq!(framer.waiting_for(), Wait::Idle);
}

#[test]
fn a_refused_request_after_good_ones_comes_after_their_replies() {
    let bytes = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/2.0\r\n\r\n";
    let (replies, rejections, _) = frame(bytes, &[bytes.len()]);
    assert_eq!(replies, [KEEP]);
    assert_eq!(rejections, [Status::VersionNotSupported]);
}

#[test]
fn the_response_bytes_are_exactly_the_documented_ones() {
    let ok =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
    assert_eq!(BODY, b"Hello, World!");
    assert_eq!(responses(&[KEEP]), ok.as_bytes());
    let close = Reply {
        close: true,
        ..KEEP
    };
    let http10 = Reply {
        http10: true,
        ..KEEP
    };
    let head = Reply {
        head_method: true,
        ..KEEP
    };
    let all = String::from_utf8(responses(&[KEEP, http10, head, close])).unwrap();
    assert_eq!(
        all,
        format!(
            "{ok}\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 13\r\n\r\nHello, World!\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 13\r\n\r\nHello, World!"
        )
    );
    let Parse::Rejected(rejection) = parse(b"GET / HTTP/2.0\r\n\r\n", &Limits::default()) else {
        panic!("not refused");
    };
    let error = String::from_utf8(error_response(&rejection)).unwrap();
    assert_eq!(
        error,
        "HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain\r\n\
         Connection: close\r\nContent-Length: 38\r\n\r\nonly HTTP/1.0 and HTTP/1.1 are served\n"
    );
    assert_eq!(
        unavailable(true),
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

fn valid_head() -> impl Strategy<Value = (Vec<u8>, u64, bool)> {
    (
        prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "X-CUSTOM"]),
        "/[a-z0-9/?=&%.-]{0,40}",
        prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,15}", "[ -~]{0,30}"), 0..8),
        prop::option::of(0u64..=1024 * 1024),
        any::<bool>(),
    )
        .prop_map(|(method, target, fields, length, close)| {
            let mut head = format!("{method} {target} HTTP/1.1\r\nHost: example\r\n");
            for (name, value) in fields {
                let lower = name.to_ascii_lowercase();
                if ["host", "content-length", "transfer-encoding", "connection"]
                    .contains(&lower.as_str())
                {
                    continue;
                }
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            if let Some(n) = length {
                head.push_str(&format!("Content-Length: {n}\r\n"));
            }
            if close {
                head.push_str("Connection: close\r\n");
            }
            head.push_str("\r\n");
            (head.into_bytes(), length.unwrap_or(0), close)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic_and_a_complete_head_lies_within_the_buffer(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        max_head in 0usize..700,
        max_body in any::<u64>(),
    ) {
        let limits = Limits { max_head, max_body };
        if let Parse::Complete(request) = parse(&bytes, &limits) {
            prop_assert!(request.head_len <= bytes.len());
            prop_assert!(request.head_len <= max_head);
            prop_assert!(request.body_len <= max_body);
            prop_assert!(bytes[..request.head_len].ends_with(b"\r\n\r\n"));
        }
    }

    #[test]
    fn http_like_noise_never_panics(
        pieces in prop::collection::vec(
            prop::sample::select(vec![
                "GET", "POST", " ", "/", "HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "\r\n", "\r", "\n",
                "Host: x", "Content-Length: ", "18446744073709551615", "99999999999999999999",
                "-1", "7", ":", "Connection: close", "Transfer-Encoding: chunked", "\t", "\x00",
            ]),
            0..40,
        ),
    ) {
        let bytes = pieces.concat().into_bytes();
        let _ = parse(&bytes, &Limits::default());
        let mut scanner = Scanner::new();
        for end in 0..=bytes.len() {
            if !matches!(scanner.feed(&bytes[..end], &Limits::default()), Parse::Partial) {
                break;
            }
        }
    }

    #[test]
    fn a_valid_head_parses_to_its_length_body_and_close(head in valid_head()) {
        let (bytes, body_len, close) = head;
        match parse(&bytes, &Limits::default()) {
            Parse::Complete(request) => {
                prop_assert_eq!(request.head_len, bytes.len());
                prop_assert_eq!(request.body_len, body_len);
                prop_assert_eq!(request.close, close);
            }
            other => prop_assert!(false, "{:?}: {:?}", String::from_utf8_lossy(&bytes), other),
        }
    }

    #[test]
    fn a_head_fed_in_arbitrary_pieces_parses_as_the_whole_one(
        head in valid_head(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let (bytes, _, _) = head;
        let whole = parse(&bytes, &Limits::default());
        let mut ends: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        ends.push(bytes.len());
        ends.sort_unstable();
        ends.dedup();
        let mut scanner = Scanner::new();
        let mut last = Parse::Partial;
        for end in ends {
            last = scanner.feed(&bytes[..end], &Limits::default());
            if end < bytes.len() {
                prop_assert_eq!(last, Parse::Partial);
            }
        }
        prop_assert_eq!(last, whole);
    }

    #[test]
    fn any_content_length_digits_give_their_value_or_none_on_overflow(digits in "[0-9]{1,30}") {
        let expected = digits.parse::<u128>().ok().and_then(|n| u64::try_from(n).ok());
        prop_assert_eq!(content_length(digits.as_bytes()), expected);
    }

    #[test]
    fn a_request_stream_read_in_arbitrary_pieces_gives_the_replies_of_the_whole(
        requests in prop::collection::vec(
            (prop::sample::select(vec!["GET", "HEAD", "POST"]), 0usize..300, any::<bool>()),
            1..8,
        ),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut bytes = Vec::new();
        for (method, body, http10) in &requests {
            let version = if *http10 { "HTTP/1.0\r\nConnection: keep-alive" } else { "HTTP/1.1\r\nHost: x" };
            bytes.extend_from_slice(format!("{method} / {version}\r\nContent-Length: {body}\r\n\r\n").as_bytes());
            bytes.extend(std::iter::repeat_n(b'z', *body));
        }
        let mut ends: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        ends.push(bytes.len());
        ends.sort_unstable();
        ends.dedup();
        let (whole, _, _) = frame(&bytes, &[bytes.len()]);
        let (pieces, rejections, framer) = frame(&bytes, &ends);
        prop_assert_eq!(whole.len(), requests.len());
        prop_assert_eq!(&pieces, &whole);
        prop_assert!(rejections.is_empty());
        prop_assert_eq!(framer.waiting_for(), Wait::Idle);
        for (reply, (method, _, http10)) in whole.iter().zip(&requests) {
            prop_assert_eq!(reply.head_method, *method == "HEAD");
            prop_assert_eq!(reply.http10, *http10);
        }
    }
}
