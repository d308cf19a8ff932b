//! The socket-lines rows of `benches/stream.rs` (`Stream/socket_lines`) as
//! a program, for callgrind: one process writes, another reads, so that
//! the reader's instructions are counted alone.
//!
//! ```text
//! cargo run --release -p benches --example socket_lines -- serve MIB
//! cargo run --release -p benches --example socket_lines -- SIDE ADDR
//! ```
//!
//! `serve` starts the rows' line writer (`benches::socket_lines`, lines of
//! 80 bytes, `MIB` MiB per connection), prints its address and waits.
//! A reader connects once to `ADDR`, reads to the end and prints the lines
//! and their bytes. Sides: `single` (exec-single), `batching`
//! (exec-batching), `wstp` (exec-wstp, 2 workers): Spindle's
//! `reads(64 KiB)`, `utf8_decode`, `lines(1024)`, `compile().fold`;
//! `tokio` (current_thread, `BufReader::new(..).lines()`, 8 KiB buffer)
//! and `tokio64` (the same with a 64 KiB buffer).
//!
//! Instructions per line: run a reader under
//! `valgrind --tool=callgrind` against writers of two sizes and divide the
//! difference by the difference of the lines (the process's start and
//! end cancel out).

#[path = "support/tokio_lines.rs"]
mod tokio_reference;

use std::net::SocketAddr;

use benches::socket_lines::{READ, spindle_lines, start_writer};
use benches::succeeded;
use spindle_core::IORuntime;

fn on<R: IORuntime>(rt: R, addr: SocketAddr) -> (u64, u64) {
    succeeded(rt.block_on(spindle_lines(addr)).expect("a run"))
}

fn tokio_lines(addr: SocketAddr, capacity: usize) -> (u64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio current_thread");
    rt.block_on(tokio_reference::tokio_lines(addr, capacity))
        .expect("tokio lines")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [side, arg] = args.as_slice() else {
        panic!("usage: socket_lines serve MIB | socket_lines SIDE ADDR");
    };
    if side == "serve" {
        let mib: usize = arg.parse().expect("MIB, a number");
        println!("{}", start_writer(mib * 1024 * 1024));
        loop {
            std::thread::park();
        }
    }
    let addr: SocketAddr = arg.parse().expect("ADDR, host:port");
    let (n, bytes) = match side.as_str() {
        "single" => on(
            spindle_exec_single::SingleThreaded::new().expect("exec-single"),
            addr,
        ),
        "batching" => on(
            spindle_exec_batching::EventLoop::new().expect("exec-batching"),
            addr,
        ),
        "wstp" => on(
            spindle_exec_wstp::Runtime::builder()
                .worker_threads(2)
                .build()
                .expect("exec-wstp"),
            addr,
        ),
        "tokio" => tokio_lines(addr, 8 * 1024),
        "tokio64" => tokio_lines(addr, READ),
        other => panic!("unknown side {other}"),
    };
    println!("{side}: {n} lines, {bytes} bytes");
}
