//! Files and directories as `IO` values and streams.
//!
//! Paths are taken as `impl AsRef<Path>` and copied: a program is a value
//! that may run later, any number of times. Every operation runs one
//! blocking call (the crate's front page says where; reads of data in
//! the page cache are made on the fiber's thread), and fails with an
//! `io::Error` of the system's kind whose payload is a [`PathError`]
//! naming the operation and the path. An open file's `write_all` and
//! `writes` are *write-behind*: they hand their bytes to the file's
//! writer and go on, and the next operation on the file, its `flush` or
//! its close waits for them and reports a failed write, once (see
//! [`File`]).
//!
//! * Whole files: [`read`], [`read_to_string`], [`write`](write()), [`append`].
//! * Open files: [`File`] (opened with [`File::open`], [`File::create`] or
//!   [`OpenOptions`]) is a `Resource`: the file is closed exactly once,
//!   when the resource's use ends, however it ends, after the writes
//!   behind its use are written (a failed one fails the release).
//! * The tree: [`metadata`], [`symlink_metadata`], [`exists`],
//!   [`create_dir`], [`create_dir_all`], [`remove_file`], [`remove_dir`],
//!   [`remove_dir_all`], [`rename`], [`copy`], [`hard_link`], [`symlink`]
//!   (Unix), [`read_link`], [`canonicalize`], [`set_permissions`].
//! * Streams: [`reads`] (a file's bytes in chunks), [`lines`],
//!   [`writes`] (a pipe that writes a byte stream to a file),
//!   [`read_dir`] and [`walk`] (a directory, a whole tree), [`tail`] (a
//!   growing file, for ever).
//! * Temporary files and directories: [`temp_file`], [`temp_dir`] (and
//!   `_in` variants), removed when their `Resource` ends.
//!
//! # On a simulated disk
//!
//! Inside a simulation (spindle-sim), whose I/O driver offers a
//! [`VirtualDisk`], every operation
//! here runs on that disk instead of the system's files: the fiber looks
//! the disk up when the operation runs, and no system file is touched.
//! The semantics are `std::fs`'s, and errors name the operation and path
//! as here. On such a disk `read_dir` lists a directory's entries in the
//! order of their names, the Unix mode of [`OpenOptions`] is ignored, and
//! these fail with an error of kind `Unsupported` that names the
//! simulation: [`metadata`], [`symlink_metadata`] and [`File::metadata`]
//! (a `std::fs::Metadata` cannot be made without a system file: use
//! [`exists`], or `File::seek` to the end for a length), [`symlink`],
//! [`read_link`], [`canonicalize`], [`set_permissions`], [`temp_dir`] and
//! [`temp_file`] (and their `_in` forms). Outside a simulation the only
//! cost is one `Option` check per operation.
//!
//! Design credits: tokio's `tokio::fs` (every call on the blocking pool;
//! `tokio::fs::File`'s write-behind: a write returns once handed to a
//! blocking task, the next operation waits for it and reports its error)
//! and fs2-io's `Files` (files as streams and resources); the path in the
//! error follows the `fs-err` crate's idea. No code is copied.

mod behind;
mod cached;
mod dir;
mod error;
mod file;
mod simulated;
mod tail;
mod temp;

use std::io;
use std::path::{Path, PathBuf};

use spindle_core::IO;
use spindle_core::untraced::{Op, Untraced as _};
use spindle_net::driver::VirtualDisk;
use spindle_stream::{InvalidArgument, Stream, text};

pub use dir::{DirEntry, read_dir, walk};
pub use error::PathError;
pub use file::{File, OpenOptions, open_files};
pub use std::fs::{FileType, Metadata, Permissions};
pub use tail::tail;
pub use temp::{TempDir, temp_dir, temp_dir_in, temp_file, temp_file_in};

pub(crate) use error::{at, at_both};

/// The read size of [`read`]'s and [`lines`]' streams: 64 KiB.
pub const DEFAULT_CHUNK: usize = 64 * 1024;

/// The operations as traces name them: one event per operation, at its
/// caller's site.
pub(crate) mod ops {
    use spindle_core::untraced::Op;

