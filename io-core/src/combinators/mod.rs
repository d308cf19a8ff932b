//! `IO`'s combinators beyond the basic ones of `io.rs`, built on the
//! engine's nodes and on fibers.
//!
//! | file | what it holds |
//! |---|---|
//! | `monad_cancel.rs` | Cats Effect's `MonadCancel` and `start`: `uncancelable` and [`Poll`](crate::Poll), `canceled`, `on_cancel`, `guarantee(_case)`, the `bracket` family, `IO::start` |
//! | `cancelable.rs` | `IO::cancelable`: a program that ignores cancellation, stopped by a finalizer |
//! | `concurrent.rs` | `race`, `both`, `par_map2`, the parallel traversals, `timeout` and `timed` |
//! | `many.rs` | `race_all` and `par_sequence_n` |
//! | `memoize.rs` | `memoize` and `memoize_with` ([`Memoized`](crate::Memoized)) |

pub(crate) mod cancelable;
pub(crate) mod concurrent;
pub(crate) mod many;
pub(crate) mod memoize;
pub(crate) mod monad_cancel;
