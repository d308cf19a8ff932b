//! The engine: what the run-loop interprets and the memory it runs in.
//! Nothing here knows a user's types; everything is erased to two words.
//!
//! | module | what it holds |
//! |---|---|
//! | `node/` | [`Node`](node::Node), the untyped program node (two words: a payload and a tagged vtable word), its decoded `Kind`; [`Frame`](node::Frame), the continuation on a fiber's explicit stack; `Bind`, a source and its continuation in one block; the drop trampoline that drops deep programs without recursion |
//! | `erased.rs` | `Value` and `ErasedFn`: values and closures with their types erased, in two words (a payload inline when it fits one word, else in a block) |
//! | `blocks.rs` | the block allocator: per-thread free lists of fixed-size blocks for `Bind` nodes and erased payloads, and of fiber stacks |
//! | `tracing/` | fiber tracing: call sites, operation names, a fiber's trace ring, traced scopes and traces of failures ([`Trace`](crate::Trace), [`Traced`](crate::Traced)) |
//!
//! The layers above: `fiber/` runs nodes, `io.rs` and `combinators/` build
//! them from typed closures, `executor/` schedules fibers.

pub(crate) mod blocks;
pub(crate) mod erased;
pub(crate) mod node;
pub(crate) mod tracing;

#[cfg(test)]
mod tests;
