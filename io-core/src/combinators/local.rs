//! [`IOLocal`]: a value per fiber (Cats Effect's `IOLocal`, Effect-TS's
//! `FiberRef`).
//!
//! Each fiber holds its own value of each local, its *default* until the
//! fiber sets one. A fiber started by `start`, `both`, `race`,
//! `par_traverse` or any other combinator that starts children begins with
//! a copy of the values its parent holds at that moment; from then on the
//! two are independent: what a child sets never reaches its parent, and
//! what the parent sets later never reaches the child. A fiber started
//! from outside (an executor's `spawn` or `block_on`) begins with every
//! default.
//!
//! The values live in the fiber's rarely used state (`fiber/locals.rs`):
//! a fiber that never sets a local holds nothing for them, and starting a
//! child copies one pointer (a reference count when there are values).
//! `get` and `set` are one step of the run loop each: a `Local` node,
//! whose closure the run loop calls with the fiber's locals as it calls a
//! `delay`'s thunk (and in the same step as the `flat_map` or `map` over
//! it). A local's clones share one allocation (its number and its
//! default), so that the closure of a `get` holds one pointer.
//! A `set` replaces the value in place when the fiber's small map of
//! values is its own and already holds one for the local (no
//! allocation); otherwise it copies the map (the parent's, if the fiber
//! still shares it), so that the parent and the children keep theirs.
//!
//! In a fiber's trace, the operations that only read or write a value
//! (`get`, `set`, `reset`, `get_and_set`, and `local`'s swap and restore)
//! are no event of their own, as Cats Effect's `IO.Local` carries none:
//! the `flat_map` or `map` over one names the line. Keeping their call
//! sites would put each in a pooled block with its closure (their
//! closures fit the node's word alone) and record an event, for a line
//! the bind over it records anyway. `update` and `modify` run the user's
//! function, so they are recorded where sites are kept, as a `delay` is.
//!
//! Design credits: Cats Effect's `IOLocal` (a child starts with a copy,
//! never writes back) and Effect-TS's `FiberRef.locally` (a scoped value
//! restored however the program ends). No code is copied.

use alloc::boxed::Box;

#[cfg(target_pointer_width = "64")]
use core::marker::PhantomData;

#[cfg(target_pointer_width = "64")]
use crate::engine::erased::{Adapter, ErasedFn, Value};
#[cfg(target_pointer_width = "64")]
use crate::engine::node::Node;
use crate::engine::tracing::{NO_SITE, Named, OpMeta, Site, here};
use crate::fiber::FiberLocals;
use crate::io::IO;
use crate::sync::Arc;
#[cfg(any(target_pointer_width = "64", loom))]
use crate::sync::{Ordering, StaticAtomicUsize};

crate::engine::tracing::trace_ops! {
    Get = "IOLocal::get",
    Set = "IOLocal::set",
    Reset = "IOLocal::reset",
    Update = "IOLocal::update",
    Modify = "IOLocal::modify",
    GetAndSet = "IOLocal::get_and_set",
    Restore = "IOLocal::local",
}

/// A `Local` node's closure, which produces an `A` from the fiber's
/// locals.
#[cfg(target_pointer_width = "64")]
struct WithLocals<A>(PhantomData<fn() -> A>);

#[cfg(target_pointer_width = "64")]
impl<A: Send + 'static, F: FnOnce(FiberLocals) -> A> Adapter<FiberLocals, Value, F>
    for WithLocals<A>
{
    #[inline(always)]
    unsafe fn call(f: F, locals: FiberLocals) -> Value {
        Value::new(f(locals))
    }
}

impl<A: Send + 'static, E: Send + 'static> IO<A, E> {
    /// A program that runs `f` with the running fiber's locals, in one
    /// run-loop step (a `delay` that reads or sets them), recorded as the
    /// operation `M` at `site`.
    #[inline(always)]
    fn with_locals_at<M: OpMeta, F>(site: Option<Site>, f: F) -> IO<A, E>
    where
        F: FnOnce(FiberLocals) -> A + Send + 'static,
    {
        #[cfg(target_pointer_width = "64")]
        {
            IO::from_node(Node::local(ErasedFn::new_sited::<WithLocals<A>, _, M>(
                f, site,
            )))
        }
        // Narrower targets have no `Local` node (its code costs flash in
        // every program): a `Start` node, whose spawner gives the locals.
        #[cfg(not(target_pointer_width = "64"))]
        {
            IO::with_spawner_at::<M, _>(site, move |spawner| f(spawner.locals()))
        }
    }
}

