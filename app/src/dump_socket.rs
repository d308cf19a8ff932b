//! The dump socket (Unix, off by default): a local socket on which the
//! entry point answers every connection with the executor's state as one
//! JSON document, then closes it.
//!
//! # Protocol
//!
//! A thread of its own (like the signal thread, so that it answers while
//! every thread of the executor is busy) accepts connections on a Unix
//! domain socket at the configured path. For each it reads nothing: it
//! writes one JSON object and closes the connection:
//!
//! ```text
//! { "metrics":  "<the executor's Metrics, its one-line Display>",
//!   "counters": { "executor": "wstp", "fibers_started_total": 12, ... },
//!   "dump":     { "fibers": [ ... ], "executor": { ... } } }
//! ```
//!
//! `counters` is io-core's `RuntimeCounters` (an absent value is `null`),
//! `dump` its `FiberDump` (see io-core's `serde` feature for both shapes).
//!
//! The socket is made when [`run_with`](crate::run_with) starts, before the
//! main fiber, with permissions `0600` (only the process's user may
//! connect: a dump shows what fibers do and where); a path that is taken
//! already (a socket left by an earlier run, any file) or in a directory
//! that does not exist is an error that names the path, and the program
//! does not run. When the main fiber has ended the thread is stopped (a
//! connection of its own wakes its `accept`), joined, and the socket file
//! removed.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use spindle_core::IORuntime;

/// The serving thread, while it runs.
pub(crate) struct DumpSocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// Why the dump socket could not be served: the path and the system's
/// error.
#[derive(Debug)]
pub(crate) struct DumpSocketError {
    path: PathBuf,
    error: io::Error,
}

impl std::fmt::Display for DumpSocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot serve the dump socket at {} ({}): {}",
            self.path.display(),
            crate::DUMP_SOCKET_ENV,
            self.error
        )
    }
}

impl DumpSocket {
    /// Binds `path` and starts the thread that answers on it.
    pub(crate) fn start<R: IORuntime>(
        path: &Path,
        handle: R::Handle,
    ) -> Result<DumpSocket, DumpSocketError> {
        let error = |error| DumpSocketError {
            path: path.to_owned(),
            error,
        };
        let listener = UnixListener::bind(path).map_err(error)?;
        let restrict = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        if let Err(e) = restrict {
            let _ = std::fs::remove_file(path);
            return Err(error(e));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name(String::from("spindle-dump-socket"))
            .spawn({
                let stop = stop.clone();
                move || serve::<R>(listener, &handle, &stop)
            });
        match thread {
            Ok(thread) => Ok(DumpSocket {
                path: path.to_owned(),
                stop,
                thread,
            }),
            Err(e) => {
                let _ = std::fs::remove_file(path);
                Err(error(e))
            }
        }
    }

    /// Stops and joins the thread, and removes the socket file.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the thread's `accept`; it sees the flag and returns. (If the
        // connection fails the thread is not in `accept` any more, or the
        // socket is gone: it stops at its next look at the flag.)
        let woke = UnixStream::connect(&self.path).is_ok();
        if woke {
            let _ = self.thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Answers every connection until stopped.
fn serve<R: IORuntime>(listener: UnixListener, handle: &R::Handle, stop: &AtomicBool) {
    for connection in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut connection) = connection else {
            // A connection that failed before it was accepted: the next.
            continue;
        };
        let mut text = crate::dump_document::<R>(handle);
        text.push('\n');
        // A client that went away gets nothing; the thread goes on.
        let _ = connection.write_all(text.as_bytes());
    }
}
