//! The server: an accept loop with a connection limit, a fiber per
//! connection, the purge fiber, and a graceful shutdown.
//!
//! # A connection
//!
//! A connection reads into a buffer, decodes every complete frame the
//! buffer holds ([`Decoder`]: limits on bulk length, array length, nesting
//! and line length), runs each command and appends its reply to one output
//! buffer, and writes that buffer once, before it reads again. A client
//! that pipelines (sends many commands before it reads) gets one write for
//! every batch of replies that were ready together; a client that sends
//! one command at a time gets one write per reply. `GET`, `SET` without
//! an expiry and `PING` run inline, without an `IO` step of their own; a
//! `SET` with an expiry reads the executor's clock, a `PUBLISH` offers to
//! the subscribers' queues.
//!
//! Malformed input (a frame the decoder refuses, such as a bad type byte,
//! a negative bulk length or a bulk above the limit) gets an error reply,
//! `-ERR Protocol error: ...`, after the replies to the commands before it,
//! and the connection closes, as Redis does; a well-formed request that
//! is not a command this server knows, or has the wrong arguments, gets an
//! error reply and the connection goes on.
//!
//! # A subscribed connection
//!
//! `SUBSCRIBE` turns the connection into a stream: the frames it sends (a
//! `Stream::unfold_eval` over the same buffer and decoder) merged with the
//! messages of its channels (`Stream::from_queue` of its queue, see
//! [`db`](crate::db)), each event turned into its reply bytes and every
//! chunk of replies written at once. In that mode `SUBSCRIBE`,
//! `UNSUBSCRIBE`, `PING` and `QUIT` are allowed (others get Redis's error
//! reply). The connection stays in that mode until it closes, as tokio's
//! mini-redis does (Redis returns to the normal mode after the last
//! `UNSUBSCRIBE`). A subscriber dropped for not reading ends when it has
//! written what its queue held.
//!
//! # Shutdown
//!
//! When the `shutdown` program given to [`serve`] completes, the server:
//!
//! 1. stops accepting (`net::serve`);
//! 2. shuts down the read side of every live connection: a connection
//!    waiting for its next command reads the end of its stream and closes;
//!    one that is running commands finishes them, writes their replies and
//!    then reads the end (a connection accepted during the shutdown is
//!    shut down as it registers);
//! 3. waits for the connections for at most [`Config::grace`], then
//!    cancels the rest (a client that does not read its replies);
//! 4. stops the purge fiber and completes with a [`Summary`]. Every
//!    connection's finalizer has run exactly once by then
//!    ([`Summary::finalized`] equals the accepted count).
//!
//! Design credit: tokio's mini-redis (a handler per connection, a
//! semaphore for the limit, a shutdown broadcast); no code is copied.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use spindle_effect::net::{self, ServeConfig, ServeSummary, TcpListener, TcpStream};
use spindle_effect::stream::Stream;
use spindle_effect::{IO, Queue};

use crate::cmd::Command;
use crate::db::{Db, Message};
use crate::frame::{self, Decoder, Frame, Limits};

/// The server's settings; [`Config::check`] validates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// At most this many connections are served at once; more wait in the
    /// listener's backlog (at least 1).
    pub max_connections: usize,
    /// How long the connections get to finish after the shutdown starts.
    pub grace: Duration,
    /// The decoder's limits.
    pub limits: Limits,
    /// Messages that may wait for a subscriber before it is dropped (at
    /// least 1).
    pub subscriber_queue: usize,
    /// The most one read takes (at least 1).
    pub read_size: usize,
}

/// The limit of tokio's mini-redis.
pub const DEFAULT_MAX_CONNECTIONS: usize = 250;

impl Default for Config {
    fn default() -> Config {
        Config {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            grace: Duration::from_secs(5),
            limits: Limits::default(),
            subscriber_queue: 1024,
            read_size: 16 * 1024,
        }
    }
}

/// A setting that cannot work, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// `Ok` if every setting can work; otherwise the first that cannot.
    pub fn check(&self) -> Result<(), ConfigError> {
        let zero = |name: &str| Err(ConfigError(format!("{name} must be at least 1")));
        if self.max_connections == 0 {
            return zero("max_connections");
        }
        if self.subscriber_queue == 0 {
            return zero("subscriber_queue");
        }
        if self.read_size == 0 {
            return zero("read_size");
        }
        if self.limits.max_line < 3 {
            return Err(ConfigError("limits.max_line must be at least 3".into()));
        }
        if self.limits.max_depth == 0 {
            return zero("limits.max_depth");
        }
        Ok(())
    }
}

