//! [`File`]: an open file as a `Resource`, and [`OpenOptions`].

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;
use spindle_core::untraced::{Op, Untraced as _};
use spindle_core::{IO, Resource};
use spindle_stream::{Chunk, InvalidArgument, Stream};

use super::behind::{self, Behind};
use super::simulated::{self, Handle};
use super::{Metadata, at, ops};

/// An open file: a cheap handle (clones share the file and its cursor),
/// made by [`File::open`], [`File::create`] or [`OpenOptions::open`] as a
/// `Resource` that closes the file exactly once when it ends, after its
/// use, on an error or on cancellation. A clone kept past that end fails
/// every operation with an error of kind `Other` (the file is closed),
/// never reaches another file that reused the descriptor.
///
/// Operations on one handle run one at a time in the order they run, and
/// `read`, `write` and `seek` move the shared cursor, as with a
/// `std::fs::File`; fibers that read one file at once use
/// [`read_at`](File::read_at) (Unix: no cursor) or a file each.
///
/// # Writes behind the caller
///
/// [`write_all`](File::write_all) and the pipe [`writes`](File::writes)
/// are *write-behind*, as `tokio::fs::File`'s writes: they hand their
/// bytes to the file's writer and complete at once, and the writer (one
/// blocking call on the pool at a time per file) writes them, in the
/// order they were handed over, while the fiber goes on. Up to a
/// megabyte may wait behind the chunk being written; a write that finds
/// no room for its chunk (never split) waits until the writer has
/// brought the queue down to half a megabyte and the chunk fits, or has
/// emptied it (a chunk larger than the queue).
///
/// * Every other operation on the file (from any handle: `read`,
///   `read_to_end`, `read_to_string`, `read_at`, `write`,
///   `write_all_at`, `seek`, `metadata`, `set_len`,
///   `sync_all`, `sync_data`, `reads`, [`flush`](File::flush),
///   [`close`](File::close)) first waits until every write handed over
///   is written, so it sees them, as with a `std::fs::File`.
/// * A write that fails is reported once, with its error (kind and
///   [`PathError`](super::PathError) naming `write` and the path, as
///   every error here), to the first operation that waits for it, or
///   to the next `write_all`, or at `flush`, or at the close; the chunks
///   queued behind it are not written. `flush` is the call that waits
///   and reports and does nothing else.
/// * The file's `Resource` ends with its close, which waits for the writes
///   (masked: always, also after an error or a cancellation of the use),
///   closes the file, and then fails with the error of a write that
///   failed and was not reported yet. As with any release that fails,
///   that error is the result of the `use_with` whose use succeeded; if
///   the use failed or was canceled, it cannot replace that outcome and
///   is *suppressed* (io-core keeps it with the fiber's outcome, as every
///   release's error then; `FiberHandle::suppressed_errors` for error
///   types that are `Clone`, which `io::Error` is not): end a use with
///   [`flush`](File::flush) to have it as the use's own error. So no byte
///   handed over is lost when the resource ends, and a failure to write
///   it is not swallowed: [`fs::writes`](super::writes) fails with it.
/// * Cancellation: a fiber canceled while it waits (for room, or for the
///   writes before another operation) leaves the writes running; the
///   next operation and the close still wait for them. A canceled
///   `write_all` has handed over all of its bytes (then they are written)
///   or none.
/// * [`write`](File::write), which answers how many bytes the system
///   call took, is not behind: it waits for the writes behind, then
///   writes, and returns the count.
///
/// ```
/// use std::io::SeekFrom;
///
/// use spindle_effect::fs::{self, File};
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let rt = Runtime::new()?;
/// let program = fs::temp_dir().use_with(|dir| {
///     let path = dir.path().join("numbers");
///     let written = File::create(&path).use_with(|file| file.write_all("0123456789"));
///     let read = File::open(&path).use_with(|file| {
///         file.seek(SeekFrom::Start(4)).product_r(file.read(3))
///     });
///     written.product_r(read)
/// });
/// assert_eq!(rt.block_on(program)?.succeeded(), Some(b"456".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct File {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    /// `None` once closed. Operations hold the read side for their call;
    /// the close takes the write side, so it waits for a call in flight
    /// and no call starts on a closed (or reused) descriptor.
    pub(crate) file: RwLock<Option<Handle>>,
    /// The writes behind the caller (`write_all`, `writes`).
    pub(crate) behind: Behind,
}

