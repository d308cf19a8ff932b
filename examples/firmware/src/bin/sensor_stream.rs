//! The second firmware program: a stream of sensor readings from an
//! interrupt, through `spindle-stream` without `std`, on the same targets
//! and glue as the main program (`src/main.rs`), run by `run.sh`.
//!
//! A separate image because the main one has a flash budget (`run.sh`)
//! that leaves no room for the stream library; this one shares the
//! architecture glue (`src/arch`), the memory routines (`src/mem.rs`), the
//! output (`src/out.rs`), the counting heap (`src/heap.rs`) and the
//! frame of `run` (`src/frame.rs`) through `#[path]`.
//!
//! The "sensor": while it is enabled, the tick interrupt starts a
//! conversion every [`SAMPLE_EVERY`] ticks by pending the software
//! interrupt, whose handler (the "conversion complete" interrupt) reads
//! the value ([`reading`], a deterministic function of the reading's
//! number) and hands it to the program through a `static` `Signal`. The
//! handlers allocate nothing (counted: `heap.rs`).
//!
//! The stream: `Stream::bracket_case` enables the sensor and disables it
//! when the stream is done; `Stream::repeat_eval` of the signal's `wait`
//! gives the readings; glitches (a saturated converter) are filtered out,
//! the rest mapped to tenths of a degree, a moving average over 4 readings
//! is kept with `scan` (`filter_map` drops the windows not yet full), and
//! `take(8)` ends it; each average is printed (`eval_tap`) and the whole
//! compiled to one IO that folds them, run on exec-single. The averages
//! are checked against the same functions applied in a plain loop, and
//! `run.sh` checks the printed lines. A second stream fails at the first
//! glitch (`eval_map` raising an error): its release still runs, once.
//! Enables and releases are counted: each is 2 at the end.

#![no_std]
#![no_main]

extern crate alloc;

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use core::time::Duration;

use spindle_core::{ExitCase, IO, IOLocal, Signal};
use spindle_exec_single::Clock;
use spindle_stream::Stream;

use heap::{Heap, IN_HANDLER};

/// The per-architecture glue, the main program's.
#[cfg(target_arch = "arm")]
#[path = "../arch/cortex_m.rs"]
mod arch;
#[cfg(target_arch = "riscv32")]
#[path = "../arch/riscv.rs"]
mod arch;

/// `memcpy` and its kin, byte by byte (smaller than compiler_builtins').
#[path = "../mem.rs"]
mod mem;

/// Output without `core::fmt`: text and `u32`s (`say!`).
#[macro_use]
#[path = "../out.rs"]
mod out;

/// embedded-alloc's heap, counting allocations in interrupt handlers.
#[path = "../heap.rs"]
mod heap;

/// The frame of `run`: executor, verdict (`run_frame!`, the main
/// program's).
#[macro_use]
#[path = "../frame.rs"]
mod frame;

/// The heap; the architecture's entry point gives it its memory.
#[global_allocator]
static HEAP: Heap = Heap::empty();

/// Tick interrupts since boot (written only by the tick handler).
static TICKS: AtomicU32 = AtomicU32::new(0);

/// Ticks between two conversions while the sensor is enabled.
const SAMPLE_EVERY: u32 = 2;

/// Ticks after which the run fails from the tick handler (a reading that
/// never comes does not hang the program; the whole run takes about 60).
const GIVE_UP_AT: u32 = 2000;

/// Whether the sensor is enabled: set by the stream's acquire, cleared by
/// its release; the tick handler starts conversions only while it is set.
static SENSOR_ON: AtomicBool = AtomicBool::new(false);

/// Readings converted since the sensor was last enabled (written by the
/// conversion handler; reset by the acquire while the sensor is off).
static CONVERTED: AtomicU32 = AtomicU32::new(0);

/// Times the sensor was enabled, and released (the stream's finalizer).
static ENABLES: AtomicU32 = AtomicU32::new(0);
static RELEASES: AtomicU32 = AtomicU32::new(0);

/// Readings and glitches the stream pulled (written by the fiber only).
static PULLED: AtomicU32 = AtomicU32::new(0);
static GLITCHES: AtomicU32 = AtomicU32::new(0);

/// What the conversion handler hands to the stream: the reading's number
/// (1, 2, ... since the sensor was enabled) and its raw value.
static READING: Signal<(u32, u32)> = Signal::new();

/// The raw value of a saturated converter: a glitch, not a temperature.
const GLITCH: u32 = 4095;

/// The sensor's raw value for reading `n`: every fifth a glitch, the others
/// a temperature between 25.0 and 28.6 degrees.
fn reading(n: u32) -> u32 {
    if n.is_multiple_of(5) {
        GLITCH
    } else {
        1000 + 8 * ((3 * n) % 10)
    }
}

/// A raw value in tenths of a degree.
fn tenths(raw: u32) -> u32 {
    (raw - 500) / 2
}

