//! Spindle's own example servers — the key-value server, `line_echo`,
//! `hello_http` and mini-redis — run unchanged on a simulated host, each
//! with many clients on the main host, over a network with latency,
//! jitter and loss, while the simulator cancels clients at random in the
//! middle of their conversations. On every seed each client that is not
//! canceled gets exactly the answers the protocol promises, and after
//! the storm a fresh client is still served.
//!
//! The servers are the examples' own code (included with `#[path]`), so
//! what runs here is what `cargo run --example ...` runs on exec-wstp.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use spindle_effect::net::{self, BufReader, ServeConfig, TcpListener, TcpStream};
use spindle_effect::prelude::*;
use spindle_effect::{Deferred, Outcome};
use spindle_sim::{NetConfig, Sim, cancelable, invariant};

#[allow(dead_code, unreachable_pub)]
#[path = "../../spindle/examples/kv_server.rs"]
mod kv_server;

#[allow(dead_code, unreachable_pub)]
#[path = "../../spindle/examples/line_echo.rs"]
mod line_echo;

#[allow(dead_code, unreachable_pub)]
#[path = "../../spindle/examples/hello_http/http.rs"]
mod http;

#[allow(dead_code, unreachable_pub)]
#[path = "../../spindle/examples/hello_http/server.rs"]
mod server;

/// Seeds per example.
const SEEDS: u64 = 40;
/// Clients per run (each a fiber of its own on the main host).
const CLIENTS: u32 = 8;

/// A network with the faults TCP hides from a program (delays, jitter,
/// losses that cost a retransmission).
fn network() -> NetConfig {
    NetConfig::default()
        .latency(Duration::from_millis(1), Duration::from_millis(5))
        .jitter(Duration::from_millis(3))
        .loss(0.05)
}

/// The simulator every example runs under: the network above, and each
/// client fiber canceled at one of its suspensions with probability 2%.
fn simulator() -> Sim {
    Sim::builder()
        .seeds(0..SEEDS)
        .network(network())
        .cancel_at_suspension(0.02)
        .build()
        .expect("a valid simulator")
}

fn any(port: u16) -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], port))
}

/// How the clients of one test's runs ended, over all its seeds.
struct Tally {
    served: AtomicU32,
    canceled: AtomicU32,
}

impl Tally {
    const fn new() -> Tally {
        Tally {
            served: AtomicU32::new(0),
            canceled: AtomicU32::new(0),
        }
    }

    /// Both kinds happened: the runs had clients served to the end and
    /// clients canceled midway.
    fn check(&self) {
        let served = self.served.load(Ordering::Relaxed);
        let canceled = self.canceled.load(Ordering::Relaxed);
        assert!(served > 0, "no client was served to the end");
        assert!(canceled > 0, "no client was canceled ({served} served)");
    }
}