/// Files open through this module, in this process (see [`open_files`]).
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// How many files this module holds open in this process right now: one
/// per [`File`] made (opened, `from_std`, temporary) and not yet closed.
/// A leak check for tests and metrics: it is back where it started once
/// every file's `Resource` has ended.
pub fn open_files() -> usize {
    OPEN.load(Ordering::Acquire)
}

impl Inner {
    /// Closes the file if it is open: the one place a file is closed.
    fn close(&self) {
        let file = self.file.write().take();
        if let Some(file) = file {
            drop(file);
            OPEN.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Inner {
    /// The last handle of a file that was never closed (made by `from_std`
    /// and dropped, or kept past a leak) closes it. Its writes behind are
    /// done by then (the writer holds a handle), but the error of one that
    /// failed and was not reported is dropped with it: call `close` or
    /// `flush` to see it.
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("path", &self.inner.path)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// How to open a file: std's `OpenOptions` as a value, whose
/// [`open`](OpenOptions::open) is a `Resource`. A combination the system
/// refuses (`truncate` without `write`, nothing to read or write) is the
/// open's error, of kind `InvalidInput`, naming the path.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    #[cfg(unix)]
    mode: Option<u32>,
}

impl OpenOptions {
    /// Nothing set: set at least `read`, `write` or `append`.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut Self {
        self.read = read;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut Self {
        self.write = write;
        self
    }

    /// Every write goes to the end of the file.
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.append = append;
        self
    }

    /// Cut an existing file to length 0 (with `write`).
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.truncate = truncate;
        self
    }

    /// Create the file if it does not exist (with `write` or `append`).
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.create = create;
        self
    }

    /// Create the file, failing (kind `AlreadyExists`) if it exists.
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.create_new = create_new;
        self
    }

    /// The permission bits of a file this open creates (Unix; before the
    /// process's umask).
    #[cfg(unix)]
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = Some(mode);
        self
    }

    fn std(&self) -> std::fs::OpenOptions {
        let mut options = std::fs::OpenOptions::new();
        options
            .read(self.read)
            .write(self.write)
            .append(self.append)
            .truncate(self.truncate)
            .create(self.create)
            .create_new(self.create_new);
        #[cfg(unix)]
        if let Some(mode) = self.mode {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(mode);
        }
        options
    }

    /// These options for a simulated disk (the Unix mode is ignored).
    fn simulated(&self) -> spindle_net::driver::VirtualOpenOptions {
        spindle_net::driver::VirtualOpenOptions {
            read: self.read,
            write: self.write,
            append: self.append,
            truncate: self.truncate,
            create: self.create,
            create_new: self.create_new,
        }
    }

    /// Opens the file at `path` with these options, as a `Resource` that
    /// closes it exactly once when it ends.
    #[track_caller]
    pub fn open(&self, path: impl AsRef<Path>) -> Resource<File, io::Error> {
        let options = self.clone();
        let path = path.as_ref().to_path_buf();
        let open = IO::defer_untraced(move || match simulated::disk() {
            None => IO::try_blocking_untraced(move || match options.std().open(&path) {
                Ok(file) => Ok(File::from_std(file, path)),
                Err(e) => Err(at("open", &path, e)),
            }),
            Some(disk) => IO::try_blocking_untraced(move || {
                match simulated::check(options.simulated()).and_then(|o| disk.open(&path, o)) {
                    Ok(file) => Ok(File::from_handle(Handle::Virtual(file), path)),
                    Err(e) => Err(at("open", &path, e)),
                }
            }),
        })
        .traced_as(&ops::OPEN);
        Resource::make(open, |file: File| file.close())
    }
}

