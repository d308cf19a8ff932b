//! Directories as streams: [`read_dir`] and [`walk`].

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;
use spindle_net::driver::{VirtualDisk, VirtualMetadata};
use spindle_stream::{Chunk, Stream};

use super::{FileType, at, ops, simulated};

/// How many entries one blocking call reads for a directory stream.
const ENTRIES_PER_CALL: usize = 256;

/// One entry of a directory: its path (the directory's path joined with
/// its name), its name, and its type (a symbolic link is not followed).
#[derive(Debug, Clone)]
pub struct DirEntry {
    path: PathBuf,
    file_name: OsString,
    file_type: FileType,
    depth: usize,
}

impl DirEntry {
    /// The entry's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry's name in its directory.
    pub fn file_name(&self) -> &OsString {
        &self.file_name
    }

    /// Its type, as the directory listing gave it (a symbolic link is a
    /// symbolic link). On a simulated disk, where `std::fs::FileType` has
    /// no value of its own, this is the type of a system directory (the
    /// root) or of a regular file (the running program), read once: its
    /// `is_dir` and `is_file` answer for the simulated entry.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }

    /// How deep it is below the listed directory: 1 for its own entries,
    /// 2 for theirs ([`walk`]), ...
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The entry as the owned path.
    pub fn into_path(self) -> PathBuf {
        self.path
    }

    fn read(
        entry: io::Result<std::fs::DirEntry>,
        dir: &Path,
        depth: usize,
    ) -> io::Result<DirEntry> {
        let entry = entry.map_err(|e| at("read_dir", dir, e))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| at("file_type", &path, e))?;
        Ok(DirEntry {
            file_name: entry.file_name(),
            path,
            file_type,
            depth,
        })
    }
}

/// The system's `FileType` of a directory or of a regular file, for the
/// entries of a simulated disk (see [`DirEntry::file_type`]).
fn system_type(dir: bool) -> io::Result<FileType> {
    static TYPES: OnceLock<Option<(FileType, FileType)>> = OnceLock::new();
    let types = TYPES.get_or_init(|| {
        let root = std::fs::metadata("/").ok()?;
        let program = std::env::current_exe().and_then(std::fs::metadata).ok()?;
        Some((root.file_type(), program.file_type()))
    });
    match types {
        Some((dir_type, file_type)) => Ok(if dir { *dir_type } else { *file_type }),
        None => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "spindle-os: a simulated directory entry's type is told with the system's types \
             of the root directory and the running program, which cannot be read",
        )),
    }
}

/// An open listing: the system's, or a simulated disk's entries (read
/// whole when the directory is opened).
enum Entries {
    System(std::fs::ReadDir),
    Simulated(std::vec::IntoIter<(OsString, VirtualMetadata)>),
}

/// A directory being read: its path, depth and open listing.
struct Open {
    path: PathBuf,
    depth: usize,
    entries: Entries,
}

impl Open {
    fn new(path: PathBuf, depth: usize, disk: Option<&Arc<dyn VirtualDisk>>) -> io::Result<Open> {
        let entries = match disk {
            None => {
                Entries::System(std::fs::read_dir(&path).map_err(|e| at("read_dir", &path, e))?)
            }
            Some(disk) => Entries::Simulated(
                disk.read_dir(&path)
                    .map_err(|e| at("read_dir", &path, e))?
                    .into_iter(),
            ),
        };
        Ok(Open {
            path,
            depth,
            entries,
        })
    }

    /// The next entry, if any.
    fn next(&mut self) -> Option<io::Result<DirEntry>> {
        match &mut self.entries {
            Entries::System(entries) => entries
                .next()
                .map(|entry| DirEntry::read(entry, &self.path, self.depth)),
            Entries::Simulated(entries) => entries.next().map(|(name, metadata)| {
                let path = self.path.join(&name);
                let file_type =
                    system_type(metadata.is_dir).map_err(|e| at("file_type", &path, e))?;
                Ok(DirEntry {
                    path,
                    file_name: name,
                    file_type,
                    depth: self.depth,
                })
            }),
        }
    }
}

/// The entries of the directory `path` (not `.` and `..`), in the order
/// the system lists them (a simulated disk: in the order of their names), read in batches on the blocking pool. The
/// directory is opened when the stream is first pulled and closed when
/// the stream ends or is dropped. An entry that cannot be read fails the
/// stream with an error naming the path.
#[track_caller]
pub fn read_dir(path: impl AsRef<Path>) -> Stream<DirEntry, io::Error> {
    tree(path.as_ref().to_path_buf(), false)
}

/// Every entry below the directory `path`, depth first: each directory's
/// entry comes before its own entries ([`DirEntry::depth`] says how deep).
/// Symbolic links are listed and not followed (no cycles); the walk keeps
/// one open directory per level. An error (a directory that cannot be
/// read) fails the stream with an error naming it.
#[track_caller]
pub fn walk(path: impl AsRef<Path>) -> Stream<DirEntry, io::Error> {
    tree(path.as_ref().to_path_buf(), true)
}

/// The stream of [`read_dir`] (`recursive` false) and [`walk`].
fn tree(root: PathBuf, recursive: bool) -> Stream<DirEntry, io::Error> {
    // The state: the root until the first pull, then the stack of open
    // directories (empty: done).
    enum State {
        Start(PathBuf),
        Open(Vec<Open>, Option<Arc<dyn VirtualDisk>>),
    }
    // The simulated disk, looked up on the fiber at the first pull.
    Stream::unfold_chunk_eval(State::Start(root), move |state| {
        let disk = match &state {
            State::Start(_) => simulated::disk(),
            State::Open(_, disk) => disk.clone(),
        };
        IO::try_blocking_untraced(move || {
            let mut stack = match state {
                State::Start(root) => vec![Open::new(root, 1, disk.as_ref())?],
                State::Open(stack, _) => stack,
            };
            let mut batch = Vec::new();
            while batch.len() < ENTRIES_PER_CALL {
                let Some(top) = stack.last_mut() else { break };
                match top.next() {
                    None => {
                        stack.pop();
                    }
                    Some(entry) => {
                        let entry = entry?;
                        if recursive && entry.file_type.is_dir() {
                            let below =
                                Open::new(entry.path.clone(), entry.depth + 1, disk.as_ref())?;
                            stack.push(below);
                        }
                        batch.push(entry);
                    }
                }
            }
            Ok(if batch.is_empty() {
                None
            } else {
                Some((Chunk::from(batch), State::Open(stack, disk)))
            })
        })
        .traced_as(&ops::READ_DIR)
    })
}
