//! The list of live fibers behind fiber dumps and `live_fibers()`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::config::FiberConfig;
use crate::executor::{Executor, Fiber};
use crate::fiber::{FiberInfo, WeakFibers};
use crate::sync::Lock;

/// Weak references to an executor's live fibers, in shards.
///
/// An executor makes one [`FiberRegistry`] when it is built, registers
/// every fiber that lives on after a run, from
/// [`Executor::fiber_listed`](crate::Executor::fiber_listed),
/// and reads it for [`Executor::fiber_dump`](crate::Executor::fiber_dump).
/// The registry is *enabled* while fibers trace ([`lists_fibers`]) or when
/// the builder asked for it (`track_fibers(true)`); disabled, it keeps
/// nothing and registering is one predictable branch, so dumps cost
/// nothing when tracing is off.
///
/// It holds [`WeakFibers`] (weak references: a fiber's program is never
/// kept alive by a listing) in *shards*, each behind its own short lock: a
/// multi-threaded executor gives every worker a shard that only that
/// worker pushes to (uncontended) and one more for threads outside the
/// pool; a single-threaded one uses one shard.
///
/// Under `--cfg loom` it is the same code (a loom model checks a fiber
/// listed while a dump reads it: `tests/loom.rs`), with one difference in
/// memory: loom's `Arc` has no weak references, so there an entry is a
/// strong reference (`sync::Weak`) and keeps its fiber, and through the
/// fiber's executor possibly the registry itself, alive until the entry is
/// swept (the fiber completed), or [`clear`](FiberRegistry::clear) drops
/// it. Every executor clears its registry when it is dropped; a model
/// must do the same before it ends.
///
/// [`lists_fibers`]: super::lists_fibers
pub struct FiberRegistry {
    enabled: bool,
    shards: Box<[Lock<WeakFibers>]>,
}

impl core::fmt::Debug for FiberRegistry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FiberRegistry")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl FiberRegistry {
    /// The registry of an executor being built with `config`: calls
    /// [`adopt_config`](super::adopt_config) (once per executor), and is
    /// enabled if fibers trace or `track_fibers` asks for it. `shards`
    /// (at least one is made) are the places [`register`](FiberRegistry::register)
    /// may name.
    pub fn new(config: &FiberConfig, track_fibers: bool, shards: usize) -> FiberRegistry {
        let traces = super::adopt_config(config);
        let enabled = traces || track_fibers;
        FiberRegistry {
            enabled,
            shards: (0..shards.max(1))
                .map(|_| Lock::new(WeakFibers::new()))
                .collect::<Vec<_>>()
                .into(),
        }
    }

    /// Whether fibers are listed (they trace, or `track_fibers`).
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Lists `fiber` in `shard` (taken modulo the number of shards) if the
    /// registry is enabled; otherwise does nothing.
    #[inline]
    pub fn register<X: Executor>(&self, shard: usize, fiber: &Fiber<X>) {
        if self.enabled {
            let shard = &self.shards[shard % self.shards.len()];
            let weak = fiber.downgrade();
            shard.with(|fibers| fibers.push(weak));
        }
    }

    /// Number, state and trace of every listed fiber still alive (empty
    /// when the registry is disabled), by number: in the order the
    /// executor made them, whichever shard lists them.
    pub fn live_fibers(&self) -> Vec<FiberInfo> {
        let mut list = Vec::new();
        if self.enabled {
            for shard in self.shards.iter() {
                shard.with(|fibers| list.extend(fibers.infos()));
            }
            list.sort_unstable_by_key(|fiber| fiber.id);
        }
        list
    }

    /// Forgets every listed fiber (an executor being dropped). The weak
    /// references are dropped after each shard's lock is released.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            drop(shard.with(core::mem::take));
        }
    }
}
