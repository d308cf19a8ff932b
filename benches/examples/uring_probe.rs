//! What io_uring would save per file call, against a blocking call made
//! directly and one handed to another thread (the blocking pool's
//! hand-off), on one thread, in the page cache: the measurement behind
//! `spindle-os`'s choice of the blocking pool (BENCHMARKS.md, "Files
//! against tokio::fs").
//!
//! ```text
//! cargo build --release -p benches --example uring_probe
//! target/release/examples/uring_probe
//! ```
//!
//! Workloads, each timed as the median of 5 runs: 2,000 files of 1 KiB
//! read whole (open, read, close), and 1,024 writes of 64 KiB to one file.
//! Ways: `direct` (std calls on this thread), `thread hop` (each call sent
//! to a helper thread over a channel and the result sent back, as a
//! blocking pool does), `io_uring` (each call one submission, waited for
//! with `submit_and_wait`; open, read and close as three linked entries).

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("io_uring is Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::io::{Read as _, Write as _};
    use std::os::fd::AsRawFd as _;
    use std::os::unix::ffi::OsStrExt as _;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use io_uring::{IoUring, opcode, types};

    const FILES: usize = 2_000;
    const WRITES: usize = 1_024;
    const BLOCK: usize = 64 * 1024;

    fn median(mut runs: Vec<Duration>) -> Duration {
        runs.sort();
        runs[runs.len() / 2]
    }

    fn time(mut f: impl FnMut()) -> Duration {
        f(); // warm-up
        median(
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect(),
        )
    }

    type Job = Box<dyn FnOnce() + Send>;

    pub fn main() {
        let dir = std::env::temp_dir().join(format!("spindle-uring-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let paths: Vec<PathBuf> = (0..FILES).map(|i| dir.join(format!("f{i}"))).collect();
        for path in &paths {
            std::fs::write(path, [3u8; 1024]).expect("a file");
        }
        // The helper thread of the hop.
        let (jobs, queue) = mpsc::channel::<Job>();
        let helper = std::thread::spawn(move || {
            for job in queue {
                job();
            }
        });
        let hop = |job: Job| {
            let (done, wait) = mpsc::channel::<()>();
            jobs.send(Box::new(move || {
                job();
                let _ = done.send(());
            }))
            .expect("the helper");
            wait.recv().expect("done");
        };
        let mut ring = IoUring::new(8).expect("io_uring");
        // One fixed-file slot, for the opened file of the small-files loop.
        ring.submitter()
            .register_files_sparse(1)
            .expect("a fixed-file slot");

        let direct_small = time(|| {
            for path in &paths {
                let mut bytes = Vec::new();
                std::fs::File::open(path)
                    .unwrap()
                    .read_to_end(&mut bytes)
                    .unwrap();
                assert_eq!(bytes.len(), 1024);
            }
        });
        let hop_small = time(|| {
            for path in &paths {
                let path = path.clone();
                hop(Box::new(move || {
                    assert_eq!(std::fs::read(path).unwrap().len(), 1024);
                }));
            }
        });
        let uring_small = time(|| {
            let mut buf = vec![0u8; 4096];
            for path in &paths {
                let name = CString::new(path.as_os_str().as_bytes()).unwrap();
                // Open, then read and close through a fixed slot: three
                // linked entries, one submission.
                let open = opcode::OpenAt::new(types::Fd(libc_at_fdcwd()), name.as_ptr())
                    .file_index(Some(
                        types::DestinationSlot::try_from_slot_target(0).unwrap(),
                    ))
                    .build()
                    .flags(io_uring::squeue::Flags::IO_LINK)
                    .user_data(1);
                // A hard link: a short read (the whole file, shorter than
                // the buffer) must not cancel the close.
                let read = opcode::Read::new(types::Fixed(0), buf.as_mut_ptr(), buf.len() as u32)
                    .build()
                    .flags(io_uring::squeue::Flags::IO_HARDLINK)
                    .user_data(2);
                let close = opcode::Close::new(types::Fixed(0)).build().user_data(3);
                // SAFETY: `name` and `buf` outlive the wait below, which
                // waits for all three completions before they are touched.
                unsafe {
                    let mut sq = ring.submission();
                    sq.push(&open).unwrap();
                    sq.push(&read).unwrap();
                    sq.push(&close).unwrap();
                }
                ring.submit_and_wait(3).expect("submit");
                let mut read_len = 0;
                for cqe in ring.completion() {
                    assert!(cqe.result() >= 0, "{:?}", cqe);
                    if cqe.user_data() == 2 {
                        read_len = cqe.result();
                    }
                }
                assert_eq!(read_len, 1024);
            }
        });
        let out = dir.join("big");
        let block = vec![0x5au8; BLOCK];
        let direct_write = time(|| {
            let mut file = std::fs::File::create(&out).unwrap();
            for _ in 0..WRITES {
                file.write_all(&block).unwrap();
            }
        });
        let hop_write = time(|| {
            let file = std::sync::Arc::new(std::fs::File::create(&out).unwrap());
            for _ in 0..WRITES {
                let (file, block) = (file.clone(), block.clone());
                hop(Box::new(move || (&*file).write_all(&block).unwrap()));
            }
        });
        let uring_write = time(|| {
            let file = std::fs::File::create(&out).unwrap();
            for i in 0..WRITES {
                let write =
                    opcode::Write::new(types::Fd(file.as_raw_fd()), block.as_ptr(), BLOCK as u32)
                        .offset((i * BLOCK) as u64)
                        .build();
                // SAFETY: `block` outlives the wait for the completion.
                unsafe { ring.submission().push(&write).unwrap() };
                ring.submit_and_wait(1).expect("submit");
                let cqe = ring.completion().next().expect("a completion");
                assert_eq!(cqe.result(), BLOCK as i32);
            }
        });
        drop(jobs);
        helper.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let per = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n as f64;
        println!("small files ({FILES} x 1 KiB, open+read+close), µs per file:");
        println!("  direct     {:7.2}", per(direct_small, FILES));
        println!("  thread hop {:7.2}", per(hop_small, FILES));
        println!("  io_uring   {:7.2}", per(uring_small, FILES));
        println!("writes ({WRITES} x 64 KiB), µs per write:");
        println!("  direct     {:7.2}", per(direct_write, WRITES));
        println!("  thread hop {:7.2}", per(hop_write, WRITES));
        println!("  io_uring   {:7.2}", per(uring_write, WRITES));
    }

    /// `AT_FDCWD`: paths relative to the working directory (ours are
    /// absolute).
    fn libc_at_fdcwd() -> i32 {
        -100
    }
}
