//! The simulated disk: spindle-os's files on a per-host in-memory disk,
//! with the writes a crash loses and injected I/O errors drawn from the
//! seed; a planted crash-consistency bug it finds, and its fixed version
//! passing over the same seeds.

use std::io::{self, SeekFrom};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_effect::fs::{self, File, OpenOptions, PathError};
use spindle_effect::prelude::*;
use spindle_effect::stream::Stream;
use spindle_net::{TcpListener, TcpStream};
use spindle_sim::{DiskConfig, FailureKind, Fault, NetConfig, ReplayKey, Run, Sim, net};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn sim() -> Sim {
    Sim::builder().seeds(0..1).build().unwrap()
}

/// Runs `program` once (seed 0) and returns what it left in its slot;
/// the run must pass.
fn run_once<T, F>(program: F) -> T
where
    T: Send + 'static,
    F: Fn(Arc<Mutex<Option<T>>>) -> IO<(), io::Error>,
{
    run_hosts(|_, slot| program(slot))
}

/// [`run_once`] for a program that adds hosts.
fn run_hosts<T, F>(program: F) -> T
where
    T: Send + 'static,
    F: Fn(&mut Run, Arc<Mutex<Option<T>>>) -> IO<(), io::Error>,
{
    let slot = Arc::new(Mutex::new(None));
    let report = sim().replay(&ReplayKey::seed(0), |run| program(run, slot.clone()));
    assert!(report.failure.is_none(), "{:?}", report.failure);
    let value = slot.lock().unwrap().take();
    value.expect("the program filled its slot")
}

fn put<T: Send + 'static>(slot: &Arc<Mutex<Option<T>>>, value: T) {
    *slot.lock().unwrap() = Some(value);
}

// ----- the file operations' semantics -----

#[test]
fn a_file_written_on_the_simulated_disk_reads_back_and_no_system_file_is_made() {
    let dir = "/spindle-sim-disk-test-never-on-the-system";
    let (text, appended) = run_once(move |slot| {
        fs::create_dir_all(format!("{dir}/data"))
            .product_r(fs::write(format!("{dir}/data/a"), "hello"))
            .product_r(fs::read_to_string(format!("{dir}/data/a")))
            .flat_map(move |text| {
                fs::append(format!("{dir}/data/a"), ", world")
                    .product_r(fs::append(format!("{dir}/data/new"), "made"))
                    .product_r(fs::read(format!("{dir}/data/a")))
                    .map(move |appended| (text, appended))
            })
            .map(move |value| put(&slot, value))
    });
    assert_eq!(text, "hello");
    assert_eq!(appended, b"hello, world");
    assert!(!Path::new(dir).exists(), "a system directory was made");
}

#[test]
fn rename_replaces_the_target_and_read_dir_lists_entries_in_name_order() {
    let (names, moved, old_exists, dirs) = run_once(|slot| {
        fs::create_dir("d")
            .product_r(fs::create_dir("d/sub"))
            .product_r(fs::write("d/c", "c"))
            .product_r(fs::write("d/a", "a"))
            .product_r(fs::write("d/b", "old b"))
            .product_r(fs::rename("d/a", "d/b"))
            .product_r(fs::read_to_string("d/b"))
            .flat_map(|moved| {
                fs::exists("d/a").flat_map(move |old_exists| {
                    fs::read_dir("/d").compile().to_vec().map(move |entries| {
                        let names: Vec<String> = entries
                            .iter()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect();
                        let dirs: Vec<bool> =
                            entries.iter().map(|e| e.file_type().is_dir()).collect();
                        (names, moved, old_exists, dirs)
                    })
                })
            })
            .map(move |value| put(&slot, value))
    });
    assert_eq!(names, ["b", "c", "sub"]);
    assert_eq!(dirs, [false, false, true]);
    assert_eq!(moved, "a");
    assert!(!old_exists);
}

#[test]
fn an_open_file_seeks_reads_and_set_len_cuts_and_extends_it_with_zeros() {
    let (middle, cut, extended) = run_once(|slot| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open("numbers")
            .use_with(|file| {
                let (f1, f2, f3) = (file.clone(), file.clone(), file.clone());
                file.write_all("0123456789")
                    .product_r(file.seek(SeekFrom::Start(4)))
                    .product_r(file.read(3))
                    .flat_map(move |middle| {
                        f1.set_len(5)
                            .product_r(f1.seek(SeekFrom::Start(0)))
                            .product_r(f1.read_to_end())
                            .map(move |cut| (middle, cut))
                    })
                    .flat_map(move |(middle, cut)| {
                        f2.set_len(7)
                            .product_r(f2.seek(SeekFrom::Start(0)))
                            .product_r(f3.read_to_end())
                            .map(move |extended| (middle, cut, extended))
                    })
            })
            .map(move |value| put(&slot, value))
    });
    assert_eq!(middle, b"456");
    assert_eq!(cut, b"01234");
    assert_eq!(extended, b"01234\0\0");
}

