//! White-box tests of the waiter list (`list.rs`): arrival order, ids
//! across their wrap, tombstones and the ring's buffer, the entry's
//! layout, the small list's inline waiter, the ticket and the weak
//! cleanup. They read the list's
//! representation (`entries`, `next_id`, `Entry`, `ID_STEP`: visible to
//! the `wait` folder for them).

use alloc::vec::Vec;

use crate::wait::list::{Entry, ID_STEP, SmallWaiterList, WaiterId, WaiterList, cleanup_weakly};

#[test]
fn waiters_come_out_in_arrival_order_without_the_removed_ones() {
    let mut list = WaiterList::new();
    let ids: Vec<WaiterId> = (0..10).map(|i| list.push(i)).collect();
    assert_eq!(list.remove(ids[3]), Some(3));
    assert_eq!(list.remove(ids[0]), Some(0));
    assert_eq!(list.remove(ids[9]), Some(9));
    assert_eq!(list.remove(ids[3]), None, "a second removal finds nothing");
    assert_eq!(list.len(), 7);
    assert_eq!(list.pop(), Some(1));
    let rest: Vec<i32> = list.take_all().collect();
    assert_eq!(rest, [2, 4, 5, 6, 7, 8]);
    assert!(list.is_empty());
    assert_eq!(list.pop(), None);
}

#[test]
fn a_weak_cleanup_keeps_nothing_alive() {
    use crate::sync::Arc;
    let owner = Arc::new(7u8);
    let cleanup = cleanup_weakly::<_, (), _>(owner.clone(), |_| {});
    assert_eq!(Arc::strong_count(&owner), 1);
    drop(cleanup);
}

#[test]
fn ids_that_wrap_around_still_find_remove_and_order_their_waiters() {
    let mut list = WaiterList::new();
    // As after 2^31 - 3 earlier waits on one structure.
    list.next_id = 0u32.wrapping_sub(6);
    let ids: Vec<WaiterId> = (0..8).map(|i| list.push(i)).collect();
    assert_eq!(
        ids[..4],
        [
            0u32.wrapping_sub(6),
            0u32.wrapping_sub(4),
            0u32.wrapping_sub(2),
            0
        ]
    );
    // Found on both sides of the wrap, by removal and by lookup.
    assert_eq!(list.remove(ids[4]), Some(4));
    assert_eq!(list.remove(ids[1]), Some(1));
    assert_eq!(list.get_mut(ids[3]).copied(), Some(3));
    assert_eq!(list.get_mut(ids[2]).copied(), Some(2));
    assert_eq!(list.remove(ids[4]), None, "a second removal finds nothing");
    // Ids older than the front, and ids not handed out yet, are not found.
    assert_eq!(list.remove(ids[0]), Some(0));
    assert_eq!(list.remove(ids[0]), None);
    assert_eq!(list.get_mut(ids[0]), None);
    assert_eq!(list.get_mut(ids[7].wrapping_add(ID_STEP)), None);
    assert_eq!(list.get_mut(0u32.wrapping_sub(20)), None);
    // Arrival order is kept across the wrap.
    assert_eq!(list.pop(), Some(2));
    let rest: Vec<i32> = list.take_all().collect();
    assert_eq!(rest, [3, 5, 6, 7]);
}

#[test]
fn a_cancel_storm_across_the_wrap_of_the_ids_removes_every_waiter() {
    let mut list = WaiterList::new();
    list.next_id = 0u32.wrapping_sub(200);
    let n = if cfg!(miri) { 150 } else { 1000 };
    let ids: Vec<WaiterId> = (0..n).map(|i| list.push(i)).collect();
    // Every other waiter leaves, from the back, then the rest in a
    // scrambled order: each removal finds its own waiter.
    for (i, id) in ids.iter().enumerate().rev().step_by(2) {
        assert_eq!(list.remove(*id), Some(i), "waiter {i}");
    }
    let mut left: Vec<usize> = (0..n).rev().skip(1).step_by(2).collect();
    assert_eq!(list.len(), left.len());
    left.sort_by_key(|i| (i * 7919) % 1009);
    for i in left {
        assert_eq!(list.remove(ids[i]), Some(i), "waiter {i}");
    }
    assert!(list.is_empty());
}