    macro_rules! ops {
        ($($name:ident = $text:literal;)*) => {
            $(pub(crate) static $name: Op = Op::new($text);)*
        };
    }

    ops! {
        READ = "fs::read";
        READ_TO_STRING = "fs::read_to_string";
        WRITE = "fs::write";
        APPEND = "fs::append";
        METADATA = "fs::metadata";
        SYMLINK_METADATA = "fs::symlink_metadata";
        EXISTS = "fs::exists";
        CREATE_DIR = "fs::create_dir";
        CREATE_DIR_ALL = "fs::create_dir_all";
        REMOVE_FILE = "fs::remove_file";
        REMOVE_DIR = "fs::remove_dir";
        REMOVE_DIR_ALL = "fs::remove_dir_all";
        RENAME = "fs::rename";
        COPY = "fs::copy";
        HARD_LINK = "fs::hard_link";
        SYMLINK = "fs::symlink";
        READ_LINK = "fs::read_link";
        CANONICALIZE = "fs::canonicalize";
        SET_PERMISSIONS = "fs::set_permissions";
        OPEN = "File::open";
        CLOSE = "File::close";
        FILE_READ = "File::read";
        FILE_READ_TO_END = "File::read_to_end";
        FILE_READ_TO_STRING = "File::read_to_string";
        FILE_READ_AT = "File::read_at";
        FILE_WRITE = "File::write";
        FILE_WRITE_ALL = "File::write_all";
        FILE_WRITE_ALL_AT = "File::write_all_at";
        FILE_SEEK = "File::seek";
        FILE_METADATA = "File::metadata";
        FILE_SET_LEN = "File::set_len";
        FILE_SYNC_ALL = "File::sync_all";
        FILE_SYNC_DATA = "File::sync_data";
        FILE_FLUSH = "File::flush";
        READ_DIR = "fs::read_dir";
        TEMP_DIR = "fs::temp_dir";
        TEMP_FILE = "fs::temp_file";
    }
}

/// One blocking call on one path: its error names `operation` and `path`.
/// `f` makes the system call; `simulated` the call on the fiber's
/// simulated disk, when its driver has one (looked up on the fiber).
#[track_caller]
fn on_path<A, F, V>(
    op: &'static Op,
    operation: &'static str,
    path: &Path,
    f: F,
    simulated: V,
) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce(&Path) -> io::Result<A> + Send + 'static,
    V: FnOnce(&dyn VirtualDisk, &Path) -> io::Result<A> + Send + 'static,
{
    on_path_with(
        op,
        operation,
        path,
        (),
        move |p, ()| f(p),
        move |d, p, ()| simulated(d, p),
    )
}

/// [`on_path`] with a value (the bytes to write) handed to the call that
/// runs.
#[track_caller]
fn on_path_with<A, T, F, V>(
    op: &'static Op,
    operation: &'static str,
    path: &Path,
    value: T,
    f: F,
    simulated: V,
) -> IO<A, io::Error>
where
    A: Send + 'static,
    T: Send + 'static,
    F: FnOnce(&Path, T) -> io::Result<A> + Send + 'static,
    V: FnOnce(&dyn VirtualDisk, &Path, T) -> io::Result<A> + Send + 'static,
{
    let path = path.to_path_buf();
    IO::defer_untraced(move || match simulated::disk() {
        None => {
            IO::try_blocking_untraced(move || f(&path, value).map_err(|e| at(operation, &path, e)))
        }
        Some(disk) => IO::try_blocking_untraced(move || {
            simulated(&*disk, &path, value).map_err(|e| at(operation, &path, e))
        }),
    })
    .traced_as(op)
}

