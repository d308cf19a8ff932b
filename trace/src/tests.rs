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
    assert!(ring.snapshot().unwrap().is_empty());
    let mut lines = Vec::new();
    for _ in 0..6 {
        let site = here();
        lines.push(site.location().line());
        ring.push(&MAP, site.location());
    }
    assert_eq!(ring.len(), 4);
    assert_eq!(ring.recorded(), 6);
    let trace = ring.snapshot().unwrap();
    assert_eq!(trace.omitted(), 2);
    let got: Vec<u32> = trace.events().iter().map(|e| e.location().line()).collect();
    assert_eq!(got, lines[2..]);
}

#[test]
fn a_partly_filled_ring_snapshots_in_order() {
    let ring = Ring::new(16);
    ring.push(&MAP, here().location());
    ring.push(&FLAT_MAP, here().location());
    let trace = ring.snapshot().unwrap();
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
    assert_eq!(ring.snapshot().unwrap().op_names(), ["flat_map"]);
}

#[test]
fn pretty_rendering_has_one_line_per_event_most_recent_first_with_site_and_closure() {
    let ring = Ring::new(16);
    let a = here();
    let b = here();
    let (la, lb) = (a.location().line(), b.location().line());
    ring.push(&MAP, a.location());
    ring.push(&FLAT_MAP, b.location());
    let trace = ring.snapshot().unwrap();
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
    let trace = ring.snapshot().unwrap();
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
    assert!(!ring.snapshot().unwrap().events()[0].site().has_backtrace());
}
