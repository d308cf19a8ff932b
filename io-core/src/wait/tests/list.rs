//! White-box tests of the waiter list (`list.rs`): arrival order, ids
//! across their wrap, tombstones and the ring's buffer, the entry's
//! layout, the ticket and the weak cleanup. They read the list's
//! representation (`entries`, `next_id`, `Entry`, `ID_STEP`: visible to
//! the `wait` folder for them).

use alloc::vec::Vec;

use crate::wait::list::{Entry, ID_STEP, WaiterId, WaiterList, cleanup_weakly};

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
