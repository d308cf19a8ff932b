//! # trace: the data of Spindle's fiber tracing
//!
//! Spindle records, per fiber, the last N operations it ran ("fiber
//! tracing", as in Cats Effect): the operation's name (`flat_map`, `delay`,
//! `Deferred::get`, ...), the place in the user's code that built it, and the
//! user's closure type where there is one (rendered as the function the
//! closure was written in, [`enclosing_function`]). This crate holds that
//! data and nothing else: it never names io-core, which records events
//! while fibers run (see the repository's `ARCHITECTURE.md`).
//!
//! Applications do not depend on this crate: they meet its types through
//! the entry crate, as `spindle_effect::Trace` (what `IO::trace`, a
//! failure's `Traced` and a fiber dump show), `spindle_effect::TraceEvent`
//! and `spindle_effect::TracingMode`; a library that names its own
//! operations uses [`Op`] as `spindle_effect::integration::untraced::Op`.
//!
//! * [`Op`]: what an operation is, known at compile time (a `static` per
//!   operation and closure type).
//! * [`Site`]: where it was built: a `&'static Location` from
//!   `#[track_caller]` (one word, no allocation), or in full mode
//!   ([`TracingMode::Full`], `std` feature) that location together with a
//!   backtrace captured when the program was built.
//! * [`Event`]: an operation at a site (two words).
//! * [`Ring`]: a fiber's last N events, a fixed-capacity ring buffer whose
//!   capacity is chosen at run time (a power of two, indexed with a mask);
//!   recording an event stores two words and a count and never allocates.
//!   Its one writer is the fiber; a fiber dump on another thread reads it
//!   without stopping the fiber, and marks the copy *in motion* if the
//!   fiber ran meanwhile (see `ring.rs`).
//! * [`Trace`]: a snapshot of a ring (its events in the order they
//!   happened), rendered most recent event first, one line per event like
//!   Cats Effect's `Trace.pretty`, or on one line ([`Trace::compact`]).
//! * [`TracingMode`]: `none`, `cached`, `full`, parsed from configuration or
//!   from the `SPINDLE_TRACING` environment variable ([`ENV_VAR`]).
//!
//! ## Why no cache
//!
//! Cats Effect's cached mode captures a stack trace once per lambda class
//! and caches the result. In Rust the call site is known at compile time:
//! a `#[track_caller]` function receives `Location::caller()` as a hidden
//! argument, and the operation's name and closure type come from a
//! `static`. A trace event is therefore two pointers to static data: no
//! stack walk, no cache, no lock. Design credit: Cats Effect's
//! `IOFiber`/`RingBuffer`/`Tracing` (read for ideas; nothing copied).
//!
//! ## Full mode
//!
//! With the `full` feature (std), `set_full_capture` makes [`Site::caller`]
//! capture a `std::backtrace::Backtrace` (one allocation and a stack walk
//! per site: the price of the mode, as in Cats Effect). When rendered,
//! frames of Spindle's crates and of `std`, `core` and `alloc` are filtered
//! out and the first user frame is shown with the operation.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

#[cfg(feature = "full")]
mod full;
mod ring;
#[cfg(feature = "serde")]
mod serialize;
mod sync;
#[cfg(feature = "full")]
pub use full::{Frame, set_full_capture, user_frames};

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

/// What an operation is: its name and, where the user passed one, the type
/// name of the user's closure. Made as a `static` (one per operation and
/// closure type), so an [`Event`] only points at it.
#[derive(Clone, Copy)]
pub struct Op {
    name: &'static str,
    closure: Option<fn() -> &'static str>,
}

impl Op {
    /// An operation without a user closure (`cede`, `sleep`, `start`, ...).
    pub const fn new(name: &'static str) -> Op {
        Op {
            name,
            closure: None,
        }
    }

    /// An operation that runs a user closure; `closure` returns its type
    /// name (pass `core::any::type_name::<F>`).
    pub const fn with_closure(name: &'static str, closure: fn() -> &'static str) -> Op {
        Op {
            name,
            closure: Some(closure),
        }
    }

