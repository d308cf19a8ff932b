//! The comparison from end to end ([`run`]): find the repository, prepare
//! both sides, build them, run their executables alternately round after
//! round ([`run_once`]) and render what they measured; or, with
//! `--from-runs`, render the last comparison's results again.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::args::Args;
use super::cargo::build_side;
use super::error::{CompareError, io_error};
use super::git::git;
use super::render::report;
use super::rounds::{Rounds, read_runs, round_dir};
use super::worktree::{Side, prepare_side, remove_stale_worktrees};
use crate::results::read_results;

/// Runs one side's executable once with criterion writing to `home`.
fn run_once(
    side: &Side,
    exe: &Path,
    home: &Path,
    args: &Args,
    round: u32,
) -> Result<(), CompareError> {
    std::fs::create_dir_all(home)
        .map_err(|e| io_error(format!("creating {}", home.display()), &e))?;
    let mut command = Command::new(exe);
    command.args(["--bench", "--noplot"]);
    if let Some(filter) = &args.filter {
        command.arg(filter);
    }
    // As `cargo bench` does: the package's directory.
    let package_dir = side.checkout.join("benches");
    if package_dir.is_dir() {
        command.current_dir(&package_dir);
    }
    command.env("CRITERION_HOME", home);
    if args.quick {
        command.env("SPINDLE_BENCH_QUICK", "1");
    }
    // The benchmarks' report goes to stderr: stdout is the tables'.
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(io::stderr()))
        .stderr(Stdio::inherit());
    let status = command.status().map_err(|e| {
        io_error(
            format!("starting the {} benchmarks {}", side.name, exe.display()),
            &e,
        )
    })?;
    if !status.success() {
        return Err(CompareError::RunFailed {
            side: side.name,
            round,
            status: status.to_string(),
        });
    }
    Ok(())
}

/// The whole comparison: the tables (with a heading and a summary) as
/// printed on stdout.
pub fn run(args: &Args) -> Result<String, CompareError> {
    let cwd = std::env::current_dir().map_err(|e| io_error("finding this directory", &e))?;
    let root = git(&cwd, &["rev-parse", "--show-toplevel"])?
        .map(PathBuf::from)
        .map_err(CompareError::NotARepository)?;
    let dir = root.join("target").join("bench-compare");
    if args.from_runs {
        let runs = dir.join("runs");
        let rounds = read_runs(&runs)?;
        let header = format!(
            "bench-compare: the last comparison's results, {} base and {} head round(s)\n\n",
            rounds.base.len(),
            rounds.head.len()
        );
        return Ok(report(&header, &rounds, &runs));
    }

    let (base_rev, base_label) = match &args.base {
        Some(rev) => (rev.clone(), None),
        None => match git(&root, &["merge-base", "HEAD", "main"])? {
            Ok(sha) => {
                let label = "merge-base of HEAD and main".to_owned();
                (sha, Some(label))
            }
            Err(_) => (
                "HEAD".to_owned(),
                Some("HEAD (no merge-base with main)".to_owned()),
            ),
        },
    };
    let base = prepare_side(&root, &dir, "base", Some(&base_rev), base_label)?;
    let head = prepare_side(&root, &dir, "head", args.head.as_deref(), None)?;
    let keep: Vec<&Path> = [&base, &head]
        .iter()
        .filter(|s| s.commit.is_some())
        .map(|s| s.checkout.as_path())
        .collect();
    remove_stale_worktrees(&root, &dir, &keep)?;

    let base_exe = build_side(&base, &args.bench)?;
    let head_exe = build_side(&head, &args.bench)?;

    let runs = dir.join("runs");
    match std::fs::remove_dir_all(&runs) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(format!("clearing {}", runs.display()), &e)),
    }
    let mut rounds = Rounds::default();
    for round in 1..=args.rounds {
        let order = if round % 2 == 1 {
            [(&base, &base_exe), (&head, &head_exe)]
        } else {
            [(&head, &head_exe), (&base, &base_exe)]
        };
        for (side, exe) in order {
            let home = round_dir(&runs, side.name, round);
            eprintln!(
                "bench-compare: round {round}/{}: {} ({})",
                args.rounds, side.name, side.label
            );
            run_once(side, exe, &home, args, round)?;
            let found = read_results(&home)?;
            if found.is_empty() {
                return Err(CompareError::NoResults {
                    side: side.name,
                    dir: home,
                    filter: args.filter.clone(),
                });
            }
            rounds.push(side.name, found);
        }
    }

    let header = format!(
        "bench-compare: bench `{}`, {} round{}{}{}\n  base: {}\n  head: {}\n\n",
        args.bench,
        args.rounds,
        if args.rounds == 1 { "" } else { "s" },
        args.filter
            .as_deref()
            .map(|f| format!(", filter {f:?}"))
            .unwrap_or_default(),
        if args.quick { ", quick" } else { "" },
        base.label,
        head.label,
    );
    Ok(report(&header, &rounds, &runs))
}
