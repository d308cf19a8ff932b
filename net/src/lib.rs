//! # spindle-net: sockets as `IO` values, on every std executor
//!
//! TCP ([`TcpListener`], [`TcpStream`]), UDP ([`UdpSocket`]), Unix domain
//! stream sockets ([`UnixListener`], [`UnixStream`]), the halves a stream
//! splits into for a reading and a writing fiber ([`ReadHalf`],
//! [`WriteHalf`]), and a buffered reader for line protocols
//! ([`BufReader`], with [`read_line`](BufReader::read_line) and the
//! line-framed loops [`for_each_line`](BufReader::for_each_line) and
//! [`for_each_line_timeout`](BufReader::for_each_line_timeout), which ends
//! a silent connection), and a server's accept loop ([`serve()`]: a
//! connection limit, one fiber per connection, graceful shutdown), and
//! [`AsyncFd`], the same readiness for any descriptor that supports it (a
//! pipe, a Linux `pidfd`). Every
//! operation is an `IO<_, std::io::Error>`: it waits without blocking a
//! thread, its failure is an error value (never a panic), and canceling it
//! (a `timeout`, a lost `race`) leaves nothing registered. An application
//! has this crate as `spindle_effect::net` (with the entry crate's feature
//! `wstp`, on by default, `batching` or `tokio`).
//!
//! ```
//! use std::time::Duration;
//!
//! use spindle_effect::net::{TcpListener, TcpStream};
//! use spindle_effect::prelude::*;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::new()?;
//! let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
//!     listener.local_addr().flat_map(move |addr| {
//!         // A server that echoes one message, and a client, as two fibers.
//!         let server = listener.accept().flat_map(|(stream, _peer)| {
//!             stream.read(1024).flat_map(move |bytes| stream.write_all(bytes))
//!         });
//!         let client = TcpStream::connect(addr).flat_map(|stream| {
//!             stream.write_all(b"hello").product_r(stream.read(1024))
//!         });
//!         server.both(client).map(|((), echoed)| echoed)
//!     })
//! });
//! let echoed = rt.block_on(program.timeout(Duration::from_secs(10)))?;
//! assert_eq!(echoed.succeeded(), Some(b"hello".to_vec()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which executors
//!
//! The socket types are written once against the I/O capability of the
//! executor contract ([`driver`]); the same program runs on every std
//! executor:
//!
//! | executor | readiness |
//! |---|---|
//! | exec-wstp | a mio poller per worker: an idle worker sleeps in it, a busy one looks every few fibers; a fiber is resumed on the worker whose poller saw its socket ready |
//! | exec-batching | the loop's mio poller, looked at once per turn |
//! | exec-single (std) | its loop's mio poller, where it waits when idle |
//! | exec-tokio | tokio's own driver, through `AsyncFd` |
//!
//! A socket is made by a fiber (`bind`, `connect`, `accept`), and belongs
//! to the executor of the thread that made it: its readiness is seen by
//! that executor's poller (exec-wstp: that worker's), whichever fiber then
//! uses it. Outside every executor with I/O, making a socket fails with an
//! error of kind `Unsupported`.
//!
//! # One operation
//!
//! Each operation first tries the non-blocking call. On `WouldBlock` it
//! suspends its fiber until the socket is reported ready, then tries again
//! (`Interrupted` is tried again at once); any other error is the
//! operation's error value. If the fiber is canceled while it waits, its
//! interest is removed: the executor is left as if the operation had
//! never started.
//!
//! # Names
//!
//! [`TcpStream::connect_host`] resolves a `"name:port"` string with the
//! system resolver through `IO::blocking` (the executor's blocking pool),
//! then tries each address in order.
//!
//! # Sharing
//!
//! Every socket type and both halves are cheap handles (`Clone`: a
//! reference count inside, no `Arc` needed around them): hand a clone to
//! each fiber that uses the socket. What using one socket from several
//! fibers at once means:
//!
//! * **Writes are whole.** A stream's writes (`write`, `write_all`, on the
//!   stream, its clones or its [`WriteHalf`]'s clones) each hold the
//!   socket's *write turn* from their first byte to their last, however
//!   many system calls and waits that takes: another fiber's write never
//!   lands inside a `write_all`. Writers that find the turn taken wait for
//!   it and are woken in the order they came, but a writer that runs
//!   while the turn is free takes it (nothing is kept for a woken writer
//!   that has not run yet, so writers under short timeouts keep writing);
//!   a write canceled while it waits for its turn has written nothing, one canceled midway has written a
//!   prefix (as alone) and hands the turn on. The uncontended case costs
//!   two short lock acquisitions per write, and no allocation.
//! * **Reads are not coordinated.** Each read takes the bytes that are
//!   there when it runs; two fibers reading one stream at once get the
//!   bytes in an unspecified split (a `read_exact` may interleave with
//!   another fiber's read). Read a stream from one fiber (a [`BufReader`]
//!   over the [`ReadHalf`]), or coordinate the readers yourself.
//! * **Datagrams are atomic.** A UDP send is one datagram and a receive
//!   takes one, so clones of a [`UdpSocket`] share it safely in both
//!   directions (each datagram goes to one receiver).
//! * **Listeners.** Clones of a listener accept from one queue: each
//!   connection goes to one of the fibers waiting in `accept`.
//!
//! # Closing
//!
//! Every handle of a socket (its clones, a stream's halves and their
//! clones) and the `IO` values built from them share the socket (a
//! reference count): the socket is removed from its poller and closed when
//! the last of them is dropped, on any thread, exactly once. Dropping a
//! socket whose operations have all finished closes it at once; a clone
//! kept anywhere keeps it open. An explicit `shutdown` acts on the socket,
//! so on every clone at once. A [`BufReader`] owns its stream handle:
//! dropping the reader (and its `IO` values) drops it, with any bytes
//! still buffered. Dropping the last clone of a [`WriteHalf`] shuts the
//! write side down (the peer reads end of stream). A Unix listener's
//! socket file stays behind when it closes (remove it before binding the
//! path again).
//!
//! # Cancellation
//!
//! A canceled operation leaves no interest behind. What it had done before
//! it waited stays done: a `write_all` canceled midway has written a
//! prefix of its data; a read canceled while it waits has read nothing.
//! [`BufReader`] moves bytes into its buffer inside the call that reads
//! them, so a line read canceled midway keeps the part of the line it had
//! read, and the next read returns the line whole.
//!
//! # End of stream and errors
//!
//! A stream read returns 0 bytes when the peer has closed its side in
//! order (end of stream), and every later read does too. A peer that
//! resets the connection makes reads and writes fail with
//! `ConnectionReset` (or `BrokenPipe` for writes). A write of a
//! zero-length buffer writes nothing and returns 0. UDP has no streams and
//! no end: an empty datagram is just empty, and a receive into a buffer
//! smaller than its datagram truncates it ([`UdpSocket`]).
//!
//! # Platforms
//!
//! Unix (Linux, the BSDs, macOS): readiness through epoll or kqueue.
//! Windows is not supported yet (the crate is empty there).

#![cfg(unix)]

pub mod driver;

mod buffered;
mod fd;
pub mod serve;
mod source;
mod stream;
mod streams;
mod sync;
mod tcp;
mod udp;
mod unix;
mod write_lock;

pub use buffered::{BufReader, DEFAULT_LINE_LIMIT, LinesEnd, ReadStream};
pub use fd::AsyncFd;
pub use serve::{
    DEFAULT_ACCEPT_BACKOFF, DEFAULT_GRACE_PERIOD, DEFAULT_MAX_CONNECTIONS, Listener, ServeConfig,
    ServeConfigBuilder, ServeConfigError, ServeFailure, ServeSummary, serve,
};
pub use stream::{ReadHalf, ReuniteError, Split, WriteHalf};
pub use tcp::{LISTEN_BACKLOG, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixListener, UnixStream};
