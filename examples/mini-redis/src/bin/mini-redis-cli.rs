//! `mini-redis-cli`: one request to a server, its reply on stdout.
//!
//! ```text
//! mini-redis-cli [--host 127.0.0.1] [--port 6379] ping [MESSAGE]
//! mini-redis-cli ... get KEY
//! mini-redis-cli ... set KEY VALUE [EXPIRES_MS]
//! mini-redis-cli ... publish CHANNEL MESSAGE
//! mini-redis-cli ... subscribe CHANNEL...     (prints each message until the server closes)
//! ```
//!
//! The command shape of tokio's `mini-redis-cli`. Exit code 0 on a reply,
//! 1 when the request failed (the reason on stderr), 2 for an unusable
//! command line.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use spindle_effect::app;
use spindle_effect::prelude::*;
use spindle_effect::wstp::Runtime;
use spindle_mini_redis::client::{Client, ClientError};

const USAGE: &str = "usage: mini-redis-cli [--host H] [--port N] \
(ping [MESSAGE] | get KEY | set KEY VALUE [EXPIRES_MS] | publish CHANNEL MESSAGE | subscribe CHANNEL...)";

/// A request of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    Ping(Option<String>),
    Get(String),
    Set(String, String, Option<Duration>),
    Publish(String, String),
    Subscribe(Vec<String>),
}

fn parse(args: Vec<String>) -> Result<(SocketAddr, Request), String> {
    let mut host: IpAddr = [127, 0, 0, 1].into();
    let mut port = 6379u16;
    let mut rest = args.into_iter().peekable();
    while let Some(flag) = rest.next_if(|a| a.starts_with("--")) {
        let value = rest.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--host" => {
                host = value
                    .parse()
                    .map_err(|e| format!("--host {value:?}: {e}"))?
            }
            "--port" => {
                port = value
                    .parse()
                    .map_err(|e| format!("--port {value:?}: {e}"))?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    let words: Vec<String> = rest.collect();
    let request = match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ping"] => Request::Ping(None),
        ["ping", message] => Request::Ping(Some(message.to_string())),
        ["get", key] => Request::Get(key.to_string()),
        ["set", key, value] => Request::Set(key.to_string(), value.to_string(), None),
        ["set", key, value, ms] => {
            let ms: u64 = ms.parse().map_err(|e| format!("expiry {ms:?}: {e}"))?;
            Request::Set(
                key.to_string(),
                value.to_string(),
                Some(Duration::from_millis(ms)),
            )
        }
        ["publish", channel, message] => Request::Publish(channel.to_string(), message.to_string()),
        ["subscribe", channels @ ..] if !channels.is_empty() => {
            Request::Subscribe(channels.iter().map(|c| c.to_string()).collect())
        }
        _ => return Err("expected a command".into()),
    };
    Ok((SocketAddr::new(host, port), request))
}

fn show(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(text) => format!("\"{text}\""),
        Err(_) => format!("{data:?}"),
    }
}

fn program(addr: SocketAddr, request: Request) -> IO<(), ClientError> {
    IO::block(async move {
        let mut client = Client::connect(addr).await?;
        match request {
            Request::Ping(message) => {
                let reply = client.ping(message.map(Bytes::from)).await?;
                println!("{}", show(&reply));
            }
            Request::Get(key) => match client.get(key).await? {
                Some(value) => println!("{}", show(&value)),
                None => println!("(nil)"),
            },
            Request::Set(key, value, expire) => {
                client.set(key, Bytes::from(value), expire).await?;
                println!("OK");
            }
            Request::Publish(channel, message) => {
                let n = client.publish(channel, Bytes::from(message)).await?;
                println!("Publish OK ({n} subscriber(s))");
            }
            Request::Subscribe(channels) => {
                let mut subscriber = client
                    .subscribe(channels.into_iter().map(Bytes::from).collect())
                    .await?;
                while let Some(message) = subscriber.next_message().await? {
                    println!(
                        "got message from the channel: {}; message = {}",
                        show(&message.channel),
                        show(&message.content)
                    );
                }
            }
        }
        Ok(())
    })
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1).collect()) {
        Ok((addr, request)) => app::run(Runtime::from_env(), program(addr, request)),
        Err(why) => {
            eprintln!("mini-redis-cli: {why}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
