//! Traces show the user's call sites only: every operation of io-core (and
//! of exec-batching's sockets) records one event, named as the user calls
//! it, at the user's call site, and the nodes it is made of record nothing.
//!
//! Each test runs a program that uses one family of operations, reads the
//! fiber's trace at the end, and checks that (a) every event points into
//! this file, never into a Spindle crate, and (b) the operations appear, in
//! order, exactly once per call (the sequencing combinators that glue them,
//! `flat_map`, `map`, ..., are left out of that comparison). Where children
//! run user code (`race`, `both`, `par_traverse`, `start`), their own
//! traces are checked the same way. exec-batching's sockets are covered
//! here too: this crate depends on every executor.

#![cfg(feature = "tracing")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use spindle_core::error::TimeoutError;
use spindle_core::{
    CountDownLatch, Deferred, Either, FiberConfig, IO, IORuntime, Mutex, Outcome, Queue, Ref,
    Resource, RuntimeBuilder, Semaphore, Trace, TracingMode, UIO,
};
use spindle_exec_single::SingleThreaded;

#[derive(Debug, Clone, PartialEq)]
enum Error {
    Timeout,
    Boom,
}

impl From<TimeoutError> for Error {
    fn from(_: TimeoutError) -> Self {
        Error::Timeout
    }
}

fn config() -> FiberConfig {
    FiberConfig::builder()
        .tracing(TracingMode::Cached)
        .trace_capacity(1024)
        .build()
        .expect("a valid tracing configuration")
}

/// Runs `io` on a single-threaded executor that traces every fiber.
fn run<A: Send + 'static>(io: IO<A, Error>) -> A {
    let rt = SingleThreaded::builder()
        .fiber_config(config())
        .build()
        .expect("an executor");
    match rt.block_on(io).expect("block_on") {
        Outcome::Succeeded(a) => a,
        Outcome::Errored(e) => panic!("the program failed: {e:?}"),
        Outcome::Canceled => panic!("the program was canceled"),
        Outcome::Panicked(p) => panic!("the program panicked: {}", p.message()),
    }
}

/// Runs `io`, then reads the fiber's trace; gives its value and the
/// operations of the trace (see [`ops`]).
fn run_traced<A: Send + 'static>(io: IO<A, Error>) -> (A, Vec<&'static str>) {
    let (a, trace) = run(io.flat_map(|a| IO::trace().map(move |trace| (a, trace))));
    (a, ops(&trace))
}

/// The sequencing combinators the tests use to glue operations together.
/// They are left out of the compared names: where a bind's event goes
/// relative to its source's is the run-loop's business, not this file's
/// (they still count for the file check).
const GLUE: [&str; 5] = ["flat_map", "map", "product_r", "map_to", "attempt"];

/// The trace's operation names, without [`GLUE`], after checking that
/// every event points into this file.
fn ops(trace: &Trace) -> Vec<&'static str> {
    user_ops(trace)
        .into_iter()
        .filter(|name| !GLUE.contains(name))
        .collect()
}

/// The trace's operation names, after checking that every event points
/// into this file.
fn user_ops(trace: &Trace) -> Vec<&'static str> {
    assert_eq!(trace.omitted(), 0, "the ring kept every event");
    for event in trace.events() {
        let file = event.location().file();
        assert!(
            file.ends_with("tracing_internals.rs"),
            "an event points into a Spindle crate: {event}\ntrace: {}",
            trace.compact()
        );
    }
    trace.op_names()
}

/// A child's program: one user operation, then the child's own trace.
fn child_trace(value: u32) -> IO<(u32, Trace), Error> {
    IO::delay(move || value).flat_map(|v| IO::trace().map(move |t| (v, t)))
}

/// Checks a child's trace from [`child_trace`].
fn assert_child_trace(trace: &Trace) {
    assert_eq!(ops(trace), ["delay"]);
}