#[test]
fn streams_write_and_read_lines_and_walk_the_tree_on_the_simulated_disk() {
    let (lines, walked, unsupported) = run_once(|slot| {
        let bytes = Stream::emits(b"one\ntwo\nthree".to_vec());
        fs::create_dir_all("/logs/old")
            .product_r(fs::write("/logs/old/x", "x"))
            .product_r(fs::writes("/logs/today", bytes).compile().drain())
            .product_r(fs::lines("/logs/today", 100).unwrap().compile().to_vec())
            .flat_map(|lines| {
                fs::walk("/logs").compile().to_vec().map(move |entries| {
                    let walked: Vec<(String, usize)> = entries
                        .iter()
                        .map(|e| (e.path().display().to_string(), e.depth()))
                        .collect();
                    (lines, walked)
                })
            })
            .flat_map(|(lines, walked)| {
                fs::metadata("/logs/today")
                    .attempt()
                    .map(move |m| (lines, walked, m.err().map(|e| e.kind())))
            })
            .map(move |value| put(&slot, value))
    });
    assert_eq!(lines, ["one", "two", "three"]);
    assert_eq!(
        walked,
        [
            ("/logs/old".to_string(), 1),
            ("/logs/old/x".to_string(), 2),
            ("/logs/today".to_string(), 1)
        ]
    );
    assert_eq!(unsupported, Some(io::ErrorKind::Unsupported));
}

#[test]
fn a_missing_file_is_a_not_found_error_naming_the_operation_and_path() {
    let (kind, operation, path) = run_once(|slot| {
        fs::read("/nowhere/file").attempt().map(move |result| {
            let error = result.expect_err("the file is missing");
            let path = PathError::of(&error).expect("a path error");
            let value = (error.kind(), path.operation(), path.path().to_path_buf());
            put(&slot, value);
        })
    });
    assert_eq!(kind, io::ErrorKind::NotFound);
    assert_eq!(operation, "read");
    assert_eq!(path, Path::new("/nowhere/file"));
}

#[test]
fn each_host_has_its_own_disk() {
    let (main_read, other_read) = run_hosts(|run, slot| {
        let other_saw = Arc::new(Mutex::new(None));
        let other = other_saw.clone();
        run.host("other", move || {
            let other = other.clone();
            fs::write("/shared", "other's")
                .product_r(fs::read_to_string("/shared"))
                .map(move |text| *other.lock().unwrap() = Some(text))
        });
        fs::write("/shared", "main's")
            .product_r(IO::sleep(ms(10)))
            .product_r(fs::read_to_string("/shared"))
            .map(move |text| put(&slot, (text, other_saw.lock().unwrap().take())))
    });
    assert_eq!(main_read, "main's");
    assert_eq!(other_read.as_deref(), Some("other's"));
}

// ----- injected errors -----

#[test]
fn injected_disk_errors_reach_the_program_as_io_errors_and_are_recorded_as_faults() {
    let sim = Sim::builder()
        .seeds(0..1)
        .disk(DiskConfig::default().errors(1.0))
        .build()
        .unwrap();
    let slot = Arc::new(Mutex::new(None));
    let report = sim.replay(&ReplayKey::seed(0), |_| {
        let slot = slot.clone();
        fs::write("/data", "x").attempt().map(move |result| {
            let error = result.expect_err("every disk operation fails");
            let operation = PathError::of(&error).map(PathError::operation);
            *slot.lock().unwrap() = Some((error.kind(), operation, error.to_string()));
        })
    });
    assert!(report.failure.is_none(), "{:?}", report.failure);
    let (kind, operation, text) = slot.lock().unwrap().take().unwrap();
    assert_eq!(kind, io::ErrorKind::Other);
    assert_eq!(operation, Some("write"));
    assert!(text.contains("injected"), "{text}");
    assert!(
        matches!(&report.faults[..], [Fault::DiskError { host, path, .. }]
            if host == "main" && path == Path::new("/data")),
        "{:?}",
        report.faults
    );
}

#[test]
fn a_disk_error_probability_outside_zero_to_one_is_refused_when_the_simulator_is_built() {
    let error = Sim::builder()
        .disk(DiskConfig::default().errors(1.5))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("disk errors"), "{error}");
}

