//! Channel, Topic and SignallingRef on exec-single (virtual time where
//! time matters).

use std::time::Duration;

use spindle_core::{IO, IORuntime, Outcome, Queue};
use spindle_exec_single::SingleThreaded;
use spindle_exec_single::testkit::TestControl;
use spindle_stream::{Channel, SignallingRef, Stream, Topic};

const MS: Duration = Duration::from_millis(1);

fn run<A: Send + 'static>(program: IO<A, String>) -> Outcome<A, String> {
    SingleThreaded::new()
        .expect("a runtime")
        .block_on(program)
        .expect("the run")
}

fn on_virtual_time<A: Send + 'static>(program: IO<A, String>) -> Outcome<A, String> {
    let mut control = TestControl::execute(program);
    control.tick_all();
    control.take_results().expect("the program completes")
}

#[test]
fn readers_of_a_channel_share_its_elements_and_end_after_it_closes() {
    let channel = Channel::<u32>::bounded(3).expect("a capacity");
    let (w, r1, r2) = (channel.clone(), channel.clone(), channel.clone());
    let writer = Stream::range(0u32..100)
        .through(move |s| w.sends(s))
        .compile()
        .drain();
    let program = writer
        .both(r1.stream().compile().to_vec())
        .both(r2.stream().compile().to_vec())
        .map(|(((), a), b)| (a, b));
    let (a, b) = run(program).succeeded().expect("a success");
    let mut all: Vec<u32> = a.into_iter().chain(b).collect();
    all.sort_unstable();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    assert!(channel.is_closed());
}

#[test]
fn a_closed_channel_gives_a_sent_element_back() {
    let channel = Channel::<u32>::unbounded();
    let c = channel.clone();
    let outcome = run(channel.close().product_r(c.send(7)));
    assert_eq!(
        outcome.succeeded().map(|r| r.map_err(|e| e.0)),
        Some(Err(7))
    );
}

#[test]
fn a_capacity_of_zero_is_refused() {
    assert!(Channel::<u32>::bounded(0).is_err());
    assert!(Topic::<u32>::new().subscribe::<String>(0).is_err());
}

#[test]
fn every_subscriber_of_a_topic_gets_every_element_in_order() {
    let topic = Topic::<u32>::new();
    let (a, b, p, closing) = (topic.clone(), topic.clone(), topic.clone(), topic.clone());
    let publisher = IO::sleep(MS)
        .product_r(
            Stream::range(0u32..50)
                .through(move |s| p.publishes(s))
                .compile()
                .drain(),
        )
        .product_r(closing.close());
    let program = a
        .subscribe(2)
        .expect("valid")
        .compile()
        .to_vec()
        .both(b.subscribe(1).expect("valid").compile().to_vec())
        .both(publisher)
        .map(|(got, _)| got);
    let (a, b) = on_virtual_time(program).succeeded().expect("a success");
    assert_eq!(a, (0..50).collect::<Vec<_>>());
    assert_eq!(b, (0..50).collect::<Vec<_>>());
    assert_eq!(topic.subscribers(), 0);
}

#[test]
fn a_subscriber_that_stops_leaves_the_topic_and_no_longer_holds_publishers_back() {
    let topic = Topic::<u32>::new();
    let (a, p, closing) = (topic.clone(), topic.clone(), topic.clone());
    let publisher = IO::sleep(MS)
        .product_r(
            Stream::range(0u32..100)
                .through(move |s| p.publishes(s))
                .compile()
                .drain(),
        )
        .product_r(closing.close());
    let program = a
        .subscribe(1)
        .expect("valid")
        .take(3)
        .compile()
        .to_vec()
        .both(publisher)
        .map(|(got, _)| got);
    assert_eq!(on_virtual_time(program), Outcome::Succeeded(vec![0, 1, 2]));
    assert_eq!(topic.subscribers(), 0);
}

#[test]
fn discrete_emits_the_current_value_then_the_latest_after_each_change() {
    let signal = SignallingRef::new(0u32);
    let (reader, writer) = (signal.clone(), signal.clone());
    let writes = IO::traverse(vec![1u32, 2, 3], move |v| {
        let w = writer.clone();
        IO::sleep(10 * MS).product_r(w.set(v))
    });
    let program = reader
        .discrete()
        .take_while(|v| *v < 3)
        .compile()
        .to_vec()
        .both(writes)
        .map(|(got, _)| got);
    assert_eq!(on_virtual_time(program), Outcome::Succeeded(vec![0, 1, 2]));
}

#[test]
fn a_slow_reader_of_discrete_skips_to_the_latest_value() {
    let signal = SignallingRef::new(0u32);
    let (reader, writer) = (signal.clone(), signal.clone());
    // Three changes in a row, then the reader looks.
    let program = writer
        .set(1)
        .product_r(writer.set(2))
        .product_r(writer.set(3))
        .product_r(reader.discrete().take(1).compile().to_vec());
    assert_eq!(run(program), Outcome::Succeeded(vec![3]));
}

#[test]
fn from_queue_ends_when_the_queue_is_closed_and_drained() {
    let queue = Queue::<u32>::unbounded();
    let (q, closing) = (queue.clone(), queue.clone());
    let program = IO::traverse(vec![1u32, 2, 3], move |v| q.offer(v))
        .product_r(closing.close())
        .product_r(Stream::from_queue(queue).compile().to_vec());
    assert_eq!(run(program), Outcome::Succeeded(vec![1, 2, 3]));
}

#[test]
fn a_publisher_waiting_on_a_subscriber_that_leaves_goes_on() {
    let topic = Topic::<u32>::new();
    let (a, p) = (topic.clone(), topic.clone());
    // The subscriber is slow: the publisher fills its queue of one and
    // waits; then the subscriber stops after two elements.
    let subscriber = a
        .subscribe(1)
        .expect("valid")
        .eval_map(|v| IO::sleep(5 * MS).map(move |()| v))
        .take(2)
        .compile()
        .to_vec();
    let publisher = IO::sleep(MS).product_r(
        Stream::range(0u32..10)
            .eval_map(move |v| p.publish(v))
            .compile()
            .count(),
    );
    let outcome = on_virtual_time(subscriber.both(publisher));
    assert_eq!(outcome, Outcome::Succeeded((vec![0, 1], 10)));
    assert_eq!(topic.subscribers(), 0);
}
