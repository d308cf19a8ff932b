//! Unit tests of the engine that are larger than a file's own small
//! tests: the erased values and closures (`erased.rs`). They exercise its
//! `unsafe` paths and run under Miri in CI.

mod erased;
