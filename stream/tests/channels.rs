//! Topic and SignallingRef where time matters, on exec-single's virtual
//! time (the other channel tests run on every executor in
//! tests-integration's `stream` suite).

use std::time::Duration;

use spindle_core::{IO, Outcome};
use spindle_exec_single::testkit::TestControl;
use spindle_stream::{SignallingRef, Stream, Topic};

const MS: Duration = Duration::from_millis(1);

fn on_virtual_time<A: Send + 'static>(program: IO<A, String>) -> Outcome<A, String> {
    let mut control = TestControl::execute(program);
    control.tick_all();
    control.take_results().expect("the program completes")
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
