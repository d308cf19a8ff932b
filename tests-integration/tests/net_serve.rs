//! `spindle_net::serve` on every executor, over real sockets on 127.0.0.1:
//! several clients served at once (each on its own fiber), the connection
//! limit holding (concurrent handlers counted), an idle connection ended
//! by `for_each_line_timeout` while an active one goes on, graceful
//! shutdown (a short connection finishes within the grace period, a long
//! one is canceled after it, every finalizer run exactly once), handlers
//! that fail or panic without stopping the server, and clones of a write
//! half writing from two fibers (each write whole).
//!
//! The programs are IO blocks: a server started as a fiber, clients as
//! fibers of the same program. Where a test must know that handlers run
//! at once it makes them wait for each other (a latch), never for time;
//! the only time-based bounds are lower bounds (the grace period was
//! waited) and the idle timeout itself, whose slack is ten times the
//! active client's pace. Every program is bounded by [`HANG`].
#![cfg(unix)]

mod common;

use common::net::*;
use common::{Counter, rt_test};

use std::io;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spindle_core::{CountDownLatch, Deferred, FiberHandle, IO, Outcome};
use spindle_net::{
    BufReader, LinesEnd, ServeConfig, ServeFailure, ServeSummary, TcpListener, TcpStream, serve,
};

/// A configuration with `max` connections and a grace period of `grace`.
fn config(max: usize, grace: Duration) -> ServeConfig {
    ServeConfig::builder()
        .max_connections(max)
        .grace_period(grace)
        .build()
        .expect("a valid configuration")
}

/// Connects, sends `line`, and reads the one-line reply (`None` at end of
/// stream); the connection closes when this ends.
fn ask(addr: std::net::SocketAddr, line: String) -> IO<Option<String>, io::Error> {
    IO::block(async move {
        let reader = BufReader::new(TcpStream::connect(addr).await?);
        reader.get_ref().write_all(line).await?;
        reader.read_line().await
    })
}

/// The summary of a server fiber that ended, or an error saying how it
/// ended otherwise.
fn summary_of(outcome: Outcome<ServeSummary, io::Error>) -> io::Result<ServeSummary> {
    match outcome {
        Outcome::Succeeded(summary) => Ok(summary),
        Outcome::Errored(e) => Err(e),
        other => Err(io::Error::other(format!("serve ended with {other:?}"))),
    }
}

/// Stops the server started as `server` with `stop`, and waits for its
/// summary.
fn shut_down(
    stop: &Deferred<()>,
    server: FiberHandle<ServeSummary, io::Error>,
) -> IO<ServeSummary, io::Error> {
    let stop = stop.clone();
    IO::block(async move {
        let _ = stop.complete(()).value().await;
        summary_of(server.join().value().await)
    })
}

/// A line handler that answers each line in capitals, until end of
/// stream.
fn shout(stream: TcpStream, _peer: std::net::SocketAddr) -> IO<(), io::Error> {
    let (read, write) = stream.into_split();
    BufReader::new(read)
        .for_each_line(move |line| {
            write
                .write_all(line.to_uppercase())
                .map(|()| ControlFlow::Continue(()))
        })
        .void()
}

/// How many clients the concurrency tests use.
const CLIENTS: usize = 6;

