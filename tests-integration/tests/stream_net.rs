//! Sockets as streams on every executor: an echo through a connection's
//! read stream and write pipe, lines over a socket, a limit on a line from
//! the peer, UDP datagrams, a listener's accepts as a stream, and a read
//! size of zero refused.
#![cfg(unix)]

mod common;

use common::net::*;
use common::rt_test;

use std::io;

use spindle_core::IO;
use spindle_net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use spindle_stream::text;

/// The stream-side echo: every chunk read is written back.
fn stream_echo(server: spindle_net::TcpStream) -> IO<(), io::Error> {
    let writer = server.clone();
    match server.reads(4_096) {
        Ok(reads) => reads
            .through(move |bytes| writer.writes(bytes))
            .compile()
            .drain(),
        Err(e) => IO::raise_error(io::Error::other(e.to_string())),
    }
}

rt_test! {
    fn a_connection_echoes_through_its_read_stream_and_write_pipe() {
        let rt = rt();
        let message = message(1, 300_000);
        let sent = message.clone();
        let program = tcp_pair().flat_map(move |(server, client)| {
            stream_echo(server).both(exchange(client, sent)).map(|((), echoed)| echoed)
        });
        assert_eq!(succeeded(&rt, program), message);
    }

    fn lines_from_a_socket_arrive_whole_however_the_peer_writes_them() {
        let rt = rt();
        let program = tcp_pair().flat_map(|(server, client)| {
            let lines = server
                .reads(7)
                .expect("a read size")
                .through(text::utf8_decode)
                .through(|t| text::lines(t, 64))
                .compile()
                .to_vec();
            let write = client
                .write_all(b"first line\nsecond ".to_vec())
                .product_r(client.write_all("line, héllo\r\nthird".as_bytes().to_vec()))
                .product_r(client.shutdown(std::net::Shutdown::Write));
            lines.both(write).map(|(lines, ())| lines)
        });
        assert_eq!(
            succeeded(&rt, program),
            ["first line", "second line, héllo", "third"]
        );
    }

    fn a_line_from_the_peer_over_the_limit_fails_with_a_clear_error() {
        let rt = rt();
        let program = tcp_pair().flat_map(|(server, client)| {
            let lines = server
                .reads(1_024)
                .expect("a read size")
                .through(text::utf8_decode)
                .through(|t| text::lines(t, 16))
                .compile()
                .to_vec();
            let write = client.write_all(vec![b'x'; 100]).product_r(client.shutdown(std::net::Shutdown::Write));
            lines.both(write).map(|(lines, ())| lines)
        });
        let error = failed(&rt, program);
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("line 1 is longer than the limit of 16 bytes"), "{error}");
    }

    fn a_unix_connection_is_a_stream_of_its_bytes() {
        let rt = rt();
        let dir = TempDir::new(module_path!(), "unix_stream_of_bytes");
        let path = dir.path("socket");
        let client_path = path.clone();
        let program = UnixListener::bind(&path).flat_map(move |listener| {
            listener
                .accept()
                .both(UnixStream::connect(client_path))
                .flat_map(|((a, _), b)| {
                    let read = a.reads(3).expect("a read size").compile().to_vec();
                    let write = b
                        .write_all(b"hello unix".to_vec())
                        .product_r(b.shutdown(std::net::Shutdown::Write));
                    read.both(write).map(|(bytes, ())| bytes)
                })
        });
        assert_eq!(succeeded(&rt, program), b"hello unix");
    }

    fn udp_datagrams_arrive_as_a_stream_with_their_senders() {
        let rt = rt();
        let program = UdpSocket::bind(localhost()).flat_map(|receiver| {
            receiver.local_addr().flat_map(move |to| {
                UdpSocket::bind(localhost()).flat_map(move |sender| {
                    sender.local_addr().flat_map(move |from| {
                        let got = receiver
                            .datagrams(64)
                            .expect("a size")
                            .take(3)
                            .compile()
                            .to_vec();
                        let send = IO::traverse(vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()], move |d| {
                            sender.send_to(d, to).void()
                        });
                        got.both(send).map(move |(got, _)| (got, from))
                    })
                })
            })
        });
        let (got, from) = succeeded(&rt, program);
        let payloads: Vec<Vec<u8>> = got.iter().map(|(d, _)| d.clone()).collect();
        assert_eq!(payloads, [b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);
        assert!(got.iter().all(|(_, sender)| *sender == from));
    }

    fn incoming_yields_each_accepted_connection_in_order() {
        let rt = rt();
        let program = TcpListener::bind(localhost()).flat_map(|listener| {
            listener.local_addr().flat_map(move |addr| {
                // Three clients, each connected (queued in the listen
                // backlog) before the next, each saying who it is.
                let clients = IO::traverse(vec![0u8, 1, 2], move |i| {
                    TcpStream::connect(addr)
                        .flat_map(move |client| client.write_all(vec![i]).map(move |()| client))
                });
                clients.flat_map(move |clients| {
                    let peers = IO::traverse(clients.clone(), |c| c.local_addr());
                    peers.flat_map(move |peers| {
                        listener
                            .incoming()
                            .take(3)
                            .eval_map(IO::from_result)
                            .eval_map(|(server, peer)| server.read(1).map(move |said| (said, peer)))
                            .compile()
                            .to_vec()
                            .map(move |accepted| {
                                drop(clients);
                                (accepted, peers)
                            })
                    })
                })
            })
        });
        let (accepted, peers) = succeeded(&rt, program);
        let said: Vec<Vec<u8>> = accepted.iter().map(|(said, _)| said.clone()).collect();
        assert_eq!(said, [vec![0], vec![1], vec![2]]);
        let accepted_peers: Vec<_> = accepted.iter().map(|(_, peer)| *peer).collect();
        assert_eq!(accepted_peers, peers, "each with its peer's address");
    }

    fn a_unix_listeners_incoming_yields_its_connections_while_the_stream_keeps_it_open() {
        let rt = rt();
        let dir = TempDir::new(module_path!(), "unix_incoming");
        let path = dir.path("socket");
        let client_path = path.clone();
        let program = UnixListener::bind(&path).flat_map(move |listener| {
            // Only the stream holds the listener from here on.
            let incoming = listener.incoming();
            drop(listener);
            let served = incoming
                .take(2)
                .eval_map(IO::from_result)
                .eval_map(|(server, _)| server.write_all(b"hi".to_vec()).map(move |()| server))
                .compile()
                .to_vec();
            let clients = IO::traverse(vec![(), ()], move |()| {
                UnixStream::connect(client_path.clone()).flat_map(|client| client.read(2))
            });
            served.both(clients).map(|(_servers, heard)| heard)
        });
        assert_eq!(succeeded(&rt, program), [b"hi".to_vec(), b"hi".to_vec()]);
    }

    fn a_read_size_of_zero_is_refused() {
        let rt = rt();
        let program = tcp_pair().map(|(server, _client)| {
            server.reads(0).map(|_| ()).map_err(|e| e.to_string())
        });
        let refused = succeeded(&rt, program).expect_err("0 is refused");
        assert!(refused.contains("read size above 0"), "{refused}");
    }
}
