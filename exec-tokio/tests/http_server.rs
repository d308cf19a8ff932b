//! The HTTP example, started on 127.0.0.1 and driven by a hyper client:
//! keep-alive, concurrent requests, the timeout's 503, the cache race, a
//! client that goes away mid-request, and malformed input.

#[path = "../examples/http/app.rs"]
mod app;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use app::{App, AppConfig, Stats};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use spindle_exec_tokio::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a test waits for something that must happen (a hang limit, not
/// a performance assertion).
const HANG_LIMIT: Duration = Duration::from_secs(20);

fn config() -> AppConfig {
    AppConfig {
        request_timeout: Duration::from_millis(300),
        backend_latency: Duration::from_millis(20),
        max_slow: Duration::from_secs(120),
    }
}

/// Starts the server on an ephemeral port of 127.0.0.1.
async fn start(config: AppConfig) -> (std::net::SocketAddr, Arc<App>) {
    let executor = TokioExecutor::current().expect("inside a tokio runtime");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let app = App::new(executor, config);
    tokio::spawn(app::serve(listener, app.clone()));
    (address, app)
}

/// A keep-alive client connection.
async fn connect(address: std::net::SocketAddr) -> http1::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(address).await.expect("connect");
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    sender
}

async fn send(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &str,
) -> (StatusCode, Option<String>, String) {
    sender.ready().await.expect("connection ready");
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("a valid request");
    let response = sender.send_request(request).await.expect("a response");
    let status = response.status();
    let source = response
        .headers()
        .get("x-source")
        .map(|v| v.to_str().expect("ascii").to_owned());
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (
        status,
        source,
        String::from_utf8(body.to_vec()).expect("utf-8"),
    )
}

async fn get(address: std::net::SocketAddr, path: &str) -> (StatusCode, Option<String>, String) {
    let mut sender = connect(address).await;
    send(&mut sender, "GET", path, "").await
}

/// Waits until `counter` reaches `value` (or panics after [`HANG_LIMIT`]).
async fn reaches(counter: &AtomicUsize, value: usize, what: &str) {
    let started = Instant::now();
    while Stats::get(counter) < value {
        assert!(
            started.elapsed() < HANG_LIMIT,
            "{what}: {} of {value}",
            Stats::get(counter)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_serves_several_requests_each_in_its_own_session() {
    let (address, app) = start(config()).await;
    let mut sender = connect(address).await;
    for n in 0..3 {
        let (status, _, body) = send(&mut sender, "GET", "/hello", "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, format!("hello from session {n}\n"));
    }
    let (status, _, body) = send(&mut sender, "POST", "/echo", "some text").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "some text"));
    assert_eq!(
        Stats::get(&app.stats.connections),
        1,
        "one TCP connection for all four"
    );
    reaches(&app.stats.sessions_closed, 4, "sessions closed").await;
    assert_eq!(Stats::get(&app.stats.sessions_opened), 4);
    assert_eq!(Stats::get(&app.stats.sessions_canceled), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_all_answered_and_every_session_is_closed_once() {
    let (address, app) = start(config()).await;
    let clients: Vec<_> = (0..32)
        .map(|i| {
            tokio::spawn(async move { get(address, &format!("/slow?ms={}", 10 + i % 5)).await })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let (status, _, body) = client.await.expect("client task");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, format!("slept {} ms\n", 10 + i % 5));
    }
    reaches(&app.stats.sessions_closed, 32, "sessions closed").await;
    assert_eq!(Stats::get(&app.stats.sessions_opened), 32);
    assert_eq!(Stats::get(&app.stats.connections), 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_the_request_timeout_is_answered_503_and_its_session_is_canceled() {
    let (address, app) = start(config()).await;
    let (status, _, body) = get(address, "/slow?ms=60000").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("timed out"), "{body}");
    reaches(&app.stats.sessions_closed, 1, "sessions closed").await;
    assert_eq!(Stats::get(&app.stats.sessions_canceled), 1);
    // The server goes on serving.
    assert_eq!(get(address, "/hello").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_comes_from_the_backend_first_and_from_the_cache_after() {
    let (address, app) = start(config()).await;
    let (status, source, body) = get(address, "/item/apple").await;
    assert_eq!(
        (status, source.as_deref(), body.as_str()),
        (StatusCode::OK, Some("backend"), "value of apple")
    );
    let (status, source, body) = get(address, "/item/apple").await;
    assert_eq!(
        (status, source.as_deref(), body.as_str()),
        (StatusCode::OK, Some("cache"), "value of apple")
    );
    // The cache won the second race: the backend lookup was canceled
    // before it answered.
    assert_eq!(Stats::get(&app.stats.backend_answers), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_mid_request_cancels_its_fiber_and_closes_its_session() {
    let (address, app) = start(AppConfig {
        request_timeout: Duration::from_secs(600),
        ..config()
    })
    .await;
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(b"GET /slow?ms=100000 HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("write");
    reaches(
        &app.stats.sessions_opened,
        1,
        "the request's session opened",
    )
    .await;
    drop(stream);
    reaches(
        &app.stats.sessions_closed,
        1,
        "the session closed after the client left",
    )
    .await;
    assert_eq!(Stats::get(&app.stats.sessions_canceled), 1);
    assert_eq!(get(address, "/hello").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_an_error_response_and_the_server_keeps_serving() {
    let (address, app) = start(config()).await;
    assert_eq!(get(address, "/nowhere").await.0, StatusCode::NOT_FOUND);
    let (status, _, body) = get(address, "/slow?ms=soon").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("`soon` is not a number"), "{body}");
    assert_eq!(get(address, "/slow").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(
        get(address, "/item/no%20spaces").await.0,
        StatusCode::BAD_REQUEST
    );

    // Bytes that are not HTTP: hyper answers 400 and closes the connection.
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(b"\x00\x01 this is not HTTP\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(HANG_LIMIT, stream.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    reaches(
        &app.stats.connection_errors,
        1,
        "the malformed connection's error",
    )
    .await;

    assert_eq!(get(address, "/hello").await.0, StatusCode::OK);
}
