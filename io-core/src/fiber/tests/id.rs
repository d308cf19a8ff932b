//! Fiber numbers: `FiberId` and the `FiberIds` counter.

use alloc::format;
use alloc::vec::Vec;

use crate::FiberId;
use crate::executor::support::FiberIds;

#[test]
fn a_fiber_number_reads_as_a_hash_and_the_number() {
    let third = FiberId::nth(3);
    assert_eq!(third.get(), 3);
    assert_eq!(format!("{third}"), "#3");
    assert_eq!(format!("{third:?}"), "#3");
    assert_eq!(format!("{}", FiberId::UNNUMBERED), "#0");
}

#[test]
fn the_nth_fiber_is_number_n_and_numbers_start_over_from_1_after_u32_max() {
    assert_eq!(FiberId::nth(1).get(), 1);
    assert_eq!(FiberId::nth(u64::from(u32::MAX)).get(), u32::MAX);
    assert_eq!(FiberId::nth(1 << 32).get(), 1);
    assert_eq!(FiberId::nth((1 << 32) + 5).get(), 5);
    // A numbered fiber is never #0, the number of unnumbered ones.
    assert_eq!(FiberId::nth(0).get(), 1);
    assert!(FiberId::nth(1) > FiberId::UNNUMBERED);
}

#[test]
fn a_counter_numbers_fibers_from_1_in_the_order_it_is_asked() {
    let ids = FiberIds::new();
    let numbers: Vec<u32> = (0..5).map(|_| ids.next().get()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    assert_eq!(FiberIds::default().next().get(), 1);
}

#[test]
#[cfg_attr(miri, ignore = "threads: slow under Miri")]
fn a_counter_shared_by_threads_gives_each_fiber_its_own_number() {
    let ids = FiberIds::new();
    let per_thread = 1_000;
    let mut numbers: Vec<u32> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..per_thread)
                        .map(|_| ids.next().get())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a numbering thread"))
            .collect()
    });
    numbers.sort_unstable();
    let expected: Vec<u32> = (1..=4 * per_thread).collect();
    assert_eq!(numbers, expected);
}
