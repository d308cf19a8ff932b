//! Command-line parsing shared by the crate's binaries (`loadgen`,
//! `http_compare`, `bench-compare`, `bench-report`): `--flag value` or
//! `--flag=value`, switches without a value, and errors as values with
//! messages that name the flag (never a panic).

use core::fmt;

/// Why the command line cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// `--help` or `-h`: print the usage and exit successfully.
    Help,
    /// A flag this program does not know (or a stray positional argument).
    Unknown(String),
    /// A flag that needs a value came last.
    MissingValue(&'static str),
    /// A required flag is absent.
    Required(&'static str),
    /// A flag's value is unusable.
    Invalid {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: String,
        /// Why it is unusable.
        reason: String,
    },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Help => f.write_str("help requested"),
            ArgError::Unknown(arg) => write!(f, "unknown argument {arg:?}"),
            ArgError::MissingValue(flag) => write!(f, "{flag} needs a value"),
            ArgError::Required(flag) => write!(f, "{flag} is required"),
            ArgError::Invalid {
                flag,
                value,
                reason,
            } => write!(f, "invalid {flag} {value:?}: {reason}"),
        }
    }
}

impl std::error::Error for ArgError {}

/// Splits `--flag=value` and `--flag value` forms; `flags_with_values`
/// names the flags that take a value, `switches` those that take none.
/// Yields `(flag, value)` pairs in command-line order (`None` for a
/// switch); `--help` or `-h` anywhere is [`ArgError::Help`].
pub fn pairs(
    args: impl IntoIterator<Item = String>,
    flags_with_values: &[&'static str],
    switches: &[&'static str],
) -> Result<Vec<(&'static str, Option<String>)>, ArgError> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            return Err(ArgError::Help);
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        if let Some(&flag) = flags_with_values.iter().find(|&&f| f == name) {
            let value = match inline {
                Some(v) => v,
                None => args.next().ok_or(ArgError::MissingValue(flag))?,
            };
            out.push((flag, Some(value)));
        } else if let Some(&flag) = switches.iter().find(|&&f| f == name) {
            if inline.is_some() {
                return Err(ArgError::Unknown(arg));
            }
            out.push((flag, None));
        } else {
            return Err(ArgError::Unknown(arg));
        }
    }
    Ok(out)
}

/// [`ArgError::Invalid`] for `flag`'s `value`, with the reason.
pub fn invalid(flag: &'static str, value: &str, reason: impl Into<String>) -> ArgError {
    ArgError::Invalid {
        flag,
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// The tokio runtime a reference server runs on (`--flavor`), shared by
/// `hello_tokio` and `mini_redis_tokio`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `current_thread`.
    Current,
    /// `multi_thread` with this many workers.
    Multi(usize),
}

impl Flavor {
    /// Builds the runtime, with I/O and time enabled.
    pub fn build(self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Flavor::Current => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Flavor::Multi(workers) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build(),
        }
    }
}
