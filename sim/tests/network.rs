//! The simulated network: programs using spindle-net's TCP and UDP sockets
//! between simulated hosts, with the network's faults; the planted bugs it
//! finds, and their fixed versions passing over the same seeds.

use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_effect::prelude::*;
use spindle_net::{TcpListener, TcpStream, UdpSocket};
use spindle_sim::{FailureKind, Fault, NetConfig, ReplayKey, Sim, invariant, net};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn any(port: u16) -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], port))
}

fn lossy_network() -> NetConfig {
    NetConfig::default()
        .latency(ms(1), ms(5))
        .jitter(ms(3))
        .loss(0.1)
}

// ----- an echo server -----

/// Echoes every byte of `conn` back until the end of its stream.
fn echo(conn: TcpStream) -> IO<(), io::Error> {
    IO::tail_rec((), move |()| {
        let writer = conn.clone();
        conn.read(1024).flat_map(move |bytes| {
            if bytes.is_empty() {
                IO::pure(ControlFlow::Break(()))
            } else {
                writer.write_all(bytes).map(|()| ControlFlow::Continue(()))
            }
        })
    })
}

/// Accepts connections forever, one echoing fiber each.
fn echo_server(port: u16) -> IO<(), io::Error> {
    TcpListener::bind(any(port)).flat_map(|listener| {
        IO::forever(move || {
            listener
                .accept()
                .flat_map(|(conn, _)| echo(conn).attempt().start::<io::Error>().void())
        })
        .void()
    })
}

/// Connects to the echo server by name, sends three messages and checks
/// each comes back whole.
fn echo_client(id: u32) -> IO<(), io::Error> {
    TcpStream::connect_host("server:7").flat_map(move |conn| {
        IO::tail_rec(0u32, move |round| {
            if round == 3 {
                return IO::pure(ControlFlow::Break(()));
            }
            let message = format!("client {id} round {round}: {}", "x".repeat(300)).into_bytes();
            let len = message.len();
            let reader = conn.clone();
            conn.write_all(message.clone())
                .product_r(reader.read_exact(len))
                .flat_map(move |back| {
                    invariant::<io::Error, _>("the echo is the message", move || back == message)
                })
                .map(move |()| ControlFlow::Continue(round + 1))
        })
        .product_r(IO::delay(|| ()))
    })
}

fn echo_program(run: &mut spindle_sim::Run) -> IO<(), io::Error> {
    run.host("server", || echo_server(7));
    IO::par_sequence(vec![echo_client(1), echo_client(2)]).void()
}

#[test]
fn an_echo_client_and_server_pass_over_many_seeds_with_latency_jitter_and_loss() {
    let sim = Sim::builder()
        .seeds(0..200)
        .network(lossy_network())
        .build()
        .unwrap();
    let summary = sim.check(echo_program).unwrap();
    assert_eq!(summary.seeds, 200);
}

#[test]
fn the_same_seed_replays_the_same_network_run_and_other_seeds_differ() {
    let network = lossy_network()
        .duplicate(0.1)
        .partitions(0.05)
        .crashes(0.05);
    let sim = Sim::builder().network(network).build().unwrap();
    let mut times = Vec::new();
    for seed in 0..10 {
        let a = sim.replay(&ReplayKey::seed(seed), echo_program);
        let b = sim.replay(&ReplayKey::seed(seed), echo_program);
        assert_eq!(a.schedule, b.schedule, "seed {seed}");
        assert_eq!(a.network, b.network, "seed {seed}");
        assert_eq!(a.virtual_time, b.virtual_time, "seed {seed}");
        assert_eq!(a.failure, b.failure, "seed {seed}");
        times.push(a.virtual_time);
    }
    times.sort();
    times.dedup();
    assert!(
        times.len() > 5,
        "seeds should give different runs: {times:?}"
    );
}

// ----- TCP's behaviour -----

/// Runs `program` (on the main host, with an echo server on "server")
/// under one seed, and returns what it returned.
fn run_one<A: Send + Clone + 'static>(
    network: NetConfig,
    program: impl Fn() -> IO<A, io::Error> + 'static,
) -> A {
    let sim = Sim::builder().seeds(0..1).network(network).build().unwrap();
    let out = Arc::new(Mutex::new(None));
    let slot = out.clone();
    sim.check(move |run| {
        run.host("server", || echo_server(7));
        let slot = slot.clone();
        program().map(move |a| *slot.lock().unwrap() = Some(a))
    })
    .unwrap();
    let a = out.lock().unwrap().take();
    a.unwrap()
}