/// One blocking call on two paths: its error names both (`simulated` as
/// for [`on_path`]).
#[track_caller]
fn on_paths<A, F, V>(
    op: &'static Op,
    operation: &'static str,
    from: &Path,
    to: &Path,
    f: F,
    simulated: V,
) -> IO<A, io::Error>
where
    A: Send + 'static,
    F: FnOnce(&Path, &Path) -> io::Result<A> + Send + 'static,
    V: FnOnce(&dyn VirtualDisk, &Path, &Path) -> io::Result<A> + Send + 'static,
{
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    IO::defer_untraced(move || match simulated::disk() {
        None => IO::try_blocking_untraced(move || {
            f(&from, &to).map_err(|e| at_both(operation, &from, &to, e))
        }),
        Some(disk) => IO::try_blocking_untraced(move || {
            simulated(&*disk, &from, &to).map_err(|e| at_both(operation, &from, &to, e))
        }),
    })
    .traced_as(op)
}

/// The simulated form of an operation a simulated disk cannot run.
fn not_simulated<A>(
    operation: &'static str,
) -> impl FnOnce(&dyn VirtualDisk, &Path) -> io::Result<A> {
    move |_, _| Err(simulated::unsupported(operation))
}

/// The whole contents of the file at `path`. On Linux a file whose path
/// and data are in the kernel's caches is read on the fiber's own thread
/// (`RESOLVE_CACHED`, `RWF_NOWAIT`: the call never waits for the disk);
/// any other is read on the blocking pool.
#[track_caller]
pub fn read(path: impl AsRef<Path>) -> IO<Vec<u8>, io::Error> {
    read_whole(path.as_ref().to_path_buf()).traced_as(&ops::READ)
}

/// [`read`] without a trace event.
fn read_whole(path: PathBuf) -> IO<Vec<u8>, io::Error> {
    IO::defer_untraced(move || {
        if let Some(disk) = simulated::disk() {
            return IO::try_blocking_untraced(move || {
                disk.read(&path).map_err(|e| at("read", &path, e))
            });
        }
        read_system(path)
    })
}

/// [`read_whole`] on the system's files.
fn read_system(path: PathBuf) -> IO<Vec<u8>, io::Error> {
    match cached::read_whole(&path) {
        cached::Cached::Done(bytes) => IO::pure(bytes),
        cached::Cached::Opened(file, bytes) => IO::try_blocking_untraced(move || {
            cached::finish(file, bytes).map_err(|e| at("read", &path, e))
        }),
        cached::Cached::Uncached => IO::try_blocking_untraced(move || {
            std::fs::read(&path).map_err(|e| at("read", &path, e))
        }),
    }
}

/// The whole contents of the file at `path`, as text (an error of kind
/// `InvalidData` if it is not UTF-8); read as [`read`] reads.
#[track_caller]
pub fn read_to_string(path: impl AsRef<Path>) -> IO<String, io::Error> {
    let path = path.as_ref().to_path_buf();
    read_whole(path.clone())
        .flat_map_untraced(move |bytes| match String::from_utf8(bytes) {
            Ok(text) => IO::pure(text),
            Err(_) => IO::raise_error_untraced(at(
                "read",
                &path,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                ),
            )),
        })
        .traced_as(&ops::READ_TO_STRING)
}

/// Writes `contents` as the whole contents of the file at `path`, creating
/// it or replacing what it held.
#[track_caller]
pub fn write(path: impl AsRef<Path>, contents: impl Into<Vec<u8>>) -> IO<(), io::Error> {
    let contents = contents.into();
    on_path_with(
        &ops::WRITE,
        "write",
        path.as_ref(),
        contents,
        |p, contents| std::fs::write(p, contents),
        |d, p, contents| d.write(p, &contents),
    )
}

/// Appends `contents` to the file at `path`, creating it if it does not
/// exist.
#[track_caller]
pub fn append(path: impl AsRef<Path>, contents: impl Into<Vec<u8>>) -> IO<(), io::Error> {
    let contents = contents.into();
    on_path_with(
        &ops::APPEND,
        "append",
        path.as_ref(),
        contents,
        |p, contents| {
            use std::io::Write as _;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)?
                .write_all(&contents)
        },
        |d, p, contents| d.append(p, &contents),
    )
}

/// The metadata of `path` (a symbolic link is followed).
#[track_caller]
pub fn metadata(path: impl AsRef<Path>) -> IO<Metadata, io::Error> {
    on_path(
        &ops::METADATA,
        "metadata",
        path.as_ref(),
        |p| std::fs::metadata(p),
        not_simulated("metadata"),
    )
}

