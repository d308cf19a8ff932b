//! Linux: a whole small file read on the fiber's own thread when the
//! kernel's caches hold it, without ever waiting for the disk.
//!
//! `openat2` with `RESOLVE_CACHED` opens a path only if every component
//! of it is in the dentry cache (otherwise `EAGAIN`), and `preadv2` with
//! `RWF_NOWAIT` reads only what the page cache holds (otherwise
//! `EAGAIN`). A file that passes both is read in a few microseconds where
//! a hand-off to the blocking pool and back costs tens (BENCHMARKS.md,
//! "Files against tokio::fs"); one that does not is finished, or read
//! from the start, on the pool. Any error of the cached path (a kernel
//! without these calls, a sandbox that refuses them, a missing file) also
//! sends the call to the pool, whose answer is the one the caller gets:
//! the fast path never decides an error.

use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::path::Path;

/// What the cached path did.
pub(crate) enum Cached {
    /// The whole file.
    Done(Vec<u8>),
    /// Opened, and read up to where the page cache stopped: the rest is
    /// the pool's (from `bytes.len()` on).
    Opened(File, Vec<u8>),
    /// Nothing: the pool does it all.
    Uncached,
}

/// Reads the file at `path` as far as the caches allow (module doc).
#[cfg(target_os = "linux")]
pub(crate) fn read_whole(path: &Path) -> Cached {
    use rustix::fs::{CWD, FileType, Mode, OFlags, ResolveFlags, fstat, openat2};
    use rustix::io::{Errno, ReadWriteFlags, preadv2};
    // First an `O_PATH` descriptor, which opens nothing (a FIFO's open has
    // side effects: it lets a writer's open complete), to see the type.
    let Ok(located) = openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::CACHED,
    ) else {
        return Cached::Uncached;
    };
    // Regular files only: a FIFO, a device or a socket is the pool's
    // (opened there, blocking, as `std::fs::read` opens it).
    let Ok(seen) = fstat(&located) else {
        return Cached::Uncached;
    };
    if FileType::from_raw_mode(seen.st_mode) != FileType::RegularFile {
        return Cached::Uncached;
    }
    // `NONBLOCK` in case the path became something else meanwhile (it has
    // no effect on a regular file); checked to be the same file after.
    let Ok(fd) = openat2(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::CACHED,
    ) else {
        return Cached::Uncached;
    };
    let file = File::from(fd);
    let Ok(stat) = fstat(&file) else {
        return Cached::Uncached;
    };
    if (stat.st_dev, stat.st_ino) != (seen.st_dev, seen.st_ino) {
        return Cached::Uncached;
    }
    // The size, to read it in one call (one more byte tells the end).
    let size = usize::try_from(stat.st_size).unwrap_or(0);
    let mut bytes: Vec<u8> = Vec::with_capacity(size.saturating_add(1).max(64));
    loop {
        let filled = bytes.len();
        if filled == bytes.capacity() {
            bytes.reserve(filled.max(4096));
        }
        bytes.resize(bytes.capacity(), 0);
        let read = preadv2(
            &file,
            &mut [io::IoSliceMut::new(&mut bytes[filled..])],
            filled as u64,
            ReadWriteFlags::NOWAIT,
        );
        match read {
            Ok(0) => {
                bytes.truncate(filled);
                return Cached::Done(bytes);
            }
            Ok(n) => bytes.truncate(filled + n),
            Err(Errno::INTR) => bytes.truncate(filled),
            Err(_) => {
                bytes.truncate(filled);
                return Cached::Opened(file, bytes);
            }
        }
    }
}

/// Elsewhere the pool does every call.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read_whole(_path: &Path) -> Cached {
    Cached::Uncached
}

/// The pool's part of [`Cached::Opened`]: the rest of `file`, after
/// `bytes`.
pub(crate) fn finish(mut file: File, mut bytes: Vec<u8>) -> io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(bytes.len() as u64))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}