#[test]
fn a_connection_to_a_port_nobody_listens_on_is_refused() {
    let kind = run_one(NetConfig::default(), || {
        TcpStream::connect_host("server:8")
            .attempt()
            .map(|r| r.err().map(|e| e.kind()))
    });
    assert_eq!(kind, Some(io::ErrorKind::ConnectionRefused));
}

#[test]
fn a_shut_down_writing_side_is_read_as_the_end_of_the_stream_after_the_bytes_before_it() {
    let got = run_one(NetConfig::default().jitter(ms(5)), || {
        TcpStream::connect_host("server:7").flat_map(|conn| {
            let reader = conn.clone();
            conn.write_all(b"hello".to_vec())
                .product_r(conn.shutdown(Shutdown::Write))
                .product_r(IO::tail_rec(Vec::new(), move |mut all: Vec<u8>| {
                    reader.read(64).map(move |bytes| {
                        if bytes.is_empty() {
                            ControlFlow::Break(all)
                        } else {
                            all.extend(bytes);
                            ControlFlow::Continue(all)
                        }
                    })
                }))
        })
    });
    assert_eq!(got, b"hello");
}

#[test]
fn bytes_arrive_whole_and_in_order_through_a_small_send_buffer_under_jitter_and_loss() {
    // 64 KiB through a 1 KiB send buffer: the writer waits for the echo
    // server's reads (and the echo's for ours) many times.
    let network = NetConfig::default()
        .send_buffer(1024)
        .jitter(ms(5))
        .loss(0.2);
    let data: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    let got = run_one(network, move || {
        let data = data.clone();
        TcpStream::connect_host("server:7").flat_map(move |conn| {
            let reader = conn.clone();
            let len = data.len();
            conn.write_all(data)
                .start::<io::Error>()
                .flat_map(move |writer| {
                    reader
                        .read_exact(len)
                        .flat_tap(move |_| writer.join().void())
                })
        })
    });
    assert!(got == expected, "the bytes arrive whole and in order");
}

#[test]
fn unix_sockets_are_refused_on_a_simulated_host_with_an_error_naming_the_simulation() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let seen = Arc::new(Mutex::new(None));
    let slot = seen.clone();
    let path = std::env::temp_dir().join(format!("spindle-sim-{}.sock", std::process::id()));
    let bound = path.clone();
    sim.check(move |_| {
        let slot = slot.clone();
        spindle_net::UnixListener::bind(bound.clone())
            .attempt()
            .map(move |r| *slot.lock().unwrap() = r.err().map(|e| (e.kind(), e.to_string())))
    })
    .unwrap();
    let _ = std::fs::remove_file(&path);
    let (kind, message) = seen.lock().unwrap().take().unwrap();
    assert_eq!(kind, io::ErrorKind::Unsupported);
    assert!(message.contains("spindle-sim"), "{message}");
}

#[test]
fn a_client_waiting_for_bytes_that_never_come_is_a_deadlock_once_the_network_is_idle() {
    let sim = Sim::builder().seeds(0..3).build().unwrap();
    let failure = sim
        .check(|run| {
            // A server that accepts, keeps the connection open and never
            // writes.
            let kept = Arc::new(Mutex::new(Vec::new()));
            run.host("server", move || {
                let kept = kept.clone();
                TcpListener::bind(any(7)).flat_map(move |l| {
                    l.accept()
                        .map(move |(conn, _)| kept.lock().unwrap().push((conn, l.clone())))
                })
            });
            TcpStream::connect_host("server:7").flat_map(|conn| conn.read(1))
        })
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Deadlock);
}

#[test]
fn a_host_program_that_fails_fails_the_run_naming_the_host() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let failure = sim
        .check(|run| {
            run.host("broken", || {
                IO::<(), String>::raise_error("no disk".to_string())
            });
            IO::<(), io::Error>::sleep(ms(10))
        })
        .unwrap_err();
    match failure.kind {
        FailureKind::HostFailed(message) => {
            assert!(
                message.contains("broken") && message.contains("no disk"),
                "{message}"
            )
        }
        other => panic!("unexpected failure: {other}"),
    }
}

#[test]
fn two_hosts_with_one_name_are_a_setup_failure() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let failure = sim
        .check(|run| {
            run.host("a", IO::<(), ()>::unit);
            run.host("a", IO::<(), ()>::unit);
            IO::<(), ()>::unit()
        })
        .unwrap_err();
    assert!(matches!(failure.kind, FailureKind::Setup(_)), "{failure}");
}

