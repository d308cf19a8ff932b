//! Spindle's integration tests (unpublished): the tests of `spindle-core`
//! that need executors live in `tests/`, so that the core itself depends on
//! no executor and can be packaged first.
//!
//! * One test body, every executor: `tests/common/mod.rs` stamps each
//!   shared body into a module per executor (exec-single, exec-wstp,
//!   exec-batching, exec-tokio on both tokio flavours), each an
//!   `IORuntime`.
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
//! The README's examples are this library's doc tests (they use several
//! executors); otherwise it has no items: the crate exists for its
//! `tests/`.

#![no_std]

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
