//! hello_tokio answers byte for byte as hello_http does: the same requests
//! (a plain `GET /`, the load generator's, pipelined ones, HTTP/1.0, and
//! every refusal) sent to both over loopback, the raw bytes of the answers
//! compared.
//!
//! hello_tokio runs as its binary (on both tokio flavours); hello_http's
//! server runs in this process on the work-stealing pool, compiled from the
//! example's own files (`spindle/examples/hello_http/{http,server}.rs`).
//! Each request goes on a fresh connection whose write side is then shut
//! down, so that the server's whole answer (up to its close) is read:
//! what a keep-alive connection would get, then the close at end of
//! stream.

#![cfg(unix)]

#[allow(dead_code)]
#[path = "../../spindle/examples/hello_http/http.rs"]
mod http;
#[allow(dead_code)]
#[path = "../../spindle/examples/hello_http/server.rs"]
mod server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use spindle_effect::IORuntime;
use spindle_effect::wstp::Runtime;

const HANG: Duration = Duration::from_secs(20);

/// hello_tokio as a child process; killed when dropped.
struct Tokio {
    child: Child,
    addr: SocketAddr,
}

impl Tokio {
    fn start(args: &[&str]) -> Tokio {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hello_tokio"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hello_tokio");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("its first line");
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("not a listening line: {line:?}"));
        Tokio { child, addr }
    }
}

impl Drop for Tokio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// hello_http's server on a pool of two workers; stops when dropped.
struct Spindle {
    _runtime: Runtime,
    addr: SocketAddr,
}

impl Spindle {
    fn start() -> Spindle {
        let runtime = Runtime::builder()
            .worker_threads(2)
            .build()
            .expect("a pool");
        let (sender, receiver) = mpsc::channel();
        let program = server::server(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            server::Config::default(),
            move |addr| {
                let _ = sender.send(addr);
                Ok(())
            },
        );
        let _fiber = runtime.spawn(program).expect("spawn the server");
        let addr = receiver.recv_timeout(HANG).expect("its address");
        Spindle {
            _runtime: runtime,
            addr,
        }
    }
}

/// Sends `request`, shuts the write side down, reads until the server
/// closes; the raw bytes.
fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HANG)).unwrap();
    stream.write_all(request).expect("send");
    stream.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .expect("the answer and a close");
    answer
}

fn requests() -> Vec<(&'static str, Vec<u8>)> {
    let mut huge_head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Filler: ".to_vec();
    huge_head.resize(70 * 1024, b'a');
    huge_head.extend_from_slice(b"\r\n\r\n");
    let mut pipelined = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    pipelined.extend_from_slice(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    pipelined.extend_from_slice(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    pipelined.extend_from_slice(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    pipelined.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    pipelined.extend_from_slice(b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut good_then_bad = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    good_then_bad.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n");
    vec![
        ("GET /", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "the load generator's request",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\nUser-Agent: spindle-loadgen\r\nAccept: */*\r\n\r\n"
                .to_vec(),
        ),
        ("pipelined, up to a close", pipelined),
        ("HTTP/1.0", b"GET / HTTP/1.0\r\n\r\n".to_vec()),
        ("an answer, then a refusal", good_then_bad),
        ("no version (400)", b"GET /\r\n\r\n".to_vec()),
        ("bare LF (400)", b"GET / HTTP/1.1\nHost: x\n\n".to_vec()),
        ("no Host (400)", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        (
            "a body over the limit (413)",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n".to_vec(),
        ),
        ("a head over the limit (431)", huge_head),
        (
            "Transfer-Encoding (501)",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
        ),
        ("HTTP/2.0 (505)", b"GET / HTTP/2.0\r\n\r\n".to_vec()),
        (
            "a body cut short (no answer)",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b".to_vec(),
        ),
    ]
}

fn compare_with(tokio_args: &[&str]) {
    let spindle = Spindle::start();
    let tokio = Tokio::start(tokio_args);
    for (what, request) in requests() {
        let expected = exchange(spindle.addr, &request);
        let got = exchange(tokio.addr, &request);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "{what} ({tokio_args:?})"
        );
        assert_eq!(got, expected, "{what}");
    }
    // Not vacuous: `/` is answered, with the documented bytes.
    let answer = exchange(tokio.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        answer,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
    );
}

#[test]
fn hello_tokio_on_multi_thread_answers_with_hello_http_s_bytes() {
    compare_with(&["--flavor", "multi", "--workers", "2"]);
}

#[test]
fn hello_tokio_on_current_thread_answers_with_hello_http_s_bytes() {
    compare_with(&["--flavor", "current"]);
}
