//! Serves a Spindle executor's counters in Prometheus' text format over
//! HTTP, from a Spindle program: `metrics-exporter-prometheus` is the
//! recorder (without its own HTTP listener: default features off), and a
//! fiber per scrape, on spindle-net's TCP, records the executor's counters
//! ([`spindle_metrics::record`]) and answers with the rendered text.
//!
//! ```text
//! cargo run -p spindle-metrics --example prometheus -- 127.0.0.1:9898
//! curl http://127.0.0.1:9898/metrics
//! ```
//!
//! The first line on stdout is `listening on <addr>`; it serves until
//! killed. `GET /metrics` (or `GET /`) is answered `200` with the text
//! format (`text/plain; version=0.0.4`); any other method or path `404`,
//! a request without a request line `400`. Each answer closes its
//! connection. `tests/prometheus.rs` runs [`scrape_server`] and checks the
//! text.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};
use spindle_core::{Executor, IO, IORuntime, Outcome};
use spindle_exec_wstp::Runtime;
use spindle_net::{BufReader, ServeConfig, ServeSummary, TcpListener, TcpStream, serve};

/// Installs the Prometheus recorder as the process's `metrics` recorder
/// (once per process) and describes Spindle's names to it; the handle
/// renders what was recorded.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    spindle_metrics::describe();
    Ok(prometheus)
}

/// Serves scrapes on `listener` until canceled: each `GET /metrics`
/// records the counters of `executor` and answers with `prometheus`'
/// rendering.
pub fn scrape_server<X: Executor>(
    listener: TcpListener,
    executor: X,
    prometheus: PrometheusHandle,
) -> IO<ServeSummary, io::Error> {
    serve(
        listener,
        ServeConfig::default(),
        IO::<(), Infallible>::never(),
        move |stream, _peer: SocketAddr| answer(stream, executor.clone(), prometheus.clone()),
    )
}

/// One scrape: the request head, then the answer, then close.
fn answer<X: Executor>(
    stream: TcpStream,
    executor: X,
    prometheus: PrometheusHandle,
) -> IO<(), io::Error> {
    IO::block(async move {
        let reader = BufReader::new(stream);
        let request_line = reader.read_line().await?;
        // The headers, up to the blank line (or the end of input).
        while let Some(line) = reader.read_line().await? {
            if line.trim_end().is_empty() {
                break;
            }
        }
        let target = request_line.as_deref().map(|line| {
            let mut words = line.split_whitespace();
            (words.next().unwrap_or(""), words.next().unwrap_or(""))
        });
        let response = match target {
            Some(("GET", "/metrics" | "/")) => {
                spindle_metrics::record(&executor);
                let body = prometheus.render();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            }
            Some(_) => status("404 Not Found"),
            None => status("400 Bad Request"),
        };
        reader.get_ref().write_all(response.into_bytes()).await?;
        Ok(())
    })
}

fn status(status: &str) -> String {
    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

#[allow(dead_code)] // The test includes this file for the functions above.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9898".to_owned())
        .parse()?;
    let prometheus = install()?;
    let rt = Runtime::from_env()?;
    let handle = rt.handle().clone();
    let program = TcpListener::bind(addr).flat_map(move |listener| {
        listener.local_addr().flat_map(move |bound| {
            println!("listening on {bound}");
            scrape_server(listener, handle, prometheus)
        })
    });
    match rt.block_on(program)? {
        Outcome::Errored(error) => Err(error.into()),
        other => Err(format!("the server ended: {other:?}").into()),
    }
}