#[test]
fn a_network_setting_that_cannot_be_used_is_refused_naming_it() {
    let error = Sim::builder()
        .network(NetConfig::default().loss(1.5))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("loss"), "{error}");
    let error = Sim::builder()
        .network(NetConfig::default().latency(ms(5), ms(1)))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("latency"), "{error}");
}

#[test]
fn a_write_to_a_peer_that_does_not_read_waits_once_the_send_buffer_is_full() {
    let sim = Sim::builder()
        .seeds(0..1)
        .network(NetConfig::default().send_buffer(1024))
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let slot = seen.clone();
    sim.check(move |run| {
        // Accepts, keeps the connection, never reads.
        let kept = Arc::new(Mutex::new(Vec::new()));
        run.host("server", move || {
            let kept = kept.clone();
            TcpListener::bind(any(7)).flat_map(move |l| {
                l.accept()
                    .map(move |(conn, _)| kept.lock().unwrap().push((conn, l.clone())))
            })
        });
        let slot = slot.clone();
        TcpStream::connect_host("server:7").flat_map(move |conn| {
            let again = conn.clone();
            conn.write(vec![0u8; 4096]).flat_map(move |first| {
                again
                    .write(vec![0u8; 16])
                    .timeout_option(ms(500))
                    .map(move |second| *slot.lock().unwrap() = Some((first, second)))
            })
        })
    })
    .unwrap();
    let got = seen.lock().unwrap().take();
    assert_eq!(got, Some((1024, None)));
}

#[test]
fn a_read_canceled_by_a_timeout_leaves_the_connection_usable() {
    let got = run_one(NetConfig::default(), || {
        TcpStream::connect_host("server:7").flat_map(|conn| {
            let (reader, again) = (conn.clone(), conn.clone());
            // Nothing comes: the read is canceled by its timeout...
            conn.read(16).timeout_option(ms(50)).flat_map(move |first| {
                // ...and the next read gets the echo of a later write.
                reader
                    .write_all(b"late".to_vec())
                    .product_r(again.read_exact(4))
                    .map(move |second| (first, second))
            })
        })
    });
    assert_eq!(got, (None, b"late".to_vec()));
}

// ----- UDP's behaviour -----

/// Counts the datagrams that reach port 53 of "sink", by their number.
fn sink(received: Arc<Mutex<Vec<u32>>>) -> IO<(), io::Error> {
    UdpSocket::bind(any(53)).flat_map(move |socket| {
        IO::forever(move || {
            let received = received.clone();
            socket.recv_from(16).map(move |(data, _)| {
                received
                    .lock()
                    .unwrap()
                    .push(u32::from_le_bytes([data[0], data[1], data[2], data[3]]))
            })
        })
        .void()
    })
}

#[test]
fn udp_datagrams_are_lost_duplicated_and_reordered_as_configured() {
    let network = NetConfig::default()
        .latency(ms(1), ms(2))
        .jitter(ms(10))
        .loss(0.2)
        .duplicate(0.2);
    let sim = Sim::builder().seeds(0..1).network(network).build().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let seen = received.clone();
    sim.check(move |run| {
        let server = run.host("sink", {
            let seen = seen.clone();
            move || sink(seen.clone())
        });
        let to = SocketAddr::new(server, 53);
        UdpSocket::bind(any(0))
            .flat_map(move |socket| {
                IO::tail_rec(0u32, move |n| {
                    if n == 200 {
                        return IO::pure(ControlFlow::Break(()));
                    }
                    // One datagram a millisecond: less than the jitter apart.
                    socket
                        .send_to(n.to_le_bytes().to_vec(), to)
                        .product_r(IO::sleep(ms(1)))
                        .map(move |()| ControlFlow::Continue(n + 1))
                })
            })
            .product_r(IO::sleep(ms(100)))
    })
    .unwrap();
    let received = received.lock().unwrap().clone();
    let mut distinct = received.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() < 200 && distinct.len() > 100,
        "some lost: {}",
        distinct.len()
    );
    assert!(received.len() > distinct.len(), "some duplicated");
    assert!(received.windows(2).any(|w| w[0] > w[1]), "some reordered");
}