    /// The operation's name, as the user calls it (`flat_map`,
    /// `Deferred::get`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The type name of the user's closure, if the operation has one, in
    /// full (`app::main::{{closure}}::{{closure}}`); renderings show
    /// [`Op::closure_function`] instead.
    pub fn closure(&self) -> Option<&'static str> {
        self.closure.map(|f| f())
    }

    /// The function the user's closure was written in, if the operation
    /// has a closure: its type name with the trailing `::{{closure}}`
    /// segments left out (see [`enclosing_function`]), as every rendering
    /// of a trace shows it. `app::main::{{closure}}::{{closure}}` is
    /// `app::main`; a function passed by name (`flat_map(charge)`) is
    /// its own name.
    pub fn closure_function(&self) -> Option<&'static str> {
        self.closure().map(enclosing_function)
    }
}

/// The closure segment of a type name, as `core::any::type_name` writes it.
const CLOSURE_SEGMENT: &str = "{{closure}}";

/// The function a closure was written in, from the closure's type name:
/// the name without its trailing `::{{closure}}` segments, a sub-slice of
/// it (no allocation).
///
/// | type name | enclosing function |
/// |---|---|
/// | `app::main::{{closure}}` | `app::main` |
/// | `app::main::{{closure}}::{{closure}}` | `app::main` |
/// | `<app::S<u8> as app::Tr>::method::{{closure}}` | `<app::S<u8> as app::Tr>::method` |
/// | `app::retry<app::main::{{closure}}>::{{closure}}` | `app::retry<app::main::{{closure}}>` |
/// | `app::charge` (a function item) | `app::charge` |
/// | `{{closure}}` | `{{closure}}` |
///
/// Only segments at the end of the name go: a closure type in generic
/// arguments stays, since the brackets around it must stay balanced, and
/// so does a closure a named function is nested in
/// (`app::main::{{closure}}::helper::{{closure}}` is
/// `app::main::{{closure}}::helper`). A name made only of closure segments
/// keeps its last one.
pub fn enclosing_function(type_name: &str) -> &str {
    let mut name = type_name;
    while let Some(outer) = name.strip_suffix(CLOSURE_SEGMENT) {
        match outer.strip_suffix("::") {
            Some(function) if !function.is_empty() => name = function,
            _ => break,
        }
    }
    name
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Op")
            .field("name", &self.name)
            .field("closure", &self.closure())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Sites
// ---------------------------------------------------------------------------

/// Where an operation was built: one word.
///
/// The word is a `&'static Location` (low bit clear), or, with the `full`
/// feature in full mode, an `Arc` of the location and a backtrace (low bit
/// set; `Location` and the `Arc`'s contents are at least 2-aligned, so the
/// bit is free). Without the `full` feature a site is `Copy`: keeping,
/// copying and dropping one costs nothing beyond the word.
#[cfg_attr(not(feature = "full"), derive(Clone, Copy))]
pub struct Site {
    ptr: NonNull<()>,
}

// SAFETY: a site points at static data or at an `Arc` of `Send + Sync` data
// (a location and a `Backtrace`), never mutated after it is made.
unsafe impl Send for Site {}
// SAFETY: as above.
unsafe impl Sync for Site {}

const CAPTURED: usize = 1;

/// Whether sites are kept where keeping them costs (see
/// [`call_sites_for`]); on until a process says it traces nothing.
static CALL_SITES: crate::sync::StaticAtomicBool = crate::sync::StaticAtomicBool::new(true);

/// Whether something in the process traces (a tracing configuration, a
/// traced scope, a fiber that traces): then sites stay kept.
static TRACES: crate::sync::StaticAtomicBool = crate::sync::StaticAtomicBool::new(false);

/// Tells whether a configuration just built records traces, to decide
/// where sites are kept.
///
/// A leaf operation whose closure is exactly one word
/// (`delay(move || x + 1)`) fits its program node without a site, but not
/// with one: the container that stores it asks [`Site::call_sites_kept`]
/// and leaves the site out when sites are not kept. They are kept by
/// default, and as soon as anything traces ([`keep_call_sites`], or this
/// with `records`); a configuration that records nothing (mode `none`),
/// built before anything traced, stops keeping them, so that tracing
/// compiled in costs no allocation in a process that traces nothing.
/// (Leaves built after that and run inside a later traced scope have no
/// site: their events are missing from its trace.)
pub fn call_sites_for(records: bool) {
    use crate::sync::StaticOrdering::Relaxed;
    if records {
        TRACES.store(true, Relaxed);
        CALL_SITES.store(true, Relaxed);
    } else if !TRACES.load(Relaxed) {
        CALL_SITES.store(false, Relaxed);
    }
}

/// Keeps sites from now on, for good: something traces (a traced scope, a
/// fiber that traces). See [`call_sites_for`]. Cheap to call often: once
/// both flags are set it only reads them.
#[inline]
pub fn keep_call_sites() {
    use crate::sync::StaticOrdering::Relaxed;
    if !(TRACES.load(Relaxed) && CALL_SITES.load(Relaxed)) {
        TRACES.store(true, Relaxed);
        CALL_SITES.store(true, Relaxed);
    }
}

const _: () = assert!(core::mem::align_of::<Location<'static>>() > CAPTURED);

impl Site {
    /// Whether sites are kept where keeping one costs an allocation
    /// ([`call_sites_for`]).
    #[inline(always)]
    pub fn call_sites_kept() -> bool {
        CALL_SITES.load(crate::sync::StaticOrdering::Relaxed)
    }

    /// The site of the caller of the `#[track_caller]` function that calls
    /// this (through any number of `#[track_caller]` functions). In full
    /// mode (`set_full_capture`, with the `full` feature) it also captures a backtrace.
    #[track_caller]
    #[inline(always)]
    pub fn caller() -> Site {
        let location = Location::caller();
        #[cfg(feature = "full")]
        if full::capture_enabled() {
            return full::capture(location);
        }
        Site::from_location(location)
    }

    /// The site of a given location (no backtrace).
    #[inline(always)]
    pub fn from_location(location: &'static Location<'static>) -> Site {
        Site {
            ptr: NonNull::from(location).cast(),
        }
    }

    /// The source location.
    pub fn location(&self) -> &'static Location<'static> {
        #[cfg(feature = "full")]
        if let Some(captured) = self.captured() {
            return captured.location;
        }
        // SAFETY: without the `CAPTURED` bit the word is a
        // `&'static Location` (see `from_location`).
        unsafe { self.ptr.cast::<Location<'static>>().as_ref() }
    }

    /// Splits the site into its word (for containers that store it next to
    /// other data); [`Site::from_raw`] takes it back.
    #[inline(always)]
    pub fn into_raw(self) -> NonNull<()> {
        let this = core::mem::ManuallyDrop::new(self);
        this.ptr
    }

    /// Rebuilds a site from [`Site::into_raw`]'s word.
    ///
    /// # Safety
    /// * `ptr` comes from `into_raw` and is used once.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: NonNull<()>) -> Site {
        Site { ptr }
    }

    #[cfg(feature = "full")]
    fn captured(&self) -> Option<&full::Captured> {
        if self.ptr.as_ptr().addr() & CAPTURED != 0 {
            // SAFETY: with the bit set, the word is an `Arc<Captured>` pointer
            // (tagged); the `Arc` lives as long as `self`.
            Some(unsafe { &*full::untag(self.ptr) })
        } else {
            None
        }
    }

    /// Whether a backtrace was captured with this site (full mode).
    pub fn has_backtrace(&self) -> bool {
        self.ptr.as_ptr().addr() & CAPTURED != 0
    }

    /// The backtrace captured with this site (full mode), if any.
    #[cfg(feature = "full")]
    pub fn backtrace(&self) -> Option<&std::backtrace::Backtrace> {
        self.captured().map(|c| &c.backtrace)
    }
}

#[cfg(feature = "full")]
impl Clone for Site {
    #[inline]
    fn clone(&self) -> Site {
        if self.has_backtrace() {
            return full::clone(self.ptr);
        }
        Site { ptr: self.ptr }
    }
}

#[cfg(feature = "full")]
impl Drop for Site {
    #[inline(always)]
    fn drop(&mut self) {
        if self.has_backtrace() {
            // SAFETY: a tagged word is an `Arc<Captured>` this site owns.
            unsafe { full::release(self.ptr) }
        }
    }
}

impl fmt::Debug for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Site({})", self.location())
    }
}

