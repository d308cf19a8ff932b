//! The drop trampoline with `std`.
//!
//! With std the work list is thread-local: each thread drains its own.
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

struct Work {
    active: bool,
    pending: Vec<Node>,
}

std::thread_local! {
    static WORK: RefCell<Work> = const { RefCell::new(Work { active: false, pending: Vec::new() }) };
}

/// Drops `node` through this thread's work list (see `engine/node/mod.rs`).
pub(super) fn drop_deferred(node: Node) {
    // Either push (a drop is already running on this thread) or become
    // the thread's drainer.
    let mut slot = Some(node);
    let became_drainer = WORK.try_with(|w| {
        let mut w = w.borrow_mut();
        if w.active {
            w.pending.extend(slot.take());
            false
        } else {
            w.active = true;
            true
        }
    });
    let node = match (became_drainer, slot) {
        (Ok(false), _) | (_, None) => return,
        (Ok(true), Some(node)) => node,
        // The thread-local is gone (thread teardown): drop the chain with
        // a local list; nesting through closures then recurses.
        (Err(_), Some(node)) => return drop_locally(node),
    };
    let mut first = Some(node);
    drain(|| {
        first
            .take()
            .or_else(|| WORK.with(|w| w.borrow_mut().pending.pop()))
    });
    WORK.with(|w| {
        let mut w = w.borrow_mut();
        w.active = false;
        w.pending = Vec::new();
    });
}

fn drop_locally(node: Node) {
    let mut list = alloc::vec![node];
    drain(|| list.pop());
}
