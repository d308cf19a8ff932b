//! The HTTP example's application: a hyper 1.x HTTP/1.1 server whose
//! request handlers are Spindle `IO` programs, run as fibers on exec-tokio.
//!
//! Shared by the example binary (`examples/http_server.rs`) and its test
//! (`tests/http_server.rs`), which include this file with `#[path]`.
//!
//! # What it shows
//!
//! * **hyper drives the connection, Spindle runs the handler.** Each
//!   request becomes one `IO` program ([`App::handle`]), started as a fiber
//!   with [`IO::into_future_on`] and awaited by hyper's service future with
//!   `cancel_on_drop`: when hyper drops the request (the client went away),
//!   the fiber is canceled and its finalizers run.
//! * **Futures inside `IO`.** The backend's latency is `tokio::time::sleep`
//!   and the request body is hyper's `Incoming`, both awaited inside the
//!   program with [`IO::from_future`] / [`IO::from_try_future`].
//! * **Per-request timeout** (`IO::timeout`, answered `503`), a **race** of
//!   a slow backend against a cache (`IO::race`: the loser is canceled),
//!   and a **`Resource` per request** (a backend "session" opened before
//!   the handler and closed after it, however it ends, counted in
//!   [`Stats`]).
//! * **Malformed input gets an error response and the server keeps
//!   serving:** an unknown path is `404`, a bad parameter `400`, a request
//!   hyper cannot parse is answered `400` by hyper and the connection
//!   closed; the accept loop never stops on a connection's error.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use spindle_core::error::TimeoutError;
use spindle_core::{Either, ExitCase, IO, IORuntime, Resource};
use spindle_exec_tokio::TokioExecutor;
use tokio::net::TcpListener;

/// How the application behaves; the test shortens the times.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The limit on one request's handler; past it the answer is `503`.
    pub request_timeout: Duration,
    /// How long the (simulated) backend takes to answer an item lookup.
    pub backend_latency: Duration,
    /// The longest `/slow?ms=` a client may ask for (`400` above it).
    pub max_slow: Duration,
}

impl Default for AppConfig {
    fn default() -> AppConfig {
        AppConfig {
            request_timeout: Duration::from_secs(2),
            backend_latency: Duration::from_millis(50),
            max_slow: Duration::from_secs(60),
        }
    }
}

/// Counters of what the handlers did, for the test (and `/stats`).
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicUsize,
    /// Request fibers started.
    pub requests: AtomicUsize,
    /// Backend sessions opened (one per request, the `Resource`).
    pub sessions_opened: AtomicUsize,
    /// Backend sessions closed: the `Resource`'s release, run exactly once
    /// per opened session.
    pub sessions_closed: AtomicUsize,
    /// Sessions closed because their request was canceled (a timeout, or
    /// the client went away).
    pub sessions_canceled: AtomicUsize,
    /// Backend lookups that ran to completion.
    pub backend_answers: AtomicUsize,
    /// Connections that ended with a hyper error (malformed input, reset).
    pub connection_errors: AtomicUsize,
}

impl Stats {
    fn bump(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

/// Why a request failed: each becomes an error response.
#[derive(Debug)]
pub enum AppError {
    /// The handler took longer than [`AppConfig::request_timeout`].
    Timeout(TimeoutError),
    /// A parameter was missing or malformed (the text says which).
    BadRequest(String),
    /// No route for this method and path.
    NotFound,
    /// The request body could not be read.
    Body(hyper::Error),
}

impl From<TimeoutError> for AppError {
    fn from(e: TimeoutError) -> AppError {
        AppError::Timeout(e)
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Timeout(e) => write!(f, "the request timed out: {e}"),
            AppError::BadRequest(why) => write!(f, "bad request: {why}"),
            AppError::NotFound => f.write_str("not found"),
            AppError::Body(e) => write!(f, "the request body could not be read: {e}"),
        }
    }
}

impl AppError {
    /// The error response: the status and the reason as text.
    pub fn response(&self) -> Response<Full<Bytes>> {
        text(self.status(), format!("{self}\n"))
    }

    fn status(&self) -> StatusCode {
        match self {
            AppError::Timeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::BadRequest(_) | AppError::Body(_) => StatusCode::BAD_REQUEST,
            AppError::NotFound => StatusCode::NOT_FOUND,
        }
    }
}

/// A response with a text body.
fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// The application: its executor, its cache and its counters.
pub struct App {
    /// Owned: dropping an executor shuts it down (its fibers with it).
    executor: TokioExecutor,
    config: AppConfig,
    cache: Mutex<HashMap<String, String>>,
    /// What the handlers did.
    pub stats: Stats,
}

/// A backend session, the per-request `Resource`.
#[derive(Clone)]
struct Session {
    id: usize,
}

impl App {
    /// An application whose fibers run on `executor`.
    pub fn new(executor: TokioExecutor, config: AppConfig) -> Arc<App> {
        Arc::new(App {
            executor,
            config,
            cache: Mutex::new(HashMap::new()),
            stats: Stats::default(),
        })
    }

    /// The program that answers one request: route it, run the route in a
    /// backend session, under the request timeout, and turn its error into
    /// an error response (so the program fails with nothing; its error type
    /// stays `AppError`, what the routes fail with).
    pub fn handle(
        self: &Arc<App>,
        request: Request<Incoming>,
    ) -> IO<Response<Full<Bytes>>, AppError> {
        let app = self.clone();
        let opened = self.clone();
        let closed = self.clone();
        let session = Resource::make_case(
            IO::delay(move || {
                Stats::bump(&opened.stats.requests);
                let id = opened.stats.sessions_opened.fetch_add(1, Ordering::SeqCst);
                Session { id }
            }),
            move |_session: Session, exit| {
                IO::delay(move || {
                    if exit == ExitCase::Canceled {
                        Stats::bump(&closed.stats.sessions_canceled);
                    }
                    Stats::bump(&closed.stats.sessions_closed);
                })
            },
        );
        let timeout = self.config.request_timeout;
        session
            .use_with(move |session| app.route(session.id, request))
            .timeout(timeout)
            .handle_error(|error| error.response())
    }

