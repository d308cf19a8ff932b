//! Waiting: the two structures every wait of a fiber goes through, below
//! both the fiber engine and the data types that use them.
//!
//! | file | what it holds |
//! |---|---|
//! | `list.rs` | [`WaiterList`](list::WaiterList): the FIFO list of waiting fibers behind `Queue`, `Semaphore`, `Mutex` and the join cell, with ids for removal by a canceled waiter and a ring that never shifts |
//! | `cell.rs` | [`JoinCell`]: a value set once and awaited by any number of fibers (a fiber's outcome in its join state, `Deferred`, `CountDownLatch`), the readers it resumes (`Waiter`, [`Read`]) and [`wait_for`], the wait on one that holds its owner weakly ([`CellOwner`]) |
//!
//! The fiber's join state (`fiber/join.rs`) is a `JoinCell` of the fiber's
//! erased outcome; the data types of the standard library
//! (`stdlib/data/`) are `JoinCell`s and `WaiterList`s with typed APIs.
//! Neither layer reaches into the other: the dependency points from both
//! to this module, as tokio's task join waker and its `sync` waiter lists
//! sit below the types built on them.
//!
//! The rule that keeps a wait from keeping itself alive ("waits nobody can
//! end") is in `cell.rs`; the same rule for permits and queue elements
//! ("holding what one waits on") in `list.rs`.
//!
//! Tests: `tests/list.rs` (the list's representation) and `tests/loom.rs`
//! (loom models of the join cell).

pub(crate) mod cell;
pub(crate) mod list;
#[cfg(test)]
mod tests;

pub(crate) use cell::{CellOwner, JoinCell, Presence, Read, wait_for};
