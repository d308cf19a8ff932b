use super::*;
use alloc::format;
use alloc::string::ToString;

static MAP: Op = Op::new("map");
static FLAT_MAP: Op = Op::with_closure("flat_map", || "demo::step");

#[track_caller]
fn here() -> Site {
    Site::caller()
}

#[test]
fn a_site_is_the_location_of_the_track_caller_call() {
    let line = line!() + 1;
    let site = here();
    assert_eq!(site.location().line(), line);
    assert_eq!(site.location().file(), file!());
    assert!(!site.has_backtrace());
    assert_eq!(core::mem::size_of::<Site>(), core::mem::size_of::<usize>());
    assert_eq!(
        core::mem::size_of::<Option<Event>>(),
        2 * core::mem::size_of::<usize>()
    );
}

#[test]
fn the_ring_keeps_only_the_last_n_events_oldest_first() {
    let ring = Ring::new(4);
    assert!(ring.is_empty());
    assert!(ring.snapshot().is_empty());
    let mut lines = Vec::new();
    for _ in 0..6 {
        let site = here();
        lines.push(site.location().line());
        ring.push(&MAP, site.location());
    }
    assert_eq!(ring.len(), 4);
    assert_eq!(ring.recorded(), 6);
    let trace = ring.snapshot();
    assert_eq!(trace.omitted(), 2);
    let got: Vec<u32> = trace.events().iter().map(|e| e.location().line()).collect();
    assert_eq!(got, lines[2..]);
}

#[test]
fn a_partly_filled_ring_snapshots_in_order() {
    let ring = Ring::new(16);
    ring.push(&MAP, here().location());
    ring.push(&FLAT_MAP, here().location());
    let trace = ring.snapshot();
    assert_eq!(trace.op_names(), ["map", "flat_map"]);
    assert_eq!(trace.omitted(), 0);
}

#[test]
fn capacity_zero_is_an_error_and_other_sizes_round_up_to_a_power_of_two() {
    assert_eq!(ring_capacity(0), Err(CapacityError::Zero));
    assert!(CapacityError::Zero.to_string().contains("capacity 0"));
    assert_eq!(ring_capacity(1), Ok(1));
    assert_eq!(ring_capacity(10), Ok(16));
    assert_eq!(ring_capacity(16), Ok(16));
    assert_eq!(ring_capacity(17), Ok(32));
    assert_eq!(
        ring_capacity(MAX_CAPACITY + 1),
        Err(CapacityError::TooLarge(MAX_CAPACITY + 1))
    );
    assert_eq!(Ring::new(10).capacity(), 16);
    assert_eq!(Ring::new(0).capacity(), 1);
}

#[test]
fn a_ring_of_one_keeps_the_last_event() {
    let ring = Ring::new(1);
    ring.push(&MAP, here().location());
    ring.push(&FLAT_MAP, here().location());
    assert_eq!(ring.snapshot().op_names(), ["flat_map"]);
}

#[test]
fn pretty_rendering_has_one_line_per_event_most_recent_first_with_site_and_closure() {
    let ring = Ring::new(16);
    let a = here();
    let b = here();
    let (la, lb) = (a.location().line(), b.location().line());
    ring.push(&MAP, a.location());
    ring.push(&FLAT_MAP, b.location());
    let trace = ring.snapshot();
    // The structured events keep the order of time.
    assert_eq!(trace.op_names(), ["map", "flat_map"]);
    let text = trace.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "trace (2 events, most recent first):");
    assert!(
        lines[1].starts_with(&format!("  flat_map @ {}:{lb}:", file!())),
        "{text}"
    );
    assert!(lines[1].ends_with("(demo::step)"), "{text}");
    assert!(
        lines[2].starts_with(&format!("  map @ {}:{la}:", file!())),
        "{text}"
    );
    let compact = trace.compact().to_string();
    assert_eq!(
        compact,
        format!("flat_map@tests.rs:{lb}, map@tests.rs:{la}")
    );
}

#[test]
fn a_titled_rendering_changes_only_the_header_and_counts_omitted_events() {
    let ring = Ring::new(2);
    for _ in 0..3 {
        ring.push(&MAP, here().location());
    }
    let trace = ring.snapshot();
    let text = trace.titled("trace of a child fiber").to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "trace of a child fiber (2 events, most recent first; 1 older omitted):"
    );
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        trace.to_string().lines().skip(1).collect::<Vec<_>>(),
        lines[1..]
    );
    assert_eq!(
        Trace::empty().to_string(),
        "trace (0 events, most recent first):"
    );
}

/// An operation that runs the closure (or function) `f`, as io-core
/// builds one: its closure name is `F`'s type name.
fn op_running<F>(_f: &F) -> Op {
    Op::with_closure("delay", core::any::type_name::<F>)
}

fn a_named_function() {}

