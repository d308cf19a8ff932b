//! How many simulated steps per second the simulator runs with the
//! simulated network busy: an echo server on one host, four clients on
//! the main host each sending twenty 200-byte messages over TCP, with
//! latency, jitter and loss, over many seeds. Run it by hand in a release
//! build:
//!
//! ```text
//! cargo run --release -p spindle-sim --example sim_net_speed
//! ```
//!
//! (A timed example, not a test: the number depends on the machine.)

use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use spindle_effect::TracingMode;
use spindle_effect::prelude::*;
use spindle_net::{TcpListener, TcpStream};
use spindle_sim::{NetConfig, Sim};

fn echo(conn: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec((), move |()| {
        let writer = conn.clone();
        conn.read(4096).flat_map(move |bytes| {
            if bytes.is_empty() {
                IO::pure(ControlFlow::Break(()))
            } else {
                writer.write_all(bytes).map(|()| ControlFlow::Continue(()))
            }
        })
    })
}

fn server() -> IO<(), io::Error> {
    TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], 7))).flat_map(|listener| {
        IO::forever(move || {
            listener
                .accept()
                .flat_map(|(conn, _)| echo(conn).attempt().start::<io::Error>().void())
        })
        .void()
    })
}

fn client() -> IO<(), io::Error> {
    TcpStream::connect_host("server:7").flat_map(|conn| {
        IO::tail_rec(0u32, move |round| {
            if round == 20 {
                return IO::pure(ControlFlow::Break(()));
            }
            let reader = conn.clone();
            conn.write_all(vec![round as u8; 200])
                .product_r(reader.read_exact(200))
                .map(move |_| ControlFlow::Continue(round + 1))
        })
    })
}

fn main() {
    let seeds = 1_000;
    for (name, tracing) in [
        ("tracing off", TracingMode::None),
        ("tracing cached", TracingMode::Cached),
    ] {
        let sim = Sim::builder()
            .seeds(0..seeds)
            .tracing(tracing)
            .network(
                NetConfig::default()
                    .latency(Duration::from_millis(1), Duration::from_millis(5))
                    .jitter(Duration::from_millis(2))
                    .loss(0.05),
            )
            .build()
            .expect("valid settings");
        let start = Instant::now();
        let summary = sim
            .check(|run| {
                run.host("server", server);
                IO::par_sequence((0..4).map(|_| client()).collect::<Vec<_>>()).void()
            })
            .expect("the program is correct");
        let elapsed = start.elapsed();
        println!(
            "{name}: {} seeds, {} steps in {:.2?}: {:.2} million steps/s, {:.0} seeds/s",
            summary.seeds,
            summary.steps,
            elapsed,
            summary.steps as f64 / elapsed.as_secs_f64() / 1e6,
            summary.seeds as f64 / elapsed.as_secs_f64()
        );
    }
}
