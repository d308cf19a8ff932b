//! A client of the server (or of Redis itself): a connection, a request
//! at a time, and a subscriber whose messages are a stream.
//!
//! Its methods are `async fn`s, awaited inside IO blocks (`IO::block`):
//!
//! ```no_run
//! use spindle_effect::IO;
//! use spindle_mini_redis::client::{Client, ClientError};
//!
//! let program: IO<Option<bytes::Bytes>, ClientError> = IO::block(async {
//!     let mut client = Client::connect("127.0.0.1:6379".parse().unwrap()).await?;
//!     client.set("hello", "world".into(), None).await?;
//!     client.get("hello").await
//! });
//! ```
//!
//! Design credit: tokio's mini-redis client (a connection with a frame
//! reader, a subscriber that owns the connection once subscribed); no
//! code is copied.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use spindle_effect::IO;
use spindle_effect::net::TcpStream;
use spindle_effect::stream::Stream;

use crate::cmd::Command;
use crate::frame::{Decoder, Frame, FrameError, Limits};

/// Why a request failed.
#[derive(Debug)]
pub enum ClientError {
    /// The connection failed.
    Io(io::Error),
    /// The server sent bytes that are not a frame.
    Protocol(FrameError),
    /// The server answered with an error reply (its text, without `-`).
    Server(String),
    /// The server answered with a frame this request does not expect.
    Unexpected(Frame),
    /// The server closed the connection before it answered.
    Closed,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "connection failed: {e}"),
            ClientError::Protocol(e) => write!(f, "malformed reply: {e}"),
            ClientError::Server(text) => write!(f, "error reply: {text}"),
            ClientError::Unexpected(frame) => write!(f, "unexpected reply: {frame:?}"),
            ClientError::Closed => f.write_str("the server closed the connection"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> ClientError {
        ClientError::Io(e)
    }
}

/// A connection to a server.
pub struct Client {
    socket: TcpStream,
    decoder: Decoder,
    pending: BytesMut,
    scratch: Vec<u8>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// The most one read of a client takes.
const READ_SIZE: usize = 16 * 1024;

impl Client {
    /// Connects to the server at `addr`.
    pub fn connect(addr: SocketAddr) -> IO<Client, ClientError> {
        TcpStream::connect(addr)
            .map_err(ClientError::Io)
            .map(Client::new)
    }

    /// A client on a connected socket.
    pub fn new(socket: TcpStream) -> Client {
        // Replies are the server's: no limit below Redis's own.
        let limits = Limits {
            max_bulk: 512 * 1024 * 1024,
            ..Limits::default()
        };
        Client {
            socket,
            decoder: Decoder::new(limits),
            pending: BytesMut::new(),
            scratch: Vec::with_capacity(READ_SIZE),
        }
    }

    /// Sends `command` and reads its reply (an error reply is
    /// [`ClientError::Server`]).
    pub async fn request(&mut self, command: Command) -> Result<Frame, ClientError> {
        self.send(command).await?;
        match self.read_frame().await? {
            Some(Frame::Error(text)) => Err(ClientError::Server(text)),
            Some(reply) => Ok(reply),
            None => Err(ClientError::Closed),
        }
    }

    async fn send(&mut self, command: Command) -> Result<(), ClientError> {
        let mut out = Vec::new();
        command.into_frame().encode(&mut out);
        self.socket.write_all(out).await?;
        Ok(())
    }

    /// The next frame the server sends; `None` at the end of the stream.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ClientError> {
        loop {
            if let Some(frame) = self
                .decoder
                .decode(&mut self.pending)
                .map_err(ClientError::Protocol)?
            {
                return Ok(Some(frame));
            }
            let scratch = std::mem::take(&mut self.scratch);
            let (mut scratch, n) = self.socket.read_into(scratch, READ_SIZE).await?;
            self.pending.extend_from_slice(&scratch);
            scratch.clear();
            self.scratch = scratch;
            if n == 0 {
                return if self.pending.is_empty() && !self.decoder.is_mid_frame() {
                    Ok(None)
                } else {
                    Err(ClientError::Closed)
                };
            }
        }
    }

    /// `PING [message]`: `PONG`, or the message.
    pub async fn ping(&mut self, message: Option<Bytes>) -> Result<Bytes, ClientError> {
        match self.request(Command::Ping(message)).await? {
            Frame::Simple(text) => Ok(Bytes::from(text)),
            Frame::Bulk(data) => Ok(data),
            other => Err(ClientError::Unexpected(other)),
        }
    }

    /// `GET key`: the value, if the key is set.
    pub async fn get(&mut self, key: impl Into<Bytes>) -> Result<Option<Bytes>, ClientError> {
        match self.request(Command::Get { key: key.into() }).await? {
            Frame::Bulk(data) => Ok(Some(data)),
            Frame::Null => Ok(None),
            other => Err(ClientError::Unexpected(other)),
        }
    }

