//! `Ref`: a shared cell whose operations are atomic with respect to each
//! other, also under many concurrent fibers.

mod common;

use common::rt_test;
use spindle_core::{IO, Outcome, PanicMessage, Ref};

type E = String;

rt_test! {
    fn get_reads_the_initial_value_and_set_replaces_it() {
        let r = Ref::new(1u32);
        let (r1, r2) = (r.clone(), r.clone());
        let io: IO<(u32, u32), E> = r
            .get()
            .flat_map(move |before| r1.set(2).product_r(r2.get()).map(move |after| (before, after)));
        assert_eq!(run(io), Outcome::Succeeded((1, 2)));
    }

    fn building_an_operation_changes_nothing_until_it_runs() {
        let r = Ref::new(1u32);
        let set: IO<(), E> = r.set(5);
        let update: IO<(), E> = r.update(|n| *n += 10);
        drop(update);
        assert_eq!(run(r.get::<E>()), Outcome::Succeeded(1));
        assert_eq!(run(set.product_r(r.get())), Outcome::Succeeded(5));
    }

    fn update_changes_the_value_in_place() {
        let r = Ref::new(vec![1u32]);
        let r1 = r.clone();
        let io: IO<Vec<u32>, E> = r.update(|v| v.push(2)).product_r(r1.get());
        assert_eq!(run(io), Outcome::Succeeded(vec![1, 2]));
    }

    fn modify_changes_the_value_and_produces_what_its_function_returns() {
        let r = Ref::new(10u32);
        let r1 = r.clone();
        let io: IO<(String, u32), E> = r
            .modify(|n| {
                *n += 1;
                format!("was {}", *n - 1)
            })
            .flat_map(move |out| r1.get().map(move |now| (out, now)));
        assert_eq!(run(io), Outcome::Succeeded(("was 10".to_string(), 11)));
    }

    fn get_and_update_produces_the_value_from_before() {
        let r = Ref::new(3u32);
        let r1 = r.clone();
        let io: IO<(u32, u32), E> = r
            .get_and_update(|n| *n *= 2)
            .flat_map(move |before| r1.get().map(move |now| (before, now)));
        assert_eq!(run(io), Outcome::Succeeded((3, 6)));
    }

    fn update_and_get_produces_the_value_from_after() {
        let r = Ref::new(3u32);
        let r1 = r.clone();
        let io: IO<(u32, u32), E> = r
            .update_and_get(|n| *n *= 2)
            .flat_map(move |after| r1.get().map(move |now| (after, now)));
        assert_eq!(run(io), Outcome::Succeeded((6, 6)));
    }

    fn get_and_set_produces_the_old_value_and_stores_the_new_one() {
        let r = Ref::new("old".to_string());
        let r1 = r.clone();
        let io: IO<(String, String), E> = r
            .get_and_set("new".to_string())
            .flat_map(move |old| r1.get().map(move |now| (old, now)));
        assert_eq!(run(io), Outcome::Succeeded(("old".to_string(), "new".to_string())));
    }

    fn clones_share_one_cell() {
        let r = Ref::new(0u32);
        let (a, b) = (r.clone(), r.clone());
        let io: IO<u32, E> = a.set(7).product_r(b.get());
        assert_eq!(run(io), Outcome::Succeeded(7));
    }

    fn updates_from_many_fibers_are_atomic() {
        const FIBERS: u64 = 50;
        const EACH: u64 = if cfg!(miri) { 5 } else { 200 };
        let r = Ref::new(0u64);
        let total = r.clone();
        let io: IO<u64, E> = IO::par_traverse((0..FIBERS).collect(), move |_| {
            let r = r.clone();
            IO::replicate(EACH as usize, move || {
                let r = r.clone();
                IO::cede().product_r(r.update(|n| *n += 1))
            })
        })
        .product_r(total.get());
        assert_eq!(run(io), Outcome::Succeeded(FIBERS * EACH));
    }

    fn modify_from_many_fibers_hands_out_every_ticket_exactly_once() {
        const N: u64 = 500;
        let next = Ref::new(0u64);
        let io: IO<Vec<u64>, E> = IO::par_traverse((0..N).collect(), move |_| {
            let next = next.clone();
            IO::cede().product_r(next.modify(|n| {
                let ticket = *n;
                *n += 1;
                ticket
            }))
        });
        let mut tickets = run(io).succeeded().expect("succeeds");
        tickets.sort_unstable();
        assert_eq!(tickets, (0..N).collect::<Vec<_>>());
    }

    fn a_panicking_update_ends_only_its_fiber_and_leaves_a_usable_value() {
        let r = Ref::new(1u32);
        let panicking: IO<(), E> = r.update(|n| {
            *n = 2;
            panic!("update panicked")
        });
        assert_eq!(run(panicking), Outcome::Panicked(PanicMessage::new("update panicked")));
        let r1 = r.clone();
        let io: IO<u32, E> = r.update(|n| *n += 10).product_r(r1.get());
        assert_eq!(run(io), Outcome::Succeeded(12));
    }

    fn a_panicking_modify_under_a_bind_drops_the_bind_once_and_runs_the_finalizer_once() {
        // The bind's continuation and the modify run in one step: the
        // panic still ends the fiber, drops the continuation (never calls
        // it) and runs the finalizer around them, once each.
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let r = Ref::new(1u32);
        let (finalized, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        struct CountsDrop(Arc<AtomicUsize>);
        impl Drop for CountsDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let witness = CountsDrop(dropped.clone());
        let f = finalized.clone();
        let io: IO<u32, E> = r
            .modify(|n| -> u32 {
                *n = 2;
                panic!("modify panicked")
            })
            .flat_map(move |n| {
                drop(witness);
                IO::pure(n + 100)
            })
            .guarantee(IO::delay(move || {
                f.fetch_add(1, Ordering::SeqCst);
            }));
        assert_eq!(run(io), Outcome::Panicked(PanicMessage::new("modify panicked")));
        assert_eq!(finalized.load(Ordering::SeqCst), 1, "the finalizer ran once");
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the continuation was dropped once");
        assert_eq!(run(r.get::<E>()), Outcome::Succeeded(2));
    }

    fn modifies_in_a_loop_of_binds_longer_than_the_yield_budget_keep_every_result() {
        // Each modify and the bind after it run in one step; the loop
        // still yields as its budget runs out, and loses nothing.
        const STEPS: u64 = 5_000;
        fn go(r: Ref<u64>, left: u64, acc: u64) -> IO<u64, E> {
            if left == 0 {
                return IO::pure(acc);
            }
            r.clone()
                .modify(|n| {
                    *n += 1;
                    *n
                })
                .flat_map(move |now| go(r, left - 1, acc + now))
        }
        let r = Ref::new(0u64);
        let io = go(r.clone(), STEPS, 0).flat_map(move |sum| r.get().map(move |now| (sum, now)));
        assert_eq!(run(io), Outcome::Succeeded((STEPS * (STEPS + 1) / 2, STEPS)));
    }
}
