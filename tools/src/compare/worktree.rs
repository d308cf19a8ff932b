//! The two sides of a comparison: a [`Side`] is the working tree, built in
//! place, or a revision checked out with `git worktree add --detach` under
//! `target/bench-compare/` (reused while clean and at that commit), each
//! with a `CARGO_TARGET_DIR` of its own. Worktrees of earlier comparisons
//! are removed here too.

use std::path::{Path, PathBuf};

use super::error::{CompareError, io_error};
use super::git::{git, git_ok, resolve};

/// Where one side is built and run.
#[derive(Debug, Clone)]
pub struct Side {
    /// `base` or `head`.
    pub name: &'static str,
    /// The revision, in words.
    pub label: String,
    /// The checkout: the repository itself for the working tree.
    pub checkout: PathBuf,
    /// Its `CARGO_TARGET_DIR`.
    pub target_dir: PathBuf,
    /// The commit, or `None` for the working tree.
    pub commit: Option<String>,
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// The worktrees git has registered: (path, detached).
fn worktrees(root: &Path) -> Result<Vec<(PathBuf, bool)>, CompareError> {
    let list = git_ok(root, &["worktree", "list", "--porcelain"])?;
    let mut out = Vec::new();
    for block in list.split("\n\n") {
        let mut path = None;
        let mut detached = false;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if line == "detached" {
                detached = true;
            }
        }
        if let Some(p) = path {
            out.push((p, detached));
        }
    }
    Ok(out)
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Checks `sha` out at `<dir>/<side>-<shortsha>`, reusing a clean worktree
/// already there at that commit.
fn materialise(
    root: &Path,
    dir: &Path,
    side: &'static str,
    sha: &str,
) -> Result<PathBuf, CompareError> {
    let path = dir.join(format!("{side}-{}", short(sha)));
    let path_str = path.to_string_lossy().into_owned();
    git_ok(root, &["worktree", "prune"])?;
    let registered = worktrees(root)?.iter().any(|(p, _)| same_path(p, &path));
    if registered {
        let at = git(&path, &["rev-parse", "HEAD"])?.unwrap_or_default();
        let dirty = git(&path, &["status", "--porcelain", "--untracked-files=no"])?
            .map(|s| !s.is_empty())
            .unwrap_or(true);
        if at == sha && !dirty {
            eprintln!("bench-compare: {side}: reusing worktree {path_str}");
            return Ok(path);
        }
        eprintln!("bench-compare: {side}: worktree {path_str} is stale; replacing it");
        git_ok(root, &["worktree", "remove", "--force", &path_str])?;
    } else if path.exists() {
        // A worktree whose registration git has pruned leaves a `.git` file
        // naming its old admin directory: ours to delete. Anything else
        // there was not made by this tool.
        let leftover =
            std::fs::read_to_string(path.join(".git")).is_ok_and(|s| s.starts_with("gitdir:"));
        if !leftover {
            return Err(CompareError::Io {
                context: format!("preparing the {side} worktree"),
                message: format!("{path_str} exists and is not a git worktree; remove it by hand"),
            });
        }
        std::fs::remove_dir_all(&path)
            .map_err(|e| io_error(format!("removing the stale {path_str}"), &e))?;
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| io_error(format!("creating {}", dir.display()), &e))?;
    eprintln!(
        "bench-compare: {side}: git worktree add --detach {path_str} {}",
        short(sha)
    );
    git_ok(root, &["worktree", "add", "--detach", &path_str, sha])?;
    Ok(path)
}

/// Removes the detached worktrees under `dir` named `base-*` or `head-*`
/// that this comparison does not use. A failure is only reported.
pub(super) fn remove_stale_worktrees(
    root: &Path,
    dir: &Path,
    keep: &[&Path],
) -> Result<(), CompareError> {
    for (path, detached) in worktrees(root)? {
        let ours = path.parent().is_some_and(|p| same_path(p, dir))
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("base-") || n.starts_with("head-"));
        if !ours || !detached || keep.iter().any(|k| same_path(k, &path)) {
            continue;
        }
        let path_str = path.to_string_lossy().into_owned();
        match git(root, &["worktree", "remove", "--force", &path_str])? {
            Ok(_) => eprintln!("bench-compare: removed the stale worktree {path_str}"),
            Err(e) => {
                eprintln!("bench-compare: could not remove the stale worktree {path_str}: {e}")
            }
        }
    }
    Ok(())
}

/// The side for `rev` (`None`: the working tree).
pub(super) fn prepare_side(
    root: &Path,
    dir: &Path,
    name: &'static str,
    rev: Option<&str>,
    default_label: Option<String>,
) -> Result<Side, CompareError> {
    let Some(rev) = rev else {
        let head = git(root, &["rev-parse", "--short=10", "HEAD"])?.unwrap_or_default();
        let dirty = !git_ok(root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty();
        let label = format!(
            "working tree at HEAD {head}{}",
            if dirty {
                " with uncommitted changes"
            } else {
                ", clean"
            }
        );
        return Ok(Side {
            name,
            label,
            checkout: root.to_path_buf(),
            target_dir: dir.join("target-work"),
            commit: None,
        });
    };
    let sha = resolve(root, rev)?;
    let checkout = materialise(root, dir, name, &sha)?;
    // Cargo.lock untracked at that commit: build against the working
    // tree's, so that both sides use the same dependency versions.
    let tracked = !git_ok(root, &["ls-tree", "--name-only", &sha, "Cargo.lock"])?.is_empty();
    let lock = root.join("Cargo.lock");
    if !tracked && lock.is_file() {
        std::fs::copy(&lock, checkout.join("Cargo.lock"))
            .map_err(|e| io_error("copying Cargo.lock into the worktree", &e))?;
    }
    Ok(Side {
        name,
        label: format!(
            "{} at {}",
            default_label.as_deref().unwrap_or(rev),
            short(&sha)
        ),
        checkout,
        target_dir: dir.join(format!("target-{name}")),
        commit: Some(sha),
    })
}
