//! The `prometheus` example's scrape server, run in a program: a client
//! scrapes it over TCP and finds every documented name with plausible
//! values.

#[allow(dead_code)]
#[path = "../examples/prometheus.rs"]
mod example;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use spindle_core::{IO, IORuntime};
use spindle_exec_wstp::Runtime;
use spindle_net::TcpListener;

/// Fibers the program starts (and joins) before it is scraped.
const FIBERS: usize = 50;

/// A plain HTTP/1.1 GET of `path`, on a thread that may block: the answer,
/// head and body, to the server's close.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")?;
    stream.flush()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let _ = stream.shutdown(Shutdown::Both);
    Ok(answer)
}

/// The value of the sample `series` (a name with its labels, as the text
/// format prints it) in a scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok())?
        })
}

#[test]
fn a_scrape_shows_every_documented_name_with_the_fibers_the_program_started() {
    let prometheus = example::install().expect("the only recorder of this test binary");
    let rt = Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("a pool");
    let handle = rt.handle().clone();
    let program = IO::<usize, std::io::Error>::par_traverse((0..FIBERS).collect(), IO::pure)
        .flat_map(move |_| TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))
        .flat_map(move |listener| {
            listener.local_addr().flat_map(move |addr| {
                example::scrape_server(listener, handle, prometheus)
                    .start()
                    .flat_map(move |server| {
                        IO::blocking(move || (get(addr, "/metrics"), get(addr, "/nowhere")))
                            .flat_tap(move |_| server.cancel())
                    })
            })
        });
    let (scrape, not_found) = rt
        .block_on(program)
        .expect("runs")
        .succeeded()
        .expect("the scrapes");
    let scrape = scrape.expect("the scrape answered");
    let not_found = not_found.expect("the other path answered");
    assert!(scrape.starts_with("HTTP/1.1 200 OK\r\n"), "{scrape}");
    assert!(
        not_found.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{not_found}"
    );
    let body = scrape.split_once("\r\n\r\n").expect("a head and a body").1;

    // exec-wstp provides every name: each is described and has a sample.
    for (name, kind) in spindle_metrics::names() {
        assert!(
            body.contains(&format!("# TYPE {name} {kind}")),
            "{name} ({kind}) missing in:\n{body}"
        );
    }
    let started = sample(body, "spindle_fibers_started_total").expect("started");
    assert!(
        started >= FIBERS as f64,
        "started {started}, want at least the {FIBERS} children"
    );
    let completed = sample(body, "spindle_fibers_completed_total").expect("completed");
    assert!(
        completed >= FIBERS as f64,
        "completed {completed}: the children ended before the scrape"
    );
    assert!(completed <= started);
    // Alive at the scrape: the main fiber, the server's and the scrape's.
    let live = sample(body, "spindle_fibers_live").expect("live");
    assert!((1.0..started).contains(&live), "live {live}");
    assert_eq!(sample(body, "spindle_fibers_canceled_total"), Some(0.0));
    for worker in ["0", "1"] {
        for name in [
            "spindle_worker_queue_depth",
            "spindle_worker_steals_total",
            "spindle_worker_parks_total",
            "spindle_worker_timers",
        ] {
            let series = format!("{name}{{worker=\"{worker}\"}}");
            assert!(sample(body, &series).is_some(), "{series} in:\n{body}");
        }
    }
    assert_eq!(
        sample(body, "spindle_blocking_threads").map(|t| t >= 1.0),
        Some(true),
        "the scrape's client runs on a blocking thread"
    );
}
