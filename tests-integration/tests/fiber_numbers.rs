//! Fiber numbers on every executor: each executor numbers the fibers it
//! makes `#1`, `#2`, ... in the order it makes them (the main fiber of its
//! first `block_on` first), a fiber dump lists them by number, and a fiber
//! handle shows the number the dump shows.

// The dump test needs the fibers listed, which they are while they trace;
// without the `tracing` feature its helpers are unused.
#![cfg_attr(not(feature = "tracing"), allow(unused))]

mod common;

use common::{Dumper, eventually, rt_test};
use spindle_core::{Deferred, FiberDump, FiberHandle, FiberState, IO};

type E = ();

/// Starts `n` fibers, one after the other, each waiting for `gate`.
fn start_waiters(gate: &Deferred<()>, n: usize) -> IO<Vec<FiberHandle<(), E>>, E> {
    let gate = gate.clone();
    IO::traverse((0..n).collect(), move |_| gate.get::<E>().start())
}

/// A program that takes a dump when it runs.
fn take_dump(dump: &Dumper) -> IO<FiberDump, E> {
    let dump = dump.clone();
    IO::delay(move || dump())
}

/// The numbers of the fibers of `handles`, and their `Debug`.
fn numbers_and_debug(handles: &[FiberHandle<(), E>]) -> Vec<(u32, String)> {
    handles
        .iter()
        .map(|handle| (handle.id().get(), format!("{handle:?}")))
        .collect()
}

rt_test! {
    #[cfg(feature = "tracing")]
    fn a_dump_lists_the_fibers_numbered_from_1_in_the_order_they_were_made() {
        let rt = rt();
        let dump = rt.dumper();
        let gate = Deferred::<()>::new();
        let (waited, opened) = (gate.clone(), gate.clone());
        let program = start_waiters(&gate, 3).flat_map(move |handles| {
            eventually::<E>(move || waited.waiters() == 3)
                .product_r(take_dump(&dump))
                .flat_map(move |dump| {
                    let shown = numbers_and_debug(&handles);
                    opened
                        .complete(())
                        .product_r(IO::traverse(handles, |handle| handle.join_void()))
                        .map(move |_| (dump, shown))
                })
        });
        let (dump, shown) = rt.run(program).succeeded().expect("the program succeeds");

        // The main fiber, then the three it started, in that order.
        let numbers: Vec<u32> = dump.fibers.iter().map(|fiber| fiber.id.get()).collect();
        assert_eq!(numbers, [1, 2, 3, 4], "{dump}");
        assert_ne!(dump.fibers[0].state, FiberState::Waiting, "{dump}");
        assert!(
            dump.fibers[1..].iter().all(|fiber| fiber.state == FiberState::Waiting),
            "{dump}"
        );
        // Each handle shows the number the dump shows for its fiber.
        let text = dump.to_string();
        assert!(text.starts_with("fiber #1 "), "{text}");
        for ((number, debug), fiber) in shown.iter().zip(&dump.fibers[1..]) {
            assert_eq!(*number, fiber.id.get(), "{dump}");
            assert_eq!(debug, &format!("FiberHandle {{ fiber: #{number} }}"));
            let header = format!("fiber #{number} WAITING");
            assert!(text.contains(&header), "{header:?} in:\n{text}");
        }
    }

    fn handles_show_their_fibers_numbers_in_the_order_the_fibers_were_started() {
        let rt = rt();
        let start_three = || {
            IO::traverse(vec![(); 3], |()| IO::<(), E>::unit().start::<E>()).flat_map(|handles| {
                let shown = numbers_and_debug(&handles);
                IO::traverse(handles, |handle| handle.join_void()).map(move |_| shown)
            })
        };
        // The first program's main fiber is #1: its fibers are #2 to #4.
        let first = rt.run(start_three()).succeeded().expect("the program succeeds");
        assert_eq!(
            first,
            [
                (2, "FiberHandle { fiber: #2 }".to_string()),
                (3, "FiberHandle { fiber: #3 }".to_string()),
                (4, "FiberHandle { fiber: #4 }".to_string()),
            ]
        );
        // The executor goes on counting: the next main fiber is #5.
        let second = rt.run(start_three()).succeeded().expect("the program succeeds");
        let numbers: Vec<u32> = second.iter().map(|(number, _)| *number).collect();
        assert_eq!(numbers, [6, 7, 8]);
        // Another executor numbers its own fibers from #1.
        let other = rt_with_config(spindle_core::FiberConfig::default());
        let third = other.run(start_three()).succeeded().expect("the program succeeds");
        let numbers: Vec<u32> = third.iter().map(|(number, _)| *number).collect();
        assert_eq!(numbers, [2, 3, 4]);
    }
}
