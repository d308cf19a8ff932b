//! Unit tests of the erased values and closures: inline payloads, blocks
//! and boxes, drops counted, the result slot (also under Miri).

use crate::engine::erased::*;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::mem;

struct Plain;
impl<F: FnOnce(u64) -> u64> Adapter<u64, u64, F> for Plain {
    unsafe fn call(f: F, input: u64) -> u64 {
        f(input)
    }
}

#[test]
fn word_sized_values_round_trip_inline_and_larger_values_round_trip_boxed() {
    assert!(fits_inline::<usize>());
    // A `u64` is a word on 64-bit targets, two on 32-bit ones.
    assert_eq!(fits_inline::<u64>(), mem::size_of::<usize>() >= 8);
    assert!(fits_inline::<Box<[u64; 100]>>());
    assert!(!fits_inline::<String>());
    assert_eq!(mem::size_of::<Value>(), 2 * mem::size_of::<usize>());
    assert_eq!(
        mem::size_of::<ErasedFn<Value, Value>>(),
        2 * mem::size_of::<usize>()
    );
    // SAFETY: each value is read back as the type it was made from.
    unsafe {
        assert_eq!(Value::new(7u8).take::<u8>(), 7);
        assert_eq!(Value::new((1u8, 2u16)).take::<(u8, u16)>(), (1, 2));
        assert_eq!(
            Value::new(String::from("spindle")).take::<String>(),
            "spindle"
        );
        assert_eq!(Value::new([1u64, 2, 3, 4]).take::<[u64; 4]>(), [1, 2, 3, 4]);
        assert_eq!(Value::new(vec![1u32; 100]).take::<Vec<u32>>().len(), 100);
        Value::unit().take::<()>();
    }
}

#[test]
fn dropping_an_unread_value_drops_its_contents_exactly_once() {
    let counter = Arc::new(());
    drop(Value::new(counter.clone()));
    drop(Value::new([
        counter.clone(),
        counter.clone(),
        counter.clone(),
        counter.clone(),
    ]));
    assert_eq!(Arc::strong_count(&counter), 1);
}

#[test]
fn erased_closures_run_once_and_drop_their_captures_when_not_called() {
    let counter = Arc::new(());
    let c = counter.clone();
    let small = ErasedFn::<u64, u64>::new::<Plain, _>(move |x| {
        let _keep = &c;
        x + 1
    });
    // SAFETY: the adapter expects a `u64`.
    assert_eq!(unsafe { small.call(41) }, 42);
    assert_eq!(Arc::strong_count(&counter), 1);

    let big = [
        counter.clone(),
        counter.clone(),
        counter.clone(),
        counter.clone(),
    ];
    let f = ErasedFn::<u64, u64>::new::<Plain, _>(move |x| x + big.len() as u64);
    assert_eq!(Arc::strong_count(&counter), 5);
    drop(f);
    assert_eq!(Arc::strong_count(&counter), 1);
}

#[test]
fn payloads_larger_than_a_block_round_trip_through_the_larger_blocks_or_a_box() {
    let counter = Arc::new(());
    // Eight words: too large for a block, fits a large one.
    let eight = [(); 8].map(|()| counter.clone());
    assert!(!fits_block::<[Arc<()>; 8]>() || crate::engine::blocks::BLOCK.size() >= 64);
    assert!(fits_large_block::<[Arc<()>; 8]>());
    // SAFETY: read back as the type it was made from.
    let back = unsafe { Value::new(eight).take::<[Arc<()>; 8]>() };
    assert_eq!(Arc::strong_count(&counter), 9);
    drop(back);
    // A closure of that size, called, and one dropped without a call.
    let captures = [(); 6].map(|()| counter.clone());
    let f = ErasedFn::<u64, u64>::new::<Plain, _>(move |x| x + captures.len() as u64);
    // SAFETY: the adapter expects a `u64`.
    assert_eq!(unsafe { f.call(1) }, 7);
    let captures = [(); 6].map(|()| counter.clone());
    drop(ErasedFn::<u64, u64>::new::<Plain, _>(move |x| {
        x + captures.len() as u64
    }));
    assert_eq!(Arc::strong_count(&counter), 1);
    // Sixteen words: a huge block.
    let sixteen = [(); 16].map(|()| counter.clone());
    assert!(!fits_large_block::<[Arc<()>; 16]>());
    assert!(fits_huge_block::<[Arc<()>; 16]>());
    drop(Value::new(sixteen));
    assert_eq!(Arc::strong_count(&counter), 1);
    // Larger than a huge block: boxed, and still exact.
    let many = [(); 32].map(|()| counter.clone());
    assert!(!fits_huge_block::<[Arc<()>; 32]>());
    // SAFETY: read back as the type it was made from.
    let back = unsafe { Value::new(many).take::<[Arc<()>; 32]>() };
    assert_eq!(Arc::strong_count(&counter), 33);
    drop(back);
    assert_eq!(Arc::strong_count(&counter), 1);
}

