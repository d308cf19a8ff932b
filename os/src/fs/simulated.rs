//! Files on a simulated disk: the backend of this module's operations
//! when the fiber's I/O driver offers a
//! [`VirtualDisk`](spindle_net::driver::VirtualDisk) (spindle-sim's
//! per-host disk).
//!
//! Each operation looks the disk up on the fiber that runs it (in an
//! `IO::defer`), before it goes to the blocking pool, and the blocking
//! call holds the disk's `Arc`: the system path costs one `Option` check.
//! On a simulated disk every operation has its `std::fs` semantics (the
//! disk's contract), except those a simulated disk cannot answer, which
//! fail with an error of kind `Unsupported` naming the simulation (and,
//! as every error here, a [`PathError`](super::PathError) naming the
//! operation and path): `metadata`, `symlink_metadata` and
//! `File::metadata` (a `std::fs::Metadata` cannot be made without a
//! system file: use `exists`, `read_dir`'s entries or `File::seek` to the
//! end), `symlink`, `read_link`, `canonicalize`, `set_permissions`,
//! `temp_dir` and `temp_file` (and their `_in` forms), and the
//! Unix mode of `OpenOptions`, which is ignored.

use std::io;
use std::sync::Arc;

use spindle_net::driver::{VirtualDisk, VirtualFile, VirtualOpenOptions, with_current};

/// The simulated disk of this thread's driver, if it has one.
pub(crate) fn disk() -> Option<Arc<dyn VirtualDisk>> {
    with_current(|driver| driver.and_then(|driver| driver.disk()))
}

/// The error of an operation a simulated disk cannot run.
pub(crate) fn unsupported(operation: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("spindle-os: `{operation}` is not supported on a simulated disk (spindle-sim)"),
    )
}

/// An open file: the system's, or one on a simulated disk.
pub(crate) enum Handle {
    System(std::fs::File),
    Virtual(Arc<dyn VirtualFile>),
}

/// Checks `options` as the system does (an `InvalidInput` error for a
/// combination it refuses).
pub(crate) fn check(options: VirtualOpenOptions) -> io::Result<VirtualOpenOptions> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
    let writes = options.write || options.append;
    if !options.read && !writes {
        return Err(invalid("open: neither read, write nor append is set"));
    }
    if options.truncate && (!options.write || options.append) {
        return Err(invalid("open: truncate needs write, without append"));
    }
    if (options.create || options.create_new) && !writes {
        return Err(invalid("open: create needs write or append"));
    }
    Ok(options)
}

/// Reads from `file`'s cursor until `max` bytes or the end of the file.
pub(crate) fn read_up_to(file: &dyn VirtualFile, max: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(max.min(1 << 20));
    while bytes.len() < max {
        let chunk = file.read(max - bytes.len())?;
        if chunk.is_empty() {
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Writes all of `data` at `file`'s cursor.
pub(crate) fn write_all(file: &dyn VirtualFile, data: &[u8]) -> io::Result<()> {
    let mut rest = data;
    while !rest.is_empty() {
        match file.write(rest)? {
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            n => rest = &rest[n..],
        }
    }
    Ok(())
}