    fn route(
        self: &Arc<App>,
        session: usize,
        request: Request<Incoming>,
    ) -> IO<Response<Full<Bytes>>, AppError> {
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or("").to_owned();
        match (request.method().clone(), path.as_str()) {
            (Method::GET, "/hello") => IO::pure(text(
                StatusCode::OK,
                format!("hello from session {session}\n"),
            )),
            (Method::GET, "/slow") => self.slow(&query),
            (Method::GET, p) if p.starts_with("/item/") => {
                self.item(p["/item/".len()..].to_owned())
            }
            (Method::POST, "/echo") => {
                IO::from_try_future_with(move || request.into_body().collect())
                    .map_err(AppError::Body)
                    .map(|body| text(StatusCode::OK, body.to_bytes()))
            }
            (Method::GET, "/stats") => {
                let app = self.clone();
                IO::delay(move || {
                    let s = &app.stats;
                    text(
                        StatusCode::OK,
                        format!(
                            "requests {} opened {} closed {} canceled {}\n",
                            Stats::get(&s.requests),
                            Stats::get(&s.sessions_opened),
                            Stats::get(&s.sessions_closed),
                            Stats::get(&s.sessions_canceled),
                        ),
                    )
                })
            }
            _ => IO::raise_error(AppError::NotFound),
        }
    }

    /// `GET /slow?ms=N`: answers after N milliseconds of `tokio::time`.
    fn slow(&self, query: &str) -> IO<Response<Full<Bytes>>, AppError> {
        let Some(ms) = query.strip_prefix("ms=") else {
            return IO::raise_error(AppError::BadRequest(
                "expected the query `ms=<milliseconds>`".into(),
            ));
        };
        let Ok(ms) = ms.parse::<u64>() else {
            return IO::raise_error(AppError::BadRequest(format!(
                "`{ms}` is not a number of milliseconds"
            )));
        };
        let wait = Duration::from_millis(ms);
        if wait > self.config.max_slow {
            return IO::raise_error(AppError::BadRequest(format!(
                "{ms} ms is more than the limit of {} ms",
                self.config.max_slow.as_millis()
            )));
        }
        IO::from_future_with(move || tokio::time::sleep(wait))
            .map(move |()| text(StatusCode::OK, format!("slept {ms} ms\n")))
    }

    /// `GET /item/KEY`: the cache races the (slow) backend. A cache hit wins
    /// at once and cancels the backend lookup; on a miss the cache side
    /// never finishes, the backend wins and fills the cache.
    fn item(self: &Arc<App>, key: String) -> IO<Response<Full<Bytes>>, AppError> {
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return IO::raise_error(AppError::BadRequest(
                "an item key is one or more ASCII letters or digits".into(),
            ));
        }
        let (cache_app, backend_app) = (self.clone(), self.clone());
        let cache_key = key.clone();
        let cache: IO<String, AppError> =
            IO::delay(move || cache_app.cache.lock().unwrap().get(&cache_key).cloned()).flat_map(
                |hit| match hit {
                    Some(value) => IO::pure(value),
                    None => IO::never(),
                },
            );
        let latency = self.config.backend_latency;
        let backend: IO<String, AppError> =
            IO::from_future_with(move || tokio::time::sleep(latency)).flat_map(move |()| {
                IO::delay(move || {
                    let value = format!("value of {key}");
                    backend_app.cache.lock().unwrap().insert(key, value.clone());
                    Stats::bump(&backend_app.stats.backend_answers);
                    value
                })
            });
        cache.race(backend).map(|won| {
            let (source, value) = match won {
                Either::Left(value) => ("cache", value),
                Either::Right(value) => ("backend", value),
            };
            let mut response = text(StatusCode::OK, value);
            response
                .headers_mut()
                .insert("x-source", source.parse().expect("a valid header value"));
            response
        })
    }
}

/// Serves HTTP/1.1 on `listener` until the task is dropped: one tokio task
/// per connection, each request one fiber on the application's executor.
pub async fn serve(listener: TcpListener, app: Arc<App>) {
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // A failed accept (a reset before accept, too many open files)
            // concerns one connection: keep serving.
            Err(_) => continue,
        };
        Stats::bump(&app.stats.connections);
        let app = app.clone();
        tokio::spawn(async move {
            let stats_app = app.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let program = app.handle(request);
                // Dropped by hyper when the client goes away: then the
                // fiber is canceled, and its session closed.
                let answer = program
                    .into_future_on(app.executor.handle())
                    .cancel_on_drop();
                async move {
                    Ok::<_, Infallible>(match answer.await {
                        spindle_core::Outcome::Succeeded(response) => response,
                        spindle_core::Outcome::Errored(error) => error.response(),
                        spindle_core::Outcome::Canceled => {
                            text(StatusCode::SERVICE_UNAVAILABLE, "canceled\n")
                        }
                        spindle_core::Outcome::Panicked(message) => text(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("the handler panicked: {message}\n"),
                        ),
                    })
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if connection.await.is_err() {
                // Malformed input (hyper has answered it with 400 where it
                // could) or a reset: this connection ends, the server goes on.
                Stats::bump(&stats_app.stats.connection_errors);
            }
        });
    }
}
