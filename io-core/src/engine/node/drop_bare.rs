//! The drop trampoline without `std` (bare metal).
//!
//! Without std there are no thread-locals: one global work list behind a
//! critical section (safe from interrupt handlers). Nodes are `Send`, so
//! whichever context drains may drop nodes pushed by another.
//!
//! One of the two variants of the deep-drop trampoline, chosen as a whole
//! file by `cfg` in `engine/node/mod.rs` (embassy's way of swapping platform code,
//! instead of `cfg` inside functions). Both export the same API:
//! `drop_deferred(node)`, which drops `node` and everything it owns in
//! constant native stack, whatever other drops run meanwhile on this
//! thread or context.

use alloc::vec::Vec;
use core::cell::RefCell;

use super::{Node, drain};
use crate::sync::CriticalSectionMutex as Mutex;

struct Work {
    active: bool,
    pending: Vec<Node>,
}

static WORK: Mutex<RefCell<Work>> = Mutex::new(RefCell::new(Work {
    active: false,
    pending: Vec::new(),
}));

/// Drops `node` through the global work list (see `engine/node/mod.rs`).
pub(super) fn drop_deferred(node: Node) {
    let node = critical_section::with(|cs| {
        let mut w = WORK.borrow_ref_mut(cs);
        if w.active {
            w.pending.push(node);
            None
        } else {
            w.active = true;
            Some(node)
        }
    });
    let Some(node) = node else { return };
    let mut first = Some(node);
    drain(|| {
        first.take().or_else(|| {
            critical_section::with(|cs| {
                let mut w = WORK.borrow_ref_mut(cs);
                let next = w.pending.pop();
                if next.is_none() {
                    // Deactivate in the same critical section that saw the
                    // list empty, so no push is stranded.
                    w.active = false;
                    w.pending = Vec::new();
                }
                next
            })
        })
    });
}
