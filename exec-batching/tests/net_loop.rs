//! What is the event loop's own in the sockets' behaviour: a socket
//! belongs to the loop whose fiber made it, and is polled only while that
//! loop runs (`block_on`). The behaviour every executor shares is tested
//! on all of them, exec-batching included, in
//! `tests-integration/tests/net_*.rs`.

use std::io;
use std::net::SocketAddr;

use spindle_core::IORuntime;
use spindle_exec_batching::EventLoop;
use spindle_exec_batching::net::{TcpListener, TcpStream};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn event_loop() -> EventLoop {
    EventLoop::new().expect("build an event loop")
}

#[test]
fn a_socket_used_from_another_loop_while_its_own_is_not_running_fails_with_an_io_error() {
    let home = event_loop();
    let listener = home
        .block_on(TcpListener::bind(localhost()))
        .expect("block_on")
        .succeeded()
        .unwrap();
    // Nothing polls the listener now: its loop runs no `block_on`, so a
    // wait on it would never end, and is an error instead.
    let other = event_loop();
    let error = other
        .block_on(listener.accept())
        .expect("block_on")
        .errored()
        .expect("the listener belongs to the first loop");
    assert_eq!(error.kind(), io::ErrorKind::Other);
    assert!(error.to_string().contains("nothing polls"), "{error}");
    assert_eq!(
        home.metrics().io_waiters,
        0,
        "the failed wait left no waiter behind"
    );
    // It still works on its own loop.
    let addr = home
        .block_on(listener.local_addr())
        .expect("block_on")
        .succeeded()
        .unwrap();
    let round_trip = listener.accept().both(TcpStream::connect(addr)).void();
    assert!(home.block_on(round_trip).expect("block_on").is_succeeded());
    assert_eq!(home.metrics().io_waiters, 0);
}
