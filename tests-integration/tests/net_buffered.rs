//! The buffered reader over TCP (and Unix domain) streams, on every
//! executor: lines across many small writes, end of stream, the line
//! limit, invalid UTF-8, a read canceled mid-line that the next read
//! completes, the line-framed loop `for_each_line` (a line echo, its
//! `Break`, an over-long line, a canceled loop), its idle-timeout form
//! `for_each_line_timeout` (a partial line kept after the timeout, a slow
//! handler never canceled, its three ends told apart), and
//! `read_line_timeout`. Every program is bounded by [`HANG`]: a hang
//! fails the test instead of blocking the run.
#![cfg(unix)]

mod common;

use common::net::*;
use common::{Counter, rt_test};

use std::io;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use spindle_core::{Either, IO};
use spindle_net::{BufReader, DEFAULT_LINE_LIMIT, LinesEnd, TcpStream};

/// A connected pair: (the accepted end, the connecting end).
fn pair() -> IO<(TcpStream, TcpStream), io::Error> {
    tcp_pair()
}

/// A program that polls (every millisecond) until `done` holds; bounded by
/// the [`HANG`] limit of the program that runs it.
fn until(done: impl Fn() -> bool + Send + Sync + 'static) -> IO<(), io::Error> {
    let done = Arc::new(done);
    IO::iterate_until(
        move || {
            let done = done.clone();
            IO::sleep(Duration::from_millis(1)).map(move |()| done())
        },
        |&held| held,
    )
    .void()
}

/// Reads lines until end of stream (at most `bound` of them).
fn read_lines(reader: BufReader<TcpStream>, bound: usize) -> IO<Vec<String>, io::Error> {
    IO::tail_rec((reader, Vec::new()), move |(reader, mut lines)| {
        reader.read_line().map(move |line| match line {
            Some(line) if lines.len() < bound => {
                lines.push(line);
                ControlFlow::Continue((reader, lines))
            }
            _ => ControlFlow::Break(lines),
        })
    })
}

/// Writes `data` one byte at a time, letting the loop run between writes,
/// then closes the stream.
fn trickle(stream: TcpStream, data: Vec<u8>) -> IO<(), io::Error> {
    IO::tail_rec((stream, 0usize), move |(stream, at)| {
        if at == data.len() {
            drop(stream);
            return IO::pure(ControlFlow::Break(()));
        }
        let byte = [data[at]];
        stream
            .write_all(byte)
            .product_r(IO::cede())
            .map(move |()| ControlFlow::Continue((stream, at + 1)))
    })
}

