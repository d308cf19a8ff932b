//! The `bench-compare` binary's command line end to end: the paths that
//! fail before anything is built (the comparison itself needs two builds
//! and is left to `spindle_tools::compare`'s unit tests and to manual
//! runs).

use std::process::{Command, Output};

fn bench_compare(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-compare"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("bench-compare runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_prints_the_usage_and_succeeds() {
    let out = bench_compare(&["--help"], &std::env::temp_dir());
    assert!(out.status.success());
    let usage = text(&out.stdout);
    for flag in [
        "--base", "--head", "--bench", "--filter", "--rounds", "--quick",
    ] {
        assert!(usage.contains(flag), "{flag} in {usage}");
    }
}

#[test]
fn an_unknown_flag_exits_with_status_2_and_names_it() {
    let out = bench_compare(&["--rounds", "1", "--frobnicate"], &std::env::temp_dir());
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--frobnicate"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn outside_a_git_repository_it_fails_with_a_message_instead_of_a_panic() {
    let tmp = std::env::temp_dir();
    let dir = tmp.join(format!("bench-compare-no-repo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // git looks for no repository at or above the temporary directory.
    let out = Command::new(env!("CARGO_BIN_EXE_bench-compare"))
        .args(["--rounds", "1"])
        .current_dir(&dir)
        .env("GIT_CEILING_DIRECTORIES", &tmp)
        .output()
        .expect("bench-compare runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not inside a git repository") || stderr.contains("cannot run git"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
