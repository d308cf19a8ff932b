//! The crate's client library against its server on every executor, and
//! the key space's expiry on virtual time.

mod support;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use spindle_effect::Outcome;
use spindle_effect::prelude::*;
use spindle_effect::single::testkit::TestControl;
use spindle_effect::wstp::Runtime as Pool;
use spindle_mini_redis::client::{Client, ClientError, Message};
use spindle_mini_redis::db::Db;
use spindle_mini_redis::server::Config;
use support::{TestServer, every_executor};

/// Runs a client program on a pool of its own (the server runs on the
/// executor under test).
fn client<A: Send + std::fmt::Debug + 'static>(program: IO<A, ClientError>) -> A {
    let rt = Pool::builder().worker_threads(1).build().expect("a pool");
    match rt.block_on(program).expect("block_on") {
        Outcome::Succeeded(value) => value,
        other => panic!("the client program ended with {other:?}"),
    }
}

every_executor! {
    fn the_client_pings_sets_and_gets() {
        let server = TestServer::start(KIND, Config::default());
        let addr = server.addr;
        let (pong, echo, missing, value, error) = client(IO::block(async move {
            let mut c = Client::connect(addr).await?;
            let pong = c.ping(None).await?;
            let echo = c.ping(Some(Bytes::from_static(b"echo"))).await?;
            let missing = c.get("nothing").await?;
            c.set("key", Bytes::from_static(b"value"), None).await?;
            let value = c.get("key").await?;
            let error = c.set("", Bytes::new(), Some(Duration::ZERO)).await.err().map(|e| e.to_string());
            Ok((pong, echo, missing, value, error))
        }));
        assert_eq!(pong, "PONG");
        assert_eq!(echo, "echo");
        assert_eq!(missing, None);
        assert_eq!(value.as_deref(), Some(&b"value"[..]));
        assert_eq!(error.as_deref(), Some("error reply: ERR invalid expire time in 'set' command"));
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }

    fn a_subscriber_stream_receives_each_message_in_order() {
        let server = TestServer::start(KIND, Config::default());
        let addr = server.addr;
        let got = client(IO::block(async move {
            let subscriber = Client::connect(addr)
                .await?
                .subscribe(vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")])
                .await?;
            let receiving = subscriber.into_stream().take(3).compile().to_vec().start().value().await;
            let mut publisher = Client::connect(addr).await?;
            let mut counts = Vec::new();
            for (channel, text) in [("a", "one"), ("c", "nobody"), ("b", "two"), ("a", "three")] {
                counts.push(publisher.publish(channel, Bytes::from(text)).await?);
            }
            let messages = receiving.join_with_never().await?;
            Ok((counts, messages))
        }));
        let message = |channel: &'static str, content: &'static str| Message {
            channel: Bytes::from(channel),
            content: Bytes::from(content),
        };
        assert_eq!(got.0, [1, 0, 1, 1]);
        assert_eq!(got.1, [message("a", "one"), message("b", "two"), message("a", "three")]);
        let summary = server.stop();
        assert_eq!(summary.finalized, summary.serve.accepted);
    }
}

#[test]
fn a_key_expires_at_its_deadline_on_virtual_time_and_an_earlier_set_wakes_the_purge() {
    let db = Db::new();
    let (purging, watching) = (db.clone(), db.clone());
    let program: IO<(), Infallible> = IO::block(async move {
        let purge = purging.purge_expired().start().value().await;
        watching
            .set::<Infallible>(
                Bytes::from("hour"),
                Bytes::from("1"),
                Some(Duration::from_secs(3600)),
            )
            .value()
            .await;
        IO::<(), Infallible>::sleep(Duration::from_secs(1))
            .value()
            .await;
        // Earlier than the hour: the purge fiber, asleep until then, wakes.
        watching
            .set::<Infallible>(
                Bytes::from("minute"),
                Bytes::from("2"),
                Some(Duration::from_secs(60)),
            )
            .value()
            .await;
        IO::<(), Infallible>::sleep(Duration::from_secs(61))
            .value()
            .await;
        let after_minute = (watching.get(b"minute"), watching.get(b"hour"));
        IO::<(), Infallible>::sleep(Duration::from_secs(3600))
            .value()
            .await;
        let after_hour = watching.get(b"hour");
        watching.shut_down::<Infallible>().value().await;
        purge.join_void().value().await;
        assert_eq!(after_minute, (None, Some(Bytes::from("1"))));
        assert_eq!(after_hour, None);
        Ok(())
    });
    let mut control = TestControl::execute(program);
    control.tick_all();
    assert_eq!(control.results(), Some(&Outcome::Succeeded(())));
    assert!(db.is_empty());
}