#[test]
fn bracket_records_one_event_at_the_call_site_and_its_release_none_of_its_own() {
    let (value, ops) = run_traced(IO::bracket(
        IO::pure(1u32),
        |r: u32| IO::pure(r + 1),
        |_| IO::unit(),
    ));
    assert_eq!(value, 2);
    assert_eq!(ops, ["bracket"]);

    let (value, ops) = run_traced(IO::bracket_case(
        IO::delay(|| 1u32),
        |r: u32| IO::delay(move || r * 2),
        |_, _| IO::delay(|| ()),
    ));
    assert_eq!(value, 2);
    assert_eq!(ops, ["bracket_case", "delay", "delay", "delay"]);

    let (value, ops) = run_traced(IO::bracket_full(
        |poll| poll.apply(IO::pure(3u32)),
        |r: u32| IO::pure(r),
        |_, _| IO::unit(),
    ));
    assert_eq!(value, 3);
    assert_eq!(ops, ["bracket_full", "Poll::apply"]);
}

#[test]
fn uncancelable_poll_and_embed_record_their_own_names() {
    let (value, ops) = run_traced(IO::uncancelable(|poll| {
        poll.apply(IO::pure(1u32))
            .flat_map(|x| Outcome::<u32, Error>::Succeeded(x + 1).embed(IO::pure(0)))
    }));
    assert_eq!(value, 2);
    assert_eq!(ops, ["uncancelable", "Poll::apply", "embed"]);

    let (value, ops) = run_traced(Outcome::<u32, Error>::Succeeded(5).embed_never());
    assert_eq!(value, 5);
    assert_eq!(ops, ["embed_never"]);
}

#[test]
fn race_records_race_in_the_parent_and_only_user_sites_in_the_children() {
    let (winner, ops) = run_traced(child_trace(1).race(IO::<u32, Error>::never()));
    assert_eq!(ops, ["race"]);
    match winner {
        Either::Left((1, trace)) => assert_child_trace(&trace),
        other => panic!("the left side wins: {other:?}"),
    }

    let (outcome, ops) = run_traced(child_trace(2).race_outcome(IO::<u32, Error>::never()));
    assert_eq!(ops, ["race_outcome"]);
    match outcome {
        Either::Left(Outcome::Succeeded((2, trace))) => assert_child_trace(&trace),
        other => panic!("the left side wins: {other:?}"),
    }

    let (value, ops) = run_traced(
        child_trace(3)
            .race_pair(IO::<u32, Error>::never())
            .flat_map(|pair| match pair {
                Either::Left((Outcome::Succeeded((v, trace)), loser)) => {
                    assert_child_trace(&trace);
                    loser.cancel().map_to(v)
                }
                _ => IO::raise_error(Error::Boom),
            }),
    );
    assert_eq!(value, 3);
    assert_eq!(ops, ["race_pair", "cancel"]);
}

#[test]
fn both_and_par_map2_record_one_event_and_leave_the_children_their_own_sites() {
    let ((left, right), ops) = run_traced(child_trace(1).both(child_trace(2)));
    assert_eq!(ops, ["both"]);
    assert_eq!((left.0, right.0), (1, 2));
    assert_child_trace(&left.1);
    assert_child_trace(&right.1);

    let ((left, right), ops) = run_traced(child_trace(1).both_outcome(child_trace(2)));
    assert_eq!(ops, ["both_outcome"]);
    for outcome in [left, right] {
        match outcome {
            Outcome::Succeeded((_, trace)) => assert_child_trace(&trace),
            _ => panic!("both sides succeed"),
        }
    }

    let (sum, ops) = run_traced(child_trace(1).par_map2(child_trace(2), |(a, ta), (b, tb)| {
        assert_child_trace(&ta);
        assert_child_trace(&tb);
        a + b
    }));
    assert_eq!(sum, 3);
    assert_eq!(ops, ["par_map2"]);
}