/// What a server did, when [`serve`] completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// The accept loop's counts (`net::serve`).
    pub serve: ServeSummary,
    /// Connection finalizers run (one per accepted connection).
    pub finalized: u64,
    /// Subscribers dropped for not reading.
    pub dropped_subscribers: u64,
    /// The most connections served at once (at most
    /// [`Config::max_connections`]).
    pub peak_connections: u64,
}

/// Live connections, for the shutdown.
#[derive(Default)]
struct Live {
    closing: AtomicBool,
    next: AtomicU64,
    sockets: Mutex<HashMap<u64, TcpStream>>,
    finalized: AtomicU64,
    peak: AtomicU64,
}

impl Live {
    /// Registers a connection; its read side is shut down at once if the
    /// server is closing.
    fn register(&self, socket: &TcpStream) -> (u64, bool) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
        sockets.insert(id, socket.clone());
        self.peak.fetch_max(
            u64::try_from(sockets.len()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        (id, self.closing.load(Ordering::Acquire))
    }

    fn finalize(&self, id: u64) {
        self.sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.finalized.fetch_add(1, Ordering::AcqRel);
    }

    /// Shuts down the read side of every live connection.
    fn close_reads(&self) -> IO<(), Infallible> {
        let sockets: Vec<TcpStream> = {
            let sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
            // Under the lock: a connection registering after this sees it.
            self.closing.store(true, Ordering::Release);
            sockets.values().cloned().collect()
        };
        IO::block(async move {
            for socket in sockets {
                // A socket whose peer is gone already refuses: nothing to do.
                let _ = socket.shutdown(Shutdown::Read).await;
            }
            Ok(())
        })
    }
}

/// Serves `listener` until `shutdown` completes, then shuts down
/// gracefully (module doc). Fails at once if `config` cannot work, and
/// with the accept loop's error if the listener becomes unusable.
pub fn serve(
    listener: TcpListener,
    config: Config,
    shutdown: IO<(), Infallible>,
) -> IO<Summary, io::Error> {
    IO::block(async move {
        config
            .check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let serve_config = ServeConfig::builder()
            .max_connections(config.max_connections)
            .grace_period(config.grace)
            .on_error(|failure| eprintln!("mini-redis-server: {failure}"))
            .build()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let db = Db::new();
        let live = Arc::new(Live::default());
        let purge = db.purge_expired().start().value().await;
        let closing = live.clone();
        let trigger = shutdown.flat_map(move |()| closing.close_reads());
        let (in_handler, handler_db) = (live.clone(), db.clone());
        let serving = net::serve(listener, serve_config, trigger, move |socket, _peer| {
            connection(socket, handler_db.clone(), config, in_handler.clone())
        });
        let stop_purge = db.shut_down().product_r(purge.cancel());
        let summary = serving.guarantee(stop_purge).await?;
        Ok(Summary {
            serve: summary,
            finalized: live.finalized.load(Ordering::Acquire),
            dropped_subscribers: db.dropped_subscribers(),
            peak_connections: live.peak.load(Ordering::Relaxed),
        })
    })
}

/// One connection's buffers.
struct Conn {
    socket: TcpStream,
    decoder: Decoder,
    /// Bytes read and not decoded yet.
    pending: BytesMut,
    /// The reads' buffer (its bytes move to `pending`).
    scratch: Vec<u8>,
    read_size: usize,
}

/// What the next read gave.
enum Read {
    /// Bytes were added to `pending`.
    More,
    /// The peer closed its side (or the server shut down the read side).
    End,
}

impl Conn {
    /// Reads once, appending to `pending`.
    async fn read(&mut self) -> Result<Read, io::Error> {
        let scratch = std::mem::take(&mut self.scratch);
        let (mut scratch, n) = self.socket.read_into(scratch, self.read_size).await?;
        self.pending.extend_from_slice(&scratch);
        scratch.clear();
        self.scratch = scratch;
        Ok(if n == 0 { Read::End } else { Read::More })
    }
}

/// Serves one connection (module doc); its finalizer runs exactly once.
fn connection(socket: TcpStream, db: Db, config: Config, live: Arc<Live>) -> IO<(), io::Error> {
    let (id, closing) = live.register(&socket);
    let finalizer = IO::delay(move || live.finalize(id));
    let conn = Conn {
        socket,
        decoder: Decoder::new(config.limits),
        pending: BytesMut::with_capacity(config.read_size),
        scratch: Vec::with_capacity(config.read_size),
        read_size: config.read_size,
    };
    let shut = if closing {
        conn.socket
            .shutdown(Shutdown::Read)
            .handle_error(|_gone| ())
    } else {
        IO::unit()
    };
    shut.product_r(commands(conn, db, config))
        .guarantee(finalizer)
}

/// The normal mode: batches of commands, a write per batch.
fn commands(mut conn: Conn, db: Db, config: Config) -> IO<(), io::Error> {
    IO::block(async move {
        let mut out = Vec::new();
        loop {
            while conn.decoder.skip_empty_lines(&mut conn.pending) {
                match conn.decoder.decode(&mut conn.pending) {
                    Ok(Some(request)) => match Command::from_frame(request) {
                        Ok(command) => match execute(command, &db, &mut out).await {
                            Next::Command => {}
                            Next::Subscribe(channels) => {
                                if !out.is_empty() {
                                    conn.socket.write_all(out).await?;
                                }
                                return subscribed(conn, db, config, channels).await;
                            }
                            Next::Quit => {
                                frame::encode_simple(&mut out, "OK");
                                conn.socket.write_all(out).await?;
                                return Ok(());
                            }
                        },
                        Err(wrong) => error_reply(&mut out, &wrong.to_string()),
                    },
                    Ok(None) => break,
                    Err(malformed) => {
                        error_reply(&mut out, &format!("ERR {malformed}"));
                        conn.socket.write_all(out).await?;
                        return Ok(());
                    }
                }
            }
            if !out.is_empty() {
                conn.socket.write_all(std::mem::take(&mut out)).await?;
            }
            if let Read::End = conn.read().await? {
                return Ok(());
            }
        }
    })
}

/// What the normal mode does after a command.
enum Next {
    /// The next command (the reply is in the batch's output).
    Command,
    /// Enter subscribed mode on these channels (nothing replied yet).
    Subscribe(Vec<Bytes>),
    /// Answer `OK` and close.
    Quit,
}

/// Runs a command of the normal mode, appending its reply to `out`; the
/// commands that change the connection's mode are the caller's.
async fn execute(command: Command, db: &Db, out: &mut Vec<u8>) -> Next {
    match command {
        Command::Ping(None) => frame::encode_simple(out, "PONG"),
        Command::Ping(Some(message)) | Command::Echo { message } => {
            frame::encode_bulk(out, &message)
        }
        Command::Get { key } => match db.get(&key) {
            Some(value) => frame::encode_bulk(out, &value),
            None => frame::encode_null(out),
        },
        Command::Set {
            key,
            value,
            expire: None,
        } => {
            db.set_now(key, value);
            frame::encode_simple(out, "OK");
        }
        Command::Set {
            key,
            value,
            expire: Some(expire),
        } => {
            db.set::<Infallible>(key, value, Some(expire)).value().await;
            frame::encode_simple(out, "OK");
        }
        Command::Publish { channel, message } => {
            let taken = db.publish::<Infallible>(channel, message).value().await;
            frame::encode_integer(out, i64::try_from(taken).unwrap_or(i64::MAX));
        }
        Command::Unsubscribe { channels } => {
            // Not subscribed: Redis answers each channel with a count of 0.
            if channels.is_empty() {
                unsubscribe_reply(out, None, 0);
            }
            for channel in channels {
                unsubscribe_reply(out, Some(&channel), 0);
            }
        }
        Command::Subscribe { channels } => return Next::Subscribe(channels),
        Command::Quit => return Next::Quit,
    }
    Next::Command
}

/// Appends an error reply; a carriage return or line feed in `text` (an
/// argument quoted in it) becomes a space, as Redis does, so that the
/// reply stays one line.
fn error_reply(out: &mut Vec<u8>, text: &str) {
    if text.contains(['\r', '\n']) {
        frame::encode_error(out, &text.replace(['\r', '\n'], " "));
    } else {
        frame::encode_error(out, text);
    }
}

fn subscribe_reply(out: &mut Vec<u8>, channel: &[u8], count: usize) {
    frame::encode_array_header(out, 3);
    frame::encode_bulk(out, b"subscribe");
    frame::encode_bulk(out, channel);
    frame::encode_integer(out, i64::try_from(count).unwrap_or(i64::MAX));
}

fn unsubscribe_reply(out: &mut Vec<u8>, channel: Option<&[u8]>, count: usize) {
    frame::encode_array_header(out, 3);
    frame::encode_bulk(out, b"unsubscribe");
    match channel {
        Some(channel) => frame::encode_bulk(out, channel),
        None => frame::encode_null(out),
    }
    frame::encode_integer(out, i64::try_from(count).unwrap_or(i64::MAX));
}

/// An event of a subscribed connection.
enum Event {
    /// A frame the client sent.
    Request(Frame),
    /// Input the decoder refused.
    Malformed(frame::FrameError),
    /// The client's side ended.
    Closed,
    /// A message of one of the channels.
    Message(Message),
    /// The subscriber was dropped for not reading.
    Dropped,
}

/// The subscribed mode (module doc).
async fn subscribed(
    conn: Conn,
    db: Db,
    config: Config,
    channels: Vec<Bytes>,
) -> Result<(), io::Error> {
    let queue: Queue<Message> = Queue::bounded(config.subscriber_queue)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let id = db.new_subscriber_id();
    let socket = conn.socket.clone();
    let socket_first = conn.socket.clone();
    let requests = Stream::unfold_eval(conn, |mut conn: Conn| {
        IO::block(async move {
            loop {
                if conn.decoder.skip_empty_lines(&mut conn.pending) {
                    match conn.decoder.decode(&mut conn.pending) {
                        Ok(Some(request)) => return Ok(Some((Event::Request(request), conn))),
                        Err(malformed) => return Ok(Some((Event::Malformed(malformed), conn))),
                        Ok(None) => {}
                    }
                }
                if let Read::End = conn.read().await? {
                    return Ok(None);
                }
            }
        })
    })
    .append(Stream::emit(Event::Closed));
    let messages = Stream::from_queue(queue.clone())
        .map(Event::Message)
        .append(Stream::emit(Event::Dropped));
    let mut state = Subscription {
        id,
        db: db.clone(),
        queue: queue.clone(),
        channels: HashSet::new(),
    };
    let mut first = Vec::new();
    for channel in channels {
        state.subscribe(channel, &mut first);
    }
    let (leaving, left_queue) = (db.clone(), queue.clone());
    let leave = IO::delay(move || leaving.remove_subscriber(id))
        .product_r(left_queue.close())
        .void();
    let replies = requests
        .merge(messages)
        .map(move |event| state.reply(event))
        .take_through(|(_, go_on)| *go_on)
        .map_chunks(|replies| {
            let mut bytes = Vec::new();
            for (reply, _) in replies {
                bytes.extend_from_slice(&reply);
            }
            spindle_effect::stream::Chunk::singleton(bytes)
        })
        .eval_map(move |bytes| socket.write_all(bytes));
    // The replies to the first SUBSCRIBE go out before anything else.
    socket_first.write_all(first).await?;
    replies.compile().drain().guarantee(leave).await
}

/// A subscribed connection's channels.
struct Subscription {
    id: u64,
    db: Db,
    queue: Queue<Message>,
    channels: HashSet<Bytes>,
}

impl Subscription {
    fn subscribe(&mut self, channel: Bytes, out: &mut Vec<u8>) {
        self.db.subscribe(self.id, &self.queue, channel.clone());
        self.channels.insert(channel.clone());
        subscribe_reply(out, &channel, self.channels.len());
    }

