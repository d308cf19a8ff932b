//! Directories as streams: [`read_dir`] and [`walk`].

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use spindle_core::IO;
use spindle_core::untraced::Untraced as _;
use spindle_stream::{Chunk, Stream};

use super::{FileType, at, ops};

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
    /// symbolic link).
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

/// A directory being read: its path, depth and open listing.
struct Open {
    path: PathBuf,
    depth: usize,
    entries: std::fs::ReadDir,
}

impl Open {
    fn new(path: PathBuf, depth: usize) -> io::Result<Open> {
        let entries = std::fs::read_dir(&path).map_err(|e| at("read_dir", &path, e))?;
        Ok(Open {
            path,
            depth,
            entries,
        })
    }
}

/// The entries of the directory `path` (not `.` and `..`), in the order
/// the system lists them, read in batches on the blocking pool. The
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
        Open(Vec<Open>),
    }
    Stream::unfold_chunk_eval(State::Start(root), move |state| {
        IO::try_blocking_untraced(move || {
            let mut stack = match state {
                State::Start(root) => vec![Open::new(root, 1)?],
                State::Open(stack) => stack,
            };
            let mut batch = Vec::new();
            while batch.len() < ENTRIES_PER_CALL {
                let Some(top) = stack.last_mut() else { break };
                match top.entries.next() {
                    None => {
                        stack.pop();
                    }
                    Some(entry) => {
                        let entry = DirEntry::read(entry, &top.path, top.depth)?;
                        if recursive && entry.file_type.is_dir() {
                            stack.push(Open::new(entry.path.clone(), entry.depth + 1)?);
                        }
                        batch.push(entry);
                    }
                }
            }
            Ok(if batch.is_empty() {
                None
            } else {
                Some((Chunk::from(batch), State::Open(stack)))
            })
        })
        .traced_as(&ops::READ_DIR)
    })
}
