//! The commands the server knows, read from request frames and written back
//! as frames by the client.
//!
//! The command model follows tokio's mini-redis; arities, SET's options and
//! the error texts follow Redis 7.
//!
//! A request is an array of bulk strings whose first element names the
//! command, in any case (`get`, `GET`, `gEt`). The errors'
//! [`Display`](fmt::Display) texts are Redis's error replies without their
//! leading `-`.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::frame::Frame;

/// A request the server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `PING [message]`: `+PONG`, or the message as a bulk.
    Ping(Option<Bytes>),
    /// `ECHO message`: the message as a bulk (`redis-cli --pipe` ends its
    /// input with one and waits for it to come back).
    Echo {
        /// What comes back.
        message: Bytes,
    },
    /// `GET key`.
    Get {
        /// The key.
        key: Bytes,
    },
    /// `SET key value [EX seconds | PX milliseconds]`.
    Set {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// How long the key lives: at least 1 ms and up to `i64::MAX` ms
        /// (add it to an `Instant` with `checked_add`).
        expire: Option<Duration>,
    },
    /// `PUBLISH channel message`.
    Publish {
        /// The channel.
        channel: Bytes,
        /// The message.
        message: Bytes,
    },
    /// `SUBSCRIBE channel [channel ...]`.
    Subscribe {
        /// The channels: at least one.
        channels: Vec<Bytes>,
    },
    /// `UNSUBSCRIBE [channel ...]`.
    Unsubscribe {
        /// The channels; empty: all of the connection's.
        channels: Vec<Bytes>,
    },
    /// `QUIT`: `+OK`, then the server closes the connection.
    Quit,
}

/// Why a request frame is not a command the server can run.
///
/// The [`Display`](fmt::Display) text is the exact text of Redis's error
/// reply, without its leading `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// The request is not a non-empty array of bulk strings:
    /// `ERR Protocol error: expected an array of bulk strings`.
    NotAnArrayOfBulks,
    /// The command's name is not known:
    /// `ERR unknown command 'FOO', with args beginning with: 'a' 'b' `.
    UnknownCommand {
        /// The name as the client sent it: its first 128 bytes, up to a NUL
        /// byte, lossily decoded, `\r` and `\n` written as spaces.
        name: String,
        /// The first arguments, made like `name`: while fewer than 128
        /// bytes have been shown (counting each argument's quotes and
        /// space), the next argument cut to the bytes still allowed, as
        /// Redis does.
        args: Vec<String>,
    },
    /// Too few or too many arguments:
    /// `ERR wrong number of arguments for 'get' command`.
    WrongArity {
        /// The command's name in lowercase.
        command: &'static str,
    },
    /// Options that are not the command's, or repeated: `ERR syntax error`.
    SyntaxError,
    /// An argument that should be an `i64` is not:
    /// `ERR value is not an integer or out of range`.
    NotAnInteger,
    /// An expire time that is not positive, or whose milliseconds overflow
    /// an `i64`: `ERR invalid expire time in 'set' command`.
    InvalidExpireTime {
        /// The command's name in lowercase.
        command: &'static str,
    },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::NotAnArrayOfBulks => {
                f.write_str("ERR Protocol error: expected an array of bulk strings")
            }
            CommandError::UnknownCommand { name, args } => {
                write!(
                    f,
                    "ERR unknown command '{name}', with args beginning with: "
                )?;
                for arg in args {
                    write!(f, "'{arg}' ")?;
                }
                Ok(())
            }
            CommandError::WrongArity { command } => {
                write!(f, "ERR wrong number of arguments for '{command}' command")
            }
            CommandError::SyntaxError => f.write_str("ERR syntax error"),
            CommandError::NotAnInteger => {
                f.write_str("ERR value is not an integer or out of range")
            }
            CommandError::InvalidExpireTime { command } => {
                write!(f, "ERR invalid expire time in '{command}' command")
            }
        }
    }
}

impl std::error::Error for CommandError {}

/// How many bytes of an unknown command's name and arguments its error
/// shows (Redis's budget).
const UNKNOWN_SHOWN: usize = 128;