impl File {
    /// Opens the file at `path` for reading.
    #[track_caller]
    pub fn open(path: impl AsRef<Path>) -> Resource<File, io::Error> {
        OpenOptions::new().read(true).open(path)
    }

    /// Opens the file at `path` for writing, creating it or truncating it.
    #[track_caller]
    pub fn create(path: impl AsRef<Path>) -> Resource<File, io::Error> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// A handle over an open `std::fs::File` (named `path` in errors). It
    /// is closed by [`close`](File::close), or when the last handle goes
    /// (see `close` and [`flush`](File::flush) for the errors of writes
    /// behind).
    pub fn from_std(file: std::fs::File, path: impl Into<PathBuf>) -> File {
        File::from_handle(Handle::System(file), path.into())
    }

    /// A handle over an open system or simulated file.
    pub(crate) fn from_handle(file: Handle, path: PathBuf) -> File {
        OPEN.fetch_add(1, Ordering::AcqRel);
        File {
            inner: Arc::new(Inner {
                path,
                file: RwLock::new(Some(file)),
                behind: Behind::default(),
            }),
        }
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether it is closed (its `Resource` ended, or `close` ran).
    pub fn is_closed(&self) -> bool {
        self.inner.file.read().is_none()
    }

    /// Closes the file now (the `Resource`'s release does this). Once: a
    /// second close does nothing. It first waits for the writes behind
    /// (see [`File`]), then closes the file, and then fails with the error
    /// of a write behind that failed and was not reported yet (the file is
    /// closed all the same). It waits for a call in flight on another
    /// handle; every call after it fails.
    ///
    /// The wait for the writes is cancelable (a canceled close closes
    /// nothing, and the writes go on); the `Resource`'s release runs
    /// masked, so it always waits.
    #[track_caller]
    pub fn close(&self) -> IO<(), io::Error> {
        close(self.inner.clone()).traced_as(&ops::CLOSE)
    }

    /// Waits for the writes behind (see [`File`]) and reports the error of
    /// one that failed, once: nothing else. Every other operation begins
    /// with this wait too; `flush` is the one that does nothing more, as
    /// `tokio::fs::File`'s. The wait is cancelable (the writes go on).
    ///
    /// ```
    /// use spindle_effect::fs::{self, File, PathError};
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::wstp::Runtime;
    ///
    /// let rt = Runtime::new()?;
    /// let program = fs::temp_dir().use_with(|dir| {
    ///     let path = dir.path().join("read-only");
    ///     // Opened for reading: the write behind fails, after `write_all`
    ///     // has returned; `flush` reports it, once.
    ///     fs::write(&path, "kept").product_r(File::open(&path).use_with(|file| {
    ///         let again = file.clone();
    ///         file.write_all("lost")
    ///             .product_r(file.flush().attempt())
    ///             .flat_map(move |first| again.flush().map(move |()| first))
    ///     }))
    /// });
    /// let first = rt.block_on(program)?.succeeded().expect("the program runs");
    /// let error = first.expect_err("the failed write");
    /// assert_eq!(PathError::of(&error).map(PathError::operation), Some("write"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn flush(&self) -> IO<(), io::Error> {
        behind::after_writes(self.inner.clone(), IO::unit).traced_as(&ops::FILE_FLUSH)
    }

    /// Runs `f` on the open file, on the blocking pool, traced as `op`;
    /// its error (or the closed file's) names `operation` and the path.
    #[track_caller]
    fn with<A, F>(&self, op: &'static Op, operation: &'static str, f: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnOnce(&Handle) -> io::Result<A> + Send + 'static,
    {
        self.with_untraced(operation, f).traced_as(op)
    }

    /// At most `max` bytes from the cursor on: fewer at the end of the
    /// file, or when only some of them are in memory (the next read gets
    /// the rest; as a system `read`); none at the end of the file.
    ///
    /// On Linux the read is first tried on the fiber's own thread without
    /// waiting for the disk (`preadv2` with `RWF_NOWAIT`: what the page
    /// cache holds); only a read that would wait goes to the blocking pool
    /// (see the module doc).
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        self.read_untraced(max).traced_as(&ops::FILE_READ)
    }