impl PartialEq for Site {
    fn eq(&self, other: &Site) -> bool {
        let (a, b) = (self.location(), other.location());
        a.file() == b.file() && a.line() == b.line() && a.column() == b.column()
    }
}

// ---------------------------------------------------------------------------
// Events and the ring buffer
// ---------------------------------------------------------------------------

/// One traced operation: what ran and where the user built it.
#[derive(Clone, Debug)]
pub struct Event {
    op: &'static Op,
    site: Site,
}

impl Event {
    /// An event.
    #[inline(always)]
    pub fn new(op: &'static Op, site: Site) -> Event {
        Event { op, site }
    }

    /// The operation.
    pub fn op(&self) -> &'static Op {
        self.op
    }

    /// Where the user built it.
    pub fn site(&self) -> &Site {
        &self.site
    }

    /// The source location (shorthand for `site().location()`).
    pub fn location(&self) -> &'static Location<'static> {
        self.site.location()
    }

    /// The first frame of user code of the site's backtrace (full mode).
    #[cfg(feature = "full")]
    pub fn user_frame(&self) -> Option<Frame> {
        self.site
            .backtrace()
            .and_then(|bt| user_frames(bt).into_iter().next())
    }
}

/// The default number of events a fiber keeps (as Cats Effect's default
/// trace buffer).
pub const DEFAULT_CAPACITY: usize = 16;