#[test]
fn a_connected_udp_socket_receives_only_from_its_peer() {
    let got = run_one(NetConfig::default(), || {
        let bind = || UdpSocket::bind(any(0));
        bind().flat_map(move |receiver| {
            bind().flat_map(move |peer| {
                bind().flat_map(move |stranger| {
                    let (r, p, st) = (receiver.clone(), peer.clone(), stranger.clone());
                    let peer_addr = peer.local_addr();
                    receiver
                        .local_addr()
                        .flat_map(move |to| peer_addr.map(move |p| (to, p)))
                        .flat_map(move |(to, peer_addr)| {
                            r.connect(peer_addr)
                                .product_r(st.send_to(b"stranger".to_vec(), to))
                                .product_r(p.send_to(b"peer".to_vec(), to))
                                .product_r(r.recv(16))
                        })
                })
            })
        })
    });
    assert_eq!(got, b"peer".to_vec());
}

// ----- partitions, crashes and restarts, as a program sees them -----

#[test]
fn an_echo_client_and_server_pass_under_random_partitions_that_heal() {
    let network = lossy_network()
        .partitions(0.05)
        .partition_length(ms(100), ms(2000));
    let sim = Sim::builder()
        .seeds(0..100)
        .network(network)
        .build()
        .unwrap();
    sim.check(echo_program).unwrap();
    // The partitions happened.
    let partitioned = (0..100)
        .filter(|&seed| {
            sim.replay(&ReplayKey::seed(seed), echo_program)
                .network
                .iter()
                .any(|e| e.what.starts_with("partition"))
        })
        .count();
    assert!(
        partitioned > 10,
        "{partitioned} runs of 100 had a partition"
    );
}

#[test]
fn a_connection_partitioned_past_the_tcp_timeout_fails_at_both_ends() {
    let network = NetConfig::default().tcp_timeout(Duration::from_secs(5));
    let kind = run_one(network, || {
        TcpStream::connect_host("server:7").flat_map(|conn| {
            let reader = conn.clone();
            net::partition("main", "server")
                .map_err(io::Error::other)
                .product_r(conn.write_all(b"lost".to_vec()))
                .product_r(reader.read(16).attempt())
                .map(|r| r.err().map(|e| e.kind()))
        })
    });
    assert_eq!(kind, Some(io::ErrorKind::TimedOut));
}

#[test]
fn a_connect_during_a_partition_times_out_and_succeeds_once_healed() {
    let network = NetConfig::default().connect_timeout(Duration::from_secs(1));
    let kinds = run_one(network, || {
        let attempt = || {
            TcpStream::connect_host("server:7")
                .attempt()
                .map(|r| r.err().map(|e| e.kind()))
        };
        net::partition("main", "server")
            .map_err(io::Error::other)
            .product_r(attempt())
            .flat_map(move |during| {
                net::heal("main", "server")
                    .map_err(io::Error::other)
                    .product_r(attempt())
                    .map(move |after| (during, after))
            })
    });
    assert_eq!(kinds, (Some(io::ErrorKind::TimedOut), None));
}

#[test]
fn a_connection_whose_acceptance_is_held_past_the_tcp_timeout_fails_with_timed_out() {
    // The server accepts at 10 ms; a partition from 15 ms holds its
    // answer, until the connection times out (1 s) at both ends.
    let sim = Sim::builder()
        .seeds(0..1)
        .network(
            NetConfig::default()
                .latency(ms(10), ms(10))
                .tcp_timeout(Duration::from_secs(1)),
        )
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let slot = seen.clone();
    sim.check(move |run| {
        run.host("server", || echo_server(7));
        run.partition("main", "server", ms(15), None);
        let slot = slot.clone();
        TcpStream::connect_host("server:7")
            .attempt()
            .map(move |r| *slot.lock().unwrap() = Some(r.err().map(|e| e.kind())))
    })
    .unwrap();
    let kind = seen.lock().unwrap().take();
    assert_eq!(kind, Some(Some(io::ErrorKind::TimedOut)));
}

#[test]
fn a_crashed_server_resets_its_connections_and_serves_again_after_its_restart() {
    let sim = Sim::builder().seeds(0..20).build().unwrap();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let seen = starts.clone();
    sim.check(move |run| {
        let starts = seen.clone();
        starts.lock().unwrap().clear();
        run.host("server", move || {
            starts.lock().unwrap().push(());
            echo_server(7)
        });
        TcpStream::connect_host("server:7")
            .flat_map(|conn| {
                let reader = conn.clone();
                conn.write_all(b"one".to_vec())
                    .product_r(reader.read_exact(3))
                    .product_r(net::crash("server", Some(ms(100))).map_err(io::Error::other))
                    .product_r(conn.read(16).attempt())
            })
            .flat_map(|after_crash| {
                let kind = after_crash.err().map(|e| e.kind());
                invariant::<io::Error, _>("the connection is reset by the crash", move || {
                    kind == Some(io::ErrorKind::ConnectionReset)
                })
            })
            // During the restart the connection attempt is retried until
            // the server listens again.
            .product_r(echo_client(3))
    })
    .unwrap();
    assert_eq!(starts.lock().unwrap().len(), 2, "started, then restarted");
}