/// The next local's number (any read-modify-write hands each out once).
/// A word of 64 bits does not wrap in any program's life (one new local a
/// nanosecond would take centuries).
#[cfg(any(target_pointer_width = "64", loom))]
static KEYS: StaticAtomicUsize = StaticAtomicUsize::new(1);

/// The next local's number, on targets whose word would wrap (32 bits: a
/// program that makes a local per request could come round in days, and
/// two locals alive under one number would read each other's values): a
/// 64-bit count under the short lock (these targets may have no 64-bit
/// atomics; making a local is rare).
#[cfg(not(any(target_pointer_width = "64", loom)))]
static KEYS: crate::sync::Mutex<u64> = crate::sync::Mutex::new(1);

/// A number no other local has had.
fn next_key() -> u64 {
    #[cfg(any(target_pointer_width = "64", loom))]
    {
        KEYS.fetch_add(1, Ordering::Relaxed) as u64
    }
    #[cfg(not(any(target_pointer_width = "64", loom)))]
    {
        let mut next = KEYS.lock();
        let key = *next;
        *next += 1;
        key
    }
}

/// A value per fiber (module doc): each fiber reads and sets its own, and
/// a child fiber starts with a copy of its parent's.
///
/// A cheap handle: clones are the same local. Its values must be `Clone`
/// (a read hands out a copy), `Send` and `Sync` (they move with fibers
/// between threads).
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::IOLocal;
/// use spindle_effect::wstp::Runtime;
///
/// let request_id = IOLocal::new(String::from("none"));
/// let (child, after) = (request_id.clone(), request_id.clone());
/// let program = request_id
///     .local(
///         String::from("req-42"),
///         // A child fiber starts with its parent's value.
///         child.get::<()>().start().flat_map(|fiber| fiber.join_with_never()),
///     )
///     // Once the scope ends, the value before it shows again.
///     .flat_map(move |in_child| after.get().map(move |now| (in_child, now)));
/// let rt = Runtime::new()?;
/// assert_eq!(
///     rt.block_on(program)?.succeeded(),
///     Some((String::from("req-42"), String::from("none")))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct IOLocal<A> {
    /// Shared by the clones. One pointer, so that the closure of a `get`,
    /// which holds a clone of it, fits a node's word where no call site
    /// is kept with it (tracing mode `none` or compiled out: no pool
    /// block).
    inner: Arc<Inner<A>>,
}

/// What the clones of a local share: its number and its default.
struct Inner<A> {
    /// The local's number, its key in a fiber's locals.
    key: u64,
    /// Cloned out only for a fiber that has not set a value.
    default: A,
}

impl<A> IOLocal<A> {
    /// The local's number, its key in a fiber's locals.
    #[cfg_attr(not(feature = "observe"), allow(dead_code))]
    pub(crate) fn key(&self) -> u64 {
        self.inner.key
    }
}

impl<A> Clone for IOLocal<A> {
    fn clone(&self) -> Self {
        IOLocal {
            inner: self.inner.clone(),
        }
    }
}

impl<A: core::fmt::Debug> core::fmt::Debug for IOLocal<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IOLocal")
            .field("key", &self.inner.key)
            .field("default", &self.inner.default)
            .finish()
    }
}