fn an_op_in_a_generic_function<T>(_value: T) -> Op {
    let closure = || ();
    op_running(&closure)
}

fn an_op_around<F: Fn()>(f: F) -> Op {
    let closure = move || f();
    op_running(&closure)
}

trait Handler {
    fn handle(&self) -> Op;
}

struct Server;

impl Handler for Server {
    fn handle(&self) -> Op {
        let closure = || ();
        op_running(&closure)
    }
}

#[test]
fn a_closure_is_named_by_the_function_it_was_written_in() {
    let closure = || ();
    let op = op_running(&closure);
    let here = "spindle_trace::tests::a_closure_is_named_by_the_function_it_was_written_in";
    assert_eq!(
        op.closure(),
        Some(format!("{here}::{{{{closure}}}}").as_str())
    );
    assert_eq!(op.closure_function(), Some(here));
}

#[test]
fn nested_closures_collapse_into_their_enclosing_function() {
    let outer = || {
        let inner = || ();
        op_running(&inner)
    };
    let op = outer();
    let here = "spindle_trace::tests::nested_closures_collapse_into_their_enclosing_function";
    assert_eq!(
        op.closure(),
        Some(format!("{here}::{{{{closure}}}}::{{{{closure}}}}").as_str())
    );
    assert_eq!(op.closure_function(), Some(here));
}

#[test]
fn a_closure_in_a_generic_function_or_a_trait_method_keeps_the_type_path() {
    assert_eq!(
        an_op_in_a_generic_function(1u8).closure_function(),
        Some("spindle_trace::tests::an_op_in_a_generic_function<u8>")
    );
    assert_eq!(
        Server.handle().closure_function(),
        Some("<spindle_trace::tests::Server as spindle_trace::tests::Handler>::handle")
    );
}

#[test]
fn a_closure_in_generic_arguments_stays_and_only_trailing_closures_go() {
    let op = an_op_around(|| ());
    let argument = "spindle_trace::tests::a_closure_in_generic_arguments_stays_and_only_trailing_closures_go::{{closure}}";
    assert_eq!(
        op.closure_function(),
        Some(format!("spindle_trace::tests::an_op_around<{argument}>").as_str())
    );
    assert_eq!(
        enclosing_function("app::main::{{closure}}::helper::{{closure}}"),
        "app::main::{{closure}}::helper"
    );
}

#[test]
fn a_function_passed_by_name_keeps_its_name() {
    let op = op_running(&a_named_function);
    assert_eq!(op.closure(), Some("spindle_trace::tests::a_named_function"));
    assert_eq!(
        op.closure_function(),
        Some("spindle_trace::tests::a_named_function")
    );
    assert_eq!(MAP.closure_function(), None);
}

#[test]
fn a_name_made_only_of_closures_keeps_its_last_closure_segment() {
    assert_eq!(enclosing_function("{{closure}}"), "{{closure}}");
    assert_eq!(
        enclosing_function("{{closure}}::{{closure}}"),
        "{{closure}}"
    );
    assert_eq!(enclosing_function("::{{closure}}"), "::{{closure}}");
    assert_eq!(enclosing_function(""), "");
}

#[test]
fn the_enclosing_function_is_a_slice_of_the_type_name() {
    let name = "app::main::{{closure}}::{{closure}}";
    let function = enclosing_function(name);
    assert_eq!(function, "app::main");
    assert_eq!(function.as_ptr(), name.as_ptr());
}

static NESTED: Op = Op::with_closure("delay", || "demo::main::{{closure}}::{{closure}}");

#[test]
fn events_and_traces_render_the_enclosing_function_of_a_closure() {
    let ring = Ring::new(4);
    ring.push(&NESTED, here().location());
    let trace = ring.snapshot();
    let event = &trace.events()[0];
    assert!(event.to_string().ends_with(" (demo::main)"), "{event}");
    let text = trace.to_string();
    assert!(text.ends_with(" (demo::main)"), "{text}");
    assert!(!text.contains("{{closure}}"), "{text}");
    // The structured data keeps the full type name.
    assert_eq!(
        event.op().closure(),
        Some("demo::main::{{closure}}::{{closure}}")
    );
}

#[test]
fn modes_parse_from_their_names_and_reject_others_naming_the_valid_ones() {
    assert_eq!("none".parse(), Ok(TracingMode::None));
    assert_eq!(" Cached ".parse(), Ok(TracingMode::Cached));
    assert_eq!("FULL".parse(), Ok(TracingMode::Full));
    let err = "verbose".parse::<TracingMode>().unwrap_err();
    assert_eq!(err.value(), "verbose");
    let msg = err.to_string();
    for name in TracingMode::NAMES {
        assert!(msg.contains(name), "{msg}");
    }
    assert!(msg.contains("verbose"));
    assert_eq!(TracingMode::default(), TracingMode::Cached);
    assert!(!TracingMode::None.records());
}