/// Runs `CLIENTS` clients at once, each a fiber the simulator may cancel,
/// then `last` (never canceled): a client that fails (rather than being
/// canceled) fails the run with its error.
fn storm<F>(tally: &'static Tally, client: F, last: IO<(), io::Error>) -> IO<(), io::Error>
where
    F: Fn(u32) -> IO<(), io::Error>,
{
    let fibers = (0..CLIENTS)
        .map(|id| cancelable(client(id)).start::<io::Error>())
        .collect::<Vec<_>>();
    IO::sequence(fibers)
        .flat_map(|fibers| IO::traverse(fibers, |fiber| fiber.join()))
        .flat_map(move |outcomes| {
            let mut failed = None;
            for outcome in outcomes {
                match outcome {
                    Outcome::Succeeded(()) => tally.served.fetch_add(1, Ordering::Relaxed),
                    Outcome::Canceled => tally.canceled.fetch_add(1, Ordering::Relaxed),
                    Outcome::Errored(e) => {
                        failed.get_or_insert(e);
                        0
                    }
                    Outcome::Panicked(p) => {
                        failed.get_or_insert(io::Error::other(format!("{p:?}")));
                        0
                    }
                };
            }
            match failed {
                Some(e) => IO::raise_error(e),
                None => IO::unit(),
            }
        })
        .product_r(last)
}

/// Runs `server` on a simulated host named `host` and a storm of
/// `client`s against it ([`storm`]) under [`simulator`]: every seed
/// passes, and across them clients were both served and canceled.
fn passes_under_storm(
    tally: &'static Tally,
    host: &'static str,
    server: fn() -> IO<(), io::Error>,
    client: fn(IpAddr, u32) -> IO<(), io::Error>,
) {
    let summary = simulator()
        .check(|run| {
            let address = run.host(host, server);
            storm(
                tally,
                move |id| client(address, id),
                client(address, CLIENTS),
            )
        })
        .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(summary.seeds, SEEDS);
    tally.check();
}

/// Sends `line` and checks that the next line the server answers is
/// `expected` (with its line break).
async fn ask(
    conn: &TcpStream,
    reader: &BufReader<TcpStream>,
    line: &str,
    expected: &str,
) -> io::Result<()> {
    conn.write_all(format!("{line}\n")).await?;
    let answer = reader.read_line().await?;
    let want = format!("{expected}\n");
    let name = format!("`{line}` is answered `{expected}`");
    invariant::<io::Error, _>(name, move || answer.as_deref() == Some(want.as_str())).await
}

// ----- the key-value server -----

const KV_PORT: u16 = 7379;

/// The key-value server's host: its `connection` for every connection
/// `net::serve` accepts, over one store (made anew at each start).
fn kv_host() -> IO<(), io::Error> {
    IO::block(async move {
        let config = ServeConfig::builder().max_connections(64).build()?;
        let listener = TcpListener::bind(any(KV_PORT)).await?;
        let store = kv_server::Store::new();
        let never = Deferred::<()>::new().get();
        net::serve(listener, config, never, move |stream, _peer| {
            kv_server::connection(stream, store.clone(), Duration::from_secs(60))
        })
        .await?;
        Ok(())
    })
}

/// A client that sets, reads back and deletes keys of its own, then
/// quits and sees the server close the connection.
fn kv_client(server: IpAddr, id: u32) -> IO<(), io::Error> {
    IO::block(async move {
        let conn = TcpStream::connect(SocketAddr::new(server, KV_PORT)).await?;
        let reader = BufReader::new(conn.clone());
        for i in 0..3 {
            let (key, value) = (format!("c{id}k{i}"), format!("value {id} {i}"));
            ask(&conn, &reader, &format!("SET {key} {value}"), "OK").await?;
            ask(
                &conn,
                &reader,
                &format!("GET {key}"),
                &format!("VALUE {value}"),
            )
            .await?;
        }
        ask(&conn, &reader, &format!("DEL c{id}k0"), "DELETED").await?;
        ask(&conn, &reader, &format!("GET c{id}k0"), "NOT_FOUND").await?;
        ask(&conn, &reader, "bogus", "ERR unknown command BOGUS").await?;
        ask(&conn, &reader, "QUIT", kv_server::BYE).await?;
        let after = reader.read_line().await?;
        invariant::<io::Error, _>("the server closes after BYE", move || after.is_none()).await
    })
}

#[test]
fn the_key_value_server_answers_every_client_under_latency_loss_and_canceled_clients() {
    static TALLY: Tally = Tally::new();
    passes_under_storm(&TALLY, "kv", kv_host, kv_client);
}

// ----- line_echo -----

const ECHO_PORT: u16 = 7;

fn echo_host() -> IO<(), io::Error> {
    line_echo::server(any(ECHO_PORT), line_echo::Config::default(), |_| Ok(()))
}

/// A client that sends lines (some in two pieces, some two at once) and
/// reads each echo back; then closes its side and sees the end.
fn echo_client(server: IpAddr, id: u32) -> IO<(), io::Error> {
    IO::block(async move {
        let conn = TcpStream::connect(SocketAddr::new(server, ECHO_PORT)).await?;
        let reader = BufReader::new(conn.clone());
        for round in 0..4 {
            let line = format!("client {id} line {round}: {}", "x".repeat(40 * round));
            match round % 3 {
                0 => ask(&conn, &reader, &line, &line).await?,
                1 => {
                    // In two writes: the echo is still the whole line.
                    let (head, tail) = line.split_at(line.len() / 2);
                    conn.write_all(head.to_string()).await?;
                    ask(&conn, &reader, tail, &line).await?;
                }
                _ => {
                    // Two lines in one write: two echoes, in order.
                    conn.write_all(format!("{line}\n")).await?;
                    ask(&conn, &reader, &format!("{line}!"), &line).await?;
                    let second = reader.read_line().await?;
                    let want = format!("{line}!\n");
                    invariant::<io::Error, _>("the second line's echo follows", move || {
                        second.as_deref() == Some(want.as_str())
                    })
                    .await?;
                }
            }
        }
        conn.shutdown(std::net::Shutdown::Write).await?;
        let after = reader.read_line().await?;
        invariant::<io::Error, _>("the echo ends after the client's end", move || {
            after.is_none()
        })
        .await
    })
}

#[test]
fn line_echo_echoes_every_line_in_order_under_latency_loss_and_canceled_clients() {
    static TALLY: Tally = Tally::new();
    passes_under_storm(&TALLY, "echo", echo_host, echo_client);
}

// ----- hello_http -----

const HTTP_PORT: u16 = 80;

fn http_host() -> IO<(), io::Error> {
    server::server(any(HTTP_PORT), server::Config::default(), |_| Ok(()))
}

/// The bytes of one `200 OK` keep-alive response to a `GET`.
fn ok_response() -> Vec<u8> {
    let mut response =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n".to_vec();
    response.extend_from_slice(http::BODY);
    response
}

/// A client that sends requests on one connection (one, then two
/// pipelined in one write) and reads back exactly the responses, then a
/// request with `Connection: close` after which the server closes.
fn http_client(server: IpAddr, id: u32) -> IO<(), io::Error> {
    IO::block(async move {
        let conn = TcpStream::connect(SocketAddr::new(server, HTTP_PORT)).await?;
        let get = format!("GET /client/{id} HTTP/1.1\r\nHost: sim\r\n\r\n");
        conn.write_all(get.clone()).await?;
        let one = conn.read_exact(ok_response().len()).await?;
        invariant::<io::Error, _>("a GET is answered 200 with the body", move || {
            one == ok_response()
        })
        .await?;
        conn.write_all(get.repeat(2)).await?;
        let two = conn.read_exact(2 * ok_response().len()).await?;
        invariant::<io::Error, _>("two pipelined GETs get two responses in order", move || {
            two == ok_response().repeat(2)
        })
        .await?;
        let close = "GET / HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n";
        conn.write_all(close).await?;
        let last = BufReader::new(conn.clone());
        let status = last.read_line().await?;
        invariant::<io::Error, _>("the last request is answered 200", move || {
            status.as_deref() == Some("HTTP/1.1 200 OK\r\n")
        })
        .await?;
        // The server closes after that response: the stream ends.
        let mut rest = Vec::new();
        loop {
            let bytes = last.read(4096).await?;
            if bytes.is_empty() {
                break;
            }
            rest.extend_from_slice(&bytes);
        }
        invariant::<io::Error, _>("the closing response ends with the body", move || {
            rest.ends_with(http::BODY)
        })
        .await
    })
}

#[test]
fn hello_http_answers_every_request_under_latency_loss_and_canceled_clients() {
    static TALLY: Tally = Tally::new();
    passes_under_storm(&TALLY, "http", http_host, http_client);
}

// ----- mini-redis -----

const REDIS_PORT: u16 = 6379;

fn redis_host() -> IO<(), io::Error> {
    TcpListener::bind(any(REDIS_PORT)).flat_map(|listener| {
        let never = Deferred::<()>::new().get();
        spindle_mini_redis::server::serve(
            listener,
            spindle_mini_redis::server::Config::default(),
            never,
        )
        .void()
    })
}

/// A client that sets keys of its own (one with an expiry), reads them
/// back, and sees the expired one gone once virtual time passed it.
fn redis_client(server: IpAddr, id: u32) -> IO<(), io::Error> {
    use bytes::Bytes;
    use spindle_mini_redis::client::Client;
    let to_io = |e: spindle_mini_redis::client::ClientError| io::Error::other(e.to_string());
    IO::block(async move {
        let mut client = Client::connect(SocketAddr::new(server, REDIS_PORT))
            .map_err(to_io)
            .await?;
        for i in 0..3 {
            let (key, value) = (format!("c{id}k{i}"), Bytes::from(format!("value {id} {i}")));
            client
                .set(key.clone(), value.clone(), None)
                .await
                .map_err(to_io)?;
            let got = client.get(key).await.map_err(to_io)?;
            invariant::<io::Error, _>("GET returns what SET stored", move || got == Some(value))
                .await?;
        }
        let short = format!("c{id}short");
        let expiry = Some(Duration::from_millis(50));
        client
            .set(short.clone(), Bytes::from("soon gone"), expiry)
            .await
            .map_err(to_io)?;
        IO::<(), io::Error>::sleep(Duration::from_millis(200)).await?;
        let gone = client.get(short).await.map_err(to_io)?;
        invariant::<io::Error, _>("a key is gone after its expiry", move || gone.is_none()).await
    })
}

#[test]
fn mini_redis_keeps_every_clients_keys_under_latency_loss_and_canceled_clients() {
    static TALLY: Tally = Tally::new();
    passes_under_storm(&TALLY, "redis", redis_host, redis_client);
}
