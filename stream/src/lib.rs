//! Streams for Spindle: pull-based, chunked, resource-safe streams of
//! values produced by `IO` programs, in the model of fs2.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::single::SingleThreaded;
//! use spindle_effect::stream::Stream;
//!
//! // Squares of the odd numbers below 10, summed: a pipeline of pure
//! // stages, run by the program `compile` makes.
//! let sum: IO<u64, ()> = Stream::range(0u64..10)
//!     .filter(|n| n % 2 == 1)
//!     .map(|n| n * n)
//!     .compile()
//!     .fold(0, |acc, n| acc + n);
//! assert_eq!(SingleThreaded::new()?.block_on(sum)?.succeeded(), Some(165));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A [`Stream`] is a description, like an `IO`: nothing runs until the
//! program from [`Stream::compile`] runs on a fiber. The consumer pulls:
//! each stage asks its input for the next [`Chunk`] only when its own
//! output is asked for, so an endless source is fine as long as something
//! downstream stops (`take`). Resources acquired by a stream are released
//! exactly once, in reverse order of acquisition, as soon as the part of
//! the stream that acquired them is done (see [`Stream::bracket`]).
#![no_std]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod channels;
pub mod chunk;
mod concurrent;
mod futures;
mod ops;
mod par_map;
mod scope;
mod stream;
mod sync;
pub mod text;
mod time;

pub use channels::{Channel, SignallingRef, Topic};
pub use chunk::Chunk;
pub use concurrent::Emitter;
#[cfg(feature = "std")]
pub use futures::IntoAsync;
pub use stream::{Compile, DEFAULT_CHUNK_SIZE, InvalidArgument, Stream};
