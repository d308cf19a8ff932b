//! The common mistakes with `IO` values and IO blocks, and what the
//! compiler says about each (trybuild): every file in `compile-fail/`
//! must fail to compile, with exactly the messages in its `.stderr` file.
//!
//! | case | the mistake |
//! |---|---|
//! | `io_built_but_never_run` | an `IO` built and dropped: nothing runs (`#[must_use]`, an error under `#![deny(unused_must_use)]`) |
//! | `borrow_escapes_into_a_fiber` | a closure of a fiber's program borrows a local (programs are `'static`) |
//! | `missing_error_conversion` | `?` on an `IO` whose error has no `From` into the block's error |
//! | `infallible_op_awaited_with_question_mark` | `?` on an operation that cannot fail, whose error type nothing fixes (use `.value()`) |
//! | `non_send_value_across_await` | an `Rc` held across an `.await` in an IO block (blocks are `Send`) |
//!
//! The messages are the compiler's, so they change with its version: the
//! `.stderr` files were written by rustc 1.95.0 (2026-04-14). After a
//! compiler upgrade, regenerate them and read each again:
//!
//! ```text
//! TRYBUILD=overwrite cargo test -p spindle-effect --test compile_fail
//! ```

#[test]
fn common_mistakes_fail_to_compile_with_a_message_that_names_them() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile-fail/*.rs");
}