    fn unsubscribe(&mut self, channel: Bytes, out: &mut Vec<u8>) {
        self.db.unsubscribe(self.id, &channel);
        self.channels.remove(&channel);
        unsubscribe_reply(out, Some(&channel), self.channels.len());
    }

    /// The reply bytes of `event`, and whether the connection goes on.
    fn reply(&mut self, event: Event) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let go_on = match event {
            Event::Message((channel, message)) => {
                frame::encode_array_header(&mut out, 3);
                frame::encode_bulk(&mut out, b"message");
                frame::encode_bulk(&mut out, &channel);
                frame::encode_bulk(&mut out, &message);
                true
            }
            Event::Request(request) => match Command::from_frame(request) {
                Ok(Command::Subscribe { channels }) => {
                    for channel in channels {
                        self.subscribe(channel, &mut out);
                    }
                    true
                }
                Ok(Command::Unsubscribe { channels }) => {
                    let channels = if channels.is_empty() {
                        let mut all: Vec<Bytes> = self.channels.iter().cloned().collect();
                        all.sort();
                        all
                    } else {
                        channels
                    };
                    if channels.is_empty() {
                        unsubscribe_reply(&mut out, None, 0);
                    }
                    for channel in channels {
                        self.unsubscribe(channel, &mut out);
                    }
                    true
                }
                Ok(Command::Ping(message)) => {
                    // Redis's reply to PING in this mode.
                    frame::encode_array_header(&mut out, 2);
                    frame::encode_bulk(&mut out, b"pong");
                    frame::encode_bulk(&mut out, message.as_deref().unwrap_or_default());
                    true
                }
                Ok(Command::Quit) => {
                    frame::encode_simple(&mut out, "OK");
                    false
                }
                Ok(other) => {
                    error_reply(
                        &mut out,
                        &format!(
                            "ERR Can't execute '{}': only SUBSCRIBE / UNSUBSCRIBE / PING / QUIT are allowed in this context",
                            other.name()
                        ),
                    );
                    true
                }
                Err(wrong) => {
                    error_reply(&mut out, &wrong.to_string());
                    true
                }
            },
            Event::Malformed(malformed) => {
                error_reply(&mut out, &format!("ERR {malformed}"));
                false
            }
            Event::Closed | Event::Dropped => false,
        };
        (out, go_on)
    }
}