rt_test! {
    fn buffered_read_exact_takes_bytes_from_the_buffer_then_the_stream() {
        let program = tcp_pair().flat_map(|(server, client)| {
            let reader = BufReader::new(client);
            let writes = server
                .write_all(b"one\nabcdef")
                .product_r(IO::cede())
                .product_r(server.write_all(b"ghij"))
                .map(move |()| server);
            let reads = reader
                .read_line()
                .flat_map(move |line| reader.read_exact(10).map(move |bytes| (line, bytes)));
            writes.both(reads).map(|(_server, reads)| reads)
        });
        let (line, bytes) = succeeded(&rt(), program);
        assert_eq!(line.as_deref(), Some("one\n"));
        assert_eq!(bytes, b"abcdefghij".to_vec());
    }

    fn a_canceled_buffered_read_exact_keeps_its_bytes_for_the_next_read() {
        let program = tcp_pair().flat_map(|(server, client)| {
            let reader = Arc::new(BufReader::new(client));
            let second = reader.clone();
            server.write_all(b"abc").flat_map(move |()| {
                // Only 3 of 6 bytes come: the read times out, keeping them.
                reader
                    .read_exact(6)
                    .timeout(Duration::from_millis(100))
                    .attempt()
                    .flat_map(move |first| {
                        server
                            .write_all(b"def")
                            .product_r(second.read_exact(6))
                            .map(move |bytes| (first.is_err(), bytes, server))
                    })
            })
        });
        let (timed_out, bytes, _server) = succeeded(&rt(), program);
        assert!(timed_out, "the first read_exact timed out");
        assert_eq!(bytes, b"abcdef".to_vec());
    }

    fn read_line_assembles_lines_that_arrive_one_byte_at_a_time() {
        let text = b"first line\nsecond\n\nthe fourth, longer than the others\n".to_vec();
        let program = pair().flat_map(move |(server, client)| {
            let writer = client
                .set_nodelay(true)
                .flat_map(move |()| trickle(client, text));
            writer
                .both(read_lines(BufReader::new(server), 100))
                .map(|((), lines)| lines)
        });
        let rt = rt();
        let lines = succeeded(&rt, program);
        assert_eq!(
            lines,
            vec![
                "first line\n",
                "second\n",
                "\n",
                "the fourth, longer than the others\n"
            ]
        );
        assert_nothing_registered(&rt);
    }

    fn at_end_of_stream_read_line_returns_the_last_unterminated_line_then_none_every_time() {
        let program = pair().flat_map(|(server, client)| {
            client.write_all(b"a\nlast").flat_map(move |()| {
                drop(client);
                let reader = Arc::new(BufReader::new(server));
                let next = move || {
                    let reader = reader.clone();
                    move |mut got: Vec<Option<String>>| {
                        reader.read_line().map(move |line| {
                            got.push(line);
                            got
                        })
                    }
                };
                IO::pure(Vec::new())
                    .flat_map(next())
                    .flat_map(next())
                    .flat_map(next())
                    .flat_map(next())
            })
        });
        let got = succeeded(&rt(), program);
        assert_eq!(
            got,
            vec![
                Some("a\n".to_string()),
                Some("last".to_string()),
                None,
                None
            ]
        );
    }

    fn a_line_exactly_at_the_limit_is_read_and_a_longer_one_is_an_invalid_data_error_naming_the_limit() {
        let program = pair().flat_map(|(server, client)| {
            let mut data = vec![b'a'; 15];
            data.push(b'\n');
            data.extend_from_slice(&[b'x'; 100]);
            // The client stays open: the error comes from the limit, not
            // from end of stream.
            client.write_all(data).flat_map(move |()| {
                let reader = BufReader::with_limit(server, 16);
                reader.read_line().flat_map(move |first| {
                    reader.read_line().attempt().map(move |second| {
                        drop(client);
                        (first, second, reader.buffered())
                    })
                })
            })
        });
        let (first, second, buffered) = succeeded(&rt(), program);
        assert_eq!(first.as_deref(), Some("aaaaaaaaaaaaaaa\n"));
        let error = second.expect_err("a line over the limit");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("16"), "{error}");
        assert!(buffered <= 100, "only what was read is held: {buffered}");
    }

    fn a_peer_that_never_sends_a_newline_gets_an_error_while_the_reader_holds_a_bounded_buffer() {
        let program = pair().flat_map(|(server, client)| {
            // Far more than the limit, written by a fiber canceled once the
            // read has failed.
            let flood = client.write_all(vec![b'z'; 8 * DEFAULT_LINE_LIMIT]);
            let reader = Arc::new(BufReader::new(server));
            let inspect = reader.clone();
            let read = reader.read_line().attempt();
            flood.attempt().start().flat_map(move |flooding| {
                read.flat_map(move |read| {
                    flooding.cancel().map(move |()| (read, inspect.buffered()))
                })
            })
        });
        let (read, buffered) = succeeded(&rt(), program);
        let error = read.expect_err("an over-long line");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error.to_string().contains(&DEFAULT_LINE_LIMIT.to_string()),
            "{error}"
        );
        assert!(
            buffered <= DEFAULT_LINE_LIMIT + 8 * 1024,
            "the buffer stays bounded: {buffered}"
        );
    }

    fn a_line_that_is_not_utf8_is_an_invalid_data_error_and_the_next_line_reads() {
        let program = pair().flat_map(|(server, client)| {
            client.write_all(b"\xff\xfe bad\nok\n").flat_map(move |()| {
                let reader = BufReader::new(server);
                reader.read_line().attempt().flat_map(move |bad| {
                    reader.read_line().map(move |ok| {
                        drop(client);
                        (bad, ok)
                    })
                })
            })
        });
        let (bad, ok) = succeeded(&rt(), program);
        assert_eq!(
            bad.expect_err("not UTF-8").kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(ok.as_deref(), Some("ok\n"));
    }

    fn a_read_line_canceled_mid_line_keeps_its_bytes_and_the_next_read_line_returns_the_whole_line()
    {
        let program = pair().flat_map(|(server, client)| {
            client.write_all(b"hel").flat_map(move |()| {
                let reader = Arc::new(BufReader::new(server));
                let watched = reader.clone();
                // Cancel the read once it has buffered the first part
                // (polled: no dependence on timing).
                let has_part = until(move || watched.buffered() >= 3);
                reader.read_line().race(has_part).flat_map(move |first| {
                    let kept = reader.buffered();
                    let first_finished = matches!(first, Either::Left(_));
                    client.write_all(b"lo\nnext\n").flat_map(move |()| {
                        reader.read_line().flat_map(move |line| {
                            reader.read_line().map(move |next| {
                                drop(client);
                                (first_finished, kept, line, next)
                            })
                        })
                    })
                })
            })
        });
        let rt = rt();
        let (first_finished, kept, line, next) = succeeded(&rt, program);
        assert!(
            !first_finished,
            "the first read waited for the rest of the line"
        );
        assert_eq!(kept, 3, "the canceled read left its bytes in the reader");
        assert_eq!(line.as_deref(), Some("hello\n"));
        assert_eq!(next.as_deref(), Some("next\n"));
        assert_nothing_registered(&rt);
    }

    fn read_until_stops_after_its_byte_and_read_returns_the_buffered_rest_first() {
        let program = pair().flat_map(|(server, client)| {
            client.write_all(b"key=value;rest").flat_map(move |()| {
                drop(client);
                let reader = BufReader::new(server);
                reader.read_until(b'=').flat_map(move |key| {
                    // The rest, through `read`, until end of stream.
                    IO::tail_rec((reader, Vec::new()), |(reader, mut rest)| {
                        reader.read(4).map(move |bytes| {
                            if bytes.is_empty() {
                                ControlFlow::Break(rest)
                            } else {
                                assert!(bytes.len() <= 4);
                                rest.extend(bytes);
                                ControlFlow::Continue((reader, rest))
                            }
                        })
                    })
                    .map(move |rest| (key, rest))
                })
            })
        });
        let (key, rest) = succeeded(&rt(), program);
        assert_eq!(key, b"key=".to_vec());
        assert_eq!(rest, b"value;rest".to_vec());
    }

    fn a_buffered_reader_over_a_unix_stream_reads_lines() {
        use spindle_net::{UnixListener, UnixStream};
        let dir = TempDir::new(module_path!(), "buffered");
        let path = dir.path("sock");
        let client_path = path.clone();
        let program = UnixListener::bind(&path).flat_map(move |listener| {
            let server = listener.accept().flat_map(|(stream, _)| {
                stream.write_all(b"one\ntwo\n").map(move |()| drop(stream))
            });
            let client = UnixStream::connect(client_path).flat_map(|stream| {
                let reader = BufReader::new(stream);
                reader.read_line().flat_map(move |one| {
                    reader
                        .read_line()
                        .flat_map(move |two| reader.read_line().map(move |end| (one, two, end)))
                })
            });
            server.both(client).map(|((), lines)| lines)
        });
        let (one, two, end) = succeeded(&rt(), program);
        assert_eq!(one.as_deref(), Some("one\n"));
        assert_eq!(two.as_deref(), Some("two\n"));
        assert_eq!(end, None);
    }

    fn for_each_line_over_a_read_half_echoes_every_line_in_order_until_end_of_stream() {
        // A line-echo server is one call: the handler writes each line back
        // through the write half, and a line is read only once the reply to
        // the one before is written.
        const LINES: usize = 200;
        let sent: String = (0..LINES)
            .map(|i| format!("line {i}: {}\n", "x".repeat(i % 37)))
            .collect();
        let expected = sent.clone().into_bytes();
        let program = pair().flat_map(move |(server, client)| {
            let (read, write) = server.into_split();
            // The handler owns the write half: when the loop ends it is
            // dropped, which shuts the write side down and ends the
            // client's read.
            let serve = BufReader::new(read).for_each_line(move |line| {
                write.write_all(line).map(|()| ControlFlow::Continue(()))
            });
            serve.both(exchange(client, sent.into_bytes()))
        });
        let (handled, echoed) = succeeded(&rt(), program);
        assert_eq!(handled, LINES as u64);
        assert!(echoed == expected, "the echoed lines differ");
    }

    fn breaking_out_of_for_each_line_ends_it_with_the_count_of_lines_handled_and_leaves_the_rest() {
        let seen = common::Log::new();
        let record = seen.clone();
        let program = pair().flat_map(move |(server, client)| {
            client
                .write_all(b"one\ntwo\nstop\nafter\n")
                .flat_map(move |()| {
                    let reader = BufReader::new(server);
                    let looped = reader.for_each_line(move |line| {
                        let flow = if line == "stop\n" {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        };
                        record.record(line).map_to(flow)
                    });
                    looped.flat_map(move |handled| {
                        reader.read_line().map(move |rest| {
                            drop(client);
                            (handled, rest)
                        })
                    })
                })
        });
        let (handled, rest) = succeeded(&rt(), program);
        assert_eq!(handled, 2, "the lines before the one that broke the loop");
        assert_eq!(seen.events(), vec!["one\n", "two\n", "stop\n"]);
        assert_eq!(
            rest.as_deref(),
            Some("after\n"),
            "the line after stays in the reader"
        );
    }

    fn an_over_long_line_ends_for_each_line_with_an_invalid_data_error_naming_the_limit() {
        let handled = Counter::new();
        let count = handled.clone();
        let program = pair().flat_map(move |(server, client)| {
            let mut data = b"short\n".to_vec();
            data.extend_from_slice(&[b'x'; 100]);
            // The client stays open: the error comes from the limit, not
            // from end of stream.
            client.write_all(data).flat_map(move |()| {
                let reader = BufReader::with_limit(server, 16);
                let looped = reader
                    .for_each_line(move |_line| count.incr_io().map_to(ControlFlow::Continue(())));
                looped.attempt().map(move |looped| {
                    drop(client);
                    looped
                })
            })
        });
        let error = succeeded(&rt(), program).expect_err("a line over the limit");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("16"), "{error}");
        assert_eq!(handled.get(), 1, "the short line was handled before");
    }

    fn a_canceled_for_each_line_keeps_a_partly_read_line_for_the_next_read() {
        let handled = Counter::new();
        let count = handled.clone();
        let watched_count = handled.clone();
        let program = pair().flat_map(move |(server, client)| {
            client.write_all(b"one\nhal").flat_map(move |()| {
                let reader = Arc::new(BufReader::new(server));
                let watched = reader.clone();
                let looped = reader
                    .for_each_line(move |_line| count.incr_io().map_to(ControlFlow::Continue(())));
                // Cancel the loop once it has handled the first line and
                // buffered the start of the second (polled: no dependence on
                // timing).
                let has_part = until(move || watched_count.get() == 1 && watched.buffered() >= 3);
                looped.race(has_part).flat_map(move |first| {
                    let kept = reader.buffered();
                    let loop_finished = matches!(first, Either::Left(_));
                    client.write_all(b"f\n").flat_map(move |()| {
                        reader.read_line().map(move |line| {
                            drop(client);
                            (loop_finished, kept, line)
                        })
                    })
                })
            })
        });
        let rt = rt();
        let (loop_finished, kept, line) = succeeded(&rt, program);
        assert!(
            !loop_finished,
            "the loop waited for the rest of the second line"
        );
        assert_eq!(handled.get(), 1);
        assert_eq!(
            kept, 3,
            "the canceled loop left the partial line in the reader"
        );
        assert_eq!(line.as_deref(), Some("half\n"));
        assert_nothing_registered(&rt);
    }

    fn for_each_line_timeout_keeps_a_partial_line_after_the_idle_timeout_and_the_next_read_returns_it_whole() {
        const IDLE: Duration = Duration::from_millis(50);
        let program = IO::block(async move {
            let (server, client) = pair().await?;
            let reader = BufReader::new(server);
            client.write_all(b"one\nhal").await?;
            let lines = Counter::new();
            let counted = lines.clone();
            let end = reader
                .for_each_line_timeout(IDLE, move |_line| {
                    counted.incr();
                    IO::pure(ControlFlow::Continue(()))
                })
                .await?;
            let kept = reader.buffered();
            client.write_all(b"f\n").await?;
            let next = reader.read_line().await?;
            Ok((end, lines.get(), kept, next))
        });
        let rt = rt();
        let (end, lines, kept, next) = succeeded(&rt, program);
        assert_eq!(end, LinesEnd::IdleTimeout { handled: 1, idle: IDLE });
        assert_eq!(lines, 1);
        assert_eq!(kept, 3, "the partial line stays in the reader");
        assert_eq!(next.as_deref(), Some("half\n"), "the reader is still usable");
        assert_nothing_registered(&rt);
    }

    fn for_each_line_timeout_never_cancels_a_handler_that_takes_longer_than_the_idle_timeout() {
        const IDLE: Duration = Duration::from_millis(20);
        let finished = Counter::new();
        let done = finished.clone();
        let program = IO::block(async move {
            let (server, client) = pair().await?;
            let (read, write) = server.into_split();
            let serving = BufReader::new(read).for_each_line_timeout(IDLE, move |line| {
                let (write, done) = (write.clone(), done.clone());
                IO::block(async move {
                    // Five idle periods of work per line.
                    IO::<(), io::Error>::sleep(IDLE * 5).await?;
                    write.write_all(line).await?;
                    done.incr();
                    Ok(ControlFlow::Continue(()))
                })
            });
            let asking = IO::<_, io::Error>::block(async move {
                let reader = BufReader::new(client);
                reader.get_ref().write_all(b"a\nb\n").await?;
                let a = reader.read_line().await?;
                let b = reader.read_line().await?;
                // Then the client closes its side.
                reader.get_ref().shutdown(std::net::Shutdown::Write).await?;
                Ok((a, b, reader))
            });
            let (end, (a, b, _reader)) = serving.both(asking).await?;
            Ok((end, a, b))
        });
        let (end, a, b) = succeeded(&rt(), program);
        assert_eq!((a.as_deref(), b.as_deref()), (Some("a\n"), Some("b\n")));
        assert_eq!(finished.get(), 2, "both handlers ran to their end");
        assert_eq!(end, LinesEnd::EndOfStream { handled: 2 });
    }

    fn for_each_line_timeout_tells_end_of_stream_from_a_break() {
        let program = IO::block(async move {
            let (server, client) = pair().await?;
            let reader = BufReader::new(server);
            client.write_all(b"x\ny\nstop\nz\n").await?;
            let stopped = reader
                .for_each_line_timeout(HANG, |line| {
                    IO::pure(if line == "stop\n" {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    })
                })
                .await?;
            drop(client);
            let ended = reader
                .for_each_line_timeout(HANG, |_| IO::pure(ControlFlow::Continue(())))
                .await?;
            Ok((stopped, ended))
        });
        let (stopped, ended) = succeeded(&rt(), program);
        assert_eq!(stopped, LinesEnd::Stopped { handled: 2 });
        assert!(!stopped.is_idle_timeout());
        assert_eq!(ended, LinesEnd::EndOfStream { handled: 1 });
    }

    fn read_line_timeout_fails_with_timed_out_and_keeps_the_partial_line() {
        let program = IO::block(async move {
            let (server, client) = pair().await?;
            let reader = BufReader::new(server);
            client.write_all(b"par").await?;
            let timed_out = reader
                .read_line_timeout(Duration::from_millis(30))
                .attempt()
                .await?
                .err()
                .map(|e| e.kind());
            client.write_all(b"t\n").await?;
            let line = reader.read_line_timeout(HANG).await?;
            Ok((timed_out, line))
        });
        let (timed_out, line) = succeeded(&rt(), program);
        assert_eq!(timed_out, Some(io::ErrorKind::TimedOut));
        assert_eq!(line.as_deref(), Some("part\n"));
    }
}
