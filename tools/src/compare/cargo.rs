//! Cargo: building one side's bench target ([`build_side`]: `cargo metadata`
//! first, so that a missing target is named, then `cargo bench --no-run`)
//! and what is read from cargo's JSON ([`bench_targets`],
//! [`bench_executable`], [`compiler_errors`]).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::error::{CompareError, io_error};
use super::worktree::Side;

/// How many of cargo's last lines a build failure quotes.
const TAIL_LINES: usize = 40;

/// The messages of `reason` (`compiler-artifact`, `compiler-message`) among
/// cargo's JSON lines, in order; lines that are not JSON are skipped.
fn messages<'a>(
    json_lines: &'a str,
    reason: &'a str,
) -> impl DoubleEndedIterator<Item = Value> + 'a {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(move |msg| msg.get("reason").and_then(Value::as_str) == Some(reason))
}

/// The name of a target in cargo's JSON (an artifact's `target`, or one of
/// `cargo metadata`'s `targets`) when it is a bench target.
fn bench_name(target: &Value) -> Option<&str> {
    let is_bench = target
        .get("kind")
        .and_then(Value::as_array)
        .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some("bench")));
    if is_bench {
        target.get("name")?.as_str()
    } else {
        None
    }
}

/// The executable of bench target `name` in the JSON lines of `cargo bench
/// --no-run --message-format=json` (the last `compiler-artifact` of a
/// `bench` target of that name that names one).
pub fn bench_executable(json_lines: &str, name: &str) -> Option<PathBuf> {
    messages(json_lines, "compiler-artifact")
        .filter(|msg| msg.get("target").and_then(bench_name) == Some(name))
        .filter_map(|msg| msg.get("executable")?.as_str().map(PathBuf::from))
        .next_back()
}

/// The rendered error messages among cargo's JSON lines (what a failed
/// build would have printed).
pub fn compiler_errors(json_lines: &str) -> Vec<String> {
    messages(json_lines, "compiler-message")
        .filter_map(|msg| {
            let message = msg.get("message")?;
            let level = message.get("level")?.as_str()?;
            if !level.starts_with("error") {
                return None;
            }
            Some(message.get("rendered")?.as_str()?.trim_end().to_owned())
        })
        .collect()
}

/// The bench targets of package `package` in `cargo metadata --no-deps
/// --format-version 1` output, or `None` when the package is not there.
pub fn bench_targets(metadata_json: &str, package: &str) -> Option<Vec<String>> {
    let json: Value = serde_json::from_str(metadata_json).ok()?;
    let pkg = json
        .get("packages")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(package))?;
    let mut names: Vec<String> = pkg
        .get("targets")?
        .as_array()?
        .iter()
        .filter_map(bench_name)
        .map(str::to_owned)
        .collect();
    names.sort();
    Some(names)
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `cargo`: the one that runs this tool (`$CARGO`), or the one on `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Builds `bench` on `side` and returns its executable.
pub(super) fn build_side(side: &Side, bench: &str) -> Result<PathBuf, CompareError> {
    let metadata = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(&side.checkout)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CompareError::CargoMissing(e.to_string()))?;
    if !metadata.status.success() {
        return Err(CompareError::BuildFailed {
            side: side.name,
            tail: tail(&String::from_utf8_lossy(&metadata.stderr), TAIL_LINES),
        });
    }
    let targets = bench_targets(&String::from_utf8_lossy(&metadata.stdout), "benches");
    if !targets
        .as_ref()
        .is_some_and(|t| t.iter().any(|t| t == bench))
    {
        return Err(CompareError::NoBenchTarget {
            side: side.name,
            rev: side.label.clone(),
            name: bench.to_owned(),
            available: targets.unwrap_or_default(),
        });
    }
    eprintln!(
        "bench-compare: {}: cargo bench -p benches --bench {bench} --no-run (in {}, CARGO_TARGET_DIR={})",
        side.name,
        side.checkout.display(),
        side.target_dir.display()
    );
    let mut child = cargo()
        .args(["bench", "-p", "benches", "--bench", bench, "--no-run"])
        .arg("--message-format=json")
        .current_dir(&side.checkout)
        .env("CARGO_TARGET_DIR", &side.target_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CompareError::CargoMissing(e.to_string()))?;
    // cargo's progress goes on to our stderr as it comes; the last lines
    // are kept for the error message.
    let stderr = child.stderr.take();
    let echo = std::thread::spawn(move || {
        let mut last = VecDeque::new();
        if let Some(stderr) = stderr {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if last.len() == TAIL_LINES {
                    last.pop_front();
                }
                last.push_back(line);
            }
        }
        last.into_iter().collect::<Vec<_>>().join("\n")
    });
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout)
            .map_err(|e| io_error("reading cargo's output", &e))?;
    }
    let status = child
        .wait()
        .map_err(|e| io_error("waiting for cargo", &e))?;
    let stderr_tail = echo.join().unwrap_or_default();
    if !status.success() {
        let mut text = compiler_errors(&stdout).join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&stderr_tail);
        return Err(CompareError::BuildFailed {
            side: side.name,
            tail: tail(&text, TAIL_LINES),
        });
    }
    bench_executable(&stdout, bench).ok_or_else(|| CompareError::NoExecutable {
        side: side.name,
        name: bench.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_json_names_the_bench_executable() {
        let lines = [
            r#"{"reason":"compiler-artifact","target":{"name":"benches","kind":["lib"]},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"suite","kind":["bench"]},"executable":"/t/release/deps/suite-abc"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            bench_executable(&lines, "suite"),
            Some(PathBuf::from("/t/release/deps/suite-abc"))
        );
        assert_eq!(bench_executable(&lines, "bind"), None);
        assert_eq!(bench_executable("garbage\n", "suite"), None);
    }

    #[test]
    fn compiler_errors_are_taken_from_cargo_json() {
        let lines = [
            r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: unused"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","rendered":"error[E0425]: cannot find value `x`\n"}}"#,
        ]
        .join("\n");
        assert_eq!(
            compiler_errors(&lines),
            ["error[E0425]: cannot find value `x`"]
        );
    }

    #[test]
    fn cargo_metadata_lists_the_bench_targets_of_a_package() {
        let json = r#"{"packages":[{"name":"io-core","targets":[]},{"name":"benches","targets":[
            {"name":"benches","kind":["lib"]},{"name":"bind","kind":["bench"]},
            {"name":"loadgen","kind":["bin"]},{"name":"async_ops","kind":["bench"]}]}]}"#;
        assert_eq!(
            bench_targets(json, "benches"),
            Some(vec!["async_ops".to_owned(), "bind".to_owned()])
        );
        assert_eq!(bench_targets(json, "nope"), None);
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\nd", 2), "c\nd");
        assert_eq!(tail("a", 5), "a");
    }
}
