//! The state word's transitions, one thread at a time: each returns what
//! happened, and the names say what the caller must do. (The races between
//! them are the loom models' business, `loom.rs`.)

use crate::fiber::state::{
    Claim, State, TransitionToCancelRequested, TransitionToDelivered, TransitionToSuspended,
};

#[test]
fn a_completer_of_the_current_generation_wins_the_claim_once() {
    let state = State::new();
    let generation = state.begin_suspension();
    assert_eq!(state.claim(generation), Claim::Won);
    assert_eq!(state.claim(generation), Claim::Lost, "a second claim loses");
}

#[test]
fn a_callback_of_an_earlier_generation_loses_the_claim() {
    let state = State::new();
    let first = state.begin_suspension();
    let second = state.begin_suspension();
    assert_ne!(first, second);
    assert_eq!(state.claim(first), Claim::Lost);
    assert_eq!(state.claim(second), Claim::Won);
}

#[test]
fn delivering_before_the_fiber_suspends_lets_it_continue_with_the_result() {
    let state = State::new();
    let generation = state.begin_suspension();
    assert_eq!(state.claim(generation), Claim::Won);
    assert_eq!(
        state.transition_to_delivered(),
        TransitionToDelivered::FiberNotSuspended
    );
    assert!(state.is_done());
    assert_eq!(
        state.transition_to_suspended(true),
        TransitionToSuspended::ResultArrived
    );
}

#[test]
fn delivering_to_a_suspended_fiber_makes_the_completer_schedule_it() {
    let state = State::new();
    let generation = state.begin_suspension();
    assert_eq!(
        state.transition_to_suspended(false),
        TransitionToSuspended::Suspended
    );
    assert_eq!(state.claim(generation), Claim::Won);
    assert_eq!(
        state.transition_to_delivered(),
        TransitionToDelivered::Schedule
    );
}

#[test]
fn a_cancel_of_an_interruptible_suspension_claims_it_and_must_schedule_the_fiber() {
    let state = State::new();
    let generation = state.begin_suspension();
    assert_eq!(
        state.transition_to_suspended(true),
        TransitionToSuspended::Suspended
    );
    assert_eq!(
        state.transition_to_cancel_requested(),
        TransitionToCancelRequested::Schedule
    );
    assert!(state.is_done(), "claimed without a result");
    assert_eq!(
        state.claim(generation),
        Claim::Lost,
        "a late callback loses"
    );
    assert_eq!(
        state.transition_to_cancel_requested(),
        TransitionToCancelRequested::Requested,
        "a second cancel only records the request"
    );
}

#[test]
fn a_cancel_of_a_masked_suspension_is_only_recorded() {
    let state = State::new();
    let generation = state.begin_suspension();
    assert_eq!(
        state.transition_to_suspended(false),
        TransitionToSuspended::Suspended
    );
    assert_eq!(
        state.transition_to_cancel_requested(),
        TransitionToCancelRequested::Requested
    );
    assert!(state.is_cancel_requested());
    assert_eq!(
        state.claim(generation),
        Claim::Won,
        "the callback still wins"
    );
}

#[test]
fn a_cancel_requested_before_an_interruptible_suspension_ends_it_at_once() {
    let state = State::new();
    let _generation = state.begin_suspension();
    assert_eq!(
        state.transition_to_cancel_requested(),
        TransitionToCancelRequested::Requested
    );
    assert_eq!(
        state.transition_to_suspended(true),
        TransitionToSuspended::CanceledBeforeSuspending
    );
}

#[test]
fn the_cancel_request_survives_the_next_suspension_and_completion_is_final() {
    let state = State::new();
    state.request_self_cancel();
    let generation = state.begin_suspension();
    assert!(state.is_cancel_requested(), "kept across suspensions");
    state.mark_completed();
    assert!(state.is_completed());
    assert!(state.snapshot().is_completed());
    assert_eq!(
        state.claim(generation),
        Claim::Lost,
        "nothing claims a completed fiber"
    );
    assert_eq!(
        state.transition_to_cancel_requested(),
        TransitionToCancelRequested::Requested
    );
}
