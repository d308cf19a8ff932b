//! A tiny HTTP/1.1 keep-alive "Hello, World!" server on std threads and a
//! blocking `TcpListener`: the stand-in for exec-batching's `hello_http`
//! example in the tests of the load generator and in
//! `http_compare --self-test`. One thread accepts, one thread per
//! connection answers every `GET` with `Hello, World!`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The body of every response.
pub const HELLO: &[u8] = b"Hello, World!";

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(5);

/// How a [`HelloServer`] behaves.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen (default `127.0.0.1:0`, a free port).
    pub addr: SocketAddr,
    /// Answer this many requests in all, then close the connection that
    /// asks for one more and stop listening (`None`: no limit).
    pub max_requests: Option<u64>,
    /// Send the body with `Transfer-Encoding: chunked`, in two writes,
    /// instead of with `Content-Length` in one.
    pub chunked: bool,
    /// The status code of every response (default 200).
    pub status: u16,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_requests: None,
            chunked: false,
            status: 200,
        }
    }
}

/// A running server; dropping it stops accepting and lets every
/// connection thread end (within a few milliseconds).
#[derive(Debug)]
pub struct HelloServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    options: ServerOptions,
    stop: AtomicBool,
    /// Requests received (answered or not).
    received: AtomicU64,
    /// Responses sent (counted as their write starts).
    served: AtomicU64,
}

impl HelloServer {
    /// Binds `options.addr` and starts serving on background threads.
    pub fn start(options: ServerOptions) -> io::Result<HelloServer> {
        let listener = TcpListener::bind(options.addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            options,
            stop: AtomicBool::new(false),
            received: AtomicU64::new(0),
            served: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("hello-accept".into())
                .spawn(move || accept_loop(listener, &shared))?
        };
        Ok(HelloServer {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many responses it has sent (counted as each write starts, so
    /// every response a client has read is counted).
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::SeqCst)
    }
}

impl Drop for HelloServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = Arc::clone(shared);
                let _ = std::thread::Builder::new()
                    .name("hello-conn".into())
                    .spawn(move || {
                        let _ = serve_connection(stream, &shared);
                    });
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Answers the requests of one connection until the client closes it, the
/// request limit is reached, or the server stops.
fn serve_connection(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    let options = &shared.options;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // Answer every complete request head in the buffer.
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let ticket = shared.received.fetch_add(1, Ordering::SeqCst);
            if options.max_requests.is_some_and(|max| ticket >= max) {
                shared.stop.store(true, Ordering::SeqCst);
                return Ok(());
            }
            // Counted before the write, so that a client that has read
            // the response always finds it counted.
            shared.served.fetch_add(1, Ordering::SeqCst);
            write_response(&mut stream, options)?;
        }
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn write_response(stream: &mut TcpStream, options: &ServerOptions) -> io::Result<()> {
    let status = options.status;
    let reason = if (200..300).contains(&status) {
        "OK"
    } else {
        "Error"
    };
    if options.chunked {
        let (first, rest) = HELLO.split_at(7);
        let mut head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n\
             Transfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            first.len()
        )
        .into_bytes();
        head.extend_from_slice(first);
        head.extend_from_slice(b"\r\n");
        stream.write_all(&head)?;
        let mut tail = format!("{:x}\r\n", rest.len()).into_bytes();
        tail.extend_from_slice(rest);
        tail.extend_from_slice(b"\r\n0\r\n\r\n");
        stream.write_all(&tail)
    } else {
        let mut response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            HELLO.len()
        )
        .into_bytes();
        response.extend_from_slice(HELLO);
        stream.write_all(&response)
    }
}

/// Serves on `addr` the way `hello_http` does for `http_compare`: prints
/// `listening on <addr>` as the first line on stdout, then serves until
/// the process is killed.
pub fn serve_until_killed(addr: SocketAddr) -> io::Result<std::convert::Infallible> {
    let server = HelloServer::start(ServerOptions {
        addr,
        ..ServerOptions::default()
    })?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {}", server.addr())?;
    out.flush()?;
    drop(out);
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_answers_pipelined_requests_in_order_and_counts_them() {
        let server = HelloServer::start(ServerOptions::default()).unwrap();
        let mut conn = TcpStream::connect(server.addr()).unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut parser = crate::http_load::ResponseParser::new();
        let mut answered = 0;
        let mut buf = [0u8; 1024];
        while answered < 2 {
            let n = conn.read(&mut buf).unwrap();
            let mut piece = &buf[..n];
            while let crate::http_load::Progress::Done { response, consumed } =
                parser.feed(piece).unwrap()
            {
                assert_eq!((response.status, response.body_len), (200, 13));
                answered += 1;
                piece = &piece[consumed..];
            }
        }
        assert_eq!(server.served(), 2);
    }
}
