//! tokio's mini-redis, written on Spindle: a Redis server with `PING`,
//! `GET`, `SET` (with `EX`/`PX` expiry), `PUBLISH`, `SUBSCRIBE` and
//! `UNSUBSCRIBE`, its client library and a small command-line client, on
//! every std executor from one program.
//!
//! ```text
//! cargo run --release -p spindle-mini-redis --bin mini-redis-server -- --port 6379
//! redis-cli -p 6379 set hello world
//! cargo run --release -p spindle-mini-redis --bin mini-redis-cli -- get hello
//! ```
//!
//! * [`frame`]: RESP frames, a decoder with limits, the encoder;
//! * [`cmd`]: commands from frames, with Redis's error replies;
//! * [`db`]: the key space, expiry and publish/subscribe;
//! * [`server`]: connections, the limit, the graceful shutdown;
//! * [`client`]: the client library.
//!
//! The application is tokio's mini-redis (the crate `mini-redis`): the
//! same commands, the same command-line shape (`mini-redis-server --port`),
//! read for its design and written again on Spindle; no code is copied.
#![forbid(unsafe_code)]

#[cfg(feature = "server")]
pub mod client;
pub mod cmd;
#[cfg(feature = "server")]
pub mod db;
pub mod frame;
#[cfg(feature = "server")]
pub mod server;