impl Command {
    /// Reads a request: a non-empty array of bulk strings whose first names
    /// the command, in any case. SET's options `EX seconds` and
    /// `PX milliseconds` are case-insensitive too.
    pub fn from_frame(frame: Frame) -> Result<Command, CommandError> {
        let Frame::Array(items) = frame else {
            return Err(CommandError::NotAnArrayOfBulks);
        };
        let mut args = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Frame::Bulk(arg) => args.push(arg),
                _ => return Err(CommandError::NotAnArrayOfBulks),
            }
        }
        let Some(name) = args.first() else {
            return Err(CommandError::NotAnArrayOfBulks);
        };
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        if is("get") {
            let Ok([_, key]) = <[Bytes; 2]>::try_from(args) else {
                return Err(CommandError::WrongArity { command: "get" });
            };
            Ok(Command::Get { key })
        } else if is("set") {
            parse_set(args)
        } else if is("ping") {
            match <[Bytes; 2]>::try_from(args) {
                Ok([_, message]) => Ok(Command::Ping(Some(message))),
                Err(args) if args.len() == 1 => Ok(Command::Ping(None)),
                Err(_) => Err(CommandError::WrongArity { command: "ping" }),
            }
        } else if is("echo") {
            let Ok([_, message]) = <[Bytes; 2]>::try_from(args) else {
                return Err(CommandError::WrongArity { command: "echo" });
            };
            Ok(Command::Echo { message })
        } else if is("publish") {
            let Ok([_, channel, message]) = <[Bytes; 3]>::try_from(args) else {
                return Err(CommandError::WrongArity { command: "publish" });
            };
            Ok(Command::Publish { channel, message })
        } else if is("subscribe") {
            if args.len() < 2 {
                return Err(CommandError::WrongArity {
                    command: "subscribe",
                });
            }
            Ok(Command::Subscribe {
                channels: args.into_iter().skip(1).collect(),
            })
        } else if is("unsubscribe") {
            Ok(Command::Unsubscribe {
                channels: args.into_iter().skip(1).collect(),
            })
        } else if is("quit") {
            // Redis's QUIT takes (and ignores) any arguments.
            Ok(Command::Quit)
        } else {
            Err(unknown_command(name, args.get(1..).unwrap_or_default()))
        }
    }

    /// What a client sends for this command: an array of bulk strings with
    /// the name in uppercase. SET's expire is sent as `PX` milliseconds,
    /// rounded up to a whole millisecond (and at most `i64::MAX`).
    pub fn into_frame(self) -> Frame {
        let word = |word: &'static str| Frame::Bulk(Bytes::from_static(word.as_bytes()));
        let items = match self {
            Command::Ping(None) => vec![word("PING")],
            Command::Ping(Some(message)) => vec![word("PING"), Frame::Bulk(message)],
            Command::Echo { message } => vec![word("ECHO"), Frame::Bulk(message)],
            Command::Get { key } => vec![word("GET"), Frame::Bulk(key)],
            Command::Set { key, value, expire } => {
                let mut items = vec![word("SET"), Frame::Bulk(key), Frame::Bulk(value)];
                if let Some(expire) = expire {
                    let rounded_up = u128::from(expire.subsec_nanos() % 1_000_000 != 0);
                    let ms = expire.as_millis().saturating_add(rounded_up);
                    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
                    items.push(word("PX"));
                    items.push(Frame::Bulk(Bytes::from(ms.to_string())));
                }
                items
            }
            Command::Publish { channel, message } => {
                vec![word("PUBLISH"), Frame::Bulk(channel), Frame::Bulk(message)]
            }
            Command::Subscribe { channels } => std::iter::once(word("SUBSCRIBE"))
                .chain(channels.into_iter().map(Frame::Bulk))
                .collect(),
            Command::Unsubscribe { channels } => std::iter::once(word("UNSUBSCRIBE"))
                .chain(channels.into_iter().map(Frame::Bulk))
                .collect(),
            Command::Quit => vec![word("QUIT")],
        };
        Frame::Array(items)
    }

    /// The command's name in lowercase: `"ping"`, `"echo"`, `"get"`, `"set"`,
    /// `"publish"`, `"subscribe"`, `"unsubscribe"` or `"quit"`.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Ping(_) => "ping",
            Command::Echo { .. } => "echo",
            Command::Get { .. } => "get",
            Command::Set { .. } => "set",
            Command::Publish { .. } => "publish",
            Command::Subscribe { .. } => "subscribe",
            Command::Unsubscribe { .. } => "unsubscribe",
            Command::Quit => "quit",
        }
    }
}