rt_test! {
    fn several_clients_are_served_at_once_each_on_its_own_fiber() {
        let rt = rt();
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let stop = Deferred::<()>::new();
            // Each handler waits, after reading its line, until every
            // client's handler has read one: they can only all get there
            // if they run at once.
            let together = CountDownLatch::new(CLIENTS as u64).expect("a latch");
            let server = serve(listener, config(CLIENTS, HANG), stop.get(), move |stream, _peer| {
                let together = together.clone();
                let reader = BufReader::new(stream);
                IO::block(async move {
                    let Some(line) = reader.read_line().await? else {
                        return Ok(());
                    };
                    together.release().value().await;
                    together.wait().value().await;
                    reader.get_ref().write_all(line.to_uppercase()).await
                })
            })
            .start()
            .value()
            .await;
            let clients = (0..CLIENTS).map(|i| ask(addr, format!("client {i}\n"))).collect();
            let replies = IO::par_sequence(clients).await?;
            let summary = shut_down(&stop, server).await?;
            Ok((replies, summary))
        });
        let (replies, summary) = succeeded(&rt, program);
        let expected: Vec<_> = (0..CLIENTS).map(|i| Some(format!("CLIENT {i}\n"))).collect();
        assert_eq!(replies, expected);
        assert_eq!(
            (summary.accepted, summary.completed, summary.failed, summary.canceled),
            (CLIENTS as u64, CLIENTS as u64, 0, 0)
        );
        assert_nothing_registered(&rt);
    }

    fn at_most_max_connections_handlers_run_at_once_and_the_rest_wait_their_turn() {
        const LIMIT: usize = 2;
        let rt = rt();
        let live = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (live_in, most_in) = (live.clone(), most.clone());
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let stop = Deferred::<()>::new();
            let answered = Counter::new();
            let release = Deferred::<()>::new();
            let server = serve(listener, config(LIMIT, HANG), stop.get(), move |stream, _peer| {
                let (live, most) = (live_in.clone(), most_in.clone());
                IO::block(async move {
                    let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let reader = BufReader::new(stream);
                    if let Some(line) = reader.read_line().await? {
                        reader.get_ref().write_all(line).await?;
                    }
                    // Until the client closes: the connection stays live
                    // as long as its client holds it.
                    let _rest = reader.read(16).await?;
                    live.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                })
            })
            .start()
            .value()
            .await;
            // Every client holds its connection after its answer until
            // `release`; the first LIMIT answered hold the server's every
            // permit, so no other client can be answered before it.
            let clients = (0..CLIENTS)
                .map(|i| {
                    let (answered, release) = (answered.clone(), release.clone());
                    IO::<_, io::Error>::block(async move {
                        let reader = BufReader::new(TcpStream::connect(addr).await?);
                        reader.get_ref().write_all(format!("{i}\n")).await?;
                        let answer = reader.read_line().await?;
                        answered.incr();
                        release.get::<io::Error>().await?;
                        Ok(answer)
                    })
                })
                .collect();
            let clients = IO::par_sequence(clients).start().value().await;
            // Wait until LIMIT clients are answered and hold their
            // connections; give the others a moment: they are not served.
            while answered.get() < LIMIT {
                IO::<(), io::Error>::sleep(Duration::from_millis(1)).await?;
            }
            IO::<(), io::Error>::sleep(Duration::from_millis(50)).await?;
            let answered_while_full = answered.get();
            let _ = release.complete(()).value().await;
            let answers = match clients.join().value().await {
                Outcome::Succeeded(answers) => answers,
                other => return Err(io::Error::other(format!("clients: {other:?}"))),
            };
            let summary = shut_down(&stop, server).await?;
            Ok((answered_while_full, answers, summary))
        });
        let (answered_while_full, answers, summary) = succeeded(&rt, program);
        assert_eq!(answered_while_full, LIMIT, "only LIMIT clients are served while the server is full");
        let expected: Vec<_> = (0..CLIENTS).map(|i| Some(format!("{i}\n"))).collect();
        assert_eq!(answers, expected, "every client is served in the end");
        assert_eq!(most.load(Ordering::SeqCst), LIMIT, "at most LIMIT handlers at once, and LIMIT reached");
        assert_eq!(live.load(Ordering::SeqCst), 0);
        assert_eq!((summary.accepted, summary.completed), (CLIENTS as u64, CLIENTS as u64));
        assert_nothing_registered(&rt);
    }

    fn an_idle_connection_times_out_while_an_active_one_keeps_going() {
        const IDLE: Duration = Duration::from_millis(400);
        const PACE: Duration = Duration::from_millis(20);
        const LINES: usize = 40;
        let rt = rt();
        let ends = Arc::new(Mutex::new(Vec::new()));
        let ends_in = ends.clone();
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let stop = Deferred::<()>::new();
            let server = serve(listener, config(8, HANG), stop.get(), move |stream, _peer| {
                let ends = ends_in.clone();
                let (read, write) = stream.into_split();
                IO::block(async move {
                    let echo = write.clone();
                    let end = BufReader::new(read)
                        .for_each_line_timeout(IDLE, move |line| {
                            echo.write_all(line).map(|()| ControlFlow::Continue(()))
                        })
                        .await?;
                    ends.lock().unwrap().push(end);
                    if end.is_idle_timeout() {
                        write.write_all(b"idle: bye\n").await?;
                    }
                    Ok(())
                })
            })
            .start()
            .value()
            .await;
            // The silent client: connects and waits for what the server
            // says; the server's goodbye, then end of stream.
            let silent = IO::<_, io::Error>::block(async move {
                let started = Instant::now();
                let reader = BufReader::new(TcpStream::connect(addr).await?);
                let bye = reader.read_line().await?;
                let end = reader.read_line().await?;
                Ok((bye, end, started.elapsed()))
            });
            // The active client: a line every PACE, for LINES lines (much
            // longer than IDLE in all), each echoed.
            let active = IO::<_, io::Error>::block(async move {
                let reader = BufReader::new(TcpStream::connect(addr).await?);
                let mut echoed = 0;
                for i in 0..LINES {
                    reader.get_ref().write_all(format!("line {i}\n")).await?;
                    if reader.read_line().await? == Some(format!("line {i}\n")) {
                        echoed += 1;
                    }
                    IO::<(), io::Error>::sleep(PACE).await?;
                }
                Ok(echoed)
            });
            let ((bye, end, took), echoed) = silent.both(active).await?;
            let summary = shut_down(&stop, server).await?;
            Ok((bye, end, took, echoed, summary))
        });
        let (bye, end, took, echoed, summary) = succeeded(&rt, program);
        assert_eq!(bye.as_deref(), Some("idle: bye\n"));
        assert_eq!(end, None, "the idle connection is closed after its goodbye");
        assert!(took >= IDLE, "timed out after {took:?}, before the idle timeout");
        assert_eq!(echoed, LINES, "the active connection went on");
        let mut ends = ends.lock().unwrap().clone();
        ends.sort_by_key(LinesEnd::handled);
        assert_eq!(
            ends,
            [
                LinesEnd::IdleTimeout { handled: 0, idle: IDLE },
                LinesEnd::EndOfStream { handled: LINES as u64 },
            ]
        );
        assert_eq!((summary.accepted, summary.completed), (2, 2));
    }

    fn graceful_shutdown_lets_a_short_connection_finish_and_cancels_a_long_one_after_the_grace_period() {
        const GRACE: Duration = Duration::from_millis(200);
        let rt = rt();
        let finalized_short = Counter::new();
        let finalized_long = Counter::new();
        let (short_done, long_done) = (finalized_short.clone(), finalized_long.clone());
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let stop = Deferred::<()>::new();
            // Both handlers have read their line (they run), and the short
            // one may finish once `finish` is completed (after the stop).
            let both_running = CountDownLatch::new(2).expect("a latch");
            let finish = Deferred::<()>::new();
            let (running, finish_in) = (both_running.clone(), finish.clone());
            let server = serve(listener, config(8, GRACE), stop.get(), move |stream, _peer| {
                let (running, finish) = (running.clone(), finish_in.clone());
                let (short_done, long_done) = (short_done.clone(), long_done.clone());
                let reader = BufReader::new(stream);
                IO::block(async move {
                    let line = reader.read_line().await?.unwrap_or_default();
                    running.release().value().await;
                    if line == "short\n" {
                        let work = IO::block(async move {
                            finish.get::<io::Error>().await?;
                            reader.get_ref().write_all(b"done\n").await
                        });
                        work.guarantee(short_done.incr_io()).await
                    } else {
                        IO::<(), io::Error>::never().guarantee(long_done.incr_io()).await
                    }
                })
            })
            .start()
            .value()
            .await;
            let short = ask(addr, "short\n".to_string()).start().value().await;
            let long = ask(addr, "long\n".to_string()).start().value().await;
            both_running.wait().value().await;
            let _ = stop.complete(()).value().await;
            let stopped = Instant::now();
            let _ = finish.complete(()).value().await;
            let summary = summary_of(server.join().value().await)?;
            let took = stopped.elapsed();
            let after = TcpStream::connect(addr).attempt().await?.map(|_| ());
            let short = short.join().value().await;
            let long = long.join().value().await;
            Ok((summary, took, after, short, long))
        });
        let (summary, took, after, short, long) = succeeded(&rt, program);
        assert_eq!(short.succeeded(), Some(Some("done\n".to_string())), "the short one finished");
        assert_eq!(long.succeeded(), Some(None), "the long one was closed unanswered");
        assert_eq!(finalized_short.get(), 1, "the short handler's finalizer ran once");
        assert_eq!(finalized_long.get(), 1, "the long handler's finalizer ran once");
        assert!(took >= GRACE, "the long one was canceled after {took:?}, within the grace period");
        assert_eq!(
            (summary.accepted, summary.completed, summary.failed, summary.canceled),
            (2, 1, 0, 1)
        );
        let refused = after.expect_err("nothing accepts once serve has ended");
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        assert_nothing_registered(&rt);
    }

    fn a_handler_that_fails_or_panics_does_not_stop_the_server() {
        let rt = rt();
        let failures = Arc::new(Mutex::new(Vec::new()));
        let seen = failures.clone();
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let stop = Deferred::<()>::new();
            let config = ServeConfig::builder()
                .on_error(move |failure| {
                    let what = match failure {
                        ServeFailure::Handler(e) => format!("error: {e}"),
                        ServeFailure::HandlerPanicked(message) => format!("panic: {message}"),
                        other => format!("other: {other}"),
                    };
                    seen.lock().unwrap().push(what);
                })
                .build()
                .expect("a valid configuration");
            let server = serve(listener, config, stop.get(), |stream, _peer| {
                let reader = BufReader::new(stream);
                IO::block(async move {
                    let line = reader.read_line().await?.unwrap_or_default();
                    match line.trim_end() {
                        "malformed" => Err(io::Error::new(io::ErrorKind::InvalidData, "malformed request")),
                        "panic" => panic!("the handler panics"),
                        _ => reader.get_ref().write_all(line.to_uppercase()).await,
                    }
                })
            })
            .start()
            .value()
            .await;
            // One after the other: each connection ends before the next.
            let malformed = ask(addr, "malformed\n".to_string()).await?;
            let panicked = ask(addr, "panic\n".to_string()).await?;
            let good = ask(addr, "good\n".to_string()).await?;
            let summary = shut_down(&stop, server).await?;
            Ok((malformed, panicked, good, summary))
        });
        let (malformed, panicked, good, summary) = succeeded(&rt, program);
        assert_eq!(malformed, None, "the failed connection is closed");
        assert_eq!(panicked, None, "the panicked connection is closed");
        assert_eq!(good.as_deref(), Some("GOOD\n"), "the server goes on serving");
        assert_eq!(
            (summary.accepted, summary.completed, summary.failed, summary.panicked, summary.canceled),
            (3, 1, 1, 1, 0)
        );
        let mut failures = failures.lock().unwrap().clone();
        failures.sort();
        assert_eq!(failures, ["error: malformed request", "panic: the handler panics"]);
        assert_nothing_registered(&rt);
    }

    fn a_server_whose_trigger_is_already_complete_accepts_nothing_and_ends() {
        let rt = rt();
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            serve(listener, ServeConfig::default(), IO::unit(), shout).await
        });
        let summary = succeeded(&rt, program);
        assert_eq!(summary, ServeSummary::default());
        assert_nothing_registered(&rt);
    }

    fn canceling_serve_cancels_its_connections_at_once_and_runs_their_finalizers() {
        let rt = rt();
        let finalized = Counter::new();
        let finalizer = finalized.clone();
        let program = IO::block(async move {
            let listener = TcpListener::bind(localhost()).await?;
            let addr = listener.local_addr().await?;
            let running = Deferred::<()>::new();
            let started = running.clone();
            // A grace period longer than the hang limit: only a hard stop
            // ends this in time.
            let server = serve(listener, config(4, HANG * 2), IO::never(), move |_stream, _peer| {
                let (started, finalizer) = (started.clone(), finalizer.clone());
                IO::block(async move {
                    let _ = started.complete(()).value().await;
                    IO::<(), io::Error>::never().await
                })
                .guarantee(finalizer.incr_io())
            })
            .start()
            .value()
            .await;
            let client = TcpStream::connect(addr).await?;
            running.get::<io::Error>().await?;
            server.cancel().value().await;
            let outcome = server.join().value().await;
            // The server closed the connection: the client reads its end.
            let rest = client.read(16).await?;
            Ok((outcome.is_canceled(), rest))
        });
        let (canceled, rest) = succeeded(&rt, program);
        assert!(canceled, "serve ends canceled");
        assert!(rest.is_empty(), "the connection was closed");
        assert_eq!(finalized.get(), 1);
        assert_nothing_registered(&rt);
    }

    fn clones_of_a_write_half_write_from_two_fibers_each_message_whole_and_in_order() {
        // Messages larger than the socket buffers, and a reader that starts
        // late, so that every write_all takes several calls and waits while
        // the other fiber wants to write too (without the write turn, their
        // bytes interleave).
        const MESSAGE: usize = 1024 * 1024;
        const MESSAGES: usize = 4;
        let rt = rt();
        let program = IO::block(async move {
            let (server, client) = tcp_pair().await?;
            let (_read, write) = server.into_split();
            let writer = |id: u8, write: spindle_net::WriteHalf<TcpStream>| {
                IO::<_, io::Error>::block(async move {
                    for n in 0..MESSAGES as u8 {
                        write.write_all(vec![id << 4 | n; MESSAGE]).await?;
                        IO::<(), io::Error>::cede().await?;
                    }
                    Ok(())
                })
            };
            let writers = writer(1, write.clone()).both(writer(2, write));
            // The write side shuts down when the last clone is dropped (with
            // the writers): the reader then sees end of stream.
            let late_reader = IO::sleep(Duration::from_millis(20)).product_r(read_to_end(client));
            let (_, received) = writers.both(late_reader).await?;
            Ok(received)
        });
        let received = succeeded(&rt, program);
        assert_eq!(received.len(), 2 * MESSAGES * MESSAGE);
        let mut next = [0u8; 3];
        for message in received.chunks(MESSAGE) {
            let tag = message[0];
            assert!(message.iter().all(|&b| b == tag), "a message was interleaved with another");
            let (id, n) = (usize::from(tag >> 4), tag & 0xf);
            assert_eq!(n, next[id], "writer {id}'s messages arrive in order");
            next[id] += 1;
        }
        assert_eq!(next[1..], [MESSAGES as u8, MESSAGES as u8]);
    }

    fn dropping_one_clone_of_a_write_half_leaves_the_write_side_open_for_the_others() {
        let rt = rt();
        let program = IO::block(async move {
            let (server, client) = tcp_pair().await?;
            let (_read, write) = server.into_split();
            let other = write.clone();
            write.write_all(b"one ").await?;
            drop(write);
            // Still open: the clone writes on, then its drop ends the stream.
            other.write_all(b"two").await?;
            drop(other);
            read_to_end(client).await
        });
        assert_eq!(succeeded(&rt, program), b"one two".to_vec());
    }
}
