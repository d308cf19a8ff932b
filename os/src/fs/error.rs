//! Errors that name their path.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What failed, and on which path: the payload of every `io::Error` this
/// module returns (the outer error keeps the system's
/// [`ErrorKind`](io::ErrorKind), so `error.kind()` still says *why*; this
/// says *where*).
///
/// ```
/// use spindle_effect::fs::{self, PathError};
/// use spindle_effect::prelude::*;
/// use spindle_effect::wstp::Runtime;
///
/// let rt = Runtime::new()?;
/// let error = rt
///     .block_on(fs::read("/no/such/file"))?
///     .errored()
///     .expect("an error value");
/// assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
/// let at = PathError::of(&error).expect("it names the path");
/// assert_eq!(at.operation(), "read");
/// assert_eq!(at.path(), std::path::Path::new("/no/such/file"));
/// assert!(error.to_string().starts_with("read /no/such/file: "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PathError {
    operation: &'static str,
    path: PathBuf,
    to: Option<PathBuf>,
    source: io::Error,
}

impl PathError {
    /// The operation that failed (`"open"`, `"read"`, `"rename"`, ...).
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The path it failed on (for two-path operations, the source).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The second path of a two-path operation (`rename`, `copy`, links),
    /// if any.
    pub fn to(&self) -> Option<&Path> {
        self.to.as_deref()
    }

    /// The system's own error, as the call returned it (its
    /// `raw_os_error` included).
    pub fn system_error(&self) -> &io::Error {
        &self.source
    }

    /// The `PathError` inside `error`, if this module made it.
    pub fn of(error: &io::Error) -> Option<&PathError> {
        error.get_ref()?.downcast_ref()
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.operation, self.path.display())?;
        if let Some(to) = &self.to {
            write!(f, " to {}", to.display())?;
        }
        write!(f, ": {}", self.source)
    }
}

impl Error for PathError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

/// `source`, wrapped to name `operation` and `path` (keeping its kind).
pub(crate) fn at(operation: &'static str, path: &Path, source: io::Error) -> io::Error {
    wrap(operation, path.to_path_buf(), None, source)
}

/// `source`, wrapped to name `operation`, `from` and `to`.
pub(crate) fn at_both(
    operation: &'static str,
    from: &Path,
    to: &Path,
    source: io::Error,
) -> io::Error {
    wrap(
        operation,
        from.to_path_buf(),
        Some(to.to_path_buf()),
        source,
    )
}

fn wrap(
    operation: &'static str,
    path: PathBuf,
    to: Option<PathBuf>,
    source: io::Error,
) -> io::Error {
    io::Error::new(
        source.kind(),
        PathError {
            operation,
            path,
            to,
            source,
        },
    )
}