/// The largest ring a fiber may keep (a larger request is a
/// [`CapacityError::TooLarge`]).
pub const MAX_CAPACITY: usize = 1 << 16;

/// A ring-buffer capacity that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapacityError {
    /// 0 events: a traced fiber could keep nothing. Use tracing mode `none`
    /// to record nothing.
    Zero,
    /// More than [`MAX_CAPACITY`] events.
    TooLarge(usize),
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::Zero => f.write_str(
                "invalid trace buffer capacity 0: a traced fiber must keep at least 1 event \
                 (use tracing mode `none` to record nothing)",
            ),
            CapacityError::TooLarge(n) => write!(
                f,
                "invalid trace buffer capacity {n}: at most {MAX_CAPACITY} events per fiber"
            ),
        }
    }
}

impl core::error::Error for CapacityError {}

/// Validates a requested capacity: 0 and more than [`MAX_CAPACITY`] are
/// errors; anything else is rounded up to the next power of two (so that a
/// slot is found with a mask), e.g. 10 becomes 16.
pub const fn ring_capacity(requested: usize) -> Result<usize, CapacityError> {
    if requested == 0 {
        Err(CapacityError::Zero)
    } else if requested > MAX_CAPACITY {
        Err(CapacityError::TooLarge(requested))
    } else {
        Ok(requested.next_power_of_two())
    }
}

pub use ring::{Ring, RingBox, RunToken};

// ---------------------------------------------------------------------------
// Traces
// ---------------------------------------------------------------------------

/// A snapshot of a fiber's last events.
///
/// [`events`](Trace::events) keeps them in the order they happened (oldest
/// first), the order of time in which a program reads them; every
/// rendering shows them the other way round, most recent first, like a
/// stack trace and Cats Effect's `Trace.pretty`: the operation the fiber was
/// running when the trace was taken (where it failed, where it waits) is on
/// the first line. `Display` renders one line per event:
///
/// ```text
/// trace (3 events, most recent first):
///   cede @ examples/trace_demo.rs:22:13
///   flat_map @ examples/trace_demo.rs:21:10 (trace_demo::inner)
///   delay @ examples/trace_demo.rs:20:9 (trace_demo::inner)
/// ```
///
/// A closure is named by the function it was written in
/// ([`Op::closure_function`]; the event keeps its full type name,
/// [`Op::closure`]). In full mode each line names the first user function
/// of the backtrace captured when the operation was built, its closure
/// segments left out likewise.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    events: Vec<Event>,
    omitted: usize,
    in_motion: bool,
}

impl Trace {
    /// An empty trace (a fiber that recorded nothing).
    pub const fn empty() -> Trace {
        Trace {
            events: Vec::new(),
            omitted: 0,
            in_motion: false,
        }
    }

    /// The events in the order they happened, oldest first (renderings
    /// show them most recent first; iterate with `.iter().rev()` to do the
    /// same).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Whether there is no event.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// How many older events the ring had already overwritten.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// Whether the fiber was running while this copy was read (a fiber
    /// dump of a running fiber): then an event's operation may be paired
    /// with a neighbouring event's location. A trace read from a fiber
    /// that is suspended, queued or done, or by the fiber itself, is never
    /// in motion (see the ring's protocol).
    pub fn in_motion(&self) -> bool {
        self.in_motion
    }

    /// The operation names, in the order of [`events`](Trace::events)
    /// (oldest first; handy in tests).
    pub fn op_names(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.op().name()).collect()
    }

    /// One-line rendering: `op@file:line` per event, most recent first,
    /// separated by `, ` (file names without their directories).
    pub fn compact(&self) -> Compact<'_> {
        Compact(self)
    }

    /// The `Display` rendering under another title than `trace`: the
    /// header line reads `{title} (N events, most recent first):` (a
    /// failure that crossed fibers titles the traces of the child fibers it
    /// came from this way).
    ///
    /// ```
    /// use spindle_effect::Trace;
    ///
    /// let text = Trace::empty().titled("trace of a child fiber").to_string();
    /// assert_eq!(text, "trace of a child fiber (0 events, most recent first):");
    /// ```
    pub fn titled<'a>(&'a self, title: &'a str) -> Titled<'a> {
        Titled { trace: self, title }
    }
}