// ----- crashes -----

/// What the host "db" found on its disk after its restart: the synced
/// file, the unsynced one (`None`: missing).
type Found = (Option<Vec<u8>>, Option<Vec<u8>>);

const SYNCED: &[u8] = b"synced: 0123456789";
const UNSYNCED: &[u8] = b"unsynced: 0123456789";

/// Host "db" writes a synced file and an unsynced one in its first life,
/// is crashed by the main program, and reports what it finds in its
/// second.
fn crash_program(run: &mut Run, slot: Arc<Mutex<Option<Found>>>) -> IO<(), io::Error> {
    let lives = Arc::new(AtomicU32::new(0));
    let written = Arc::new(AtomicU32::new(0));
    let (lives_in, written_in) = (lives.clone(), written.clone());
    run.host("db", move || {
        let (written, slot) = (written_in.clone(), slot.clone());
        if lives_in.fetch_add(1, Ordering::SeqCst) == 0 {
            File::create("/synced")
                .use_with(|file| file.write_all(SYNCED).product_r(file.sync_all()))
                .product_r(File::create("/unsynced").use_with(|file| file.write_all(UNSYNCED)))
                .map(move |()| written.store(1, Ordering::SeqCst))
                .product_r(IO::never())
        } else {
            fs::read("/synced")
                .attempt()
                .flat_map(|synced| fs::read("/unsynced").attempt().map(move |u| (synced, u)))
                .map(move |(synced, unsynced)| {
                    *slot.lock().unwrap() = Some((synced.ok(), unsynced.ok()));
                })
        }
    });
    IO::tail_rec((), move |()| {
        let done = written.load(Ordering::SeqCst) == 1;
        IO::sleep(ms(1)).map(move |()| {
            if done {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
    })
    .product_r(net::crash("db", Some(ms(5))).map_err(io::Error::other))
    .product_r(IO::sleep(ms(20)))
}

fn found_after_crash(seed: u64) -> (Found, Vec<String>) {
    let slot = Arc::new(Mutex::new(None));
    let report = sim().replay(&ReplayKey::seed(seed), |run| {
        crash_program(run, slot.clone())
    });
    assert!(report.failure.is_none(), "{:?}", report.failure);
    let found = slot
        .lock()
        .unwrap()
        .take()
        .expect("db restarted and read its disk");
    let events = report.network.iter().map(|e| e.what.clone()).collect();
    (found, events)
}

#[test]
fn a_crash_keeps_synced_writes_and_loses_unsynced_ones_fully_or_to_a_prefix() {
    let mut lost_some = 0;
    for seed in 0..20 {
        let ((synced, unsynced), events) = found_after_crash(seed);
        assert_eq!(synced.as_deref(), Some(SYNCED), "seed {seed}");
        // The name survives (names are durable at once); its contents
        // are a prefix of what was written.
        let unsynced = unsynced.expect("the unsynced file's name survives");
        assert!(UNSYNCED.starts_with(&unsynced), "seed {seed}: {unsynced:?}");
        if unsynced.len() < UNSYNCED.len() {
            lost_some += 1;
            assert!(
                events
                    .iter()
                    .any(|e| e.contains("db's disk lost unsynced writes")),
                "seed {seed}: {events:?}"
            );
        }
    }
    // The kept length is drawn in 0..=20 per seed: nearly every seed loses.
    assert!(lost_some >= 10, "only {lost_some} of 20 seeds lost bytes");
}

#[test]
fn the_same_seed_replays_the_same_disk_run_with_its_errors_and_losses() {
    let sim = Sim::builder()
        .seeds(0..1)
        .disk(DiskConfig::default().errors(0.2))
        .build()
        .unwrap();
    let run = |seed: u64| {
        let slot = Arc::new(Mutex::new(None));
        let report = sim.replay(&ReplayKey::seed(seed), |run| {
            crash_program(run, slot.clone())
        });
        let found = slot.lock().unwrap().take();
        (
            format!("{:?}", report.faults),
            format!("{:?}", report.network),
            report.schedule,
            found,
        )
    };
    for seed in 0..5 {
        assert_eq!(run(seed), run(seed), "seed {seed}");
    }
}

// ----- planted bug: a write acknowledged before it is synced -----

fn any(port: u16) -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], port))
}

const LOG: &str = "/kv/log";