/// The metadata of `path` itself (a symbolic link is not followed).
#[track_caller]
pub fn symlink_metadata(path: impl AsRef<Path>) -> IO<Metadata, io::Error> {
    on_path(
        &ops::SYMLINK_METADATA,
        "symlink_metadata",
        path.as_ref(),
        |p| std::fs::symlink_metadata(p),
        not_simulated("symlink_metadata"),
    )
}

/// Whether `path` exists (following symbolic links); an error if that
/// cannot be told (a permission denied on the way, for instance), where
/// `Path::exists` would say `false`.
#[track_caller]
pub fn exists(path: impl AsRef<Path>) -> IO<bool, io::Error> {
    on_path(
        &ops::EXISTS,
        "exists",
        path.as_ref(),
        |p| p.try_exists(),
        |d, p| match d.metadata(p) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        },
    )
}

/// Creates the directory `path` (its parent must exist).
#[track_caller]
pub fn create_dir(path: impl AsRef<Path>) -> IO<(), io::Error> {
    on_path(
        &ops::CREATE_DIR,
        "create_dir",
        path.as_ref(),
        |p| std::fs::create_dir(p),
        |d, p| d.create_dir(p),
    )
}

/// Creates the directory `path` and every missing parent; nothing to do
/// if it exists.
#[track_caller]
pub fn create_dir_all(path: impl AsRef<Path>) -> IO<(), io::Error> {
    on_path(
        &ops::CREATE_DIR_ALL,
        "create_dir_all",
        path.as_ref(),
        |p| std::fs::create_dir_all(p),
        |d, p| d.create_dir_all(p),
    )
}

/// Removes the file (or symbolic link) `path`.
#[track_caller]
pub fn remove_file(path: impl AsRef<Path>) -> IO<(), io::Error> {
    on_path(
        &ops::REMOVE_FILE,
        "remove_file",
        path.as_ref(),
        |p| std::fs::remove_file(p),
        |d, p| d.remove_file(p),
    )
}

/// Removes the empty directory `path`.
#[track_caller]
pub fn remove_dir(path: impl AsRef<Path>) -> IO<(), io::Error> {
    on_path(
        &ops::REMOVE_DIR,
        "remove_dir",
        path.as_ref(),
        |p| std::fs::remove_dir(p),
        |d, p| d.remove_dir(p),
    )
}

/// Removes the directory `path` and everything in it (symbolic links are
/// removed, not followed).
#[track_caller]
pub fn remove_dir_all(path: impl AsRef<Path>) -> IO<(), io::Error> {
    on_path(
        &ops::REMOVE_DIR_ALL,
        "remove_dir_all",
        path.as_ref(),
        |p| std::fs::remove_dir_all(p),
        |d, p| d.remove_dir_all(p),
    )
}

/// Renames `from` to `to` (replacing a file at `to`; within one file
/// system).
#[track_caller]
pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> IO<(), io::Error> {
    on_paths(
        &ops::RENAME,
        "rename",
        from.as_ref(),
        to.as_ref(),
        |f, t| std::fs::rename(f, t),
        |d, f, t| d.rename(f, t),
    )
}

/// Copies the contents and permissions of the file `from` to `to`
/// (created or replaced); the number of bytes copied.
#[track_caller]
pub fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> IO<u64, io::Error> {
    on_paths(
        &ops::COPY,
        "copy",
        from.as_ref(),
        to.as_ref(),
        |f, t| std::fs::copy(f, t),
        |d, f, t| d.copy(f, t),
    )
}

/// Makes `link` a new name (a hard link) of the file `original`.
#[track_caller]
pub fn hard_link(original: impl AsRef<Path>, link: impl AsRef<Path>) -> IO<(), io::Error> {
    on_paths(
        &ops::HARD_LINK,
        "hard_link",
        original.as_ref(),
        link.as_ref(),
        |o, l| std::fs::hard_link(o, l),
        |d, o, l| d.hard_link(o, l),
    )
}