#[test]
fn the_first_waiter_gets_a_buffer_of_one_entry() {
    let mut list = WaiterList::new();
    let id = list.push(1u8);
    assert_eq!(list.entries.capacity(), 1);
    assert_eq!(list.remove(id), Some(1));
    assert!(list.is_empty());
}

#[test]
fn a_removed_waiter_of_an_already_taken_list_is_not_found() {
    let mut list = WaiterList::new();
    let id = list.push(1u8);
    assert_eq!(list.take_all().count(), 1);
    assert_eq!(list.remove(id), None);
    let later = list.push(2);
    assert_eq!(
        later,
        id.wrapping_add(ID_STEP),
        "ids keep increasing after the list was emptied"
    );
    assert_eq!(list.pop(), Some(2));
}

#[test]
fn tombstones_are_swept_instead_of_growing_the_buffer_forever() {
    let mut list = WaiterList::new();
    let n = if cfg!(miri) { 200 } else { 100_000 };
    // One long-lived waiter at the front, and a stream of waiters that
    // are removed again: the buffer stays small.
    list.push(usize::MAX);
    for i in 0..n {
        let keep = list.push(i);
        let id = list.push(i);
        assert_eq!(list.remove(id), Some(i));
        assert_eq!(list.remove(keep), Some(i));
    }
    assert!(list.entries.capacity() <= 4, "{}", list.entries.capacity());
    // Removals in the middle leave tombstones; pushing sweeps them.
    let ids: Vec<WaiterId> = (0..64).map(|i| list.push(i)).collect();
    for id in &ids[..63] {
        assert!(list.remove(*id).is_some());
    }
    for i in 0..64 {
        list.push(1000 + i);
    }
    assert!(
        list.entries.capacity() <= 128,
        "{}",
        list.entries.capacity()
    );
    assert_eq!(list.len(), 66);
    // The sweep kept the ids in order: they are still found.
    assert_eq!(list.get_mut(ids[63]).copied(), Some(63));
    assert_eq!(list.pop(), Some(usize::MAX));
    assert_eq!(list.pop(), Some(63));
    assert_eq!(list.pop(), Some(1000));
}

#[test]
fn an_entry_is_its_id_and_its_waiter_with_no_tag_beside_them() {
    use core::mem::size_of;
    let word = size_of::<usize>();
    // A `Deferred`'s or a join's waiter: 20 bytes on 32-bit targets (an
    // `Option` beside the id made it 24), 40 on 64-bit.
    type JoinWaiter = crate::wait::cell::Listed;
    assert_eq!(size_of::<JoinWaiter>(), 4 * word);
    assert_eq!(size_of::<Entry<JoinWaiter>>(), 5 * word);
    assert!(size_of::<Entry<JoinWaiter>>() < size_of::<(WaiterId, Option<JoinWaiter>)>());
    // A join cell's list: the inline entry, the id counter and a pointer
    // to the list behind (28 bytes on 32-bit targets, 56 on 64-bit: a
    // large block of the pool).
    assert_eq!(size_of::<SmallWaiterList<JoinWaiter>>(), 7 * word);
}

#[test]
fn waiters_left_in_the_list_or_its_iterators_are_dropped_once() {
    use crate::sync::Arc;
    let probe = Arc::new(());
    let mut list = WaiterList::new();
    let ids: Vec<WaiterId> = (0..6).map(|_| list.push(probe.clone())).collect();
    assert_eq!(Arc::strong_count(&probe), 7);
    drop(list.remove(ids[2]));
    drop(list.pop());
    assert_eq!(
        Arc::strong_count(&probe),
        5,
        "taken waiters are the caller's"
    );
    // Tombstones in the middle, then a list dropped with waiters in it.
    let mut other = WaiterList::new();
    let more: Vec<WaiterId> = (0..4).map(|_| other.push(probe.clone())).collect();
    drop(other.remove(more[1]));
    drop(other);
    assert_eq!(Arc::strong_count(&probe), 5);
    // A `take_all` iterator dropped half way drops the rest.
    let mut all = list.take_all();
    drop(all.next());
    drop(all);
    assert_eq!(Arc::strong_count(&probe), 1);
    assert!(list.is_empty());
    // `take_where` leaves the others listed under their ids.
    let kept = list.push(probe.clone());
    list.push(probe.clone());
    let mut first = true;
    let taken = list.take_where(|_| !core::mem::take(&mut first));
    assert_eq!(taken.len(), 1);
    assert!(list.get_mut(kept).is_some());
    drop(taken);
    drop(list);
    assert_eq!(Arc::strong_count(&probe), 1);
}