#[test]
fn a_result_slot_is_two_words_and_gives_back_each_side_once() {
    assert_eq!(mem::size_of::<ResSlot>(), 2 * mem::size_of::<usize>());
    let mut slot = ResSlot::empty();
    assert!(slot.take().is_none());
    slot.put(Ok(Value::new(String::from("ok"))));
    let ok = slot.take().expect("the value");
    assert!(slot.take().is_none(), "taken once");
    slot.put(Err(Value::new(7u64)));
    let err = slot.take().expect("the error");
    // SAFETY: each value is read back as the type it was made from.
    unsafe {
        assert_eq!(ok.ok().expect("Ok").take::<String>(), "ok");
        assert_eq!(err.err().expect("Err").take::<u64>(), 7);
    }
}

#[test]
fn a_result_slot_drops_what_it_holds_when_refilled_or_dropped() {
    let counter = Arc::new(());
    let mut slot = ResSlot::empty();
    slot.put(Err(Value::new(counter.clone())));
    slot.put(Ok(Value::new(counter.clone())));
    assert_eq!(Arc::strong_count(&counter), 2, "the first one was dropped");
    drop(slot);
    assert_eq!(Arc::strong_count(&counter), 1);
}

/// Counts its drops (for the raised errors below).
#[cfg(feature = "tracing")]
struct Counted<T>(T, #[allow(dead_code)] Arc<()>);

#[cfg(feature = "tracing")]
fn raised_round_trip<T: Send + 'static + PartialEq + core::fmt::Debug + Clone>(error: T) {
    use crate::engine::tracing::Site;
    let location = core::panic::Location::caller();
    let witness = Arc::new(());
    // Split: the error comes back as its own value, the site as it was.
    let raised = RaisedError::new(
        Counted(error.clone(), witness.clone()),
        Site::from_location(location),
    );
    let (value, site) = raised.split();
    assert_eq!(site.location(), location);
    // SAFETY: the value is the error, made as a `Counted<T>`.
    let back = unsafe { value.take::<Counted<T>>() };
    assert_eq!(back.0, error);
    drop(back);
    // Dropped unsplit: the error is dropped once.
    drop(RaisedError::new(
        Counted(error, witness.clone()),
        Site::from_location(location),
    ));
    assert_eq!(Arc::strong_count(&witness), 1, "every error dropped once");
}

#[cfg(feature = "tracing")]
#[test]
fn a_raised_error_of_any_size_splits_into_the_error_and_its_site_and_drops_once() {
    // The error with its counter is two words (shares the block with the
    // site), three (the block's size less the site's word), and larger
    // (stored as a pair); a zero-sized one is inline.
    raised_round_trip(());
    raised_round_trip(7u64);
    raised_round_trip(String::from("a raised error"));
    raised_round_trip([1u64, 2, 3, 4, 5, 6, 7, 8]);
    let (value, _) = RaisedError::new(5u32, crate::engine::tracing::Site::caller()).split();
    // SAFETY: read back as the type it was made from.
    assert_eq!(unsafe { value.take::<u32>() }, 5);
    let (value, _) =
        RaisedError::new(Box::new(9u8), crate::engine::tracing::Site::caller()).split();
    // SAFETY: read back as the type it was made from.
    assert_eq!(*unsafe { value.take::<Box<u8>>() }, 9);
}
