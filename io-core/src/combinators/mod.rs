//! `IO`'s combinators beyond the basic ones of `io.rs`, built on the
//! engine's nodes and on fibers.
//!
//! | file | what it holds |
//! |---|---|
//! | `monad_cancel.rs` | Cats Effect's `MonadCancel` and `start`: `uncancelable` and [`Poll`](crate::Poll), `canceled`, `on_cancel`, `guarantee(_case)`, the `bracket` family, `IO::start` |
//! | `cancelable.rs` | `IO::cancelable`: a program that ignores cancellation, stopped by a finalizer |
//! | `outcomes.rs` | the outcome table of the combinators that run children: how the children record their outcomes, how the parent waits for a condition on them (no wake-up lost), and how it cancels and awaits the rest |
//! | `embed.rs` | a child's outcome as the parent's program: `Outcome::embed`, `embed_never`, and the parent's `embed` |
//! | `race.rs` | `race_pair`, `race_outcome`, `race`, `race_all` ([`Either`](crate::Either)) |
//! | `par.rs` | `both_outcome`, `both`, `par_map2`, and the parallel traversals `par_traverse(_n)`, `par_sequence(_n)` |
//! | `select.rs` | the `select!` macro of IO blocks (a race of programs of different types, the winner's branch run inline) over `race_all` |
//! | `timeout.rs` | `timeout`, `timeout_option`, `timeout_to`, `timeout_and_forget`, `timed` ([`TimeoutError`](crate::error::TimeoutError)) |
//! | `memoize.rs` | `memoize` and `memoize_with` ([`Memoized`](crate::Memoized)) |
//! | `local.rs` | [`IOLocal`](crate::IOLocal): a value per fiber, copied into the children it starts |

pub(crate) mod cancelable;
pub(crate) mod embed;
pub(crate) mod local;
pub(crate) mod memoize;
pub(crate) mod monad_cancel;
pub(crate) mod outcomes;
pub(crate) mod par;
pub(crate) mod race;
pub(crate) mod select;
pub(crate) mod timeout;

#[cfg(test)]
mod tests;