/// Called by the architecture's tick interrupt handler, every tick.
pub fn on_tick() {
    IN_HANDLER.store(true, Ordering::Relaxed);
    // One writer (this handler): a load and a store, no read-modify-write
    // (which thumbv6m and riscv32imc do not have).
    let now = TICKS.load(Ordering::Relaxed).wrapping_add(1);
    TICKS.store(now, Ordering::Relaxed);
    if SENSOR_ON.load(Ordering::Acquire) && now.is_multiple_of(SAMPLE_EVERY) {
        // Start a conversion: its "complete" interrupt follows.
        arch::pend_soft_interrupt();
    }
    if now >= GIVE_UP_AT {
        say!("sensor stream: not done after ", GIVE_UP_AT, " ticks");
        arch::exit(false);
    }
    IN_HANDLER.store(false, Ordering::Relaxed);
}

/// Called by the architecture's software interrupt handler: the conversion
/// is complete; numbers it and hands its value to the stream. No
/// allocation, no lock but the signal's short critical section.
pub fn on_soft_interrupt() {
    IN_HANDLER.store(true, Ordering::Relaxed);
    if SENSOR_ON.load(Ordering::Acquire) {
        let n = CONVERTED.load(Ordering::Relaxed).wrapping_add(1);
        CONVERTED.store(n, Ordering::Relaxed);
        READING.signal((n, reading(n)));
    }
    IN_HANDLER.store(false, Ordering::Relaxed);
}

/// exec-single's clock: ticks as milliseconds; waiting is `wfi` (as the
/// main program's, whose doc says why no wake-up is lost).
#[derive(Default)]
struct TickClock;

impl Clock for TickClock {
    fn now(&self) -> Duration {
        let ms = TICKS.load(Ordering::Relaxed);
        Duration::new(u64::from(ms / 1000), (ms % 1000) * 1_000_000)
    }

    fn wait(&self, _deadline: Option<Duration>) {
        arch::wait_for_interrupt();
    }
}

/// Errors are static messages: no formatting machinery in the image.
type Error = &'static str;
type Io<A> = IO<A, Error>;

/// Adds one to a counter only the fiber writes.
fn bump(counter: &AtomicU32) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
}

/// The stream's acquire: enables the sensor (its readings numbered from 1).
fn enable() -> Io<()> {
    IO::delay(|| {
        CONVERTED.store(0, Ordering::Relaxed);
        SENSOR_ON.store(true, Ordering::Release);
        bump(&ENABLES);
        say!(
            "sensor: enabled (sampled on ",
            arch::TICK_SOURCE,
            ", read in ",
            arch::SOFT_INTERRUPT,
            ")"
        );
    })
}

/// The stream's release: disables the sensor, drops a reading converted
/// after the stream's last wait, counts the release and prints how the
/// stream ended.
fn disable(exit: ExitCase) -> Io<()> {
    IO::delay(move || {
        SENSOR_ON.store(false, Ordering::Release);
        let _ = READING.try_take();
        bump(&RELEASES);
        let how = match exit {
            ExitCase::Succeeded => "succeeded",
            ExitCase::Errored => "errored",
            ExitCase::Canceled => "canceled",
            ExitCase::Panicked => "panicked",
        };
        say!("sensor: disabled (stream ", how, ")");
    })
}

/// The sensor's readings, `(number, raw value)`, while the stream runs: the
/// sensor enabled when the stream starts and disabled, exactly once, when
/// it is done (finished, stopped by a `take`, failed or canceled).
fn readings() -> Stream<(u32, u32), Error> {
    Stream::bracket_case(enable(), |(), exit| disable(exit))
        .flat_map(|()| Stream::repeat_eval(|| READING.wait::<Error>()))
        .eval_tap(|_| IO::delay(|| bump(&PULLED)))
}

/// The last readings, for the moving average (the `scan` state).
#[derive(Clone, Default)]
struct Window {
    last: [u32; WINDOW],
    seen: u32,
}

/// Readings per moving average.
const WINDOW: usize = 4;

impl Window {
    /// The window with `value` in place of its oldest reading.
    fn push(&self, value: u32) -> Window {
        let mut next = self.clone();
        next.last[self.seen as usize % WINDOW] = value;
        next.seen = self.seen + 1;
        next
    }

    /// The average of the window, once it is full.
    fn average(&self) -> Option<u32> {
        (self.seen as usize >= WINDOW).then(|| self.last.iter().sum::<u32>() / WINDOW as u32)
    }
}

/// Moving averages wanted.
const AVERAGES: u32 = 8;

/// The same averages computed without a stream: the checks' reference.
fn expected_averages() -> [u32; AVERAGES as usize] {
    let mut out = [0; AVERAGES as usize];
    let mut window = Window::default();
    let mut found = 0;
    let mut n = 1;
    while found < out.len() {
        let raw = reading(n);
        n += 1;
        if raw == GLITCH {
            continue;
        }
        window = window.push(tenths(raw));
        if let Some(average) = window.average() {
            out[found] = average;
            found += 1;
        }
    }
    out
}