#[test]
fn the_only_waiter_of_a_small_list_is_inline_and_allocates_no_buffer() {
    let mut list = SmallWaiterList::new();
    assert!(list.is_empty());
    let id = list.push(1u8);
    assert!(list.rest.is_none(), "no list behind one waiter");
    assert_eq!(list.len(), 1);
    assert_eq!(list.get_mut(id), Some(&mut 1));
    assert!(list.rest_is_empty());
    assert_eq!(list.take_first(), Some(1));
    assert!(list.is_empty());
    assert_eq!(list.remove(id), None, "a taken waiter is not found again");
    assert_eq!(list.get_mut(id), None);
}

#[test]
fn a_small_list_keeps_arrival_order_around_its_inline_waiter() {
    let mut list = SmallWaiterList::new();
    let a = list.push(1);
    let b = list.push(2);
    assert!(
        !list.rest_is_empty(),
        "the second waiter is behind the first"
    );
    // The inline waiter leaves; later ones queue behind the list's, not
    // in the vacant inline entry ahead of them.
    assert_eq!(list.remove(a), Some(1));
    let c = list.push(3);
    assert_eq!(list.len(), 2);
    assert_eq!(list.remove(a), None, "a second removal finds nothing");
    assert_eq!(drain(&mut list), [2, 3]);
    assert!(list.is_empty());
    assert_eq!(list.remove(b), None);
    assert_eq!(list.remove(c), None);
    // Empty again: the next waiter is inline, under a fresh id.
    let d = list.push(4);
    assert!(d != a && d != b && d != c);
    let e = list.push(5);
    assert_eq!(list.remove(e), Some(5));
    assert_eq!(drain(&mut list), [4]);
}

#[test]
fn a_small_list_finds_its_waiters_across_the_wrap_of_the_ids() {
    let mut list = SmallWaiterList::new();
    list.next_id = 0u32.wrapping_sub(ID_STEP);
    let ids: Vec<WaiterId> = (0..4).map(|i| list.push(i)).collect();
    assert_eq!(ids[1], 0, "the ids wrap after the inline waiter's");
    assert_eq!(list.remove(ids[2]), Some(2));
    assert_eq!(list.get_mut(ids[0]), Some(&mut 0));
    assert_eq!(list.remove(ids[0]), Some(0));
    assert_eq!(drain(&mut list), [1, 3]);
}

#[test]
fn waiters_left_in_a_small_list_are_dropped_once() {
    use crate::sync::Arc;
    let probe = Arc::new(());
    let mut list = SmallWaiterList::new();
    let ids: Vec<WaiterId> = (0..3).map(|_| list.push(probe.clone())).collect();
    drop(list.remove(ids[1]));
    assert_eq!(Arc::strong_count(&probe), 3);
    drop(list);
    assert_eq!(Arc::strong_count(&probe), 1, "inline and listed waiters");
    let mut list = SmallWaiterList::new();
    list.push(probe.clone());
    list.push(probe.clone());
    list.push(probe.clone());
    drop(list.take_first());
    let mut rest = list.rest().expect("waiters behind the first").take_all();
    drop(rest.next());
    drop(rest);
    assert_eq!(Arc::strong_count(&probe), 1, "a rest dropped half way");
    assert!(list.is_empty());
}

/// Every waiter of a small list, oldest first (as a completion takes them).
fn drain<T>(list: &mut SmallWaiterList<T>) -> Vec<T> {
    let first = list.take_first();
    let rest = list.rest().map(|rest| rest.take_all().collect::<Vec<T>>());
    first
        .into_iter()
        .chain(rest.into_iter().flatten())
        .collect()
}