/// Makes `link` a symbolic link to `original` (Unix).
#[cfg(unix)]
#[track_caller]
pub fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> IO<(), io::Error> {
    on_paths(
        &ops::SYMLINK,
        "symlink",
        original.as_ref(),
        link.as_ref(),
        |o, l| std::os::unix::fs::symlink(o, l),
        |_, _, _| Err(simulated::unsupported("symlink")),
    )
}

/// What the symbolic link `path` points to.
#[track_caller]
pub fn read_link(path: impl AsRef<Path>) -> IO<PathBuf, io::Error> {
    on_path(
        &ops::READ_LINK,
        "read_link",
        path.as_ref(),
        |p| std::fs::read_link(p),
        not_simulated("read_link"),
    )
}

/// The absolute form of `path`, every symbolic link resolved.
#[track_caller]
pub fn canonicalize(path: impl AsRef<Path>) -> IO<PathBuf, io::Error> {
    on_path(
        &ops::CANONICALIZE,
        "canonicalize",
        path.as_ref(),
        |p| std::fs::canonicalize(p),
        not_simulated("canonicalize"),
    )
}

/// Sets the permissions of `path`.
#[track_caller]
pub fn set_permissions(path: impl AsRef<Path>, permissions: Permissions) -> IO<(), io::Error> {
    on_path(
        &ops::SET_PERMISSIONS,
        "set_permissions",
        path.as_ref(),
        move |p| std::fs::set_permissions(p, permissions),
        not_simulated("set_permissions"),
    )
}

/// The bytes of the file at `path`, a chunk per read of at most
/// `chunk_size` bytes (above 0; [`DEFAULT_CHUNK`] is a good size). The file
/// is opened when the stream is first pulled and closed exactly once when
/// the stream ends, fails, is canceled, or is stopped early by a
/// downstream `take`. A chunk the page cache holds is read on the
/// fiber's thread (Linux); when the disk must be waited for, one blocking
/// call reads several chunks ahead (one at first, then twice as many each
/// call, up to 1 MiB), so that a file off the disk costs a trip to the
/// blocking pool per megabyte, not per chunk.
pub fn reads(
    path: impl AsRef<Path>,
    chunk_size: usize,
) -> Result<Stream<u8, io::Error>, InvalidArgument> {
    let chunk_size = InvalidArgument::above_zero("fs::reads", "a chunk size above 0", chunk_size)?;
    let path = path.as_ref().to_path_buf();
    Ok(Stream::resource(File::open(path)).flat_map(move |file| file.reads_ahead(chunk_size)))
}

/// The lines of the UTF-8 text file at `path` (`\n` or `\r\n` ends a
/// line; a last line without one is emitted too). A line longer than
/// `max_line` bytes fails the stream, as invalid UTF-8 does, with an error
/// that names the limit or the byte offset (`spindle_stream::text`). The
/// file is closed as [`reads`] closes it.
pub fn lines(
    path: impl AsRef<Path>,
    max_line: usize,
) -> Result<Stream<String, io::Error>, InvalidArgument> {
    let bytes = reads(path, DEFAULT_CHUNK)?;
    let max_line = InvalidArgument::above_zero("fs::lines", "a line limit above 0", max_line)?;
    Ok(text::lines(text::utf8_decode(bytes), max_line))
}

/// A pipe: writes every chunk of `bytes` to the file at `path` (created,
/// or truncated if it exists), behind the stream (as
/// [`File::writes`]), emitting a unit per chunk handed over. The file is
/// opened when the stream is first pulled and closed exactly once when
/// the stream ends, however it ends; the close waits for the chunks
/// still being written, so the stream has ended only once all are
/// written, and it fails with the error of a write that failed.
pub fn writes(path: impl AsRef<Path>, bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
    let path = path.as_ref().to_path_buf();
    // The resource emits its file once: the byte stream goes to that one.
    let mut bytes = Some(bytes);
    Stream::resource(File::create(path))
        .flat_map(move |file| file.writes(bytes.take().unwrap_or_else(Stream::empty)))
}
