//! The servers the tests talk to: the crate's server on a fresh executor
//! of each kind, in a thread of the test process, on a port the system
//! picks; and the stamping of one test body onto every executor.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use spindle_effect::net::TcpListener;
use spindle_effect::prelude::*;
use spindle_effect::{IORuntime, Outcome};
use spindle_mini_redis::server::{self, Config, Summary};

/// Every std executor with I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// exec-wstp, two workers.
    Wstp,
    /// exec-batching.
    Batching,
    /// exec-tokio on a multi-thread runtime of two workers.
    Tokio,
    /// exec-tokio on a current-thread runtime.
    TokioCurrent,
    /// exec-single on the system clock.
    Single,
}

fn run_on<A: Send + 'static>(kind: Kind, io: IO<A, io::Error>) -> Outcome<A, io::Error> {
    fn go<R: IORuntime, A: Send + 'static>(
        rt: Result<R, R::BuildError>,
        io: IO<A, io::Error>,
    ) -> Outcome<A, io::Error>
    where
        R::BuildError: std::fmt::Debug,
    {
        rt.expect("the executor builds")
            .block_on(io)
            .expect("block_on runs")
    }
    use spindle_effect::{batching, single, tokio, wstp};
    match kind {
        Kind::Wstp => go(wstp::Runtime::builder().worker_threads(2).build(), io),
        Kind::Batching => go(batching::EventLoop::builder().build(), io),
        Kind::Tokio => go(tokio::TokioExecutor::builder().multi_thread(2).build(), io),
        Kind::TokioCurrent => go(tokio::TokioExecutor::builder().current_thread().build(), io),
        Kind::Single => go(single::SingleThreaded::builder().build(), io),
    }
}

/// A server running in a thread of its own.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Outcome<Summary, io::Error>>>,
}

impl TestServer {
    /// Starts a server with `config` on an executor of `kind`.
    pub fn start(kind: Kind, config: Config) -> TestServer {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let program = IO::block(async move {
                let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
                addr_tx
                    .send(listener.local_addr().await?)
                    .expect("the test waits for the address");
                // The test's stop, waited for on the blocking pool.
                let shutdown: IO<(), Infallible> = IO::blocking(move || {
                    let _ = stop_rx.recv();
                })
                .attempt()
                .void();
                server::serve(listener, config, shutdown).await
            });
            run_on(kind, program)
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server listens");
        TestServer {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The port, as a string for command lines.
    pub fn port(&self) -> String {
        self.addr.port().to_string()
    }

    /// Shuts the server down gracefully; what it did.
    pub fn stop(mut self) -> Summary {
        drop(self.stop.take());
        let outcome = self
            .thread
            .take()
            .expect("stopped once")
            .join()
            .expect("the server's thread ends");
        match outcome {
            Outcome::Succeeded(summary) => summary,
            other => panic!("the server ended with {other:?}"),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One test at a time in a test binary: a test that counts this
/// process's descriptors must not see another test's sockets.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Stamps each test body into a module per executor, where `KIND` names
/// the executor; the tests of a binary run one at a time ([`serial`]).
macro_rules! every_executor {
    ($($(#[$meta:meta])* fn $name:ident() $body:block)*) => {
        every_executor!(@one wstp, Wstp, $($(#[$meta])* fn $name() $body)*);
        every_executor!(@one batching, Batching, $($(#[$meta])* fn $name() $body)*);
        every_executor!(@one tokio, Tokio, $($(#[$meta])* fn $name() $body)*);
        every_executor!(@one tokio_current, TokioCurrent, $($(#[$meta])* fn $name() $body)*);
        every_executor!(@one single, Single, $($(#[$meta])* fn $name() $body)*);
    };
    (@one $module:ident, $kind:ident, $($(#[$meta:meta])* fn $name:ident() $body:block)*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            /// This module's executor.
            const KIND: $crate::support::Kind = $crate::support::Kind::$kind;
            $( $(#[$meta])* #[test] fn $name() {
                let _serial = $crate::support::serial();
                $body
            } )*
        }
    };
}
pub(crate) use every_executor;