/// Reads `SET key value [EX seconds | PX milliseconds]` (`args[0]` is the
/// name). Like Redis, the options' syntax is checked before their values.
fn parse_set(args: Vec<Bytes>) -> Result<Command, CommandError> {
    const ARITY: CommandError = CommandError::WrongArity { command: "set" };
    if args.len() < 3 {
        return Err(ARITY);
    }
    let mut expire: Option<(bool, &Bytes)> = None;
    let mut options = args.get(3..).unwrap_or_default().iter();
    while let Some(option) = options.next() {
        let in_seconds = if option.eq_ignore_ascii_case(b"ex") {
            true
        } else if option.eq_ignore_ascii_case(b"px") {
            false
        } else {
            return Err(CommandError::SyntaxError);
        };
        let Some(value) = options.next() else {
            return Err(CommandError::SyntaxError);
        };
        if expire.is_some() {
            return Err(CommandError::SyntaxError);
        }
        expire = Some((in_seconds, value));
    }
    let expire = match expire {
        None => None,
        Some((in_seconds, value)) => {
            let invalid = CommandError::InvalidExpireTime { command: "set" };
            let n = parse_integer(value).ok_or(CommandError::NotAnInteger)?;
            if n <= 0 {
                return Err(invalid);
            }
            let ms = if in_seconds {
                n.checked_mul(1000).ok_or(invalid)?
            } else {
                n
            };
            Some(Duration::from_millis(ms.unsigned_abs()))
        }
    };
    let mut args = args.into_iter().skip(1);
    let (Some(key), Some(value)) = (args.next(), args.next()) else {
        return Err(ARITY);
    };
    Ok(Command::Set { key, value, expire })
}

/// Parses an integer argument as Redis does (`string2ll`): an optional `-`
/// and decimal digits, without leading zeros (but `0`), no `+`, no spaces,
/// within `i64`.
fn parse_integer(text: &[u8]) -> Option<i64> {
    if text == b"0" {
        return Some(0);
    }
    // Redis's stricter form: no leading zero (so no `-0`); the digits
    // themselves are the frame decoder's integer.
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    match digits.first() {
        Some(b'1'..=b'9') => crate::frame::parse_i64(text),
        _ => None,
    }
}

/// Redis's reply to an unknown command: the name and, within a budget of
/// 128 bytes, the first arguments.
fn unknown_command(name: &[u8], rest: &[Bytes]) -> CommandError {
    let mut args = Vec::new();
    let mut shown = 0usize;
    for arg in rest {
        if shown >= UNKNOWN_SHOWN {
            break;
        }
        let arg = shown_text(arg, UNKNOWN_SHOWN - shown);
        // The quotes and the space count too.
        shown = shown.saturating_add(arg.len()).saturating_add(3);
        args.push(arg);
    }
    CommandError::UnknownCommand {
        name: shown_text(name, UNKNOWN_SHOWN),
        args,
    }
}

