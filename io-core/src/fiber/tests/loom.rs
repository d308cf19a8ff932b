//! Loom model checks of the suspension protocol (module doc of `fiber`):
//! `RUSTFLAGS="--cfg loom" cargo test -p io-core --lib --release -- loom`.

use alloc::vec::Vec;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::erased::Value;
use crate::fiber::Header;

/// Two completers race each other and the fiber's own suspension: exactly
/// one result is delivered, and the fiber is resumed exactly once, either
/// inline (it saw `DONE`) or by the completer that saw `SUSPENDED`.
#[test]
fn loom_racing_completers_and_suspension_resume_the_fiber_exactly_once() {
    loom::model(|| {
        let header = Arc::new(Header::new());
        let generation = header.begin_suspension();
        let scheduled = Arc::new(AtomicUsize::new(0));
        let wins = Arc::new(AtomicUsize::new(0));

        let completers: Vec<_> = [1u32, 2u32]
            .into_iter()
            .map(|value| {
                let header = header.clone();
                let scheduled = scheduled.clone();
                let wins = wins.clone();
                thread::spawn(move || {
                    if header.claim(generation) {
                        wins.fetch_add(1, Ordering::SeqCst);
                        if header.deliver(Ok(Value::new(value))) {
                            scheduled.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();

        let continued_inline = header.suspend();
        for c in completers {
            c.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::SeqCst), 1, "one completer wins");
        let resumes = continued_inline as usize + scheduled.load(Ordering::SeqCst);
        assert_eq!(resumes, 1, "the fiber is resumed exactly once");
        // The resumed fiber finds the winner's value.
        let value = header.take_result().ok().expect("a value");
        // SAFETY: the completers deliver `u32`s.
        let value = unsafe { value.take::<u32>() };
        assert!(value == 1 || value == 2);
    });
}

/// A callback of an earlier suspension cannot complete a later one.
#[test]
fn loom_a_stale_callback_is_ignored_by_the_next_suspension() {
    loom::model(|| {
        let header = Arc::new(Header::new());
        let first = header.begin_suspension();
        assert!(header.claim(first));
        assert!(!header.deliver(Ok(Value::unit())));
        header.take_result().ok().expect("delivered");
        let second = header.begin_suspension();

        let stale = {
            let header = header.clone();
            thread::spawn(move || header.claim(first))
        };
        let current = {
            let header = header.clone();
            thread::spawn(move || {
                if header.claim(second) {
                    header.deliver(Ok(Value::new(9u8)));
                    true
                } else {
                    false
                }
            })
        };
        assert!(!stale.join().unwrap(), "the stale callback never wins");
        assert!(current.join().unwrap(), "the current callback always wins");
        let continued_inline = header.suspend();
        assert!(continued_inline);
        // SAFETY: the current completer delivered a `u8`.
        assert_eq!(
            unsafe { header.take_result().ok().unwrap().take::<u8>() },
            9
        );
    });
}