impl<A: Clone + Send + Sync + 'static> IOLocal<A> {
    /// A new local whose value is `default` in every fiber that has not
    /// set it (Cats Effect's `IOLocal(default)`; making one has no effect
    /// on any fiber, so it is a plain constructor).
    pub fn new(default: A) -> IOLocal<A> {
        let key = next_key();
        IOLocal {
            inner: Arc::new(Inner { key, default }),
        }
    }

    /// The default, the value of fibers that have not set one.
    pub fn default_value(&self) -> &A {
        &self.inner.default
    }

    /// The current fiber's value (its default if it has set none).
    #[inline]
    pub fn get<E: Send + 'static>(&self) -> IO<A, E> {
        let local = self.inner.clone();
        IO::with_locals_at::<Named<Get>, _>(NO_SITE, move |fiber| {
            fiber
                .get::<A>(local.key)
                .unwrap_or_else(|| local.default.clone())
        })
    }

    /// Sets the current fiber's value (children it starts from now on
    /// begin with it; its parent and the children started before keep
    /// theirs).
    #[inline]
    pub fn set<E: Send + 'static>(&self, value: A) -> IO<(), E> {
        let key = self.inner.key;
        IO::with_locals_at::<Named<Set>, _>(NO_SITE, move |fiber| {
            fiber.set_value(key, value);
        })
    }

    /// Makes the current fiber's value the default again.
    #[inline]
    pub fn reset<E: Send + 'static>(&self) -> IO<(), E> {
        let key = self.inner.key;
        IO::with_locals_at::<Named<Reset>, _>(NO_SITE, move |fiber| fiber.set::<A>(key, None))
    }

    /// Sets the current fiber's value to `f` of it.
    #[track_caller]
    pub fn update<E: Send + 'static, F>(&self, f: F) -> IO<(), E>
    where
        F: FnOnce(A) -> A + Send + 'static,
    {
        let local = self.inner.clone();
        IO::with_locals_at::<Named<Update>, _>(here(), move |fiber| {
            let value = f(fiber
                .get::<A>(local.key)
                .unwrap_or_else(|| local.default.clone()));
            fiber.set_value(local.key, value);
        })
    }

    /// Sets the current fiber's value to the first of `f` of it, and
    /// returns the second.
    #[track_caller]
    pub fn modify<B: Send + 'static, E: Send + 'static, F>(&self, f: F) -> IO<B, E>
    where
        F: FnOnce(A) -> (A, B) + Send + 'static,
    {
        let local = self.inner.clone();
        IO::with_locals_at::<Named<Modify>, _>(here(), move |fiber| {
            let (value, out) = f(fiber
                .get::<A>(local.key)
                .unwrap_or_else(|| local.default.clone()));
            fiber.set_value(local.key, value);
            out
        })
    }

    /// Sets the current fiber's value and returns the one it replaces.
    #[inline]
    pub fn get_and_set<E: Send + 'static>(&self, value: A) -> IO<A, E> {
        let local = self.inner.clone();
        IO::with_locals_at::<Named<GetAndSet>, _>(NO_SITE, move |fiber| {
            let old = fiber
                .get::<A>(local.key)
                .unwrap_or_else(|| local.default.clone());
            fiber.set_value(local.key, value);
            old
        })
    }

    /// Runs `io` with the current fiber's value set to `value`, and puts
    /// the value it had before back when `io` ends, however it ends
    /// (success, error, cancellation): a value scoped to one program, as
    /// Effect-TS's `FiberRef.locally`. What `io` sets inside the scope is
    /// dropped at its end too.
    pub fn local<B: Send + 'static, E: Send + 'static>(&self, value: A, io: IO<B, E>) -> IO<B, E> {
        let key = self.inner.key;
        // The value before, as the fiber holds it (`None`: the default),
        // swapped in one step with `value`.
        let swap = IO::<Option<A>, E>::with_locals_at::<Named<Restore>, _>(NO_SITE, move |fiber| {
            let before = fiber.get::<A>(key);
            fiber.set_value(key, value);
            before
        });
        IO::uncancelable_untraced(move |poll| {
            swap.flat_map_untraced(move |before| {
                let restore = IO::with_locals_at::<crate::engine::tracing::Internal, _>(
                    NO_SITE,
                    move |fiber| {
                        fiber.set(key, before.map(Box::new));
                    },
                );
                poll.apply_untraced(io).guarantee_untraced(restore)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    #[test]
    fn every_local_gets_a_number_no_other_local_had_even_when_made_on_many_threads() {
        let first = super::next_key();
        let mut keys: Vec<u64> = (0..50).map(|_| super::next_key()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]) && keys[0] > first);
        #[cfg(feature = "std")]
        {
            extern crate std;
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    std::thread::spawn(|| (0..25).map(|_| super::next_key()).collect::<Vec<_>>())
                })
                .collect();
            for thread in threads {
                keys.extend(thread.join().expect("the thread ends"));
            }
        }
        keys.push(first);
        let made = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), made);
    }
}