/// The one-line rendering of a [`Trace`] (see [`Trace::compact`]).
pub struct Compact<'a>(&'a Trace);

impl fmt::Display for Compact<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, event) in self.0.events.iter().rev().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let location = event.location();
            let file = location.file();
            let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
            write!(f, "{}@{}:{}", event.op().name(), base, location.line())?;
        }
        Ok(())
    }
}

/// A [`Trace`] rendered under a title of the caller's (see
/// [`Trace::titled`]).
pub struct Titled<'a> {
    trace: &'a Trace,
    title: &'a str,
}

impl fmt::Display for Titled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let trace = self.trace;
        let n = trace.events.len();
        write!(
            f,
            "{} ({n} event{}, most recent first",
            self.title,
            if n == 1 { "" } else { "s" }
        )?;
        if trace.omitted > 0 {
            write!(f, "; {} older omitted", trace.omitted)?;
        }
        if trace.in_motion {
            f.write_str("; in motion: read while the fiber ran")?;
        }
        f.write_str("):")?;
        for event in trace.events.iter().rev() {
            f.write_str("\n  ")?;
            write_event(f, event)?;
        }
        Ok(())
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.titled("trace").fmt(f)
    }
}

fn write_event(f: &mut fmt::Formatter<'_>, event: &Event) -> fmt::Result {
    let location = event.location();
    #[cfg(feature = "full")]
    if let Some(frame) = event.user_frame() {
        return write!(
            f,
            "{} @ {} ({}:{}:{})",
            event.op().name(),
            enclosing_function(&frame.function),
            location.file(),
            location.line(),
            location.column()
        );
    }
    write!(
        f,
        "{} @ {}:{}:{}",
        event.op().name(),
        location.file(),
        location.line(),
        location.column()
    )?;
    if let Some(function) = event.op().closure_function() {
        write!(f, " ({function})")?;
    }
    Ok(())
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_event(f, self)
    }
}

// ---------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------

/// The name of the environment variable that selects the tracing mode in
/// std builds: `none`, `cached` or `full`.
pub const ENV_VAR: &str = "SPINDLE_TRACING";

/// How much a fiber traces (chosen when an executor is built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TracingMode {
    /// Record nothing (scoped tracing, `io.traced()`, still records inside
    /// its scope).
    None,
    /// Record each operation's name, call site and closure type (the
    /// default, as in Cats Effect).
    #[default]
    Cached,
    /// As `cached`, and capture a backtrace where each operation is built
    /// (needs `std`; expensive, for debugging).
    Full,
}

impl TracingMode {
    /// The valid names, as [`ENV_VAR`] and configuration accept them.
    pub const NAMES: [&'static str; 3] = ["none", "cached", "full"];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            TracingMode::None => "none",
            TracingMode::Cached => "cached",
            TracingMode::Full => "full",
        }
    }

    /// Whether fibers record events in this mode.
    pub fn records(self) -> bool {
        self != TracingMode::None
    }

    /// The mode named by [`ENV_VAR`], if the variable is set; an unknown
    /// value is an error naming the valid ones.
    #[cfg(feature = "std")]
    pub fn from_env() -> Result<Option<TracingMode>, ParseModeError> {
        match std::env::var(ENV_VAR) {
            Ok(value) => value.parse().map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(value)) => Err(ParseModeError {
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }
}

impl fmt::Display for TracingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tracing mode name that is not `none`, `cached` or `full`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseModeError {
    value: String,
}

impl ParseModeError {
    /// The rejected value.
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown tracing mode `{}` (from {ENV_VAR} or configuration): expected one of none, cached, full",
            self.value
        )
    }
}

impl core::error::Error for ParseModeError {}

impl core::str::FromStr for TracingMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<TracingMode, ParseModeError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("none") {
            Ok(TracingMode::None)
        } else if t.eq_ignore_ascii_case("cached") {
            Ok(TracingMode::Cached)
        } else if t.eq_ignore_ascii_case("full") {
            Ok(TracingMode::Full)
        } else {
            Err(ParseModeError {
                value: String::from(s),
            })
        }
    }
}

#[cfg(test)]
mod tests;