// ----- planted bug: a write acknowledged before it is durable -----

/// The server's disk: survives crashes (it is not a fiber's state).
type Disk = Arc<Mutex<Vec<u32>>>;

/// A store server: reads 4-byte values, answers each with "ok". The lossy
/// one acknowledges a value at once and writes its batch to the disk
/// every 10 ms (a crash in between loses acknowledged values); the fixed
/// one writes to the disk before it acknowledges.
fn store_server(disk: Disk, lossy: bool) -> IO<(), io::Error> {
    let pending: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(Vec::new()));
    let flusher = {
        let (disk, pending) = (disk.clone(), pending.clone());
        IO::<(), io::Error>::forever(move || {
            let (disk, pending) = (disk.clone(), pending.clone());
            IO::sleep(ms(10)).map(move |()| {
                let batch = core::mem::take(&mut *pending.lock().unwrap());
                disk.lock().unwrap().extend(batch);
            })
        })
        .void()
    };
    let handle = move |conn: TcpStream| {
        let (disk, pending) = (disk.clone(), pending.clone());
        IO::<(), io::Error>::tail_rec((), move |()| {
            let (disk, pending, writer) = (disk.clone(), pending.clone(), conn.clone());
            conn.read_exact(4).flat_map(move |bytes| {
                let value = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                if lossy {
                    pending.lock().unwrap().push(value);
                } else {
                    disk.lock().unwrap().push(value);
                }
                writer
                    .write_all(b"ok".to_vec())
                    .map(|()| ControlFlow::Continue(()))
            })
        })
    };
    let accept_loop = TcpListener::bind(any(9)).flat_map(move |listener| {
        IO::forever(move || {
            let handle = handle.clone();
            listener
                .accept()
                .flat_map(move |(conn, _)| handle(conn).attempt().start::<io::Error>().void())
        })
        .void()
    });
    flusher.start::<io::Error>().product_r(accept_loop)
}

/// Stores values 0..10 one at a time, reconnecting (and sending the value
/// again) when the connection breaks; records each value the server
/// acknowledged.
fn store_client(acked: Arc<Mutex<Vec<u32>>>) -> IO<(), io::Error> {
    IO::tail_rec(
        (0u32, None::<TcpStream>, 0u32),
        move |(value, conn, tries)| {
            if value == 10 {
                return IO::pure(ControlFlow::Break(()));
            }
            if tries > 200 {
                return IO::raise_error(io::Error::other("the server never came back"));
            }
            let acked = acked.clone();
            let connected = match conn {
                Some(conn) => IO::pure(conn),
                None => TcpStream::connect_host("server:9"),
            };
            connected
                .flat_map(move |conn| {
                    let reader = conn.clone();
                    conn.write_all(value.to_le_bytes().to_vec())
                        .product_r(reader.read_exact(2))
                        .map(move |_| conn)
                })
                .attempt()
                .flat_map(move |result| match result {
                    Ok(conn) => {
                        acked.lock().unwrap().push(value);
                        IO::pure(ControlFlow::Continue((value + 1, Some(conn), 0)))
                    }
                    Err(_) => IO::sleep(ms(20))
                        .map(move |()| ControlFlow::Continue((value, None, tries + 1))),
                })
        },
    )
}

fn store_program(run: &mut spindle_sim::Run, lossy: bool) -> IO<(), io::Error> {
    let disk: Disk = Arc::new(Mutex::new(Vec::new()));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let server_disk = disk.clone();
    run.host("server", move || store_server(server_disk.clone(), lossy));
    expect_every_ack_stored(
        run,
        "every acknowledged value is on the server's disk",
        acked.clone(),
        disk.clone(),
    );
    // The last values' batch gets its 10 ms to reach the disk.
    store_client(acked).product_r(IO::sleep(ms(30)))
}

/// Checks at the end of the run that every value in `acked` is in
/// `stored` (an `Invariant` failure naming the lost ones otherwise).
fn expect_every_ack_stored(
    run: &mut spindle_sim::Run,
    name: &str,
    acked: Arc<Mutex<Vec<u32>>>,
    stored: Arc<Mutex<Vec<u32>>>,
) {
    run.check_at_end(name, move || {
        let stored = stored.lock().unwrap();
        let lost: Vec<u32> = (acked.lock().unwrap().iter().copied())
            .filter(|v| !stored.contains(v))
            .collect();
        if lost.is_empty() {
            Ok(())
        } else {
            Err(format!("acknowledged but lost: {lost:?}"))
        }
    });
}

