//! Spindle's benchmark tools: binaries that run, compare and report the
//! benchmarks of the `benches` crate, the HTTP load of the HTTP benchmark,
//! and that benchmark's tokio reference server. The crate is unpublished
//! (xtask style) and is the only one that depends on `plotters` and
//! `serde_json`, so `cargo bench` builds the benchmarks and nothing of
//! this.
//!
//! Run them from the workspace root (the default paths below are relative to
//! the current directory).
//!
//! # `bench-compare`: two revisions' benchmarks, side by side
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-compare -- \
//!     [--base REV] [--head REV] [--bench NAME] [--filter REGEX] [--rounds N] [--quick]
//!     [--from-runs]
//! ```
//!
//! Builds a bench target of the `benches` crate (`suite` by default) at two
//! git revisions (default: the merge base with `main` against the working
//! tree) with `cargo bench -p benches --bench NAME --no-run`, each in a
//! worktree and target directory of its own under `target/bench-compare/`,
//! runs the two executables alternately `--rounds` times and prints one
//! JMH-style table per workload, with a verdict only beyond the noise.
//! `--from-runs` prints the last comparison's tables again. See
//! [`compare`].
//!
//! # `bench-report`: BENCHMARKS.md's suite section and chart
//!
//! ```text
//! cargo run -p spindle-tools --release --bin bench-report -- \
//!     [--criterion DIR] [--out BENCHMARKS.md] [--svg benches/suite.svg] [--command TEXT]
//! ```
//!
//! Reads criterion's results of the `suite.*` groups (default
//! `target/criterion`, or `$CARGO_TARGET_DIR/criterion`, as left by
//! `cargo bench -p benches --bench suite`), rewrites BENCHMARKS.md between
//! `<!-- suite:begin -->` and `<!-- suite:end -->` (machine, date, command,
//! one table per workload) and draws `benches/suite.svg`. See [`report`].
//!
//! # `loadgen`: closed-loop HTTP/1.1 load
//!
//! ```text
//! cargo run --release -p spindle-tools --bin loadgen -- \
//!     --url http://127.0.0.1:8080/ --connections 50 --duration 10 [--warmup 1] [--json]
//! ```
//!
//! N keep-alive connections, one thread each, one request outstanding per
//! connection; prints the total, latency statistics (slowest, fastest,
//! average, p50, p99), requests/sec and errors, or one JSON object with
//! `--json`. Std only. See [`http_load`].
//!
//! # `http_compare`: the HTTP benchmark
//!
//! ```text
//! cargo build --release -p spindle-effect --features full --example hello_http
//! cargo build --release -p spindle-tools --bin hello_tokio --bin http_compare
//! target/release/http_compare [--duration 10] [--warmup 1]
//! target/release/http_compare --versus [--rounds 3] [--pairs wstp,batching,fan-out] [--server-cpu 0]
//! ```
//!
//! Starts the `hello_http` server (spindle-effect's example; default
//! `target/release/examples/hello_http`, or `--server PATH`) on the event
//! loop in batching and then macrotask mode, loads it with `loadgen`'s code
//! at each connection count (default 1 and 50) and prints one markdown
//! table per count plus the requests/sec ratio batching / non-batching.
//! `--versus` compares named servers side by side in alternating rounds,
//! at 1, 50 and 256 connections: spindle wstp against tokio multi_thread,
//! spindle batching against tokio current_thread, and `hello_http
//! --fan-out 8` in batching against macrotask mode, with the servers' CPU
//! time per request. `--self-test` runs either against a std-only stand-in
//! server. See [`http_load::compare`] and [`http_load::versus`].
//!
//! # `hello_tokio`: the tokio reference server
//!
//! ```text
//! hello_tokio [--flavor current|multi] [--workers N] [--addr 127.0.0.1:0] [hello_http's limits]
//! ```
//!
//! hello_http's HTTP on tokio: it compiles hello_http's own protocol module
//! (`spindle/examples/hello_http/http.rs`) through `#[path]`, so requests
//! are parsed and framed by the same code and answered with the same
//! bytes; a tokio task per connection. It is here, beside the runner that
//! starts it, because it is a tool of the benchmark (unpublished, with
//! tokio's networking as a dependency of this crate only), not a
//! criterion suite (`benches`) nor an example of Spindle's (the entry
//! crate, which does not depend on tokio's networking).
//!
//! # `redis_compare`: Redis servers under `redis-benchmark`
//!
//! ```text
//! cargo run -p spindle-tools --release --bin redis_compare -- --build \
//!     [--servers tokio_mt,tokio_current,redis,spindle_wstp,spindle_batching,spindle_tokio]
//!     [--clients 1,50,256] [--pipeline 1,16] [--requests N] [--rounds R]
//! ```
//!
//! Starts each named server in turn (tokio's mini-redis through
//! `mini_redis_tokio`, Redis itself when `redis-server` is installed, and
//! the `mini-redis-server` of `examples/mini-redis` on each executor), runs
//! Debian's `redis-benchmark -t set,get` at each shape against it, and
//! prints one markdown table: requests per second, median latencies and
//! the server's CPU time per request, with the ratio to a reference
//! server. A shape with more clients than a server serves at once (tokio's
//! mini-redis: 250) is listed as not run. See [`redis_compare`].
//!
//! # `mini_redis_tokio`: the tokio reference server of `redis_compare`
//!
//! tokio's own mini-redis application (the `mini-redis` crate's
//! `server::run`, a dependency; none of its code copied) on a tokio
//! runtime, multi-thread or current-thread.
//!
//! Every binary prints its flags with `--help`, exits with status 2 for an
//! unusable command line and never panics on bad input ([`cli`] is their
//! shared parser; [`results`] reads criterion's files for the first two).

#![deny(missing_docs)]

pub mod cli;
pub mod compare;
pub mod http_load;
pub mod redis_compare;
pub mod report;
pub mod results;