/// The values in the store's log (a torn last record is left out).
fn decode(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// A key-value store's log server: appends each 4-byte value it receives
/// to its log file and answers "ok". The buggy one answers once the value
/// is handed to the file (`write_all`); the fixed one after `sync_all`.
/// On each start it reads its log back into `recovered`.
fn kv_server(recovered: Arc<Mutex<Vec<u32>>>, sync: bool) -> IO<(), io::Error> {
    let recover = fs::create_dir_all("/kv")
        .product_r(fs::read(LOG).attempt())
        .map(move |log| *recovered.lock().unwrap() = decode(&log.unwrap_or_default()));
    let serve = OpenOptions::new()
        .append(true)
        .create(true)
        .open(LOG)
        .use_with(move |file| {
            TcpListener::bind(any(7)).flat_map(move |listener| {
                IO::forever(move || {
                    let file = file.clone();
                    listener.accept().flat_map(move |(conn, _)| {
                        IO::<(), io::Error>::tail_rec((), move |()| {
                            let (file, writer) = (file.clone(), conn.clone());
                            conn.read_exact(4).flat_map(move |bytes| {
                                let stored = file.write_all(bytes);
                                let durable = if sync {
                                    stored.product_r(file.sync_all())
                                } else {
                                    stored
                                };
                                durable
                                    .product_r(writer.write_all(b"ok".to_vec()))
                                    .map(|()| ControlFlow::Continue(()))
                            })
                        })
                        .attempt()
                        .start::<io::Error>()
                        .void()
                    })
                })
                .void()
            })
        });
    recover.product_r(serve)
}

/// Stores values 0..8 one at a time, reconnecting (and sending the value
/// again) when the connection breaks; records each acknowledged value.
fn kv_client(acked: Arc<Mutex<Vec<u32>>>) -> IO<(), io::Error> {
    IO::tail_rec(
        (0u32, None::<TcpStream>, 0u32),
        move |(value, conn, tries)| {
            if value == 8 {
                return IO::pure(ControlFlow::Break(()));
            }
            if tries > 200 {
                return IO::raise_error(io::Error::other("the store never came back"));
            }
            let acked = acked.clone();
            let connected = match conn {
                Some(conn) => IO::pure(conn),
                None => TcpStream::connect_host("kv:7"),
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

/// The client stores its values while the network may crash the store;
/// then the store is crashed once more and restarted, and every
/// acknowledged value must be in the log it recovers.
fn kv_program(run: &mut Run, sync: bool) -> IO<(), io::Error> {
    let recovered = Arc::new(Mutex::new(Vec::new()));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let server_view = recovered.clone();
    run.host("kv", move || kv_server(server_view.clone(), sync));
    let (check_recovered, check_acked) = (recovered.clone(), acked.clone());
    run.check_at_end("every acknowledged value survives a crash", move || {
        let recovered = check_recovered.lock().unwrap();
        let lost: Vec<u32> = check_acked
            .lock()
            .unwrap()
            .iter()
            .copied()
            .filter(|v| !recovered.contains(v))
            .collect();
        if lost.is_empty() {
            Ok(())
        } else {
            Err(format!("acknowledged but lost: {lost:?}"))
        }
    });
    kv_client(acked)
        .product_r(net::crash("kv", Some(ms(10))).map_err(io::Error::other))
        .product_r(IO::sleep(ms(50)))
}

fn kv_sim() -> Sim {
    Sim::builder()
        .seeds(0..30)
        .network(
            NetConfig::default()
                .latency(ms(1), ms(3))
                .crashes(0.02)
                .restart_after(ms(20), ms(60)),
        )
        .build()
        .unwrap()
}

#[test]
fn a_store_that_acknowledges_before_sync_all_loses_an_acknowledged_write_when_it_crashes() {
    let sim = kv_sim();
    let failure = sim.check(|run| kv_program(run, false)).unwrap_err();
    assert!(
        matches!(&failure.kind, FailureKind::Invariant(m) if m.contains("acknowledged but lost")),
        "{failure}"
    );
    assert!(
        failure.key.seed < 5,
        "found within 5 seeds: {}",
        failure.key
    );
    assert!(
        failure
            .network
            .iter()
            .any(|e| e.what.contains("kv's disk lost unsynced writes")),
        "{failure}"
    );
    // The printed key reproduces it.
    let key: ReplayKey = failure.key.to_string().parse().unwrap();
    let again = sim.replay(&key, |run| kv_program(run, false));
    assert_eq!(again.failure.map(|f| f.kind), Some(failure.kind));
}

#[test]
fn a_store_that_syncs_before_it_acknowledges_keeps_every_acknowledged_write() {
    let summary = kv_sim().check(|run| kv_program(run, true));
    assert!(summary.is_ok(), "{}", summary.unwrap_err());
}