#[test]
fn par_traverse_and_par_sequence_record_one_event_each() {
    let (values, ops) = run_traced(IO::par_traverse(vec![1u32, 2, 3], child_trace));
    assert_eq!(ops, ["par_traverse"]);
    assert_eq!(
        values.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    values
        .iter()
        .for_each(|(_, trace)| assert_child_trace(trace));

    let (values, ops) = run_traced(IO::par_sequence(vec![child_trace(4), child_trace(5)]));
    assert_eq!(ops, ["par_sequence"]);
    values
        .iter()
        .for_each(|(_, trace)| assert_child_trace(trace));

    let program = IO::par_traverse_n(nz(2), vec![6u32, 7, 8], child_trace);
    let (values, ops) = run_traced(program);
    assert_eq!(ops, ["par_traverse_n"]);
    assert_eq!(values.len(), 3);
    values
        .iter()
        .for_each(|(_, trace)| assert_child_trace(trace));
}

#[test]
fn timeout_timeout_to_and_timed_record_their_names_whether_or_not_time_runs_out() {
    let (result, ops) = run_traced(
        IO::<u32, Error>::never()
            .timeout(Duration::from_millis(1))
            .attempt(),
    );
    assert_eq!(result, Err(Error::Timeout));
    // The body runs on the caller's fiber (a deadline region): its events
    // are the caller's own.
    assert_eq!(ops, ["timeout", "never"]);

    let (value, ops) = run_traced(IO::pure(1u32).timeout(Duration::from_secs(60)));
    assert_eq!(value, 1);
    assert_eq!(ops, ["timeout"]);

    let (value, ops) = run_traced(IO::never().timeout_to(Duration::from_millis(1), IO::pure(9)));
    assert_eq!(value, 9);
    assert_eq!(ops, ["timeout_to", "never"]);

    let ((_, value), ops) = run_traced(IO::delay(|| 4u32).timed());
    assert_eq!(value, 4);
    assert_eq!(ops, ["timed", "delay"]);
}

#[test]
fn start_join_and_join_void_record_one_event_each() {
    let (outcome, ops) = run_traced(
        child_trace(1)
            .start()
            .flat_map(|fiber| fiber.join_void().product_r(fiber.join())),
    );
    match outcome {
        Outcome::Succeeded((1, child)) => assert_child_trace(&child),
        _ => panic!("the child succeeds"),
    }
    assert_eq!(ops, ["start", "join_void", "join"]);
}

#[test]
fn cancel_and_join_with_never_record_one_event_each() {
    let (value, ops) = run_traced(UIO::<u32>::never().start().flat_map(|fiber| {
        fiber
            .cancel()
            .product_r(IO::delay(|| 7u32).start())
            .flat_map(|other| other.join_with_never())
    }));
    assert_eq!(value, 7);
    assert_eq!(ops, ["start", "cancel", "start", "join_with_never"]);
}

#[test]
fn deferred_operations_record_their_type_and_name() {
    let d = Deferred::<u32>::new();
    let (reader, writer, peeker) = (d.clone(), d.clone(), d);
    // The reader waits (the slow path), the writer completes it.
    let (value, ops) = run_traced(reader.get().start().flat_map(move |fiber| {
        IO::cede()
            .product_r(writer.complete(5))
            .product_r(peeker.try_get())
            .product_r(fiber.join_with_never())
    }));
    assert_eq!(value, 5);
    assert_eq!(
        ops,
        [
            "start",
            "cede",
            "Deferred::complete",
            "Deferred::try_get",
            "join_with_never"
        ]
    );
}

#[test]
fn deferred_get_in_a_child_records_only_its_own_name() {
    let d = Deferred::<u32>::new();
    let (reader, writer) = (d.clone(), d);
    let child = reader.get().flat_map(|v| IO::trace().map(move |t| (v, t)));
    let ((value, trace), _) = run_traced(child.start().flat_map(move |fiber| {
        IO::cede()
            .product_r(writer.complete(5))
            .product_r(fiber.join_with_never())
    }));
    assert_eq!(value, 5);
    assert_eq!(ops(&trace), ["Deferred::get"]);
}

#[test]
fn ref_operations_record_their_type_and_name() {
    let r = Ref::new(1u32);
    let (a, b, c, d, e, f, g) = (
        r.clone(),
        r.clone(),
        r.clone(),
        r.clone(),
        r.clone(),
        r.clone(),
        r,
    );
    let (value, ops) = run_traced(
        a.set(2)
            .product_r(b.update(|x| *x += 1))
            .product_r(c.modify(|x| *x))
            .product_r(d.get_and_update(|x| *x += 1))
            .product_r(e.update_and_get(|x| *x += 1))
            .product_r(f.get_and_set(10))
            .product_r(g.get()),
    );
    assert_eq!(value, 10);
    assert_eq!(
        ops,
        [
            "Ref::set",
            "Ref::update",
            "Ref::modify",
            "Ref::get_and_update",
            "Ref::update_and_get",
            "Ref::get_and_set",
            "Ref::get"
        ]
    );
}

#[test]
fn semaphore_operations_record_their_name_also_when_acquire_waits() {
    let sem = Semaphore::new(1).expect("one permit");
    let (s1, s2, s3, s4, s5) = (sem.clone(), sem.clone(), sem.clone(), sem.clone(), sem);
    let releaser = IO::cede().product_r(s2.release::<Error>());
    let (value, ops) = run_traced(
        s1.acquire()
            .product_r(releaser.start())
            // No permit left: this acquire waits for the releaser.
            .product_r(s3.acquire())
            .product_r(s4.release())
            .product_r(s5.with_permit(IO::pure(3u32))),
    );
    assert_eq!(value, 3);
    assert_eq!(
        ops,
        [
            "Semaphore::acquire",
            "start",
            "Semaphore::acquire",
            "Semaphore::release",
            "Semaphore::with_permit"
        ]
    );
}

#[test]
fn queue_operations_record_their_name_also_when_they_wait() {
    let q = Queue::<u32>::bounded(1).expect("capacity 1");
    let (producer, taker, q2, q3, q4) = (q.clone(), q.clone(), q.clone(), q.clone(), q);
    // The producer's second offer waits for the taker.
    let produce = producer.offer(1).flat_map(move |()| producer.offer(2));
    let (value, ops) = run_traced(
        taker
            .take()
            .start()
            .flat_map(move |fiber| {
                IO::cede()
                    .product_r(produce)
                    .product_r(fiber.join_with_never())
            })
            .flat_map(move |first| q2.take().map(move |second| (first, second)))
            .flat_map(move |pair| {
                q3.try_offer(7)
                    .product_r(q4.try_take())
                    .map(move |third| (pair, third))
            }),
    );
    assert_eq!(value, ((1, 2), Some(7)));
    assert_eq!(
        ops,
        [
            "start",
            "cede",
            "Queue::offer",
            "Queue::offer",
            "join_with_never",
            "Queue::take",
            "Queue::try_offer",
            "Queue::try_take"
        ]
    );
}

#[test]
fn mutex_and_latch_operations_record_their_type_and_name() {
    let mutex = Mutex::new();
    let latch = CountDownLatch::new(1).expect("count 1");
    let (m1, m2) = (mutex.clone(), mutex);
    let (l1, l2) = (latch.clone(), latch);
    let (value, ops) = run_traced(
        m1.lock()
            .use_with(|_| IO::pure(1u32))
            .product_r(m2.with_lock(IO::pure(2u32)))
            .product_r(l1.release())
            .product_r(l2.wait())
            .map_to(3u32),
    );
    assert_eq!(value, 3);
    assert_eq!(
        ops,
        [
            "Resource::use_with",
            "Mutex::lock",
            "Mutex::with_lock",
            "CountDownLatch::release",
            "CountDownLatch::wait"
        ]
    );
}

#[test]
fn mutex_operations_record_their_name_also_when_they_wait() {
    let mutex = Mutex::new();
    let (m1, m2, m3, m4) = (mutex.clone(), mutex.clone(), mutex.clone(), mutex.clone());
    // Before each use, a holder takes the lock and keeps it over a cede:
    // the use waits for it (on the single-threaded executor, in this
    // order; each holder counts the waiters it sees before it lets go).
    // The waits are internal: each use records its name once.
    let seen = Arc::new(AtomicUsize::new(0));
    let holder = |m: Mutex, seen: Arc<AtomicUsize>| {
        let inside = m.clone();
        m.with_lock(IO::<(), Error>::cede().product_r(IO::delay(move || {
            seen.fetch_add(inside.waiting(), Ordering::SeqCst);
        })))
    };
    let (value, ops) = run_traced(
        holder(m1, seen.clone())
            .start()
            .product_r(IO::cede())
            .product_r(m2.lock().use_with(|_| IO::pure(1u32)))
            .product_r(holder(m3, seen.clone()).start())
            .product_r(IO::cede())
            .product_r(m4.with_lock(IO::pure(2u32))),
    );
    assert_eq!(value, 2);
    assert_eq!(seen.load(Ordering::SeqCst), 2, "each use waited");
    assert_eq!(
        ops,
        [
            "start",
            "cede",
            "Resource::use_with",
            "Mutex::lock",
            "start",
            "cede",
            "Mutex::with_lock"
        ]
    );
}

#[test]
fn resource_operations_record_where_the_resource_was_made() {
    let a = Resource::make(IO::delay(|| 1u32), |_| IO::unit());
    let b = Resource::<u32, Error>::pure(2);
    let c = Resource::eval(IO::pure(3u32));
    let d = Resource::make_case(IO::pure(4u32), |_, _| IO::unit());
    let e = Resource::make_full(|poll| poll.apply(IO::pure(5u32)), |_, _| IO::unit());
    let all = a
        .map(|x| *x)
        .flat_map(move |x| b.map(move |y| x + *y))
        .both(c)
        .both(d)
        .both(e);
    let (value, ops) = run_traced(all.use_with(|(((ab, c), d), e)| IO::pure(ab + c + d + e)));
    assert_eq!(value, 15);
    assert_eq!(
        ops,
        [
            "Resource::use_with",
            "Resource::both",
            "Resource::both",
            "Resource::both",
            "Resource::flat_map",
            "Resource::map",
            "Resource::make",
            "delay",
            "Resource::map",
            "Resource::pure",
            "Resource::eval",
            "Resource::make_case",
            "Resource::make_full",
            "Poll::apply"
        ]
    );
}

#[test]
fn allocated_release_and_background_record_their_names() {
    let resource = Resource::make(IO::pure(1u32), |_| IO::unit());
    let (value, ops) = run_traced(resource.allocated().flat_map(|allocated| {
        let value = *allocated.value();
        allocated.release().map_to(value)
    }));
    assert_eq!(value, 1);
    assert_eq!(
        ops,
        [
            "Resource::allocated",
            "Resource::make",
            "Allocated::release"
        ]
    );

    let (value, ops) = run_traced(
        IO::<u32, Error>::never()
            .background()
            .use_ref(|_| IO::pure(2u32)),
    );
    assert_eq!(value, 2);
    assert_eq!(ops, ["Resource::use_ref", "background"]);
}

#[test]
fn socket_operations_record_their_type_and_name_at_the_call_site() {
    use spindle_exec_batching::EventLoop;
    use spindle_exec_batching::net::{TcpListener, TcpStream};

    let program = TcpListener::bind("127.0.0.1:0".parse().unwrap()).flat_map(|listener| {
        listener.local_addr().flat_map(move |addr| {
            let server = listener.accept().flat_map(|(stream, _)| {
                stream
                    .write_all(b"hi")
                    .product_r(stream.shutdown(std::net::Shutdown::Write))
                    .flat_map(|()| IO::trace())
            });
            let client = TcpStream::connect(addr).flat_map(|stream| {
                stream
                    .set_nodelay(true)
                    .product_r(stream.peer_addr())
                    .product_r(stream.local_addr())
                    .product_r(stream.read(16))
                    .flat_map(move |bytes| {
                        stream
                            .read_into(bytes, 16)
                            .product_r(stream.write(b"x".to_vec()))
                    })
                    .flat_map(|_| IO::trace())
            });
            server.both(client)
        })
    });
    let program = program.flat_map(|pair| IO::trace().map(move |main| (pair, main)));
    let ((server, client), main) = match EventLoop::builder()
        .fiber_config(config())
        .build()
        .unwrap()
        .block_on(program)
        .expect("block_on")
    {
        Outcome::Succeeded(traces) => traces,
        Outcome::Errored(e) => panic!("the sockets failed: {e}"),
        _ => panic!("the sockets did not succeed"),
    };
    assert_eq!(
        ops(&main),
        ["TcpListener::bind", "TcpListener::local_addr", "both"]
    );
    assert_eq!(
        ops(&server),
        [
            "TcpListener::accept",
            "TcpStream::write_all",
            "TcpStream::shutdown"
        ]
    );
    assert_eq!(
        ops(&client),
        [
            "TcpStream::connect",
            "TcpStream::set_nodelay",
            "TcpStream::peer_addr",
            "TcpStream::local_addr",
            "TcpStream::read",
            "TcpStream::read_into",
            "TcpStream::write"
        ]
    );
}

/// A parallelism for `par_traverse_n` (tests pass literals that are not 0).
fn nz(n: usize) -> core::num::NonZeroUsize {
    core::num::NonZeroUsize::new(n).expect("a parallelism of at least 1")
}
