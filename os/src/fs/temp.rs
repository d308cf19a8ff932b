//! Temporary files and directories, removed when their `Resource` ends.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use spindle_core::{IO, Resource};

use spindle_core::untraced::Untraced as _;

use super::{File, at, ops, remove_dir_all, remove_file, simulated};

/// A temporary directory: a cheap handle to its path. [`temp_dir`] makes
/// it, empty, with a unique name, and removes it with everything in it
/// when its `Resource` ends.
#[derive(Debug, Clone)]
pub struct TempDir {
    path: Arc<Path>,
}

impl TempDir {
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A new empty directory in the system's temporary directory
/// (`std::env::temp_dir`), removed with everything in it when the
/// resource ends.
#[track_caller]
pub fn temp_dir() -> Resource<TempDir, io::Error> {
    temp_dir_in(std::env::temp_dir())
}

/// A new empty directory in `parent`, removed with everything in it when
/// the resource ends.
#[track_caller]
pub fn temp_dir_in(parent: impl AsRef<Path>) -> Resource<TempDir, io::Error> {
    let parent = parent.as_ref().to_path_buf();
    let make = IO::defer_untraced(move || {
        if simulated::disk().is_some() {
            let unsupported = simulated::unsupported("temp_dir");
            return IO::raise_error_untraced(at("temp_dir", &parent, unsupported));
        }
        IO::try_blocking_untraced(move || {
            let dir = tempfile::Builder::new()
                .prefix("spindle-")
                .tempdir_in(&parent)
                .map_err(|e| at("temp_dir", &parent, e))?;
            Ok(TempDir {
                path: Arc::from(dir.keep()),
            })
        })
    })
    .traced_as(&ops::TEMP_DIR);
    Resource::make(make, |dir: TempDir| remove_dir_all(dir.path()))
}

/// A new empty file in the system's temporary directory, open for reading
/// and writing, closed and removed when the resource ends
/// ([`File::path`] is its name).
#[track_caller]
pub fn temp_file() -> Resource<File, io::Error> {
    temp_file_in(std::env::temp_dir())
}

/// A new empty file in `parent`, open for reading and writing, closed and
/// removed when the resource ends (removed also when the close fails with
/// the error of a write behind, which the release then fails with: see
/// [`File`]).
#[track_caller]
pub fn temp_file_in(parent: impl AsRef<Path>) -> Resource<File, io::Error> {
    let parent = parent.as_ref().to_path_buf();
    let make = IO::defer_untraced(move || {
        if simulated::disk().is_some() {
            let unsupported = simulated::unsupported("temp_file");
            return IO::raise_error_untraced(at("temp_file", &parent, unsupported));
        }
        IO::try_blocking_untraced(move || {
            let named = tempfile::Builder::new()
                .prefix("spindle-")
                .tempfile_in(&parent)
                .map_err(|e| at("temp_file", &parent, e))?;
            let (file, path): (std::fs::File, PathBuf) = named
                .keep()
                .map_err(|e| at("temp_file", &parent, e.error))?;
            Ok(File::from_std(file, path))
        })
    })
    .traced_as(&ops::TEMP_FILE);
    Resource::make(make, |file: File| {
        let path = file.path().to_path_buf();
        file.close().attempt().flat_map(move |closed| {
            remove_file(path)
                .attempt()
                .flat_map(move |removed| IO::from_result(closed.and(removed)))
        })
    })
}