    /// [`read`](File::read) without a trace event (a stream's steps).
    fn read_untraced(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        let file = self.clone();
        behind::after_writes(self.inner.clone(), move || {
            match file.read_cached(None, max) {
                Ok(Some(bytes)) => IO::pure(bytes),
                Ok(None) => file.with_untraced("read", move |f| f.read_up_to(max)),
                Err(e) => IO::raise_error_untraced(e),
            }
        })
    }

    /// A read that never waits for the disk, on this thread: `Some(bytes)`
    /// if the page cache held them (at most `max`; empty at the end of
    /// the file), `None` if it would have to wait (or the system cannot
    /// tell: an older kernel, a file system without `RWF_NOWAIT`, a closed
    /// file's error is left to the blocking call). At `offset`, or at the
    /// cursor (moving it) for `None`.
    #[cfg(target_os = "linux")]
    fn read_cached(&self, offset: Option<u64>, max: usize) -> io::Result<Option<Vec<u8>>> {
        use rustix::io::{Errno, ReadWriteFlags, preadv2};
        let guard = self.inner.file.read();
        let Some(Handle::System(file)) = &*guard else {
            return Ok(None);
        };
        let mut bytes = vec![0; max];
        // `u64::MAX` (-1) is the cursor, used and moved.
        let at = offset.unwrap_or(u64::MAX);
        loop {
            let read = preadv2(
                file,
                &mut [io::IoSliceMut::new(&mut bytes)],
                at,
                ReadWriteFlags::NOWAIT,
            );
            return match read {
                Ok(n) => {
                    bytes.truncate(n);
                    Ok(Some(bytes))
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => Ok(None),
                Err(e) => Err(at_error(&self.inner.path, e.into())),
            };
        }
    }

    /// Elsewhere every read goes to the blocking pool.
    #[cfg(not(target_os = "linux"))]
    fn read_cached(&self, _offset: Option<u64>, _max: usize) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Everything from the cursor to the end of the file.
    #[track_caller]
    pub fn read_to_end(&self) -> IO<Vec<u8>, io::Error> {
        self.with(&ops::FILE_READ_TO_END, "read", Handle::read_to_end)
    }

    /// Everything from the cursor to the end of the file, as text (kind
    /// `InvalidData` if it is not UTF-8).
    #[track_caller]
    pub fn read_to_string(&self) -> IO<String, io::Error> {
        self.with(&ops::FILE_READ_TO_STRING, "read", |file| {
            String::from_utf8(file.read_to_end()?).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                )
            })
        })
    }

    /// At most `max` bytes from `offset` on, without moving the cursor
    /// (fibers can read one file at once this way).
    #[cfg(unix)]
    #[track_caller]
    pub fn read_at(&self, offset: u64, max: usize) -> IO<Vec<u8>, io::Error> {
        let file = self.clone();
        behind::after_writes(self.inner.clone(), move || {
            match file.read_cached(Some(offset), max) {
                // All of it in memory, or the end of the file in it.
                Ok(Some(bytes)) if bytes.len() == max || bytes.is_empty() => IO::pure(bytes),
                Ok(_) => file.read_at_blocking(offset, max),
                Err(e) => IO::raise_error_untraced(e),
            }
        })
        .traced_as(&ops::FILE_READ_AT)
    }

    /// [`read_at`](File::read_at) on the blocking pool, filling `max`
    /// bytes unless the file ends.
    #[cfg(unix)]
    fn read_at_blocking(&self, offset: u64, max: usize) -> IO<Vec<u8>, io::Error> {
        self.with_untraced("read_at", move |file| {
            use std::os::unix::fs::FileExt as _;
            let file = match file {
                Handle::System(file) => file,
                Handle::Virtual(file) => return file.read_at(offset, max),
            };
            let mut bytes = vec![0; max];
            let mut filled = 0;
            while filled < max {
                match file.read_at(&mut bytes[filled..], offset + filled as u64) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            bytes.truncate(filled);
            Ok(bytes)
        })
    }

    /// Writes some of `bytes` at the cursor: how many. Not behind the
    /// caller (its answer is the count the system call gave): it waits
    /// for the writes behind first, then writes and returns.
    #[track_caller]
    pub fn write(&self, bytes: impl Into<Vec<u8>>) -> IO<usize, io::Error> {
        let bytes = bytes.into();
        self.with(&ops::FILE_WRITE, "write", move |file| match file {
            Handle::System(file) => (&*file).write(&bytes),
            Handle::Virtual(file) => file.write(&bytes),
        })
    }

    /// Writes all of `bytes` at the cursor, behind the caller: it
    /// completes once the bytes are handed to the file's writer, before
    /// they are written (see [`File`]: the next operation on the file
    /// waits for them, and the error of a failed write shows there, at
    /// [`flush`](File::flush) or at the close). It waits only when the
    /// queue behind the writer has no room for `bytes` (about a megabyte
    /// is still to be written), and fails at once with the
    /// error of an earlier write behind that failed (reporting it; these
    /// bytes are then not written).
    ///
    /// Canceled, it has either handed over nothing (canceled while it
    /// waited for room) or all of `bytes`, which are then written.
    #[track_caller]
    pub fn write_all(&self, bytes: impl Into<Vec<u8>>) -> IO<(), io::Error> {
        behind::write_behind(self.inner.clone(), bytes.into()).traced_as(&ops::FILE_WRITE_ALL)
    }

    /// Writes all of `bytes` at `offset`, without moving the cursor.
    #[cfg(unix)]
    #[track_caller]
    pub fn write_all_at(&self, offset: u64, bytes: impl Into<Vec<u8>>) -> IO<(), io::Error> {
        let bytes = bytes.into();
        self.with(&ops::FILE_WRITE_ALL_AT, "write_at", move |file| {
            use std::os::unix::fs::FileExt as _;
            match file {
                Handle::System(file) => file.write_all_at(&bytes, offset),
                Handle::Virtual(file) => file.write_all_at(offset, &bytes),
            }
        })
    }

    /// Moves the cursor; its new offset from the start.
    #[track_caller]
    pub fn seek(&self, position: SeekFrom) -> IO<u64, io::Error> {
        self.with(&ops::FILE_SEEK, "seek", move |file| file.seek(position))
    }

    /// The file's metadata (not on a simulated disk: an `Unsupported`
    /// error; `seek(SeekFrom::End(0))` tells the length there).
    #[track_caller]
    pub fn metadata(&self) -> IO<Metadata, io::Error> {
        self.with(&ops::FILE_METADATA, "metadata", |file| match file {
            Handle::System(file) => file.metadata(),
            Handle::Virtual(_) => Err(simulated::unsupported("File::metadata")),
        })
    }

    /// Cuts or extends the file to `len` bytes (extended with zeros).
    #[track_caller]
    pub fn set_len(&self, len: u64) -> IO<(), io::Error> {
        self.with(&ops::FILE_SET_LEN, "set_len", move |file| match file {
            Handle::System(file) => file.set_len(len),
            Handle::Virtual(file) => file.set_len(len),
        })
    }

    /// Flushes the file's data and metadata to the device (on a simulated
    /// disk: makes its contents survive a crash of the host).
    #[track_caller]
    pub fn sync_all(&self) -> IO<(), io::Error> {
        self.with(&ops::FILE_SYNC_ALL, "sync_all", |file| match file {
            Handle::System(file) => file.sync_all(),
            Handle::Virtual(file) => file.sync(),
        })
    }

    /// Flushes the file's data to the device (on a simulated disk: as
    /// [`sync_all`](File::sync_all)).
    #[track_caller]
    pub fn sync_data(&self) -> IO<(), io::Error> {
        self.with(&ops::FILE_SYNC_DATA, "sync_data", |file| match file {
            Handle::System(file) => file.sync_data(),
            Handle::Virtual(file) => file.sync(),
        })
    }

    /// The bytes from the cursor to the end of the file, a chunk per read
    /// of at most `chunk_size` bytes (above 0). The stream does not close
    /// the file (its `Resource` does); [`fs::reads`](super::reads) opens
    /// and closes one for the stream.
    pub fn reads(&self, chunk_size: usize) -> Result<Stream<u8, io::Error>, InvalidArgument> {
        let chunk_size =
            InvalidArgument::above_zero("File::reads", "a chunk size above 0", chunk_size)?;
        Ok(self.reads_unchecked(chunk_size))
    }

    pub(crate) fn reads_unchecked(&self, chunk_size: usize) -> Stream<u8, io::Error> {
        Stream::unfold_chunk_eval(self.clone(), move |file| {
            file.read_untraced(chunk_size).map_untraced(move |bytes| {
                if bytes.is_empty() {
                    None
                } else {
                    Some((Chunk::from(bytes), file))
                }
            })
        })
    }

    /// [`reads`](File::reads) for a file that no one else reads (the one
    /// [`fs::reads`](super::reads) opens): one blocking call reads several
    /// chunks ahead (1, then twice as many each call, up to
    /// [`READ_AHEAD`] bytes), which the stream then emits one at a time.
    /// No write is ever behind it (its file is its own), so the reads on
    /// the fiber's thread skip [`File::read`]'s wait for them.
    /// The chunks are the ones `reads_unchecked` would emit; an error
    /// after some chunks of a call is raised once they are emitted; a
    /// stream stopped early leaves the cursor past what it emitted.
    pub(crate) fn reads_ahead(&self, chunk_size: usize) -> Stream<u8, io::Error> {
        let state = Ahead {
            file: self.clone(),
            ready: VecDeque::new(),
            end: None,
            batch: 1,
            max_batch: (READ_AHEAD / chunk_size).max(1),
        };
        Stream::unfold_chunk_eval(state, move |mut state: Ahead| {
            if let Some(bytes) = state.ready.pop_front() {
                return IO::pure(Some((Chunk::from(bytes), state)));
            }
            match state.end.take() {
                Some(Some(error)) => return IO::raise_error_untraced(error),
                Some(None) => return IO::pure(None),
                None => {}
            }
            // What the page cache holds is read here, on the fiber's
            // thread (`read_cached`); the blocking pool reads ahead only
            // when the disk must be waited for.
            match state.file.read_cached(None, chunk_size) {
                Ok(Some(bytes)) if bytes.is_empty() => return IO::pure(None),
                Ok(Some(bytes)) => return IO::pure(Some((Chunk::from(bytes), state))),
                Ok(None) => {}
                Err(e) => return IO::raise_error_untraced(e),
            }
            let batch = state.batch;
            state.batch = (batch * 2).min(state.max_batch);
            state
                .file
                .with_untraced("read", move |f| {
                    let mut chunks = VecDeque::with_capacity(batch);
                    let mut end = None;
                    while chunks.len() < batch {
                        match f.read_up_to(chunk_size) {
                            // The end of the file: `read_up_to` read until it.
                            Ok(bytes) if bytes.len() < chunk_size => {
                                if !bytes.is_empty() {
                                    chunks.push_back(bytes);
                                }
                                end = Some(None);
                                break;
                            }
                            Ok(bytes) => chunks.push_back(bytes),
                            Err(e) if chunks.is_empty() => return Err(e),
                            Err(e) => {
                                end = Some(Some(e));
                                break;
                            }
                        }
                    }
                    Ok((chunks, end))
                })
                .map_untraced(move |(chunks, end)| {
                    state.ready = chunks;
                    state.end = end.map(|e: Option<io::Error>| {
                        e.map(|e| at("read", &state.file.inner.path, e))
                    });
                    let first = state.ready.pop_front();
                    first.map(|bytes| (Chunk::from(bytes), state))
                })
        })
    }

    /// A pipe: writes each chunk of `bytes` at the cursor, whole and
    /// behind the stream as [`write_all`](File::write_all) does, emitting
    /// a unit per chunk handed over. The stream does not close the file;
    /// the file's close (its `Resource`'s end) waits for the last chunks
    /// and fails if one of them could not be written (as does the next
    /// chunk's hand-over, or [`flush`](File::flush)).
    pub fn writes(&self, bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
        let inner = self.inner.clone();
        bytes
            .chunks()
            .eval_map(move |chunk| behind::write_behind(inner.clone(), chunk.into_vec()))
    }

    /// [`with`](File::with) without a trace event (a stream's steps).
    pub(crate) fn with_untraced<A, F>(&self, operation: &'static str, f: F) -> IO<A, io::Error>
    where
        A: Send + 'static,
        F: FnOnce(&Handle) -> io::Result<A> + Send + 'static,
    {
        let inner = self.inner.clone();
        behind::after_writes(self.inner.clone(), move || {
            IO::try_blocking_untraced(move || {
                let file = inner.file.read();
                let result = match &*file {
                    Some(file) => f(file),
                    None => Err(io::Error::other("the file is closed")),
                };
                result.map_err(|e| at(operation, &inner.path, e))
            })
        })
    }
}

/// The most bytes one blocking call of [`File::reads_ahead`] reads.
const READ_AHEAD: usize = 1024 * 1024;

/// The state of [`File::reads_ahead`]: chunks read and not yet emitted,
/// and how the reading ended (`Some(None)`: at the end of the file;
/// `Some(Some(e))`: on the error `e`, raised once `ready` is emitted).
struct Ahead {
    file: File,
    ready: VecDeque<Vec<u8>>,
    end: Option<Option<io::Error>>,
    /// Chunks the next blocking call reads.
    batch: usize,
    max_batch: usize,
}

/// `source`, named as a read of `path` (the error of a cached read).
#[cfg(target_os = "linux")]
fn at_error(path: &Path, source: io::Error) -> io::Error {
    at("read", path, source)
}

impl Handle {
    /// Reads from the cursor until `max` bytes or the end of the file.
    pub(crate) fn read_up_to(&self, max: usize) -> io::Result<Vec<u8>> {
        match self {
            Handle::System(file) => {
                let file: &std::fs::File = file;
                let mut bytes = Vec::with_capacity(max);
                file.take(max as u64).read_to_end(&mut bytes)?;
                Ok(bytes)
            }
            Handle::Virtual(file) => simulated::read_up_to(&**file, max),
        }
    }

    /// Everything from the cursor on.
    fn read_to_end(&self) -> io::Result<Vec<u8>> {
        match self {
            Handle::System(file) => {
                let mut file: &std::fs::File = file;
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(bytes)
            }
            Handle::Virtual(file) => file.read_to_end(),
        }
    }

    /// The file's length.
    pub(crate) fn len(&self) -> io::Result<u64> {
        match self {
            Handle::System(file) => Ok(file.metadata()?.len()),
            Handle::Virtual(file) => Ok(file.metadata()?.len),
        }
    }

    /// Moves the cursor; its new offset.
    pub(crate) fn seek(&self, position: SeekFrom) -> io::Result<u64> {
        match self {
            Handle::System(file) => (&*file).seek(position),
            Handle::Virtual(file) => file.seek(position),
        }
    }

    /// Writes all of `bytes` at the cursor.
    pub(crate) fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Handle::System(file) => (&*file).write_all(bytes),
            Handle::Virtual(file) => simulated::write_all(&**file, bytes),
        }
    }
}

/// [`File::close`] without its trace event: waits until no write is at
/// work, then closes the file and reports the error of a failed write
/// behind, once (the file closed all the same).
fn close(inner: Arc<Inner>) -> IO<(), io::Error> {
    IO::defer_untraced(move || {
        if inner.behind.writing() {
            let again = inner.clone();
            return behind::wait(inner, behind::Want::Done)
                .flat_map_untraced(move |()| close(again));
        }
        IO::try_blocking_untraced(move || {
            let failed = inner.behind.take_error();
            inner.close();
            failed.map_or(Ok(()), Err)
        })
    })
}
