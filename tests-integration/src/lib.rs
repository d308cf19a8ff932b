//! Spindle's integration tests (unpublished): the tests of `spindle-core`
//! that need executors live in `tests/`, so that the core itself depends on
//! no executor and can be packaged first.
//!
//! * One test body, every executor: `tests/common/mod.rs` stamps each
//!   shared body into a module per runtime, five in all: exec-single,
//!   exec-wstp, exec-batching, and exec-tokio on a multi-thread and on a
//!   current-thread tokio runtime, each an `IORuntime`.
//! * Laws on `TestControl` (virtual time), combinators, cancellation and
//!   masking, finalizers, data types, stack safety, panics, tracing and
//!   fiber dumps.
//!
//! ```text
//! cargo test -p spindle-tests-integration                                    # tracing compiled in
//! cargo test -p spindle-tests-integration --no-default-features --features std  # compiled out
//! cargo test -p spindle-tests-integration --features tracing-full --test tracing
//! ```
//!
//! The README's examples, and the examples of the crates' own READMEs,
//! are this library's doc tests: they are written as an application
//! writes them, with the entry crate `spindle-effect` (a dev-dependency
//! here, with every executor); otherwise it has no items: the crate exists
//! for its `tests/`.

#![no_std]

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../app/README.md")]
struct AppReadmeDoctests;