    /// `SET key value [PX ms]`.
    pub async fn set(
        &mut self,
        key: impl Into<Bytes>,
        value: Bytes,
        expire: Option<Duration>,
    ) -> Result<(), ClientError> {
        let command = Command::Set {
            key: key.into(),
            value,
            expire,
        };
        match self.request(command).await? {
            Frame::Simple(ok) if ok == "OK" => Ok(()),
            other => Err(ClientError::Unexpected(other)),
        }
    }

    /// `PUBLISH channel message`: how many subscribers received it.
    pub async fn publish(
        &mut self,
        channel: impl Into<Bytes>,
        message: Bytes,
    ) -> Result<u64, ClientError> {
        let command = Command::Publish {
            channel: channel.into(),
            message,
        };
        match self.request(command).await? {
            Frame::Integer(n) => {
                u64::try_from(n).map_err(|_| ClientError::Unexpected(Frame::Integer(n)))
            }
            other => Err(ClientError::Unexpected(other)),
        }
    }

    /// `SUBSCRIBE channel...`: the connection becomes a [`Subscriber`].
    pub async fn subscribe(mut self, channels: Vec<Bytes>) -> Result<Subscriber, ClientError> {
        let mut subscriber = Subscriber {
            client: {
                self.send(Command::Subscribe {
                    channels: channels.clone(),
                })
                .await?;
                self
            },
            channels: Vec::new(),
        };
        subscriber.confirm(b"subscribe", &channels).await?;
        Ok(subscriber)
    }
}

/// A message a subscriber received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published on.
    pub channel: Bytes,
    /// What was published.
    pub content: Bytes,
}

/// A subscribed connection: its messages, and more subscriptions.
#[derive(Debug)]
pub struct Subscriber {
    client: Client,
    channels: Vec<Bytes>,
}

impl Subscriber {
    /// The channels subscribed to.
    pub fn channels(&self) -> &[Bytes] {
        &self.channels
    }

    /// Reads the confirmations of a `SUBSCRIBE` or `UNSUBSCRIBE` of
    /// `channels`.
    async fn confirm(&mut self, kind: &[u8], channels: &[Bytes]) -> Result<(), ClientError> {
        for channel in channels {
            let reply = self.client.read_frame().await?.ok_or(ClientError::Closed)?;
            match reply {
                Frame::Array(ref parts)
                    if matches!(parts.as_slice(),
                        [Frame::Bulk(k), Frame::Bulk(c), Frame::Integer(_)]
                            if k.as_ref() == kind && c == channel) =>
                {
                    if kind == b"subscribe" {
                        self.channels.push(channel.clone());
                    } else {
                        self.channels.retain(|c| c != channel);
                    }
                }
                Frame::Error(text) => return Err(ClientError::Server(text)),
                other => return Err(ClientError::Unexpected(other)),
            }
        }
        Ok(())
    }

    /// Subscribes to more channels.
    pub async fn subscribe(&mut self, channels: Vec<Bytes>) -> Result<(), ClientError> {
        self.client
            .send(Command::Subscribe {
                channels: channels.clone(),
            })
            .await?;
        self.confirm(b"subscribe", &channels).await
    }

    /// Unsubscribes from `channels` (which must be non-empty).
    pub async fn unsubscribe(&mut self, channels: Vec<Bytes>) -> Result<(), ClientError> {
        self.client
            .send(Command::Unsubscribe {
                channels: channels.clone(),
            })
            .await?;
        self.confirm(b"unsubscribe", &channels).await
    }

    /// The next message; `None` when the server closed the connection.
    pub async fn next_message(&mut self) -> Result<Option<Message>, ClientError> {
        let Some(frame) = self.client.read_frame().await? else {
            return Ok(None);
        };
        match frame {
            Frame::Array(parts) => match <[Frame; 3]>::try_from(parts) {
                Ok(
                    [
                        Frame::Bulk(kind),
                        Frame::Bulk(channel),
                        Frame::Bulk(content),
                    ],
                ) if kind.as_ref() == b"message" => Ok(Some(Message { channel, content })),
                Ok(parts) => Err(ClientError::Unexpected(Frame::Array(parts.into()))),
                Err(parts) => Err(ClientError::Unexpected(Frame::Array(parts))),
            },
            Frame::Error(text) => Err(ClientError::Server(text)),
            other => Err(ClientError::Unexpected(other)),
        }
    }

    /// The messages as a stream, until the server closes the connection.
    pub fn into_stream(self) -> Stream<Message, ClientError> {
        Stream::unfold_eval(self, |mut subscriber: Subscriber| {
            IO::block(async move {
                Ok(subscriber
                    .next_message()
                    .await?
                    .map(|message| (message, subscriber)))
            })
        })
    }
}
