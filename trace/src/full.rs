//! Full mode: a backtrace per site, and the filter that finds the user's
//! frames in it.
//!
//! A captured site is an `Arc<Captured>` whose pointer carries the low tag
//! bit (see [`Site`](crate::Site)). Capture is switched on for the whole
//! process ([`set_full_capture`]), since a program is usually built before
//! the fiber that runs it exists; a runtime built in full mode switches it
//! on.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::panic::Location;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use std::backtrace::Backtrace;
use std::sync::Arc;

use crate::{CAPTURED, Site};

static FULL_CAPTURE: AtomicBool = AtomicBool::new(false);

/// Switches backtrace capture on or off for every site built from now on
/// in this process (executors built in [`TracingMode::Full`] switch it
/// on). Sites already built keep what they have.
///
/// [`TracingMode::Full`]: crate::TracingMode::Full
pub fn set_full_capture(on: bool) {
    FULL_CAPTURE.store(on, Ordering::Relaxed);
}

#[inline(always)]
pub(crate) fn capture_enabled() -> bool {
    FULL_CAPTURE.load(Ordering::Relaxed)
}

/// A location and the backtrace captured where it was built.
pub(crate) struct Captured {
    pub(crate) location: &'static Location<'static>,
    pub(crate) backtrace: Backtrace,
}

const _: () = assert!(core::mem::align_of::<Captured>() > CAPTURED);

#[cold]
#[inline(never)]
pub(crate) fn capture(location: &'static Location<'static>) -> Site {
    let captured = Arc::new(Captured {
        location,
        backtrace: Backtrace::force_capture(),
    });
    tag(Arc::into_raw(captured))
}

fn tag(ptr: *const Captured) -> Site {
    let tagged = ptr.cast::<()>().cast_mut().map_addr(|a| a | CAPTURED);
    Site {
        // SAFETY: `Arc::into_raw` never returns null, and setting a bit keeps
        // it non-null.
        ptr: unsafe { NonNull::new_unchecked(tagged) },
    }
}

pub(crate) fn untag(ptr: NonNull<()>) -> *const Captured {
    ptr.as_ptr().map_addr(|a| a & !CAPTURED).cast_const().cast()
}

pub(crate) fn clone(ptr: NonNull<()>) -> Site {
    let raw = untag(ptr);
    // SAFETY: a tagged site owns one strong count of this `Arc`; we add one.
    unsafe { Arc::increment_strong_count(raw) };
    tag(raw)
}

/// # Safety
/// * `ptr` is a tagged `Arc<Captured>` whose count the caller owns.
pub(crate) unsafe fn release(ptr: NonNull<()>) {
    // SAFETY: forwarded precondition.
    drop(unsafe { Arc::from_raw(untag(ptr)) })
}

/// One frame of a backtrace: the function and, when known, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The demangled function name (without its hash).
    pub function: String,
    /// `file:line:col`, when the debug information has it.
    pub location: Option<String>,
}

/// Crates whose frames a rendered trace leaves out: Spindle's own, the
/// standard library's, and the backtrace machinery.
const RUNTIME_CRATES: [&str; 10] = [
    "spindle_core",
    "spindle_exec_single",
    "spindle_exec_wstp",
    "spindle_exec_batching",
    "spindle_trace",
    "std",
    "core",
    "alloc",
    "backtrace",
    "std_detect",
];

/// Whether a function belongs to the runtime or the standard library.
fn is_runtime(function: &str) -> bool {
    // `<T as Trait>::f` and `<T>::f`: what matters is the type's crate, or
    // for a closure shim (`<F as core::ops::FnOnce<..>>::call_once`) std.
    let f = function.trim_start_matches(['<', '&', '*']);
    let f = f.strip_prefix("mut ").unwrap_or(f);
    let f = f.strip_prefix("dyn ").unwrap_or(f);
    let head = f.split("::").next().unwrap_or(f);
    if RUNTIME_CRATES.contains(&head) {
        return true;
    }
    if function.starts_with('<')
        && (function.contains(" as core::ops::function::")
            || function.contains(" as alloc::boxed::"))
    {
        return true;
    }
    function.starts_with("__rust")
        || function.starts_with("rust_begin_unwind")
        || function.starts_with("__libc")
        || function.starts_with("_start")
        || function == "main"
        || function.starts_with("clone")
        || function.starts_with("start_thread")
        || function.starts_with("__GI_")
        || function.starts_with("<unknown>")
}

/// The frames of `backtrace` that belong to user code, innermost first:
/// frames of Spindle's crates, `std`, `core` and `alloc` are left out.
pub fn user_frames(backtrace: &Backtrace) -> Vec<Frame> {
    parse(&backtrace.to_string())
        .into_iter()
        .filter(|frame| !is_runtime(&frame.function))
        .collect()
}

/// Parses `Backtrace`'s `Display` output: `  N: function` lines, each
/// followed by an optional `at file:line:col` line.
fn parse(text: &str) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(at) = trimmed.strip_prefix("at ") {
            if let Some(last) = frames.last_mut() {
                if last.location.is_none() {
                    last.location = Some(at.trim().to_string());
                }
            }
            continue;
        }
        let Some((index, function)) = trimmed.split_once(": ") else {
            continue;
        };
        if index.chars().all(|c| c.is_ascii_digit()) && !index.is_empty() {
            frames.push(Frame {
                function: function.trim().to_string(),
                location: None,
            });
        }
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_a_rendered_backtrace_finds_functions_and_locations() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n             at /rustc/x/library/std/src/backtrace.rs:312:13\n   1: spindle_core::io::IO<A,E>::flat_map\n             at ./io-core/src/io.rs:10:5\n   2: demo::program\n             at ./examples/demo.rs:7:9\n   3: <F as core::ops::function::FnOnce<()>>::call_once\n   4: demo::main\n";
        let frames = parse(text);
        assert_eq!(frames.len(), 5);
        assert_eq!(frames[2].function, "demo::program");
        assert_eq!(
            frames[2].location.as_deref(),
            Some("./examples/demo.rs:7:9")
        );
        let user: Vec<_> = frames
            .into_iter()
            .filter(|f| !is_runtime(&f.function))
            .map(|f| f.function)
            .collect();
        assert_eq!(user, ["demo::program", "demo::main"]);
    }

    #[test]
    fn runtime_and_standard_library_frames_are_recognised() {
        for f in [
            "spindle_core::fiber::run_loop::run_loop",
            "<spindle_core::io::IO<A,E>>::map",
            "spindle_exec_wstp::worker::run",
            "core::ops::function::FnOnce::call_once",
            "std::rt::lang_start_internal",
            "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
            "spindle_trace::Site::caller",
            "__rust_begin_short_backtrace",
        ] {
            assert!(is_runtime(f), "{f} should be filtered");
        }
        for f in [
            "demo::program",
            "demo::main::{{closure}}",
            "<demo::Server>::handle",
        ] {
            assert!(!is_runtime(f), "{f} is user code");
        }
    }
}