#[cfg(feature = "full")]
#[test]
#[cfg_attr(miri, ignore = "backtrace capture: not under Miri")]
fn full_capture_attaches_a_backtrace_whose_first_user_frame_is_the_caller() {
    // Capture is process-wide: switch it on only around this one site.
    set_full_capture(true);
    let site = here();
    set_full_capture(false);
    assert!(site.has_backtrace());
    let copy = site.clone();
    drop(site);
    let event = Event::new(&MAP, copy);
    let frame = event.user_frame().expect("a user frame");
    // `here` is in this test module (crate `trace`, filtered) when inlined
    // away; the first frame outside the runtime crates is the test harness
    // or this test, never `spindle_trace::`/`std::`.
    assert!(!frame.function.starts_with("spindle_trace::"), "{frame:?}");
    assert!(!frame.function.starts_with("std::"), "{frame:?}");
}

#[cfg(feature = "full")]
#[test]
#[cfg_attr(miri, ignore = "backtrace capture: not under Miri")]
fn the_owner_snapshot_joins_the_sites_kept_for_full_mode() {
    set_full_capture(true);
    let site = here();
    set_full_capture(false);
    let ring = Ring::new(2);
    let index = ring.push(&MAP, site.location());
    let mut sites = alloc::vec![None, None];
    sites[index] = Some(site);
    let trace = ring.snapshot_with_sites(&sites);
    assert!(trace.events()[0].site().has_backtrace());
    // A reader on another thread gets the same event without it.
    assert!(!ring.snapshot().events()[0].site().has_backtrace());
}

#[test]
#[cfg(not(feature = "full"))] // full mode's sites add a `Vec` to the header
fn a_ring_is_one_allocation_of_a_two_word_header_and_its_slots_behind_one_word() {
    let word = core::mem::size_of::<usize>();
    assert_eq!(core::mem::size_of::<RingBox>(), word, "a thin pointer");
    for capacity in [1, 16, 1024] {
        let ring = Ring::new(capacity);
        // The header (state word, then mask and mark in a second word) and
        // two pointers per slot, in the one allocation the box owns.
        assert_eq!(
            core::mem::size_of_val::<Ring>(&ring),
            2 * word + capacity * 2 * word,
            "capacity {capacity}"
        );
        assert_eq!(ring.capacity(), capacity);
    }
}

#[test]
fn a_ring_handed_through_its_raw_pointer_keeps_its_events_and_capacity() {
    let ring = Ring::new(8);
    ring.push(&MAP, here().location());
    let raw = ring.into_raw();
    // SAFETY: `raw` comes from `into_raw`; the ring lives until taken back.
    let borrowed = unsafe { Ring::from_raw(raw) };
    assert_eq!(borrowed.capacity(), 8);
    assert_eq!(borrowed.snapshot().op_names(), ["map"]);
    // SAFETY: taken back once.
    let ring = unsafe { RingBox::from_raw(raw) };
    assert_eq!(ring.recorded(), 1);
}

#[test]
fn the_owners_mark_is_kept_beside_the_events_and_cleared_by_reset() {
    let mut ring = Ring::new(2);
    assert_eq!(ring.mark(), 0);
    ring.set_mark(3);
    ring.push(&MAP, here().location());
    assert_eq!(ring.mark(), 3);
    assert_eq!(ring.snapshot().op_names(), ["map"], "the mark is no event");
    ring.reset();
    assert_eq!(ring.mark(), 0);
    assert!(ring.is_empty());
}

#[test]
#[cfg_attr(miri, ignore = "a 1 MiB ring: slow under Miri")]
fn a_capacity_above_the_maximum_is_clamped_to_it() {
    assert_eq!(Ring::new(MAX_CAPACITY * 2).capacity(), MAX_CAPACITY);
}

#[test]
fn a_run_that_records_nothing_leaves_copies_consistent_and_the_count_as_it_was() {
    let ring = Ring::new(4);
    ring.push(&MAP, here().location());
    let run = ring.begin_run();
    assert!(ring.snapshot().in_motion(), "read during the run");
    ring.end_run(run);
    let trace = ring.snapshot();
    assert!(!trace.in_motion());
    assert_eq!(trace.op_names(), ["map"]);
    assert_eq!(ring.recorded(), 1);
}

#[test]
fn the_writers_record_and_snapshot_keep_the_events_in_order() {
    let ring = Ring::new(2);
    // SAFETY: this thread is the ring's only writer.
    unsafe {
        ring.record(&MAP, &here());
        ring.record(&FLAT_MAP, &here());
        ring.record(&MAP, &here());
        let trace = ring.owner_snapshot();
        assert_eq!(trace.op_names(), ["flat_map", "map"]);
        assert_eq!(trace.omitted(), 1);
    }
}
