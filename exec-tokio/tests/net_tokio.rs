//! What is exec-tokio's own in spindle-net's sockets (its readiness is
//! tokio's I/O driver, through `AsyncFd`): a runtime of the application's
//! that the executor is attached to, whose driver serves spindle's sockets
//! and tokio's alike, and one built without I/O (an error, not tokio's
//! panic). What every executor shares (round trips over TCP, UDP and Unix
//! sockets, cancellation, closing, split halves, two fibers waiting in one
//! direction of one socket, a runtime shut down, both owned runtime
//! flavors) is tested on all of them in `tests-integration/tests/net_*.rs`.
//! Loopback addresses only; every program is bounded by [`HANG`].
#![cfg(unix)]

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::time::Duration;

use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_tokio::TokioExecutor;
use spindle_exec_tokio::net::{TcpListener, TcpStream};

/// How long a test program may take before it is failed (a hang limit, not
/// a performance assertion).
const HANG: Duration = Duration::from_secs(20);

/// 127.0.0.1 with a port the system picks.
fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Writes back what it reads, until end of stream, then shuts its write
/// side down.
fn echo(stream: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec(stream, |stream| {
        stream.read(16 * 1024).flat_map(move |bytes| {
            if bytes.is_empty() {
                stream
                    .shutdown(Shutdown::Write)
                    .map(|()| ControlFlow::Break(()))
            } else {
                let written = stream.write_all(bytes);
                written.map(move |()| ControlFlow::Continue(stream))
            }
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spindle_listener_on_an_attached_runtime_serves_a_tokio_client_on_the_same_driver() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let executor = TokioExecutor::current().expect("inside tokio");
    let (address_tx, address_rx) = tokio::sync::oneshot::channel();
    let server = TcpListener::bind(localhost()).flat_map(move |listener| {
        listener.local_addr().flat_map(move |addr| {
            let _ = address_tx.send(addr);
            listener
                .accept()
                .flat_map(|(stream, _)| echo(stream))
                .map(move |()| drop(listener))
        })
    });
    let served = tokio::spawn(executor.run_async(server.timeout(HANG)));
    let addr = tokio::time::timeout(HANG, address_rx)
        .await
        .expect("the server binds in time")
        .expect("the server sends its address");
    let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    client.write_all(b"through tokio").await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut echoed = Vec::new();
    tokio::time::timeout(HANG, client.read_to_end(&mut echoed))
        .await
        .expect("the echo ends in time")
        .expect("read");
    assert_eq!(echoed, b"through tokio".to_vec());
    let outcome = served.await.expect("the task").expect("runs");
    assert!(
        matches!(outcome, Outcome::Succeeded(())),
        "the server fiber ends: {outcome:?}"
    );
}

#[test]
fn making_a_socket_on_an_attached_runtime_without_io_is_an_unsupported_error_not_a_panic() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("a runtime with timers and no I/O");
    let executor = TokioExecutor::builder()
        .handle(runtime.handle().clone())
        .build()
        .expect("attach");
    let outcome = executor
        .block_on(TcpListener::bind(localhost()).timeout(HANG))
        .expect("block_on");
    let error = outcome.errored().expect("an error value");
    assert_eq!(error.kind(), io::ErrorKind::Unsupported, "{error}");
    assert!(error.to_string().contains("enable_io"), "{error}");
}
