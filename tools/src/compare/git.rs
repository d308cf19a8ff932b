//! Running git: [`git`] answers git's output or its message, [`git_ok`]
//! makes a failure a [`CompareError`], and [`resolve`] turns a revision
//! into its commit.

use std::path::Path;
use std::process::{Command, Stdio};

use super::error::CompareError;

/// Runs git in `dir`; its trimmed stdout, or its stderr as the error.
pub(super) fn git(dir: &Path, args: &[&str]) -> Result<Result<String, String>, CompareError> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CompareError::GitMissing(e.to_string()))?;
    if output.status.success() {
        Ok(Ok(String::from_utf8_lossy(&output.stdout)
            .trim()
            .to_owned()))
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        Ok(Err(if stderr.is_empty() {
            output.status.to_string()
        } else {
            stderr
        }))
    }
}

/// Runs git in `dir` where a failure is an error.
pub(super) fn git_ok(dir: &Path, args: &[&str]) -> Result<String, CompareError> {
    git(dir, args)?.map_err(|message| CompareError::Git {
        command: format!("git {}", args.join(" ")),
        message,
    })
}

/// The full commit id of `rev`.
pub(super) fn resolve(root: &Path, rev: &str) -> Result<String, CompareError> {
    git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )?
    .map_err(|message| CompareError::UnknownRevision {
        rev: rev.to_owned(),
        message: if message.starts_with("exit status") {
            "git does not know it (a branch, tag or commit of this repository?)".to_owned()
        } else {
            message
        },
    })
}
