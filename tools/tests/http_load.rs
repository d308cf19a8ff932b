//! The `loadgen` and `http_compare` binaries end to end, against the
//! std-only stand-in server (`spindle_tools::http_load::hello_server`).

use std::process::{Command, Output};

use spindle_tools::http_load::hello_server::{HelloServer, ServerOptions};

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The number after `"key": ` in loadgen's JSON.
fn json_number(json: &str, key: &str) -> f64 {
    let pattern = format!("\"{key}\": ");
    let at = json
        .find(&pattern)
        .unwrap_or_else(|| panic!("{key} in {json}"))
        + pattern.len();
    let end = json[at..].find([',', '}']).unwrap() + at;
    json[at..end].trim().parse().unwrap()
}

#[test]
fn loadgen_counts_every_request_a_server_answers_and_reports_json() {
    let server = HelloServer::start(ServerOptions {
        max_requests: Some(25),
        ..ServerOptions::default()
    })
    .unwrap();
    let url = format!("http://{}/", server.addr());
    let out = loadgen(&[
        "--url",
        &url,
        "--connections",
        "3",
        "--duration",
        "0.3",
        "--json",
    ]);
    let json = text(&out.stdout);
    assert!(out.status.success(), "{json}\n{}", text(&out.stderr));
    assert_eq!(json.lines().count(), 1, "{json}");
    assert_eq!(json_number(&json, "requests"), 25.0);
    assert_eq!(server.served(), 25);
    assert_eq!(json_number(&json, "connections"), 3.0);
    // The 26th request is refused (closed connection, then refused
    // connects): errors, but never a crash.
    assert!(json_number(&json, "errors") >= 1.0, "{json}");
    assert!(json_number(&json, "p50_secs") <= json_number(&json, "p99_secs"));
    assert!(json_number(&json, "total_secs") >= 0.3);
}

#[test]
fn loadgen_prints_a_summary_with_percentiles_by_default() {
    let server = HelloServer::start(ServerOptions::default()).unwrap();
    let url = format!("http://{}/", server.addr());
    let out = loadgen(&["--url", &url, "--duration", "100ms"]);
    let summary = text(&out.stdout);
    assert!(out.status.success(), "{summary}");
    for label in [
        "Total:",
        "Slowest:",
        "Fastest:",
        "Average:",
        "Requests/sec:",
        "p50:",
        "p99:",
        "Errors:       0",
    ] {
        assert!(summary.contains(label), "{label} missing from\n{summary}");
    }
}

#[test]
fn loadgen_exits_with_failure_when_every_request_fails() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{addr}/");
    let out = loadgen(&["--url", &url, "--duration", "50ms", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json = text(&out.stdout);
    assert_eq!(json_number(&json, "requests"), 0.0);
    assert!(json.contains("\"p99_secs\": null"), "{json}");
    assert!(text(&out.stderr).contains("every request failed"));
}

#[test]
fn loadgen_rejects_bad_command_lines_with_a_message_and_status_2() {
    for (args, message) in [
        (
            &["--url", "http://127.0.0.1:1/", "--frobnicate"][..],
            "unknown argument \"--frobnicate\"",
        ),
        (
            &["--url", "http://127.0.0.1:1/", "--connections", "0"][..],
            "at least one connection",
        ),
        (&["--url", "127.0.0.1:1"][..], "invalid --url"),
        (&["--connections", "2"][..], "--url is required"),
    ] {
        let out = loadgen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn http_compare_self_test_prints_both_tables_and_the_ratios() {
    let out = Command::new(env!("CARGO_BIN_EXE_http_compare"))
        .args(["--self-test", "--duration", "0.15", "--warmup", "0"])
        .output()
        .expect("http_compare runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("### 1 connection ("), "{stdout}");
    assert!(stdout.contains("### 50 connections ("), "{stdout}");
    assert_eq!(stdout.matches("| batching | ").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("| non-batching | ").count(), 2, "{stdout}");
    assert!(
        stdout.contains("requests/sec, batching / non-batching: 1 connection: "),
        "{stdout}"
    );
    // Both stand-in servers were started and stopped.
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("server listening on").count(), 2, "{stderr}");
}

#[test]
fn http_compare_without_a_server_binary_says_how_to_build_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_http_compare"))
        .args(["--server", "/nonexistent/hello_http"])
        .output()
        .expect("http_compare runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "cargo build --release -p spindle-effect --features full --example hello_http"
        ),
        "{stderr}"
    );
}

#[test]
fn http_compare_versus_self_test_prints_a_table_per_pair_with_cpu_per_request() {
    let out = Command::new(env!("CARGO_BIN_EXE_http_compare"))
        .args([
            "--versus",
            "--self-test",
            "--duration",
            "0.1",
            "--warmup",
            "0",
            "--rounds",
            "2",
            "--connections",
            "1,3",
        ])
        .output()
        .expect("http_compare runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for title in [
        "### spindle wstp vs tokio multi_thread, 2 workers each",
        "### spindle batching (the event loop, batching mode) vs tokio current_thread",
        "### the batching reframe: hello_http --fan-out 8 on the event loop, batching vs macrotask",
    ] {
        assert!(stdout.contains(title), "{title}: {stdout}");
    }
    assert_eq!(
        stdout.matches("| server CPU/request |").count(),
        3,
        "{stdout}"
    );
    // Two counts, two servers each, in three tables.
    for row in [
        "| 1 | spindle wstp | ",
        "| 3 | tokio multi_thread | ",
        "| 1 | spindle batching | ",
        "| 3 | tokio current_thread | ",
        "| 1 | batching | ",
        "| 3 | macrotask | ",
    ] {
        assert_eq!(stdout.matches(row).count(), 1, "{row}: {stdout}");
    }
    assert!(stdout.contains("servers unpinned; 2 rounds"), "{stdout}");
    assert!(
        stdout.contains("requests/s, spindle wstp / tokio multi_thread: 1 connection: "),
        "{stdout}"
    );
    // Two servers per pair, each started once and loaded 2 rounds x 2 counts.
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("server listening on").count(), 6, "{stderr}");
    assert_eq!(stderr.matches(", round 2 of 2").count(), 12, "{stderr}");
}

#[test]
fn http_compare_versus_without_a_tokio_server_says_how_to_build_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_http_compare"))
        .args([
            "--versus",
            "--server",
            env!("CARGO_BIN_EXE_http_compare"),
            "--tokio-server",
            "/nonexistent/hello_tokio",
        ])
        .output()
        .expect("http_compare runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cargo build --release -p spindle-tools --bin hello_tokio"),
        "{stderr}"
    );
}