/// `bytes` as C's `%.*s` shows them with precision `max`, on one line: up
/// to the first NUL and at most `max` bytes, lossily decoded, `\r` and `\n`
/// written as spaces.
fn shown_text(bytes: &[u8], max: usize) -> String {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(bytes.len())
        .min(max);
    let bytes = bytes.get(..end).unwrap_or_default();
    String::from_utf8_lossy(bytes).replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(words: &[&'static str]) -> Frame {
        Frame::array_of_bulks(words.iter().copied())
    }

    fn parse(words: &[&'static str]) -> Result<Command, CommandError> {
        Command::from_frame(request(words))
    }

    fn b(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    #[test]
    fn each_command_parses_from_its_array_of_bulks() {
        assert_eq!(parse(&["PING"]), Ok(Command::Ping(None)));
        assert_eq!(parse(&["PING", "hi"]), Ok(Command::Ping(Some(b("hi")))));
        assert_eq!(
            parse(&["echo", "back"]),
            Ok(Command::Echo { message: b("back") })
        );
        assert_eq!(parse(&["GET", "k"]), Ok(Command::Get { key: b("k") }));
        assert_eq!(
            parse(&["SET", "k", "v"]),
            Ok(Command::Set {
                key: b("k"),
                value: b("v"),
                expire: None
            })
        );
        assert_eq!(
            parse(&["PUBLISH", "c", "m"]),
            Ok(Command::Publish {
                channel: b("c"),
                message: b("m")
            })
        );
        assert_eq!(
            parse(&["SUBSCRIBE", "a", "b"]),
            Ok(Command::Subscribe {
                channels: vec![b("a"), b("b")]
            })
        );
        assert_eq!(
            parse(&["UNSUBSCRIBE", "a"]),
            Ok(Command::Unsubscribe {
                channels: vec![b("a")]
            })
        );
        assert_eq!(parse(&["QUIT"]), Ok(Command::Quit));
    }

    #[test]
    fn command_names_are_case_insensitive() {
        for name in ["get", "GET", "gEt", "Get"] {
            assert_eq!(parse(&[name, "k"]), Ok(Command::Get { key: b("k") }));
        }
        assert_eq!(parse(&["ping"]), Ok(Command::Ping(None)));
        assert_eq!(parse(&["qUiT"]), Ok(Command::Quit));
        assert_eq!(
            parse(&["Subscribe", "c"]),
            Ok(Command::Subscribe {
                channels: vec![b("c")]
            })
        );
    }

    #[test]
    fn set_takes_ex_seconds_or_px_milliseconds_in_any_case() {
        let set = |expire| {
            Ok(Command::Set {
                key: b("k"),
                value: b("v"),
                expire: Some(expire),
            })
        };
        assert_eq!(
            parse(&["SET", "k", "v", "EX", "10"]),
            set(Duration::from_secs(10))
        );
        assert_eq!(
            parse(&["set", "k", "v", "ex", "1"]),
            set(Duration::from_secs(1))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "PX", "1500"]),
            set(Duration::from_millis(1500))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "pX", "1"]),
            set(Duration::from_millis(1))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "EX", "9223372036854775"]),
            set(Duration::from_millis(9_223_372_036_854_775_000))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "PX", "9223372036854775807"]),
            set(Duration::from_millis(i64::MAX as u64))
        );
    }

    #[test]
    fn set_with_an_unknown_or_incomplete_option_is_a_syntax_error() {
        for words in [
            &["SET", "k", "v", "BOGUS"][..],
            &["SET", "k", "v", "NX"],
            &["SET", "k", "v", "EX"],
            &["SET", "k", "v", "EX", "1", "PX"],
            &["SET", "k", "v", "EX", "1", "XX"],
        ] {
            assert_eq!(parse(words), Err(CommandError::SyntaxError), "{words:?}");
        }
    }

    #[test]
    fn set_with_two_expire_options_is_a_syntax_error() {
        for words in [
            &["SET", "k", "v", "EX", "1", "PX", "2"][..],
            &["SET", "k", "v", "EX", "1", "EX", "2"],
            &["SET", "k", "v", "px", "1", "ex", "2"],
        ] {
            assert_eq!(parse(words), Err(CommandError::SyntaxError), "{words:?}");
        }
    }

    #[test]
    fn set_checks_its_options_syntax_before_their_values() {
        assert_eq!(
            parse(&["SET", "k", "v", "EX", "abc", "BOGUS"]),
            Err(CommandError::SyntaxError)
        );
        assert_eq!(
            parse(&["SET", "k", "v", "EX", "0", "PX", "1"]),
            Err(CommandError::SyntaxError)
        );
    }

    #[test]
    fn set_with_an_expire_that_is_not_an_integer_is_an_error() {
        for value in [
            "abc",
            "",
            "1.5",
            "+1",
            " 1",
            "1 ",
            "01",
            "-0",
            "-",
            "9223372036854775808",
        ] {
            assert_eq!(
                parse(&["SET", "k", "v", "EX", value]),
                Err(CommandError::NotAnInteger),
                "{value:?}"
            );
        }
    }

    #[test]
    fn set_with_a_zero_negative_or_overflowing_expire_is_an_invalid_expire_time() {
        let invalid = Err(CommandError::InvalidExpireTime { command: "set" });
        assert_eq!(parse(&["SET", "k", "v", "EX", "0"]), invalid);
        assert_eq!(parse(&["SET", "k", "v", "EX", "-5"]), invalid);
        assert_eq!(parse(&["SET", "k", "v", "PX", "0"]), invalid);
        assert_eq!(
            parse(&["SET", "k", "v", "PX", "-9223372036854775808"]),
            invalid
        );
        assert_eq!(parse(&["SET", "k", "v", "EX", "9223372036854776"]), invalid);
    }

    #[test]
    fn wrong_numbers_of_arguments_name_the_command_in_lowercase() {
        let cases: [(&[&'static str], &str); 9] = [
            (&["GET"], "get"),
            (&["gEt", "a", "b"], "get"),
            (&["SET", "k"], "set"),
            (&["SET"], "set"),
            (&["PING", "a", "b"], "ping"),
            (&["PUBLISH", "c"], "publish"),
            (&["PUBLISH", "c", "m", "x"], "publish"),
            (&["SUBSCRIBE"], "subscribe"),
            (&["Subscribe"], "subscribe"),
        ];
        for (words, command) in cases {
            assert_eq!(
                parse(words),
                Err(CommandError::WrongArity { command }),
                "{words:?}"
            );
        }
        assert_eq!(
            parse(&["GET"]).unwrap_err().to_string(),
            "ERR wrong number of arguments for 'get' command"
        );
    }

    #[test]
    fn unsubscribe_without_channels_means_all() {
        assert_eq!(
            parse(&["UNSUBSCRIBE"]),
            Ok(Command::Unsubscribe { channels: vec![] })
        );
    }

    #[test]
    fn quit_takes_any_arguments() {
        assert_eq!(parse(&["QUIT", "now", "please"]), Ok(Command::Quit));
    }

    #[test]
    fn an_unknown_command_quotes_its_name_as_sent_and_its_first_arguments() {
        let error = parse(&["FOO", "a", "b"]).unwrap_err();
        assert_eq!(
            error,
            CommandError::UnknownCommand {
                name: "FOO".into(),
                args: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            error.to_string(),
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            parse(&["hello"]).unwrap_err().to_string(),
            "ERR unknown command 'hello', with args beginning with: "
        );
    }

    #[test]
    fn an_unknown_commands_shown_arguments_are_cut_at_128_bytes_as_redis_does() {
        let long: &'static str = "x".repeat(200).leak();
        // The first argument is cut to 128 bytes, and nothing follows it.
        let CommandError::UnknownCommand { args, .. } = parse(&["FOO", long, "b"]).unwrap_err()
        else {
            panic!("not unknown");
        };
        assert_eq!(args, vec!["x".repeat(128)]);
        // 40 bytes then 40 + 3 + 3 = 49... each argument costs its length
        // and 3: after three 40-byte ones 129 bytes are shown.
        let forty: &'static str = "y".repeat(40).leak();
        let CommandError::UnknownCommand { args, .. } =
            parse(&["FOO", forty, forty, forty, forty]).unwrap_err()
        else {
            panic!("not unknown");
        };
        assert_eq!(args, vec![forty.to_owned(), forty.into(), forty.into()]);
        // The third gets what the budget leaves: 128 - 2 * 63 = 2 bytes.
        let sixty: &'static str = "z".repeat(60).leak();
        let CommandError::UnknownCommand { args, .. } =
            parse(&["FOO", sixty, sixty, sixty]).unwrap_err()
        else {
            panic!("not unknown");
        };
        assert_eq!(args, vec![sixty.to_owned(), sixty.into(), "zz".into()]);
        // The name is cut to 128 bytes.
        let CommandError::UnknownCommand { name, .. } = parse(&[long]).unwrap_err() else {
            panic!("not unknown");
        };
        assert_eq!(name, "x".repeat(128));
    }

    #[test]
    fn an_unknown_commands_text_stays_on_one_line_and_stops_at_nul() {
        let frame = Frame::array_of_bulks([&b"F\r\nO"[..], b"a\0b", b"\xff"]);
        assert_eq!(
            Command::from_frame(frame).unwrap_err().to_string(),
            "ERR unknown command 'F  O', with args beginning with: 'a' '\u{fffd}' "
        );
    }

    #[test]
    fn a_frame_that_is_not_a_non_empty_array_of_bulks_is_a_protocol_error() {
        for frame in [
            Frame::Array(vec![]),
            Frame::Simple("PING".into()),
            Frame::Bulk(b("PING")),
            Frame::Null,
            Frame::Integer(1),
            Frame::Error("x".into()),
            Frame::Array(vec![Frame::Bulk(b("GET")), Frame::Integer(1)]),
            Frame::Array(vec![Frame::Simple("PING".into())]),
            Frame::Array(vec![Frame::Null]),
            Frame::Array(vec![Frame::Array(vec![Frame::Bulk(b("PING"))])]),
        ] {
            assert_eq!(
                Command::from_frame(frame.clone()),
                Err(CommandError::NotAnArrayOfBulks),
                "{frame:?}"
            );
        }
    }

    #[test]
    fn error_texts_are_redis_error_replies_without_the_dash() {
        let cases = [
            (
                CommandError::NotAnArrayOfBulks,
                "ERR Protocol error: expected an array of bulk strings",
            ),
            (
                CommandError::UnknownCommand {
                    name: "FOO".into(),
                    args: vec!["a".into(), "b".into()],
                },
                "ERR unknown command 'FOO', with args beginning with: 'a' 'b' ",
            ),
            (
                CommandError::WrongArity { command: "get" },
                "ERR wrong number of arguments for 'get' command",
            ),
            (CommandError::SyntaxError, "ERR syntax error"),
            (
                CommandError::NotAnInteger,
                "ERR value is not an integer or out of range",
            ),
            (
                CommandError::InvalidExpireTime { command: "set" },
                "ERR invalid expire time in 'set' command",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn into_frame_sends_an_array_of_bulks_with_the_name_in_uppercase() {
        assert_eq!(Command::Ping(None).into_frame(), request(&["PING"]));
        assert_eq!(
            Command::Set {
                key: b("k"),
                value: b("v"),
                expire: Some(Duration::from_secs(2)),
            }
            .into_frame(),
            request(&["SET", "k", "v", "PX", "2000"])
        );
        assert_eq!(
            Command::Unsubscribe { channels: vec![] }.into_frame(),
            request(&["UNSUBSCRIBE"])
        );
        assert_eq!(Command::Quit.into_frame(), request(&["QUIT"]));
    }

    #[test]
    fn into_frame_rounds_an_expire_up_to_whole_milliseconds() {
        let set = |expire| Command::Set {
            key: b("k"),
            value: b("v"),
            expire: Some(expire),
        };
        assert_eq!(
            set(Duration::from_micros(1500)).into_frame(),
            request(&["SET", "k", "v", "PX", "2"])
        );
        assert_eq!(
            set(Duration::from_nanos(1)).into_frame(),
            request(&["SET", "k", "v", "PX", "1"])
        );
        assert_eq!(
            set(Duration::MAX).into_frame(),
            request(&["SET", "k", "v", "PX", "9223372036854775807"])
        );
    }

    #[test]
    fn into_frame_then_from_frame_gives_back_the_command() {
        let commands = [
            Command::Ping(None),
            Command::Ping(Some(b("hello world"))),
            Command::Get { key: b("k") },
            Command::Set {
                key: b("k"),
                value: Bytes::from_static(b"\0\r\n\xff"),
                expire: None,
            },
            Command::Set {
                key: b("k"),
                value: b("v"),
                expire: Some(Duration::from_millis(1)),
            },
            Command::Set {
                key: b("k"),
                value: b("v"),
                expire: Some(Duration::from_secs(3600)),
            },
            Command::Publish {
                channel: b("c"),
                message: b("m"),
            },
            Command::Subscribe {
                channels: vec![b("a"), b("b"), b("c")],
            },
            Command::Unsubscribe { channels: vec![] },
            Command::Unsubscribe {
                channels: vec![b("a")],
            },
            Command::Quit,
        ];
        for command in commands {
            assert_eq!(
                Command::from_frame(command.clone().into_frame()),
                Ok(command)
            );
        }
    }

    #[test]
    fn names_are_lowercase() {
        let names: Vec<&str> = [
            Command::Ping(None),
            Command::Get { key: b("k") },
            Command::Set {
                key: b("k"),
                value: b("v"),
                expire: None,
            },
            Command::Publish {
                channel: b("c"),
                message: b("m"),
            },
            Command::Subscribe { channels: vec![] },
            Command::Unsubscribe { channels: vec![] },
            Command::Quit,
        ]
        .iter()
        .map(Command::name)
        .collect();
        assert_eq!(
            names,
            [
                "ping",
                "get",
                "set",
                "publish",
                "subscribe",
                "unsubscribe",
                "quit"
            ]
        );
    }
}
