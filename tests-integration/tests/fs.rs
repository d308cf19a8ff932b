//! Files and directories (`spindle_os::fs`) on every executor: whole
//! files, open files as resources closed exactly once (after their use, on
//! an error, on cancellation), positions, the directory tree, directories
//! and files as streams, temporary files and directories, and errors that
//! name their path.
//!
//! Every test holds [`SERIAL`]: they count the process's open files
//! ([`fs::open_files`]), which the others would move.
#![cfg(unix)]

mod common;

use common::net::{HANG, failed, succeeded};
use common::{Serial, rt_test};

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use std::ops::ControlFlow;

use spindle_core::{Deferred, IO, Outcome, Ref};
use spindle_os::fs::{self, File, OpenOptions, PathError};
use spindle_stream::Stream;

/// One test at a time (module doc).
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds [`SERIAL`] and checks, at the end of a passing test, that every
/// file the test opened is closed.
fn serial() -> Serial {
    Serial::take(&SERIAL, fs::open_files, "open file")
}

/// A temporary directory for a test, removed by its resource.
fn in_temp_dir<A: Send + 'static>(
    body: impl FnOnce(PathBuf) -> IO<A, io::Error> + Send + 'static,
) -> IO<A, io::Error> {
    fs::temp_dir().use_with(move |dir| body(dir.path().to_path_buf()))
}

/// A fresh directory under the system's temporary directory, for tests
/// that read their files after the program ends (the caller removes it).
fn tempdir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spindle-fs-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `PathError` of `error`, which must have one.
fn path_error(error: &io::Error) -> &PathError {
    PathError::of(error).unwrap_or_else(|| panic!("the error names its path: {error}"))
}

