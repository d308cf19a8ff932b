//! tokio's own futures awaited inside `IO` programs on exec-tokio:
//! `tokio::net` reads with `IO::from_try_future`, and one canceled
//! mid-read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use spindle_core::{IO, IORuntime, Outcome, UIO};
use spindle_exec_tokio::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HANG_LIMIT: Duration = Duration::from_secs(20);

/// A connected pair of tokio TCP streams on 127.0.0.1.
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
    (client.expect("connect"), accepted.expect("accept").0)
}

/// Reads exactly `n` bytes of `stream` inside an `IO`, then gives the
/// stream back with them.
fn read_exact(mut stream: TcpStream, n: usize) -> IO<(TcpStream, Vec<u8>), std::io::Error> {
    IO::from_try_future_with(move || async move {
        let mut buffer = vec![0; n];
        stream.read_exact(&mut buffer).await?;
        Ok((stream, buffer))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokio_net_read_inside_an_io_gives_the_bytes_the_peer_wrote() {
    let executor = TokioExecutor::current().expect("inside tokio");
    let (mut ours, theirs) = pair().await;
    let program = read_exact(theirs, 5)
        .flat_map(|(stream, first)| read_exact(stream, 3).map(move |(_, second)| (first, second)));
    let reading = executor.run_async(program);
    ours.write_all(b"hello").await.expect("write");
    tokio::time::sleep(Duration::from_millis(10)).await;
    ours.write_all(b"abc").await.expect("write");
    let outcome = tokio::time::timeout(HANG_LIMIT, reading)
        .await
        .expect("the read ends");
    match outcome.expect("runs") {
        Outcome::Succeeded(bytes) => assert_eq!(bytes, (b"hello".to_vec(), b"abc".to_vec())),
        other => panic!("expected the bytes, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_error_inside_an_io_is_the_programs_typed_error() {
    let executor = TokioExecutor::current().expect("inside tokio");
    let (ours, theirs) = pair().await;
    drop(ours); // end of stream before the 4 bytes: `UnexpectedEof`
    let outcome = executor
        .run_async(read_exact(theirs, 4))
        .await
        .expect("runs");
    match outcome {
        Outcome::Errored(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof),
        other => panic!("expected the read's error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canceling_a_fiber_mid_read_drops_the_read_and_its_stream_and_runs_the_finalizer_once() {
    let executor = TokioExecutor::current().expect("inside tokio");
    let (mut ours, theirs) = pair().await;
    let finalized = Arc::new(AtomicUsize::new(0));
    let f = finalized.clone();
    let reader = read_exact(theirs, 10)
        .map(|(_, bytes)| bytes)
        .on_cancel(IO::delay(move || {
            f.fetch_add(1, Ordering::SeqCst);
        }));
    let fiber = executor.spawn(reader).expect("spawn");
    // Half of what the read waits for: it is mid-read, suspended in tokio.
    ours.write_all(b"12345").await.expect("write");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cancel: UIO = fiber.cancel();
    let canceled = executor.run_async(cancel).await.expect("runs");
    assert_eq!(canceled, Outcome::Succeeded(()));
    assert_eq!(
        finalized.load(Ordering::SeqCst),
        1,
        "the finalizer ran once"
    );
    assert!(fiber.await.is_canceled(), "the fiber ended canceled");
    // The read's future owned the stream: dropping it closed our peer.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(HANG_LIMIT, ours.read_to_end(&mut rest))
        .await
        .expect("the peer's end was closed");
    assert_eq!(read.expect("read"), 0, "nothing was sent after the cancel");
    assert_eq!(finalized.load(Ordering::SeqCst), 1, "and ran only once");
}
