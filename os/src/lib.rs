//! # spindle-os: files and directories as `IO` values, on every std executor
//!
//! [`fs`] opens a [`File`](fs::File) as a `Resource` (closed exactly once
//! when the resource ends: after its use, on an error, on cancellation),
//! reads, writes and seeks it, reads and writes whole files, creates,
//! lists, renames, copies, links and removes, makes temporary files and
//! directories that remove themselves, and reads files and directory trees
//! as [`Stream`](spindle_stream::Stream)s. Every operation is an
//! `IO<_, std::io::Error>`; its error keeps the system's
//! [`ErrorKind`](std::io::ErrorKind) and names the operation and the path
//! ([`fs::PathError`]).
//!
//! [`process`] spawns a [`Command`](process::Command) as a `Resource`
//! (the child is killed and reaped when it ends, so none is left running
//! or unreaped), pipes its standard streams as streams on the executor's
//! I/O driver, and waits for its exit without blocking a thread (a Linux
//! `pidfd`).
//!
//! [`signal`] (Unix) receives signals as a stream ([`signal::signals`]) or
//! one at a time ([`signal::next`]), on the executor's I/O driver, the
//! handlers removed exactly once when the stream ends. [`stdio`] reads
//! standard input as a stream of bytes or lines and writes standard
//! output and error as pipes or whole writes, on the blocking pool.
//!
//! An application has these modules as `spindle_effect::fs`,
//! `spindle_effect::process`, ... (the entry crate's feature `os`):
//!
//! ```
//! use spindle_effect::fs;
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::new()?;
//! let program = fs::temp_dir().use_with(|dir| {
//!     let path = dir.path().join("greeting.txt");
//!     fs::write(&path, "hello\nworld\n").product_r(fs::read_to_string(&path))
//! });
//! assert_eq!(rt.block_on(program)?.succeeded(), Some("hello\nworld\n".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How the calls run
//!
//! A file system call blocks its thread, and no portable readiness
//! interface exists for regular files, so each operation is one call of
//! `IO::blocking` under the hood: the executor runs it on its blocking
//! pool (exec-wstp, exec-batching, exec-single on the system clock,
//! exec-tokio's `spawn_blocking`) while the fiber waits, and the other
//! fibers keep their threads. An open file's `write_all` (and `writes`)
//! does not wait for its call: it hands its bytes to the file's writer,
//! one blocking call that writes what it is handed, in order, while the
//! fiber goes on (write-behind, as `tokio::fs::File`; the next operation
//! on the file waits for it). An executor without a pool (exec-single on
//! a virtual clock) makes the call on its own thread, the executor
//! contract's default. This is the design of tokio's `tokio::fs` and of
//! fs2-io's `Files` on the JVM. One exception, on Linux: reads first ask
//! for what the kernel's caches hold without waiting for the disk, on the
//! fiber's own thread (`preadv2` with `RWF_NOWAIT` for an open file; for
//! a whole file, `fs::read`, also `openat2` with `RESOLVE_CACHED`, regular
//! files only), and go to the pool only if they would wait: a read of
//! cached data costs its copy, not a hand-off to another thread and back
//! (4.5x `tokio::fs`'s big reads and about 3x its small-file reads in the
//! crate's benchmarks). Linux's io_uring would save the hand-off of the
//! other calls (writes, opens off the cache) too and is not used yet (the
//! benchmarks have the numbers). No code of either is copied.

use std::io;

use spindle_core::IO;
use spindle_core::untraced::{Op, Untraced as _};

pub mod fs;
pub mod process;
#[cfg(unix)]
pub mod signal;
pub mod stdio;

/// One blocking call on the executor's blocking pool, traced as `op` at
/// the caller's site (the operations of `fs` and `stdio`).
#[track_caller]
pub(crate) fn call<A, F>(op: &'static Op, f: F) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce() -> io::Result<A> + Send + 'static,
{
    IO::try_blocking_untraced(f).traced_as(op)
}
