//! Spindle's standard library (Cats Effect's `std` and `kernel` data
//! types): what applications build with, written on `IO`, fibers and the
//! wait structures, never on the engine's internals.
//!
//! | module | what it holds |
//! |---|---|
//! | `data/` | [`Ref`](crate::Ref), [`Deferred`](crate::Deferred), [`Semaphore`](crate::Semaphore), [`Queue`](crate::Queue), [`Mutex`](crate::Mutex), [`CountDownLatch`](crate::CountDownLatch), [`CyclicBarrier`](crate::CyclicBarrier), [`AtomicCell`](crate::AtomicCell), [`MapRef`](crate::MapRef), [`Signal`](crate::Signal) |
//! | `resource.rs` | [`Resource`](crate::Resource): acquisition and release as a value, `par_zip` (`resource/par.rs`) |
//! | `supervisor.rs` | [`Supervisor`](crate::Supervisor) and [`JoinSet`](crate::JoinSet): scopes for fibers |
//! | `dispatcher.rs` | [`Dispatcher`](crate::Dispatcher): programs run from code that is not a fiber (foreign threads, callbacks) |
//! | `retry.rs` | [`Schedule`](crate::Schedule), `retry`, `repeat`, [`FixedRate`](crate::FixedRate) |
//! | `random.rs`, `clock.rs`, `console.rs` | the services [`Random`](crate::Random), [`Clock`](crate::Clock) and (with `std`) [`Console`](crate::Console) |

pub(crate) mod clock;
#[cfg(feature = "std")]
pub(crate) mod console;
pub(crate) mod data;
pub(crate) mod dispatcher;
pub(crate) mod random;
pub(crate) mod resource;
pub(crate) mod retry;
pub(crate) mod supervisor;