rt_test! {
    fn a_file_written_whole_reads_back_whole_and_appends_add_to_its_end() {
        let _serial = serial();
        let rt = rt();
        let text = succeeded(&rt, in_temp_dir(|dir| {
            let path = dir.join("notes.txt");
            fs::write(&path, "one\n")
                .product_r(fs::append(&path, "two\n"))
                .product_r(fs::append(dir.join("new.txt"), "made by append"))
                .product_r(fs::read_to_string(&path).both(fs::read(dir.join("new.txt"))))
        }));
        assert_eq!(text, ("one\ntwo\n".to_string(), b"made by append".to_vec()));
    }

    fn a_missing_file_fails_with_not_found_naming_the_operation_and_the_path() {
        let _serial = serial();
        let rt = rt();
        let error = failed(&rt, in_temp_dir(|dir| fs::read(dir.join("missing"))));
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let at = path_error(&error);
        assert_eq!(at.operation(), "read");
        assert!(at.path().ends_with("missing"), "{}", at.path().display());
        assert_eq!(at.system_error().kind(), io::ErrorKind::NotFound);
        assert!(error.to_string().starts_with("read "), "{error}");

        let error = failed(&rt, File::open("/no/such/dir/file").use_with(|file| file.read(1)));
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert_eq!(path_error(&error).operation(), "open");
        assert_eq!(path_error(&error).path(), Path::new("/no/such/dir/file"));

        let error = failed(&rt, fs::rename("/no/such/a", "/no/such/b"));
        assert_eq!(path_error(&error).to(), Some(Path::new("/no/such/b")));
        assert!(error.to_string().starts_with("rename /no/such/a to /no/such/b: "), "{error}");
    }

    fn an_open_file_is_closed_exactly_once_after_its_use_on_an_error_and_on_cancellation() {
        let serial = serial();
        let rt = rt();
        let base = serial.before();
        let kept: std::sync::Arc<Mutex<Vec<File>>> = Default::default();
        let (k1, k2, k3) = (kept.clone(), kept.clone(), kept.clone());
        let outcome = rt.run(in_temp_dir(move |dir| {
            let path = dir.join("data");
            let (p1, p2, p3) = (path.clone(), path.clone(), path.clone());
            fs::write(&path, "abc")
                // After its use: the file is open during it, closed after.
                .product_r(File::open(p1).use_with(move |file| {
                    k1.lock().unwrap().push(file.clone());
                    let open = fs::open_files();
                    file.read(3).map(move |bytes| (bytes, open))
                }))
                .flat_map(move |(bytes, open_during)| {
                    // On an error of the use.
                    let failing = File::open(p2)
                        .use_with(move |file| {
                            k2.lock().unwrap().push(file.clone());
                            IO::<(), io::Error>::raise_error(io::Error::other("the use fails"))
                        })
                        .attempt();
                    // On cancellation: the use waits forever, a timeout
                    // cancels it.
                    let canceled = File::open(p3)
                        .use_with(move |file| {
                            k3.lock().unwrap().push(file.clone());
                            IO::<(), io::Error>::never()
                        })
                        .timeout(Duration::from_millis(50))
                        .attempt();
                    failing.both(canceled).map(move |(f, c)| (bytes, open_during, f.is_err(), c.is_err()))
                })
        }).timeout(HANG));
        let (bytes, open_during, use_failed, use_canceled) = outcome.succeeded().expect("the program runs");
        assert_eq!(bytes, b"abc");
        assert_eq!(open_during, base + 1, "open while used");
        assert!(use_failed && use_canceled);
        let kept = kept.lock().unwrap();
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(File::is_closed), "all three closed");
        // Closed once: the count is back at its start (checked on drop of
        // `serial`), not below it, and a clone kept past the end fails.
        assert_eq!(fs::open_files(), base);
        let error = failed(&rt, kept[0].read(1));
        assert_eq!(error.kind(), io::ErrorKind::Other);
        assert!(error.to_string().contains("the file is closed"), "{error}");
        // Closing again does nothing.
        succeeded(&rt, kept[0].close());
        assert_eq!(fs::open_files(), base);
    }

    fn reads_writes_and_seeks_move_the_cursor_and_positional_calls_do_not() {
        let _serial = serial();
        let rt = rt();
        let got = succeeded(&rt, fs::temp_file().use_with(|file| {
            let f = file.clone();
            file.write_all("0123456789")
                .product_r(file.seek(SeekFrom::Start(2)))
                .flat_map(move |at| f.read(3).map(move |bytes| (at, bytes)))
                .flat_map(move |(at, bytes)| {
                    let g = file.clone();
                    file.read_at(8, 100)
                        .flat_map(move |tail| {
                            g.write_all_at(0, "ab")
                                .product_r(g.seek(SeekFrom::Current(0)))
                                .flat_map(move |cursor| {
                                    g.seek(SeekFrom::Start(0))
                                        .product_r(g.read_to_string())
                                        .map(move |all| (at, bytes, tail, cursor, all))
                                })
                        })
                })
        }));
        assert_eq!(got, (2, b"234".to_vec(), b"89".to_vec(), 5, "ab23456789".to_string()));
    }

    fn open_options_create_new_refuses_an_existing_file_and_truncate_cuts_it() {
        let _serial = serial();
        let rt = rt();
        let error = failed(&rt, in_temp_dir(|dir| {
            let path = dir.join("once");
            fs::write(&path, "x").product_r(
                OpenOptions::new().write(true).create_new(true).open(path).use_with(|_| IO::unit()),
            )
        }));
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(path_error(&error).operation(), "open");
        let len = succeeded(&rt, in_temp_dir(|dir| {
            let path = dir.join("cut");
            let p = path.clone();
            fs::write(&path, "long contents")
                .product_r(OpenOptions::new().write(true).truncate(true).open(path).use_with(|f| f.write_all("ab")))
                .product_r(fs::metadata(p).map(|m| m.len()))
        }));
        assert_eq!(len, 2);
    }

    fn the_tree_operations_create_rename_copy_link_and_remove() {
        let _serial = serial();
        let rt = rt();
        let got = succeeded(&rt, in_temp_dir(|dir| {
            let d = dir.clone();
            let deep = dir.join("a/b/c");
            fs::create_dir_all(&deep)
                .product_r(fs::write(deep.join("f"), "data"))
                .product_r(fs::rename(deep.join("f"), dir.join("g")))
                .product_r(fs::copy(dir.join("g"), dir.join("h")))
                .flat_map(move |copied| {
                    fs::hard_link(d.join("g"), d.join("g2"))
                        .product_r(fs::symlink(d.join("h"), d.join("link")))
                        .product_r(fs::read_link(d.join("link")))
                        .flat_map(move |target| {
                            fs::symlink_metadata(d.join("link"))
                                .map(|m| m.file_type().is_symlink())
                                .both(fs::metadata(d.join("g2")).map(|m| m.len()))
                                .flat_map(move |(is_link, linked_len)| {
                                    fs::remove_file(d.join("h"))
                                        .product_r(fs::exists(d.join("h")))
                                        .both(fs::remove_dir(d.join("a/b/c")).product_r(fs::remove_dir_all(d.join("a"))).product_r(fs::exists(d.join("a"))))
                                        .map(move |(h_exists, a_exists)| (copied, target, is_link, linked_len, h_exists, a_exists))
                                })
                        })
                })
                .map(move |got| (got, dir))
        }));
        let ((copied, target, is_link, linked_len, h_exists, a_exists), dir) = got;
        assert_eq!(copied, 4);
        assert_eq!(target, dir.join("h"));
        assert!(is_link);
        assert_eq!(linked_len, 4);
        assert!(!h_exists && !a_exists);
        assert!(!dir.exists(), "the temporary directory is removed");
    }

    fn a_directory_lists_its_entries_and_a_walk_lists_each_directory_before_its_contents() {
        let _serial = serial();
        let rt = rt();
        let (listed, walked) = succeeded(&rt, in_temp_dir(|dir| {
            let d = dir.clone();
            // 300 files: more than one batch of entries.
            let files = (0..300).fold(IO::unit(), |acc: IO<(), io::Error>, i| {
                let d = d.clone();
                acc.product_r(IO::defer(move || fs::write(d.join(format!("f{i}")), "")))
            });
            files
                .product_r(fs::create_dir_all(dir.join("sub/deeper")))
                .product_r(fs::write(dir.join("sub/deeper/leaf"), "x"))
                .product_r(fs::read_dir(&dir).compile().to_vec().both(fs::walk(&dir).compile().to_vec()))
                .map(move |(listed, walked)| {
                    let strip = |e: &fs::DirEntry| (e.path().strip_prefix(&dir).unwrap().to_path_buf(), e.depth(), e.file_type().is_dir());
                    (listed.iter().map(strip).collect::<Vec<_>>(), walked.iter().map(strip).collect::<Vec<_>>())
                })
        }));
        assert_eq!(listed.len(), 301);
        assert!(listed.iter().all(|(_, depth, _)| *depth == 1));
        assert!(listed.contains(&(PathBuf::from("sub"), 1, true)));
        assert_eq!(walked.len(), 303);
        let position = |p: &str| walked.iter().position(|(path, _, _)| path == Path::new(p)).unwrap();
        assert!(position("sub") < position("sub/deeper"));
        assert!(position("sub/deeper") < position("sub/deeper/leaf"));
        assert_eq!(walked[position("sub/deeper/leaf")].1, 3);
    }

    fn a_file_read_as_a_stream_gives_its_bytes_in_chunks_and_closes_when_a_take_stops_early() {
        let serial = serial();
        let rt = rt();
        let base = serial.before();
        let contents: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let expected = contents.clone();
        let (chunks, first, open_after) = succeeded(&rt, in_temp_dir(move |dir| {
            let path = dir.join("big");
            let (p1, p2) = (path.clone(), path.clone());
            fs::write(&path, contents)
                .product_r(IO::defer(move || {
                    fs::reads(p1, 4096).expect("4096 > 0").chunks().map(|c| c.len()).compile().to_vec()
                }))
                .flat_map(move |chunks| {
                    fs::reads(p2, 1000).expect("1000 > 0").take(10).compile().to_vec()
                        .map(move |first| (chunks, first, fs::open_files()))
                })
        }));
        assert_eq!(chunks.iter().sum::<usize>(), expected.len());
        assert!(chunks.iter().all(|&n| n <= 4096) && chunks.len() >= 25, "{chunks:?}");
        assert_eq!(first, expected[..10]);
        assert_eq!(open_after, base, "closed when the take stopped");
    }

    fn a_file_out_of_memory_is_read_whole_from_the_disk_by_reads_and_streams() {
        let _serial = serial();
        let rt = rt();
        let contents: Vec<u8> = (0..300_000u32).map(|i| (i * 13) as u8).collect();
        let expected = contents.clone();
        let (read, streamed, at) = succeeded(&rt, in_temp_dir(move |dir| {
            let path = dir.join("cold");
            let (p1, p2, p3) = (path.clone(), path.clone(), path.clone());
            // Written, flushed, and dropped from the page cache: a read
            // that must not wait for the disk finds nothing, and the
            // blocking pool reads it.
            let evict = move |path: PathBuf| {
                IO::blocking(move || {
                    let file = std::fs::File::open(&path).expect("the file");
                    file.sync_all().expect("flushed");
                    let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
                })
            };
            fs::write(&path, contents)
                .product_r(evict(p1.clone()))
                .product_r(File::open(p1.clone()).use_with(|file| file.read(1 << 20)))
                .flat_map(move |read| {
                    evict(p2.clone())
                        .product_r(IO::defer(move || {
                            fs::reads(p2, 65_536).expect("65,536 > 0").compile().to_vec()
                        }))
                        .map(move |streamed| (read, streamed))
                })
                .flat_map(move |(read, streamed)| {
                    evict(p3.clone())
                        .product_r(File::open(p3).use_with(|file| file.read_at(100_000, 1000)))
                        .map(move |at| (read, streamed, at))
                })
        }));
        assert!(read.len() <= expected.len() && !read.is_empty());
        assert_eq!(read, expected[..read.len()], "a prefix of the file, in order");
        assert_eq!(streamed, expected);
        assert_eq!(at, expected[100_000..101_000]);
    }

    fn whole_reads_of_a_fifo_a_proc_file_and_a_file_out_of_memory_give_all_their_bytes() {
        let _serial = serial();
        let rt = rt();
        let (from_fifo, from_proc, cold) = succeeded(&rt, in_temp_dir(|dir| {
            let fifo = dir.join("fifo");
            let cold = dir.join("cold");
            let (f1, f2, c1, c2) = (fifo.clone(), fifo.clone(), cold.clone(), cold.clone());
            // A FIFO is read on the pool (its open waits for a writer); the
            // writer runs beside it.
            let made = IO::blocking(move || {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &f1,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .expect("a FIFO");
            });
            let writer = IO::blocking(move || {
                use std::io::Write as _;
                let mut end = std::fs::OpenOptions::new().write(true).open(&f2).expect("the FIFO");
                end.write_all(b"through the fifo").expect("written");
            });
            let evicted = fs::write(&cold, vec![9u8; 200_000]).product_r(IO::blocking(move || {
                let file = std::fs::File::open(&c1).expect("the file");
                file.sync_all().expect("flushed");
                let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
            }));
            made.product_r(fs::read(&fifo).both(writer))
                .flat_map(move |(from_fifo, ())| {
                    fs::read_to_string("/proc/self/stat")
                        .both(evicted.product_r(fs::read(c2)))
                        .map(move |(from_proc, cold)| (from_fifo, from_proc, cold))
                })
        }));
        assert_eq!(from_fifo, b"through the fifo");
        assert!(from_proc.contains(&std::process::id().to_string()), "{from_proc}");
        assert_eq!(cold, vec![9u8; 200_000]);
    }

    fn a_file_read_as_lines_gives_each_line_and_an_over_long_line_is_an_error() {
        let _serial = serial();
        let rt = rt();
        let lines = succeeded(&rt, in_temp_dir(|dir| {
            let path = dir.join("log");
            let p = path.clone();
            fs::write(&path, "first\r\nsecond\n\nlast without a break")
                .product_r(IO::defer(move || fs::lines(p, 100).expect("100 > 0").compile().to_vec()))
        }));
        assert_eq!(lines, ["first", "second", "", "last without a break"]);
        let error = failed(&rt, in_temp_dir(|dir| {
            let path = dir.join("long");
            let p = path.clone();
            fs::write(&path, "short\n".to_string() + &"x".repeat(500))
                .product_r(IO::defer(move || fs::lines(p, 100).expect("100 > 0").compile().to_vec()))
        }));
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("100"), "names the limit: {error}");
    }

    fn a_byte_stream_written_through_a_pipe_is_the_files_contents() {
        let _serial = serial();
        let rt = rt();
        let back = succeeded(&rt, in_temp_dir(|dir| {
            let path = dir.join("out");
            let p = path.clone();
            let bytes = Stream::iter_chunked((0..50_000u32).map(|i| i as u8), 777).expect("777 > 0");
            fs::writes(&path, bytes).compile().drain().product_r(fs::read(p))
        }));
        let expected: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
        assert_eq!(back, expected);
    }

    fn temporary_files_and_directories_are_removed_when_their_resource_ends_even_on_error() {
        let _serial = serial();
        let rt = rt();
        let (dir, file) = succeeded(&rt, fs::temp_dir().use_with(|dir| {
            let d = dir.path().to_path_buf();
            fs::write(d.join("inside"), "x").product_r(fs::temp_file_in(&d).use_with(|file| {
                let path = file.path().to_path_buf();
                file.write_all("y").map(move |()| path)
            }))
            .map(move |file| (d, file))
        }));
        assert!(!dir.exists() && !file.exists());
        let leaked: std::sync::Arc<Mutex<Option<PathBuf>>> = Default::default();
        let l = leaked.clone();
        let outcome = rt.run(fs::temp_file().use_with(move |file| {
            *l.lock().unwrap() = Some(file.path().to_path_buf());
            IO::<(), io::Error>::raise_error(io::Error::other("fails"))
        }));
        assert!(matches!(outcome, Outcome::Errored(_)));
        let path = leaked.lock().unwrap().clone().expect("the use ran");
        assert!(!path.exists(), "removed after the error");
    }

    fn a_tailed_file_gives_what_it_held_then_what_is_appended_and_starts_over_when_cut() {
        let _serial = serial();
        let rt = rt();
        let lines = succeeded(&rt, in_temp_dir(|dir| {
            let path = dir.join("app.log");
            let (p1, p2) = (path.clone(), path.clone());
            // How many lines the stream has emitted: the writer waits for
            // each before it writes the next (no race with the polling).
            let seen = Ref::new(0usize);
            let counter = seen.clone();
            let tailed = IO::defer(move || {
                let bytes = fs::tail(p1, 0, 1024, Duration::from_millis(5)).expect("valid");
                spindle_stream::text::lines(spindle_stream::text::utf8_decode(bytes), 100)
                    .eval_tap(move |_| counter.update(|n| *n += 1))
                    .take(4)
                    .compile()
                    .to_vec()
            });
            let until = move |n: usize| {
                let seen = seen.clone();
                IO::tail_rec((), move |()| {
                    seen.get().flat_map(move |got: usize| {
                        if got >= n {
                            IO::pure(ControlFlow::Break(()))
                        } else {
                            IO::sleep(Duration::from_millis(2)).map(|()| ControlFlow::Continue(()))
                        }
                    })
                })
            };
            // The writer: a line at a time while the stream follows, then
            // the file cut to nothing and a new line (a rotation).
            let writer = until(1)
                .product_r(fs::append(&path, "second\n"))
                .product_r(until(2))
                .product_r(fs::append(&path, "third\n"))
                .product_r(until(3))
                .product_r(fs::write(&p2, "after the cut\n"));
            fs::write(&path, "first\n").product_r(tailed.both(writer)).map(|(lines, ())| lines)
        }));
        assert_eq!(lines, ["first", "second", "third", "after the cut"]);
    }

    fn many_chunks_written_behind_are_all_in_the_file_in_their_order_once_its_resource_ends() {
        let serial = serial();
        let rt = rt();
        let base = serial.before();
        // 3 MiB in chunks of 48 KiB and 1 byte, each its own pattern: more
        // than the queue behind the writer holds, so writes wait for room.
        let chunks: Vec<Vec<u8>> = (0..128u32)
            .map(|i| if i % 16 == 15 { vec![i as u8] } else { (0..49_152u32).map(|j| (i * 31 + j) as u8).collect() })
            .collect();
        let expected: Vec<u8> = chunks.concat();
        let streamed: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
        let stream_expected = streamed.clone();
        // And chunks of more than half the queue, which wait until each fits.
        let big: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i; 700_000]).collect();
        let big_expected = big.concat();
        let (looped, piped, big_back, open_during) = succeeded(&rt, in_temp_dir(move |dir| {
            let (p1, p2, p3) = (dir.join("looped"), dir.join("piped"), dir.join("big"));
            let (r1, r2, r3) = (p1.clone(), p2.clone(), p3.clone());
            let big_written = File::create(p3).use_with(move |file| {
                big.into_iter().fold(IO::unit(), |acc: IO<(), io::Error>, chunk| {
                    let file = file.clone();
                    acc.flat_map(move |()| file.write_all(chunk))
                })
            });
            let written = File::create(p1).use_with(move |file| {
                chunks.into_iter().fold(IO::unit(), |acc: IO<(), io::Error>, chunk| {
                    let file = file.clone();
                    acc.flat_map(move |()| file.write_all(chunk))
                })
                .map(|()| fs::open_files())
            });
            let bytes = Stream::iter_chunked(streamed, 65_536).expect("65,536 > 0");
            written
                .flat_map(move |open_during| {
                    fs::writes(p2, bytes).compile().drain().map(move |()| open_during)
                })
                .flat_map(move |open_during| big_written.map(move |()| open_during))
                .flat_map(move |open_during| {
                    fs::read(r1).both(fs::read(r2)).both(fs::read(r3)).map(move |((a, b), c)| (a, b, c, open_during))
                })
        }));
        assert_eq!(open_during, base + 1, "the file is open while it is written");
        assert_eq!(looped.len(), expected.len());
        assert!(looped == expected, "every chunk, in order");
        assert!(piped == stream_expected, "the pipe's chunks, in order");
        assert!(big_back == big_expected, "the big chunks, in order");
    }

    fn the_next_operation_waits_for_the_writes_behind_and_reads_what_they_wrote() {
        let _serial = serial();
        let rt = rt();
        let got = succeeded(&rt, fs::temp_file().use_with(|file| {
            let (f1, f2, f3) = (file.clone(), file.clone(), file.clone());
            file.write_all(vec![1u8; 300_000])
                .product_r(file.write_all(vec![2u8; 300_000]))
                .product_r(f1.metadata().map(|m| m.len()))
                .flat_map(move |len| {
                    f2.write(vec![3u8; 10]).flat_map(move |n| {
                        f3.seek(SeekFrom::Start(299_999))
                            .product_r(f3.read(2))
                            .product_r(f3.read_at(600_000, 100))
                            .map(move |tail| (len, n, tail))
                    })
                })
        }));
        let (len, n, tail) = got;
        assert_eq!(len, 600_000, "metadata after both writes");
        assert_eq!(tail.len(), n, "the synchronous write after them");
        assert!(tail.iter().all(|&b| b == 3));
    }

    fn a_failed_write_behind_is_reported_once_at_the_next_operation_at_flush_and_at_the_close() {
        let serial = serial();
        let rt = rt();
        let base = serial.before();
        let dir = tempdir();
        let path = dir.join("read-only");
        std::fs::write(&path, "contents").unwrap();
        // A file opened for reading only: its writes fail (EBADF), after
        // `write_all` has returned.
        let (p1, p2, p3) = (path.clone(), path.clone(), path.clone());
        let (at_next, len) = succeeded(&rt, File::open(p1).use_with(|file| {
            let (f1, f2) = (file.clone(), file.clone());
            file.write_all("lost")
                .product_r(f1.metadata().map(|_| ()).attempt())
                .flat_map(move |at_next| f2.metadata().map(move |m| (at_next, m.len())))
        }));
        let error = at_next.expect_err("the next operation reports the failed write");
        assert_eq!(path_error(&error).operation(), "write");
        assert_eq!(path_error(&error).path(), path);
        assert!(error.to_string().starts_with("write "), "{error}");
        assert_eq!(len, 8, "reported once: the operation after it runs");

        // At `flush`, once: the second flush succeeds.
        let flushed = succeeded(&rt, File::open(p2).use_with(|file| {
            let f = file.clone();
            file.write_all("lost")
                .product_r(file.flush().attempt())
                .flat_map(move |first| f.flush().map(move |()| first))
        }));
        assert_eq!(path_error(&flushed.expect_err("flush reports it")).operation(), "write");

        // At the release: the use succeeded, so the close's error is the
        // result; the file is closed all the same.
        let kept: std::sync::Arc<Mutex<Option<File>>> = Default::default();
        let k = kept.clone();
        let error = failed(&rt, File::open(p3).use_with(move |file| {
            *k.lock().unwrap() = Some(file.clone());
            file.write_all("lost")
        }));
        assert_eq!(path_error(&error).operation(), "write");
        assert!(kept.lock().unwrap().as_ref().unwrap().is_closed());
        assert_eq!(fs::open_files(), base);
        assert_eq!(std::fs::read(&path).unwrap(), b"contents");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    fn a_full_device_fails_write_all_behind_and_a_pipe_to_it_fails_with_its_error() {
        let _serial = serial();
        assert!(Path::new("/dev/full").exists(), "Linux has /dev/full");
        let rt = rt();
        let error = failed(&rt, OpenOptions::new().write(true).open("/dev/full").use_with(|file| {
            file.write_all(vec![0u8; 100_000]).product_r(file.write_all(vec![0u8; 100]))
        }));
        assert_eq!(error.raw_os_error(), None, "wrapped: {error}");
        assert_eq!(path_error(&error).system_error().raw_os_error(), Some(28), "ENOSPC: {error}");
        assert_eq!(path_error(&error).operation(), "write");
        let bytes = Stream::iter_chunked(vec![7u8; 200_000], 4096).expect("4096 > 0");
        let error = failed(&rt, fs::writes("/dev/full", bytes).compile().drain());
        assert_eq!(path_error(&error).system_error().raw_os_error(), Some(28), "ENOSPC: {error}");
        assert_eq!(path_error(&error).path(), Path::new("/dev/full"));
    }

    fn writes_handed_over_before_a_cancellation_are_in_the_file_after_its_close() {
        let serial = serial();
        let rt = rt();
        let base = serial.before();
        let dir = tempdir();
        let path = dir.join("canceled");
        // The use hands over two big writes, then says so and waits for
        // ever; it is canceled then (its writes may still be at work),
        // and the release (the close) waits for them.
        let handed = Deferred::<()>::new();
        let h = handed.clone();
        let p = path.clone();
        let used = File::create(p).use_with(move |file| {
            let f = file.clone();
            file.write_all(vec![1u8; 4 << 20])
                .product_r(f.write_all(vec![2u8; 4 << 20]))
                .product_r(h.complete(()).void())
                .product_r(IO::<(), io::Error>::never())
        });
        let outcome = succeeded(&rt, used.start().flat_map(move |fiber| {
            handed.get().product_r(fiber.cancel()).product_r(fiber.join())
        }));
        assert!(matches!(outcome, Outcome::Canceled), "{outcome:?}");
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len(), 8 << 20, "both writes");
        assert!(written[..4 << 20].iter().all(|&b| b == 1) && written[4 << 20..].iter().all(|&b| b == 2));

        // A fiber canceled while it waits for the writes (`flush`), then the
        // file used again: the next operation still waits for them.
        let p = path.clone();
        let len = succeeded(&rt, File::create(p).use_with(|file| {
            let (f1, f2) = (file.clone(), file.clone());
            file.write_all(vec![3u8; 8 << 20])
                .product_r(f1.flush().timeout(Duration::from_micros(100)).attempt())
                .product_r(f2.metadata().map(|m| m.len()))
        }));
        assert_eq!(len, 8 << 20);

        // Many writes, the loop canceled at some point: each chunk is in
        // the file whole or not at all, in order.
        let p = path.clone();
        let _ = rt.run(File::create(p).use_with(|file| {
            (0..400u32).fold(IO::unit(), |acc: IO<(), io::Error>, i| {
                let file = file.clone();
                acc.flat_map(move |()| file.write_all(vec![i as u8; 100_000]))
            })
        }).timeout(Duration::from_millis(3)));
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written.len() % 100_000, 0, "whole chunks: {}", written.len());
        for (i, chunk) in written.chunks(100_000).enumerate() {
            assert!(chunk.iter().all(|&b| b == i as u8), "chunk {i} in order");
        }
        assert_eq!(fs::open_files(), base);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn a_chunk_size_or_line_limit_of_zero_is_refused_when_the_stream_is_made() {
        let _serial = serial();
        let error = fs::reads("/anything", 0).expect_err("refused");
        assert_eq!(error.operation, "fs::reads");
        assert!(fs::lines("/anything", 0).is_err());
        assert!(fs::tail("/anything", 0, 0, Duration::from_millis(1)).is_err());
        assert!(fs::tail("/anything", 0, 1, Duration::ZERO).is_err());
        let rt = rt();
        let refused = succeeded(&rt, fs::temp_file().use_with(|file| IO::pure(file.reads(0).is_err())));
        assert!(refused);
    }
}
