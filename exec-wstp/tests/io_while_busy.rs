//! Sockets on a busy pool: an idle worker serves the readiness of a socket
//! while the worker that ran the fiber that made the socket is stuck in a
//! fiber that never yields (`park.rs`: no idle worker sleeps while events
//! wait in the pool's poller).

mod common;

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream as StdTcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use common::{HANG_LIMIT, runtime, wait_until, within};
use spindle_core::{IO, IORuntime, Outcome};
use spindle_exec_wstp::net::TcpListener;

/// Spins on the calling worker, never yielding, until `served` is set;
/// false if it gave up after [`HANG_LIMIT`] (the hang guard).
fn spin_until(served: &AtomicBool) -> bool {
    let start = Instant::now();
    while !served.load(Ordering::SeqCst) {
        if start.elapsed() > HANG_LIMIT {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

#[test]
fn a_socket_made_by_a_fiber_on_a_worker_stuck_in_a_fiber_that_never_yields_is_served_by_the_idle_worker()
 {
    within("the busy-worker socket test", HANG_LIMIT * 3, || {
        let rt = runtime(2);
        let reading = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicBool::new(false));
        let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();

        // The peer, a thread outside the pool: it connects, waits until the
        // reader fiber waits for bytes (the pool's one I/O waiter), then
        // writes them; the connection stays open until the test ends.
        let peer = {
            let handle = rt.handle().clone();
            let reading = reading.clone();
            std::thread::spawn(move || -> io::Result<StdTcpStream> {
                let addr = addr_rx.recv().map_err(io::Error::other)?;
                let mut stream = StdTcpStream::connect(addr)?;
                wait_until("the reader waits for its bytes", HANG_LIMIT, || {
                    reading.load(Ordering::SeqCst) && handle.metrics().io_waiters == 1
                });
                stream.write_all(b"ping")?;
                Ok(stream)
            })
        };

        // The program starts on a worker (spawned, not run inline by
        // `block_on`), makes the listener and the accepted socket there,
        // starts the reader, and then spins on that same worker without
        // ever yielding until the reader got its bytes.
        let (r, s) = (reading.clone(), served.clone());
        let program = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).flat_map(
            move |listener| {
                listener.local_addr().flat_map(move |addr| {
                    let _ = addr_tx.send(addr);
                    listener.accept().flat_map(move |(server, _)| {
                        let s2 = s.clone();
                        let reader = IO::delay(move || r.store(true, Ordering::SeqCst))
                            .flat_map(move |()| server.read_exact(4))
                            .map(move |bytes| {
                                s2.store(true, Ordering::SeqCst);
                                bytes
                            });
                        reader.start().flat_map(move |reader| {
                            // A fiber that takes this worker's next slot,
                            // so that the reader moves to its queue, where
                            // the idle worker takes it.
                            IO::<(), io::Error>::unit().start().flat_map(move |_next| {
                                IO::delay(move || spin_until(&s)).flat_map(
                                    move |served_while_spinning| {
                                        reader
                                            .join::<io::Error>()
                                            .map(move |outcome| (served_while_spinning, outcome))
                                    },
                                )
                            })
                        })
                    })
                })
            },
        );
        let fiber = rt.spawn(program).expect("spawn the program");
        let outcome = rt.block_on(fiber.join::<()>());
        let _stream = peer
            .join()
            .expect("the peer thread")
            .expect("the peer's socket");
        match outcome {
            Ok(Outcome::Succeeded(Outcome::Succeeded((served_while_spinning, read)))) => {
                assert!(
                    served_while_spinning,
                    "the reader was not served while the worker spun for {HANG_LIMIT:?}"
                );
                assert!(
                    matches!(&read, Outcome::Succeeded(bytes) if bytes == b"ping"),
                    "the reader's outcome: {read:?}"
                );
            }
            other => panic!("the program: {other:?}"),
        }
    });
}