fn crashing_sim() -> Sim {
    Sim::builder()
        .seeds(0..100)
        .network(
            NetConfig::default()
                .latency(ms(1), ms(3))
                .jitter(ms(1))
                .crashes(0.05)
                .restart_after(ms(20), ms(100)),
        )
        .build()
        .unwrap()
}

#[test]
fn a_server_that_acknowledges_before_its_write_is_durable_loses_a_write_when_it_crashes() {
    let sim = crashing_sim();
    let failure = sim.check(|run| store_program(run, true)).unwrap_err();
    assert!(
        matches!(&failure.kind, FailureKind::Invariant(m) if m.contains("acknowledged but lost")),
        "{failure}"
    );
    // Seed 1 of 0..100 (22 of the 100 seeds fail: those where the server
    // crashes with a batch not yet on its disk).
    assert!(
        failure.key.seed < 10,
        "found within 10 seeds: {}",
        failure.key
    );
    assert!(
        failure
            .network
            .iter()
            .any(|e| e.what.contains("server crashed")),
        "{failure}"
    );
    // Shrinking keeps the crash that lost the write.
    assert!(
        matches!(&failure.faults[..], [Fault::Crash { host, .. }] if host == "server"),
        "{failure}"
    );
    let again = sim.replay(&failure.key, |run| store_program(run, true));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn a_server_that_writes_before_it_acknowledges_keeps_every_write_over_the_same_seeds() {
    crashing_sim()
        .check(|run| store_program(run, false))
        .unwrap();
}

// ----- planted bug: a UDP client that takes any reply as the answer -----

/// Answers each request "id:n" with "id:n*n", from port 53.
fn square_server() -> IO<(), io::Error> {
    UdpSocket::bind(any(53)).flat_map(|socket| {
        IO::forever(move || {
            let replier = socket.clone();
            socket.recv_from(64).flat_map(move |(request, from)| {
                let text = String::from_utf8_lossy(&request).into_owned();
                let (id, n) = text.split_once(':').unwrap_or(("0", "0"));
                let n: u64 = n.parse().unwrap_or(0);
                replier
                    .send_to(format!("{id}:{}", n * n).into_bytes(), from)
                    .void()
            })
        })
        .void()
    })
}

/// Asks for the squares of 1..=5, retrying a request after 15 ms without
/// an answer. The buggy client takes the first datagram that comes as
/// the answer; the fixed one skips replies to other requests. Returns the
/// answers.
fn square_client(server: IpAddr, check_id: bool) -> IO<Vec<(u64, u64)>, io::Error> {
    let to = SocketAddr::new(server, 53);
    let bound =
        UdpSocket::bind(any(0)).flat_map(move |socket| socket.connect(to).map(move |()| socket));
    bound.flat_map(move |socket| {
        IO::tail_rec((1u64, Vec::new()), move |(n, mut answers)| {
            if n > 5 {
                return IO::pure(ControlFlow::Break(answers));
            }
            let ask = socket.clone();
            let receiver = socket.clone();
            let id = n;
            // One attempt: send, then wait (up to 15 ms) for the answer.
            let attempt = move || {
                let receiver = receiver.clone();
                let wait = IO::tail_rec((), move |()| {
                    receiver.recv(64).map(move |reply| {
                        let text = String::from_utf8_lossy(&reply).into_owned();
                        let (rid, value) = text.split_once(':').unwrap_or(("0", "0"));
                        let (rid, value) =
                            (rid.parse().unwrap_or(0u64), value.parse().unwrap_or(0u64));
                        if check_id && rid != id {
                            ControlFlow::Continue(())
                        } else {
                            ControlFlow::Break(value)
                        }
                    })
                });
                ask.send_to(format!("{id}:{n}").into_bytes(), to)
                    .product_r(wait.timeout_option(ms(15)))
            };
            IO::tail_rec(0u32, move |tries| {
                if tries == 50 {
                    return IO::raise_error(io::Error::other("no answer after 50 tries"));
                }
                attempt().map(move |answer| match answer {
                    Some(value) => ControlFlow::Break(value),
                    None => ControlFlow::Continue(tries + 1),
                })
            })
            .map(move |value| {
                answers.push((n, value));
                ControlFlow::Continue((n + 1, answers))
            })
        })
    })
}

fn square_program(run: &mut spindle_sim::Run, check_id: bool) -> IO<(), io::Error> {
    let server = run.host("server", square_server);
    // `recv` on a connected socket: only the server's datagrams.
    square_client(server, check_id).flat_map(|answers| {
        invariant::<io::Error, _>("each answer is the square of its request", move || {
            answers.iter().all(|&(n, value)| value == n * n)
        })
    })
}

fn lossy_udp_sim() -> Sim {
    Sim::builder()
        .seeds(0..100)
        .network(
            NetConfig::default()
                .latency(ms(1), ms(8))
                .jitter(ms(8))
                .loss(0.2)
                .duplicate(0.1),
        )
        .build()
        .unwrap()
}

#[test]
fn a_udp_client_that_takes_any_reply_as_the_answer_is_caught_under_loss_and_duplication() {
    let sim = lossy_udp_sim();
    let failure = sim.check(|run| square_program(run, false)).unwrap_err();
    assert!(
        matches!(failure.kind, FailureKind::Invariant(_)),
        "{failure}"
    );
    // Seed 0 (95 of the seeds 0..100 fail).
    assert!(
        failure.key.seed < 5,
        "found within 5 seeds: {}",
        failure.key
    );
    let again = sim.replay(&failure.key, |run| square_program(run, false));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn a_udp_client_that_matches_replies_to_requests_passes_over_the_same_seeds() {
    lossy_udp_sim()
        .check(|run| square_program(run, true))
        .unwrap();
}

#[test]
fn shrinking_leaves_out_the_partitions_a_lost_write_does_not_need() {
    let sim = Sim::builder()
        .seeds(0..100)
        .network(
            NetConfig::default()
                .latency(ms(1), ms(3))
                .jitter(ms(1))
                .crashes(0.05)
                .restart_after(ms(20), ms(100))
                .partitions(0.2)
                .partition_length(ms(5), ms(20)),
        )
        .build()
        .unwrap();
    let failure = sim.check(|run| store_program(run, true)).unwrap_err();
    assert!(
        failure.faults_before_shrinking > failure.faults.len(),
        "{failure}"
    );
    assert!(
        failure
            .faults
            .iter()
            .all(|f| matches!(f, Fault::Crash { .. })),
        "{failure}"
    );
    let again = sim.replay(&failure.key, |run| store_program(run, true));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn scheduled_partitions_and_crashes_happen_at_their_virtual_times() {
    let sim = Sim::builder().seeds(0..10).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    sim.check(move |run| {
        run.host("server", || echo_server(7));
        run.partition("main", "server", ms(100), Some(ms(200)));
        run.crash("server", ms(300), Some(ms(50)));
        let record = record.clone();
        let attempt_at = move |at: u64| {
            let record = record.clone();
            IO::sleep(ms(at)).product_r(
                TcpStream::connect_host("server:7")
                    .flat_map(|conn| {
                        let reader = conn.clone();
                        conn.write_all(b"x".to_vec())
                            .product_r(reader.read_exact(1))
                    })
                    .attempt()
                    .flat_map(move |r| {
                        IO::monotonic().map(move |t| {
                            record.lock().unwrap().push((at, r.is_ok(), t));
                        })
                    }),
            )
        };
        // Before, during (held until the heal at 200 ms), after the
        // partition; during the crash (held until the restart at 350 ms).
        attempt_at(10)
            .product_r(attempt_at(140))
            .product_r(attempt_at(310))
    })
    .unwrap();
    let seen = seen.lock().unwrap().clone();
    // The last seed's run: every attempt succeeded, the second after the
    // heal, the third after the restart.
    let last = &seen[seen.len() - 3..];
    assert!(last.iter().all(|&(_, ok, _)| ok), "{last:?}");
    assert!(last[0].2 < ms(100), "{last:?}");
    assert!(last[1].2 >= ms(200), "{last:?}");
    assert!(last[2].2 >= ms(350), "{last:?}");
}

#[test]
fn scheduling_a_fault_for_an_unknown_host_is_a_setup_failure() {
    let sim = Sim::builder().seeds(0..1).build().unwrap();
    let failure = sim
        .check(|run| {
            run.crash("nobody", ms(1), None);
            IO::<(), ()>::unit()
        })
        .unwrap_err();
    assert!(
        matches!(&failure.kind, FailureKind::Setup(m) if m.contains("nobody")),
        "{failure}"
    );
}

// ----- planted bug: a write lost when its connection is reset -----

/// What the clients were told was stored, and what the server stored.
#[derive(Clone, Default)]
struct Ledger {
    acked: Arc<Mutex<Vec<u32>>>,
    stored: Arc<Mutex<Vec<u32>>>,
}

/// One connection of the ledger server: a 4-byte value at a time, each
/// answered "ok". The buggy server keeps a connection's values aside and
/// stores them when the client closes cleanly, so a connection that is
/// reset (its client crashed) loses values it had acknowledged; the fixed
/// one stores each value before it answers.
fn ledger_connection(conn: TcpStream, ledger: Ledger, buggy: bool) -> IO<(), io::Error> {
    let pending = Arc::new(Mutex::new(Vec::new()));
    IO::tail_rec((), move |()| {
        let (ledger, pending, writer) = (ledger.clone(), pending.clone(), conn.clone());
        conn.read_exact(4)
            .attempt()
            .flat_map(move |read| match read {
                Ok(bytes) => {
                    let value = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                    if buggy {
                        pending.lock().unwrap().push(value);
                    } else {
                        ledger.stored.lock().unwrap().push(value);
                    }
                    writer
                        .write_all(b"ok".to_vec())
                        .map(|()| ControlFlow::Continue(()))
                }
                // The client closed its side: what it sent is stored.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let values = core::mem::take(&mut *pending.lock().unwrap());
                    ledger.stored.lock().unwrap().extend(values);
                    IO::pure(ControlFlow::Break(()))
                }
                // Reset: the buggy server drops what it kept aside.
                Err(_) => IO::pure(ControlFlow::Break(())),
            })
    })
}

/// A client host: sends five values (numbered by its incarnation, so a
/// restarted client sends new ones), each acknowledged before the next,
/// then closes its side.
fn ledger_client(ledger: Ledger, incarnation: u32) -> IO<(), io::Error> {
    TcpStream::connect_host("main:9")
        .flat_map(move |conn| {
            IO::tail_rec(0u32, move |i| {
                if i == 5 {
                    return conn
                        .shutdown(Shutdown::Write)
                        .map(|()| ControlFlow::Break(()));
                }
                let value = incarnation * 100 + i;
                let (acked, reader) = (ledger.acked.clone(), conn.clone());
                conn.write_all(value.to_le_bytes().to_vec())
                    .product_r(reader.read_exact(2))
                    .map(move |_| {
                        acked.lock().unwrap().push(value);
                        ControlFlow::Continue(i + 1)
                    })
            })
        })
        .attempt()
        .void()
}

fn ledger_program(run: &mut spindle_sim::Run, buggy: bool) -> IO<(), io::Error> {
    let ledger = Ledger::default();
    let incarnations = Arc::new(std::sync::atomic::AtomicU32::new(0));
    for name in ["c1", "c2", "c3"] {
        let (ledger, incarnations) = (ledger.clone(), incarnations.clone());
        run.host(name, move || {
            let n = incarnations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ledger_client(ledger.clone(), n)
        });
    }
    expect_every_ack_stored(
        run,
        "every acknowledged value is stored",
        ledger.acked.clone(),
        ledger.stored.clone(),
    );
    // The server runs on the main host (which never crashes) while the
    // clients come and go.
    let server = TcpListener::bind(any(9)).flat_map(move |listener| {
        IO::forever(move || {
            let ledger = ledger.clone();
            listener.accept().flat_map(move |(conn, _)| {
                ledger_connection(conn, ledger, buggy)
                    .attempt()
                    .start::<io::Error>()
                    .void()
            })
        })
        .void()
    });
    server
        .start::<io::Error>()
        .flat_map(|server| IO::sleep(ms(3_000)).product_r(server.cancel()))
}

#[test]
fn a_server_that_drops_a_reset_connections_acknowledged_writes_is_found_and_replayed() {
    let sim = crashing_sim();
    let failure = sim.check(|run| ledger_program(run, true)).unwrap_err();
    assert!(
        matches!(&failure.kind, FailureKind::Invariant(m) if m.contains("acknowledged but lost")),
        "{failure}"
    );
    assert!(
        failure.key.seed < 10,
        "found within 10 seeds: {}",
        failure.key
    );
    assert!(
        failure
            .faults
            .iter()
            .any(|f| matches!(f, Fault::Crash { .. })),
        "a client's crash resets its connection: {failure}"
    );
    let again = sim.replay(&failure.key.to_string().parse().unwrap(), |run| {
        ledger_program(run, true)
    });
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn a_server_that_stores_before_it_acknowledges_keeps_every_write_over_the_same_seeds() {
    let summary = crashing_sim()
        .check(|run| ledger_program(run, false))
        .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(summary.seeds, 100);
}
