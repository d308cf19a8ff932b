//! [`IO::cancelable`]: a program that ignores cancellation made cancelable
//! by a finalizer that makes it stop (Cats Effect 3.5's `cancelable`).
//!
//! # Protocol
//!
//! In a masked region, the caller starts the program on a fiber of its own
//! and waits for it, unmasked (`poll`). If the caller is canceled while it
//! waits, the wait's cancellation finalizer runs the user's finalizer `fin`
//! (which should make the program end: set a flag it reads, close the
//! socket it blocks on), then cancels the program's fiber and waits until
//! it has ended (its own finalizers have run): the caller's cancellation
//! completes only then. Otherwise the program's outcome is the caller's: a
//! value, an error raised again, a panic raised again, and a program that
//! canceled itself cancels the caller.
//!
//! `fin` runs only on the caller's cancellation, at most once, masked (as
//! every finalizer); the program's fiber is canceled even if `fin` fails
//! (`fin`'s error is then suppressed, as a finalizer's error is when the
//! fiber is canceled).
//!
//! Design credit: Cats Effect's `GenSpawn.cancelable` (start, join polled,
//! `fin` then cancel on cancellation). No code is copied.

use crate::combinators::embed::embed;
use crate::engine::tracing::{ChildTraces, Op};
use crate::fiber::handle::FiberHandle;
use crate::io::IO;

static CANCELABLE: Op = Op::new("cancelable");

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// Makes `self` cancelable by `fin` (Cats Effect's `cancelable`): `self`
    /// runs on a fiber of its own; if the caller is canceled meanwhile,
    /// `fin` runs (to make `self` stop), then `self`'s fiber is canceled,
    /// and the caller's cancellation completes once `self` has ended. For a
    /// program that cannot be canceled at its own points (an
    /// `uncancelable` body, a blocking wait on a flag) but can be told to
    /// stop. Module doc: `cancelable.rs`.
    ///
    /// ```
    /// use spindle_effect::prelude::*;
    /// use spindle_effect::{Deferred, wstp::Runtime};
    ///
    /// let stop = Deferred::<()>::new();
    /// let (s, fin) = (stop.clone(), stop.clone());
    /// // Uncancelable: only `stop` ends it.
    /// let stubborn: IO<&str, ()> = IO::uncancelable(move |_| s.get().map_to("stopped"));
    /// let io: IO<Outcome<&str, ()>, ()> = stubborn
    ///     .cancelable(fin.complete(()).void())
    ///     .start()
    ///     .flat_map(|f| IO::cede().product_r(f.cancel()).product_r(f.join()));
    /// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some(Outcome::Canceled));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn cancelable(self, fin: IO<(), E>) -> IO<A, E> {
        IO::uncancelable_untraced(move |poll| {
            self.start_untraced::<E>()
                .flat_map_untraced(move |fiber: FiberHandle<A, E>| {
                    let stop = fin.guarantee_untraced(fiber.cancel_untraced());
                    poll.apply_untraced(fiber.take_outcome())
                        .on_cancel_untraced(stop)
                        .flat_map_untraced(move |outcome| embed(poll, outcome, ChildTraces::none()))
                })
        })
        .traced_as(&CANCELABLE)
    }
}