/// The moving averages of the readings (glitches dropped), the first
/// [`AVERAGES`], each printed; folded into whether each is the expected
/// one, and how many there were.
fn moving_averages() -> Io<(bool, u32)> {
    let expected = expected_averages();
    readings()
        .filter(|&(_, raw)| {
            if raw == GLITCH {
                bump(&GLITCHES);
            }
            raw != GLITCH
        })
        .map(|(_, raw)| tenths(raw))
        .scan(Window::default(), Window::push)
        .filter_map(|window| window.average())
        .take(u64::from(AVERAGES))
        .zip_with_index()
        .eval_tap(|&(average, i)| {
            IO::delay(move || {
                say!(
                    "average ",
                    i as u32 + 1,
                    " of ",
                    AVERAGES,
                    ": ",
                    average / 10,
                    ".",
                    average % 10,
                    " C"
                );
            })
        })
        .compile()
        .fold((true, 0), move |(ok, count), (average, i)| {
            let right = expected.get(i as usize) == Some(&average);
            (ok && right, count + 1)
        })
}

/// A stream that fails at the sensor's first glitch; its error, with the
/// releases counted before and after.
fn failing_stream() -> Io<bool> {
    let released_before = RELEASES.load(Ordering::Relaxed);
    readings()
        .eval_map(|(_, raw)| {
            if raw == GLITCH {
                IO::raise_error("sensor glitch")
            } else {
                IO::pure(raw)
            }
        })
        .compile()
        .count()
        .redeem(
            move |error| {
                let released = RELEASES.load(Ordering::Relaxed) - released_before;
                say!("failing stream: ", error, ", releases: ", released);
                error == "sensor glitch" && released == 1 && !SENSOR_ON.load(Ordering::Relaxed)
            },
            |_| {
                say!("failing stream: ended without its error");
                false
            },
        )
}

/// A fiber-local value: a child this fiber starts begins with a copy of
/// its value (5) and sets its own (9), which never reaches the parent;
/// what the child saw and what the parent reads after it.
fn locals() -> Io<(u32, u32)> {
    let local = IOLocal::new(0u32);
    let (child, child_sets, parent) = (local.clone(), local.clone(), local.clone());
    local.set(5).product_r(
        child
            .get()
            .flat_map(move |seen| child_sets.set(9).map_to(seen))
            .start()
            .flat_map(|fiber| fiber.join_with_never())
            .flat_map(move |seen| parent.get().map(move |kept| (seen, kept))),
    )
}

/// The whole program: whether every check passed.
fn program() -> Io<bool> {
    moving_averages().flat_map(move |(right, count)| {
        say!(
            "stream: ",
            count,
            " averages of ",
            PULLED.load(Ordering::Relaxed),
            " readings, ",
            GLITCHES.load(Ordering::Relaxed),
            " glitches dropped, ",
            READING.overwritten() as u32,
            " overwritten"
        );
        let pulled = PULLED.load(Ordering::Relaxed);
        let converted = CONVERTED.load(Ordering::Relaxed);
        // The sensor is off: no reading converted while the program sleeps
        // 10 ticks (5 conversions' time).
        IO::sleep(Duration::from_millis(10))
            .flat_map(move |()| {
                let late = CONVERTED.load(Ordering::Relaxed) - converted;
                say!("readings after release: ", late);
                let ok = right
                    && count == AVERAGES
                    && pulled == 13
                    && GLITCHES.load(Ordering::Relaxed) == 2
                    && READING.overwritten() == 0
                    && late == 0
                    && RELEASES.load(Ordering::Relaxed) == 1;
                // The heap once the first stream is gone: what stays is
                // the runtime's (the signal's waiter list, the timers),
                // kept for the next stream, which must leave it as it was.
                let heap_before = HEAP.used() as u32;
                failing_stream().map(move |failed_right| (ok && failed_right, heap_before))
            })
            .map(move |(ok, heap_before)| {
                let (enables, releases) = (
                    ENABLES.load(Ordering::Relaxed),
                    RELEASES.load(Ordering::Relaxed),
                );
                say!(
                    "sensor enabled ",
                    enables,
                    " times, released ",
                    releases,
                    " times"
                );
                let heap_after = HEAP.used() as u32;
                say!(
                    "heap in use: ",
                    heap_before,
                    " bytes before the failing stream, ",
                    heap_after,
                    " after"
                );
                ok && enables == 2 && releases == 2 && heap_after == heap_before
            })
            .flat_map(|ok| {
                locals().map(move |(seen, kept)| {
                    say!("locals: the child saw ", seen, ", the parent kept ", kept);
                    ok && seen == 5 && kept == 5
                })
            })
    })
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // As the main program: neither location nor message (their formatting
    // code would be most of the image).
    say!("panic");
    arch::exit(false)
}

/// The whole run, called by the architecture's entry point once the heap
/// and the tick are set up (`frame.rs`); whether every check passed.
pub fn run() -> bool {
    // Room for the fiber the conversion handler wakes between two turns.
    run_frame!("sensor stream on ", TickClock, 1, program, |e| e)
}
