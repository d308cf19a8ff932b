//! Memory of suspended fibers on every Spindle executor, against tokio's
//! two runtimes, in bytes per fiber (task): the growth of the resident set
//! and, with `--count`, the bytes requested from the allocator.
//!
//! ```text
//! cargo run --release -p benches --example rss_fibers -- SIDE MODE [N] [--count] [--tracing none|cached] [--inside]
//! cargo run --release -p benches --example rss_fibers -- wstp gate
//! cargo run --release -p benches --example rss_fibers -- tokio_ct own 10000 --count
//! ```
//!
//! # Sides, and which tokio runtime each is compared with
//!
//! | side | runtime | method | tokio counterpart |
//! |---|---|---|---|
//! | `wstp` (alias `spindle`) | exec-wstp `Runtime`, 2 workers | outside | `tokio` |
//! | `spindle_tokio` | exec-tokio on an owned multi-thread runtime, 2 workers | outside | `tokio` |
//! | `single` | exec-single `SingleThreaded` | inside | `tokio_ct` |
//! | `batching` | exec-batching `EventLoop` | inside | `tokio_ct` |
//! | `spindle_tokio_ct` | exec-tokio on an owned current-thread runtime | inside | `tokio_ct` |
//! | `tokio` (alias `tokio_mt`) | tokio multi-thread runtime, 2 workers | outside | |
//! | `tokio_ct` | tokio current-thread runtime | inside | |
//!
//! # The two methods (the same shape on each side)
//!
//! * **outside** (multi-thread runtimes): the calling thread starts `N`
//!   fibers (tasks) with the runtime's `spawn`, each of which bumps a
//!   counter and then suspends; the calling thread polls the counter
//!   (every 5 ms), waits 200 ms more (the last fibers bump it just before
//!   they suspend), then takes the measurement, releases the fibers (where
//!   the mode allows) and waits until every one has ended.
//! * **inside** (single-threaded runtimes, and any side with `--inside`):
//!   one `block_on` runs a main program (a main fiber on Spindle, the
//!   `block_on` future on tokio) that takes the baseline, starts `N`
//!   fibers (`IO::start`; `tokio::spawn`) with the same programs, ceding
//!   (`IO::cede`; `yield_now`) after every 32, so that fibers started but
//!   not yet run do not pile up (exec-batching runs 64 fibers per turn
//!   before the main fiber's next step, tokio's current-thread runtime 61
//!   tasks: a starter that started more per turn would keep thousands of
//!   programs waiting, and their blocks, freed later, would fragment the
//!   heap between the fibers), polls the counter with 5 ms sleeps
//!   (`IO::sleep`; `tokio::time::sleep`), sleeps 200 ms more, takes the
//!   measurement from inside the program (`IO::delay`; a plain call), then
//!   releases the fibers and waits for them as above.
//!
//! The baseline is taken after the runtime has started and run one program
//! (so that its threads and their thread-locals exist). One runtime per
//! process, so that each number starts from a fresh heap.
//!
//! # What is printed, per fiber (the growth from baseline to measurement, over `N`)
//!
//! * `rss_delta`, `hwm_delta`: `VmRSS` and `VmHWM` from `/proc/self/status`
//!   (what the kernel sees: allocator chunks, its per-thread arenas, and
//!   the pages its thresholds keep). glibc's arenas and thresholds make
//!   this coarse, above all for small `N`: run each mode a few times and
//!   read the spread.
//! * with `--count`: a counting global allocator (around the system
//!   allocator, all threads) gives the live bytes *requested*
//!   (`live_bytes`: allocations minus deallocations, `Layout::size`), the
//!   same rounded up to glibc's 64-bit chunk sizes (`chunk_est`: the
//!   request plus 8 bytes, rounded up to 16, at least 32; an estimate:
//!   alignment above 16 costs glibc more), the live blocks
//!   (`live_blocks`) and the allocation calls made from baseline to
//!   measurement (`allocs`: `alloc` and `realloc`), then the live blocks
//!   by requested size (classes of 8 bytes; one class for everything above
//!   1 KiB, such as the buffer of a waiter list or of a timer heap): what
//!   the bytes are made of. Without `--count` the allocator only checks
//!   the flag.
//! * `kept by the caller`: the bytes of the vectors the starter keeps (the
//!   signals of `own`, the handles of `never`); they are included in the
//!   numbers above.
//!
//! # Modes (how each fiber waits)
//!
//! * `gate`: on one shared gate. Spindle: `Deferred::get` on one
//!   `Deferred<()>` (each waiter is an entry in the deferred's waiter
//!   list); tokio: `Notify::notified` on one shared `Notify` (an intrusive
//!   waiter inside the task). Released at the end.
//! * `own`: on a signal of its own, whose sending side the starter keeps
//!   in a `Vec`. Spindle: one `Deferred<()>` per fiber; tokio: one
//!   `oneshot` channel per task. Released at the end.
//! * `never`: forever. Spindle: `IO::never()`; tokio:
//!   `std::future::pending()`. The starter keeps every handle
//!   (`FiberHandle`, 16 bytes; `JoinHandle`, 8 bytes) until the
//!   measurement, since a Spindle fiber suspended in `never` with no handle
//!   left is freed at once.
//! * `sleep`: a one-hour sleep (a timer entry). Not released: the runtime
//!   is dropped with them.
//!
//! # Tracing
//!
//! `--tracing none|cached` sets the Spindle executors' tracing mode
//! (`FiberConfig`); without it they run in the default mode, `cached`, in
//! which every fiber here records trace events (its `delay`, `product_r`,
//! `Deferred::get`, ...) and so has a trace ring (16 events) and an entry
//! in its executor's fiber registry. tokio has no equivalent; `none` is the
//! like-for-like comparison. Built without the `tracing` feature
//! (`--no-default-features`), nothing is recorded whatever the mode, and
//! a fiber has no ring pointer or activity byte (16 bytes less): the
//! report then says `tracing=off`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use spindle_core::{
    Deferred, FiberConfig, FiberHandle, IO, IORuntime, RuntimeBuilder, TracingMode,
};

type Io<A> = IO<A, Infallible>;

const WORKERS: usize = 2;
const DEFAULT_FIBERS: usize = 1_000_000;
const SLEEP: Duration = Duration::from_secs(3600);
/// How often the starter looks at the counters.
const POLL: Duration = Duration::from_millis(5);
/// How long the starter waits after the counter is reached.
const SETTLE: Duration = Duration::from_millis(200);
/// The inside method cedes after starting this many fibers (fewer than
/// exec-batching's batch of 64 and tokio's event interval of 61).
const CHUNK: usize = 32;

// ----- the counting allocator ------------------------------------------------

/// The system allocator, counting (when [`COUNTING`] is set) the calls, live
/// blocks, live requested bytes and live estimated chunk bytes of every
/// thread.
struct Counting;

/// Set once, from the command line, before anything is allocated that is
/// measured (so that every block counted as freed was counted as made).
static COUNTING: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicUsize = AtomicUsize::new(0);
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE_CHUNKS: AtomicUsize = AtomicUsize::new(0);
/// Live blocks and bytes by requested size, in classes of 8 bytes (class
/// `c` holds the sizes `8c - 7 ..= 8c`; the last, every size above
/// [`LARGEST_CLASS`]` * 8`).
static CLASS_BLOCKS: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];
static CLASS_BYTES: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];
const LARGEST_CLASS: usize = 128;
const CLASSES: usize = LARGEST_CLASS + 2;

fn class(size: usize) -> usize {
    size.div_ceil(8).min(LARGEST_CLASS + 1)
}

/// glibc's chunk for a request of `size` bytes on a 64-bit target: the
/// request and an 8-byte size field, rounded up to 16, at least 32.
fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

impl Counting {
    fn made(size: usize) {
        // Wrapping adds and subtracts: only differences are read.
        CALLS.fetch_add(1, Relaxed);
        LIVE_BLOCKS.fetch_add(1, Relaxed);
        LIVE_BYTES.fetch_add(size, Relaxed);
        LIVE_CHUNKS.fetch_add(chunk(size), Relaxed);
        CLASS_BLOCKS[class(size)].fetch_add(1, Relaxed);
        CLASS_BYTES[class(size)].fetch_add(size, Relaxed);
    }

    fn freed(size: usize) {
        LIVE_BLOCKS.fetch_sub(1, Relaxed);
        LIVE_BYTES.fetch_sub(size, Relaxed);
        LIVE_CHUNKS.fetch_sub(chunk(size), Relaxed);
        CLASS_BLOCKS[class(size)].fetch_sub(1, Relaxed);
        CLASS_BYTES[class(size)].fetch_sub(size, Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` with the caller's arguments;
// the counting touches only atomics (no allocation, no re-entrance).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() && COUNTING.load(Relaxed) {
            Counting::made(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() && COUNTING.load(Relaxed) {
            Counting::made(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Relaxed) {
            Counting::freed(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() && COUNTING.load(Relaxed) {
            Counting::freed(layout.size());
            Counting::made(new_size);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ----- measurements ----------------------------------------------------------

/// The process's memory at one point.
#[derive(Clone, Copy)]
struct Snapshot {
    /// `VmRSS`, bytes.
    rss: u64,
    /// `VmHWM`, bytes.
    hwm: u64,
    calls: usize,
    blocks: usize,
    bytes: usize,
    chunks: usize,
    /// Live blocks and bytes per size class.
    classes: [(usize, usize); CLASSES],
}

/// `VmRSS`, `VmHWM` and the allocator's counters now.
fn snapshot() -> Snapshot {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    let (rss, hwm) = (field("VmRSS:"), field("VmHWM:"));
    drop(status);
    Snapshot {
        rss,
        hwm,
        calls: CALLS.load(Relaxed),
        blocks: LIVE_BLOCKS.load(Relaxed),
        bytes: LIVE_BYTES.load(Relaxed),
        chunks: LIVE_CHUNKS.load(Relaxed),
        classes: core::array::from_fn(|c| {
            (CLASS_BLOCKS[c].load(Relaxed), CLASS_BYTES[c].load(Relaxed))
        }),
    }
}

/// What one run measured.
struct Report {
    side: &'static str,
    method: Method,
    tracing: Option<TracingMode>,
    mode: Mode,
    fibers: usize,
    baseline: Snapshot,
    suspended: Snapshot,
    kept_bytes: usize,
    spawn_time: Duration,
    release_time: Option<Duration>,
}

impl Report {
    fn print(&self) {
        let n = self.fibers as f64;
        let (b, s) = (&self.baseline, &self.suspended);
        let per = |delta: f64| delta / n;
        let rss = per(s.rss as f64 - b.rss as f64);
        let hwm = per(s.hwm as f64 - b.rss as f64);
        let tracing = match self.tracing {
            None => "-",
            // Built without the `tracing` feature: nothing is recorded,
            // whatever the mode.
            Some(_) if !cfg!(feature = "tracing") => "off",
            Some(TracingMode::None) => "none",
            Some(TracingMode::Cached) => "cached",
            Some(_) => "full",
        };
        println!(
            "{} {} method={} tracing={} fibers={} baseline_rss={} KiB rss={} KiB hwm={} KiB",
            self.side,
            self.mode.name(),
            self.method.name(),
            tracing,
            self.fibers,
            b.rss / 1024,
            s.rss / 1024,
            s.hwm / 1024,
        );
        println!(
            "  per fiber: rss_delta={rss:.0} B  hwm_delta={hwm:.0} B  (of which kept by the caller: {:.0} B)",
            self.kept_bytes as f64 / n,
        );
        let diff = |after: usize, before: usize| after.wrapping_sub(before) as isize as f64 / n;
        let counted = COUNTING.load(Relaxed);
        if counted {
            println!(
                "  allocator per fiber: live_bytes={:.1} B  chunk_est={:.1} B  live_blocks={:.2}  allocs={:.2}",
                diff(s.bytes, b.bytes),
                diff(s.chunks, b.chunks),
                diff(s.blocks, b.blocks),
                diff(s.calls, b.calls),
            );
            // The size classes that changed by at least one block per 100
            // fibers or one byte per fiber: what the bytes are made of.
            print!("  live blocks per fiber by size:");
            for (c, (after, before)) in s.classes.iter().zip(&b.classes).enumerate() {
                let blocks = diff(after.0, before.0);
                let bytes = diff(after.1, before.1);
                if blocks.abs() >= 0.01 || bytes.abs() >= 1.0 {
                    if c == 0 {
                        print!("  0: {blocks:.2}");
                    } else if c > LARGEST_CLASS {
                        print!("  >{}: {blocks:.2} ({bytes:.1} B)", LARGEST_CLASS * 8);
                    } else {
                        print!("  {}-{}: {blocks:.2} ({bytes:.1} B)", 8 * c - 7, 8 * c);
                    }
                }
            }
            println!();
        }
        print!(
            "  spawn+suspend: {:.0} ms",
            self.spawn_time.as_secs_f64() * 1e3
        );
        if let Some(release) = self.release_time {
            print!("  release+end: {:.0} ms", release.as_secs_f64() * 1e3);
        }
        println!();
        // One line for tables: side mode method tracing N rss hwm kept
        // [live_bytes chunk_est live_blocks allocs].
        print!(
            "ROW {} {} {} {} {} {rss:.0} {hwm:.0} {:.0}",
            self.side,
            self.mode.name(),
            self.method.name(),
            tracing,
            self.fibers,
            self.kept_bytes as f64 / n,
        );
        if counted {
            print!(
                " {:.1} {:.1} {:.2} {:.2}",
                diff(s.bytes, b.bytes),
                diff(s.chunks, b.chunks),
                diff(s.blocks, b.blocks),
                diff(s.calls, b.calls),
            );
        }
        println!();
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Gate,
    Own,
    Never,
    Sleep,
}

impl Mode {
    fn parse(s: &str) -> Mode {
        match s {
            "gate" => Mode::Gate,
            "own" => Mode::Own,
            "never" => Mode::Never,
            "sleep" => Mode::Sleep,
            other => panic!("unknown mode {other:?} (gate, own, never, sleep)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Gate => "gate",
            Mode::Own => "own",
            Mode::Never => "never",
            Mode::Sleep => "sleep",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Outside,
    Inside,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Outside => "outside",
            Method::Inside => "inside",
        }
    }
}

/// Polls `counter` from a plain thread until it reaches `n`, then waits
/// [`SETTLE`] more.
fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Relaxed) < n {
        std::thread::sleep(POLL);
    }
    std::thread::sleep(SETTLE);
}

// ----- Spindle ---------------------------------------------------------------

/// What the example needs of a Spindle executor.
trait SpindleRt {
    /// Starts `io` from outside the executor.
    fn spawn_fiber(&self, io: Io<()>) -> FiberHandle<(), Infallible>;
    /// Runs `io` as the main fiber until it ends.
    fn run<A: Send + 'static>(&self, io: Io<A>) -> A;
}

/// The value of a program that cannot fail, from any executor's `block_on`.
fn succeeded<A, R: std::fmt::Debug>(outcome: Result<spindle_core::Outcome<A, Infallible>, R>) -> A {
    outcome
        .expect("block_on")
        .succeeded()
        .expect("the program succeeds")
}

impl SpindleRt for spindle_exec_wstp::Runtime {
    fn spawn_fiber(&self, io: Io<()>) -> FiberHandle<(), Infallible> {
        self.spawn(io).expect("spawn")
    }
    fn run<A: Send + 'static>(&self, io: Io<A>) -> A {
        succeeded(self.block_on(io))
    }
}

impl SpindleRt for spindle_exec_single::SingleThreaded<spindle_exec_single::StdClock> {
    fn spawn_fiber(&self, io: Io<()>) -> FiberHandle<(), Infallible> {
        self.spawn(io).expect("spawn")
    }
    fn run<A: Send + 'static>(&self, io: Io<A>) -> A {
        succeeded(self.block_on(io))
    }
}

impl SpindleRt for spindle_exec_batching::EventLoop {
    fn spawn_fiber(&self, io: Io<()>) -> FiberHandle<(), Infallible> {
        self.spawn(io).expect("spawn")
    }
    fn run<A: Send + 'static>(&self, io: Io<A>) -> A {
        succeeded(self.block_on(io))
    }
}

impl SpindleRt for spindle_exec_tokio::TokioExecutor {
    fn spawn_fiber(&self, io: Io<()>) -> FiberHandle<(), Infallible> {
        self.spawn(io).expect("spawn")
    }
    fn run<A: Send + 'static>(&self, io: Io<A>) -> A {
        succeeded(self.block_on(io))
    }
}

/// The fibers' programs and what they share.
#[derive(Clone)]
struct SpindleFibers {
    mode: Mode,
    /// Bumped by each fiber just before it suspends.
    suspended: Arc<AtomicUsize>,
    /// Bumped by each fiber after it is released.
    ended: Arc<AtomicUsize>,
    /// The shared gate of `gate`.
    gate: Deferred<()>,
}

/// What the starter keeps to release Spindle's fibers (or to keep them
/// alive) later.
struct SpindleKept {
    signals: Vec<Deferred<()>>,
    handles: Vec<FiberHandle<(), Infallible>>,
}

impl SpindleFibers {
    fn new(mode: Mode) -> Self {
        SpindleFibers {
            mode,
            suspended: Arc::new(AtomicUsize::new(0)),
            ended: Arc::new(AtomicUsize::new(0)),
            gate: Deferred::new(),
        }
    }

    fn bump(counter: &Arc<AtomicUsize>) -> Io<()> {
        let counter = counter.clone();
        Io::<()>::delay(move || {
            counter.fetch_add(1, Relaxed);
        })
    }

    /// A new fiber's program, and the signal of its own (`own`).
    fn program(&self) -> (Io<()>, Option<Deferred<()>>) {
        let suspended = Self::bump(&self.suspended);
        match self.mode {
            Mode::Gate => (
                suspended
                    .product_r(self.gate.get())
                    .product_r(Self::bump(&self.ended)),
                None,
            ),
            Mode::Own => {
                let signal = Deferred::<()>::new();
                let io = suspended
                    .product_r(signal.get())
                    .product_r(Self::bump(&self.ended));
                (io, Some(signal))
            }
            Mode::Never => (suspended.product_r(Io::<()>::never()), None),
            Mode::Sleep => (suspended.product_r(Io::<()>::sleep(SLEEP)), None),
        }
    }

    /// Room for what the starter keeps of `n` fibers.
    fn kept(&self, n: usize) -> SpindleKept {
        SpindleKept {
            signals: Vec::with_capacity(if self.mode == Mode::Own { n } else { 0 }),
            handles: Vec::with_capacity(if self.mode == Mode::Never { n } else { 0 }),
        }
    }

    /// Keeps what the mode needs of a started fiber.
    fn keep(
        &self,
        kept: &mut SpindleKept,
        handle: FiberHandle<(), Infallible>,
        signal: Option<Deferred<()>>,
    ) {
        kept.signals.extend(signal);
        if self.mode == Mode::Never {
            kept.handles.push(handle);
        }
    }

    /// The program that releases the fibers, if the mode releases them.
    fn release(&self, kept: SpindleKept) -> Option<Io<()>> {
        match self.mode {
            Mode::Gate => Some(self.gate.complete::<Infallible>(()).void()),
            Mode::Own => Some(IO::traverse(kept.signals, |s| s.complete::<Infallible>(())).void()),
            // `never`: dropping the handles frees the fibers (after the
            // measurement); `sleep`: the fibers are dropped with the runtime.
            Mode::Never | Mode::Sleep => None,
        }
    }
}

fn kept_bytes(kept: &SpindleKept) -> usize {
    kept.signals.capacity() * size_of::<Deferred<()>>()
        + kept.handles.capacity() * size_of::<FiberHandle<(), Infallible>>()
}

/// The outside method on a Spindle executor.
fn spindle_outside(rt: &impl SpindleRt, mode: Mode, n: usize) -> Measured {
    // Starts the workers' loops (and their thread-locals) before the baseline.
    rt.run(Io::<()>::unit());
    let fibers = SpindleFibers::new(mode);
    let baseline = snapshot();
    let started = Instant::now();
    let mut kept = fibers.kept(n);
    for _ in 0..n {
        let (io, signal) = fibers.program();
        let handle = rt.spawn_fiber(io);
        fibers.keep(&mut kept, handle, signal);
    }
    wait_for(&fibers.suspended, n);
    let spawn_time = started.elapsed() - SETTLE;
    let suspended = snapshot();
    let kept_bytes = kept_bytes(&kept);
    let release_time = fibers.release(kept).map(|release| {
        let t = Instant::now();
        rt.run(release);
        wait_for(&fibers.ended, n);
        t.elapsed() - SETTLE
    });
    Measured {
        baseline,
        suspended,
        kept_bytes,
        spawn_time,
        release_time,
    }
}

/// Sleeps in [`POLL`] steps until `counter` reaches `n`, then [`SETTLE`]
/// more.
fn spindle_wait_for(counter: Arc<AtomicUsize>, n: usize) -> Io<()> {
    Io::<()>::tail_rec((), move |()| {
        let reached = counter.load(Relaxed) >= n;
        if reached {
            Io::sleep(SETTLE).map_to(ControlFlow::Break(()))
        } else {
            Io::sleep(POLL).map_to(ControlFlow::Continue(()))
        }
    })
}

/// The inside method on a Spindle executor.
fn spindle_inside(rt: &impl SpindleRt, mode: Mode, n: usize) -> Measured {
    rt.run(Io::<()>::unit());
    let fibers = SpindleFibers::new(mode);
    let starter = fibers.clone();
    let start_all = Io::<SpindleKept>::tail_rec((0, fibers.kept(n)), move |(started, kept)| {
        if started == n {
            return Io::pure(ControlFlow::Break(kept));
        }
        let (io, signal) = starter.program();
        let starter = starter.clone();
        let start = io.start::<Infallible>().map(move |handle| {
            let mut kept = kept;
            starter.keep(&mut kept, handle, signal);
            ControlFlow::Continue((started + 1, kept))
        });
        if (started + 1) % CHUNK == 0 {
            start.flat_tap(|_| Io::cede())
        } else {
            start
        }
    });
    let (suspended_count, ended) = (fibers.suspended.clone(), fibers.ended.clone());
    let program = Io::delay(|| (snapshot(), Instant::now()))
        .flat_map(move |(baseline, started)| {
            start_all
                .flat_tap(move |_| spindle_wait_for(suspended_count, n))
                .map(move |kept| {
                    let spawn_time = started.elapsed() - SETTLE;
                    (baseline, snapshot(), spawn_time, kept)
                })
        })
        .flat_map(move |(baseline, suspended, spawn_time, kept)| {
            let kept_bytes = kept_bytes(&kept);
            let measured = move |release_time| Measured {
                baseline,
                suspended,
                kept_bytes,
                spawn_time,
                release_time,
            };
            match fibers.release(kept) {
                None => Io::pure(measured(None)),
                Some(release) => {
                    let t = Instant::now();
                    release
                        .product_r(spindle_wait_for(ended, n))
                        .map(move |()| measured(Some(t.elapsed() - SETTLE)))
                }
            }
        });
    rt.run(program)
}

/// What one method measured.
struct Measured {
    baseline: Snapshot,
    suspended: Snapshot,
    kept_bytes: usize,
    spawn_time: Duration,
    release_time: Option<Duration>,
}

/// The executors' default configuration with `tracing` (default: the
/// default mode, `cached`; the environment is not read).
fn fiber_config(tracing: Option<TracingMode>) -> FiberConfig {
    FiberConfig::builder()
        .tracing(tracing.unwrap_or_default())
        .build()
        .expect("fiber configuration")
}

fn spindle(
    side: &str,
    method: Method,
    tracing: Option<TracingMode>,
    mode: Mode,
    n: usize,
) -> Measured {
    let config = fiber_config(tracing);
    match side {
        "wstp" => {
            let rt = spindle_exec_wstp::Runtime::builder()
                .worker_threads(WORKERS)
                .fiber_config(config)
                .build()
                .expect("exec-wstp runtime");
            match method {
                Method::Outside => spindle_outside(&rt, mode, n),
                Method::Inside => spindle_inside(&rt, mode, n),
            }
        }
        "spindle_tokio" | "spindle_tokio_ct" => {
            let builder = spindle_exec_tokio::TokioExecutor::builder().fiber_config(config);
            let builder = if side == "spindle_tokio" {
                builder.multi_thread(WORKERS)
            } else {
                builder.current_thread()
            };
            let rt = builder.build().expect("exec-tokio executor");
            match method {
                Method::Outside => spindle_outside(&rt, mode, n),
                Method::Inside => spindle_inside(&rt, mode, n),
            }
        }
        "single" => {
            let rt = spindle_exec_single::SingleThreaded::builder()
                .fiber_config(config)
                .build()
                .expect("exec-single executor");
            assert!(
                method == Method::Inside,
                "exec-single runs fibers only inside block_on"
            );
            spindle_inside(&rt, mode, n)
        }
        "batching" => {
            let rt = spindle_exec_batching::EventLoop::builder()
                .fiber_config(config)
                .build()
                .expect("exec-batching event loop");
            assert!(
                method == Method::Inside,
                "exec-batching runs fibers only inside block_on"
            );
            spindle_inside(&rt, mode, n)
        }
        other => unreachable!("side {other}"),
    }
}

// ----- tokio -----------------------------------------------------------------

/// Spawns a task: on a runtime from outside, or on the current one.
trait TokioSpawn {
    fn spawn_task<F: Future<Output = ()> + Send + 'static>(
        &self,
        task: F,
    ) -> tokio::task::JoinHandle<()>;
}

impl TokioSpawn for tokio::runtime::Runtime {
    fn spawn_task<F: Future<Output = ()> + Send + 'static>(
        &self,
        task: F,
    ) -> tokio::task::JoinHandle<()> {
        self.spawn(task)
    }
}

/// `tokio::spawn`: the runtime of the calling task.
struct Ambient;

impl TokioSpawn for Ambient {
    fn spawn_task<F: Future<Output = ()> + Send + 'static>(
        &self,
        task: F,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(task)
    }
}

/// The tasks and what they share (the counterpart of [`SpindleFibers`]).
struct TokioTasks {
    mode: Mode,
    suspended: Arc<AtomicUsize>,
    ended: Arc<AtomicUsize>,
    gate: Arc<tokio::sync::Notify>,
}

/// What the starter keeps to release tokio's tasks (or keep them alive).
struct TokioKept {
    senders: Vec<tokio::sync::oneshot::Sender<()>>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl TokioKept {
    fn bytes(&self) -> usize {
        self.senders.capacity() * size_of::<tokio::sync::oneshot::Sender<()>>()
            + self.handles.capacity() * size_of::<tokio::task::JoinHandle<()>>()
    }
}

impl TokioTasks {
    fn new(mode: Mode) -> Self {
        TokioTasks {
            mode,
            suspended: Arc::new(AtomicUsize::new(0)),
            ended: Arc::new(AtomicUsize::new(0)),
            gate: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn kept(&self, n: usize) -> TokioKept {
        TokioKept {
            senders: Vec::with_capacity(if self.mode == Mode::Own { n } else { 0 }),
            handles: Vec::with_capacity(if self.mode == Mode::Never { n } else { 0 }),
        }
    }

    /// Starts one task and keeps what the mode needs of it.
    fn start(&self, spawner: &impl TokioSpawn, kept: &mut TokioKept) {
        let (suspended, ended) = (self.suspended.clone(), self.ended.clone());
        match self.mode {
            Mode::Gate => {
                let gate = self.gate.clone();
                drop(spawner.spawn_task(async move {
                    let notified = gate.notified();
                    tokio::pin!(notified);
                    // Registered before the count, so that `notify_waiters`
                    // wakes every task counted.
                    notified.as_mut().enable();
                    suspended.fetch_add(1, Relaxed);
                    notified.await;
                    ended.fetch_add(1, Relaxed);
                }));
            }
            Mode::Own => {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                drop(spawner.spawn_task(async move {
                    suspended.fetch_add(1, Relaxed);
                    rx.await.expect("sender kept");
                    ended.fetch_add(1, Relaxed);
                }));
                kept.senders.push(tx);
            }
            Mode::Never => {
                kept.handles.push(spawner.spawn_task(async move {
                    suspended.fetch_add(1, Relaxed);
                    std::future::pending::<()>().await;
                }));
            }
            Mode::Sleep => {
                drop(spawner.spawn_task(async move {
                    suspended.fetch_add(1, Relaxed);
                    tokio::time::sleep(SLEEP).await;
                }));
            }
        }
    }

    /// Releases the tasks, if the mode releases them; whether it did.
    fn release(&self, kept: TokioKept) -> bool {
        match self.mode {
            Mode::Gate => {
                self.gate.notify_waiters();
                true
            }
            Mode::Own => {
                for tx in kept.senders {
                    tx.send(()).expect("receiver alive");
                }
                true
            }
            // Dropped with the runtime (`never`: the handles are dropped,
            // which detaches the tasks).
            Mode::Never | Mode::Sleep => false,
        }
    }
}

/// The outside method on a tokio runtime.
fn tokio_outside(rt: &tokio::runtime::Runtime, mode: Mode, n: usize) -> Measured {
    rt.block_on(rt.spawn(async {})).expect("task");
    let tasks = TokioTasks::new(mode);
    let baseline = snapshot();
    let started = Instant::now();
    let mut kept = tasks.kept(n);
    for _ in 0..n {
        tasks.start(rt, &mut kept);
    }
    wait_for(&tasks.suspended, n);
    let spawn_time = started.elapsed() - SETTLE;
    let suspended = snapshot();
    let kept_bytes = kept.bytes();
    let t = Instant::now();
    let release_time = tasks.release(kept).then(|| {
        wait_for(&tasks.ended, n);
        t.elapsed() - SETTLE
    });
    Measured {
        baseline,
        suspended,
        kept_bytes,
        spawn_time,
        release_time,
    }
}

/// Sleeps in [`POLL`] steps until `counter` reaches `n`, then [`SETTLE`]
/// more (the counterpart of [`spindle_wait_for`]).
async fn tokio_wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Relaxed) < n {
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(SETTLE).await;
}

/// The inside method on a tokio runtime.
fn tokio_inside(rt: &tokio::runtime::Runtime, mode: Mode, n: usize) -> Measured {
    rt.block_on(rt.spawn(async {})).expect("task");
    rt.block_on(async move {
        let tasks = TokioTasks::new(mode);
        let baseline = snapshot();
        let started = Instant::now();
        let mut kept = tasks.kept(n);
        for i in 0..n {
            tasks.start(&Ambient, &mut kept);
            if (i + 1) % CHUNK == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio_wait_for(&tasks.suspended, n).await;
        let spawn_time = started.elapsed() - SETTLE;
        let suspended = snapshot();
        let kept_bytes = kept.bytes();
        let t = Instant::now();
        let release_time = if tasks.release(kept) {
            tokio_wait_for(&tasks.ended, n).await;
            Some(t.elapsed() - SETTLE)
        } else {
            None
        };
        Measured {
            baseline,
            suspended,
            kept_bytes,
            spawn_time,
            release_time,
        }
    })
}

fn tokio(side: &str, method: Method, mode: Mode, n: usize) -> Measured {
    let mut builder = if side == "tokio" {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(WORKERS);
        builder
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let rt = builder.enable_time().build().expect("tokio runtime");
    match method {
        Method::Outside => {
            assert!(
                side == "tokio",
                "tokio's current-thread runtime runs tasks only inside block_on"
            );
            tokio_outside(&rt, mode, n)
        }
        Method::Inside => tokio_inside(&rt, mode, n),
    }
}

// ----- main ------------------------------------------------------------------

fn main() {
    let mut positional = Vec::new();
    let mut count = false;
    let mut inside = false;
    let mut tracing = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--count" => count = true,
            "--inside" => inside = true,
            "--tracing" => {
                tracing = Some(match args.next().as_deref() {
                    Some("none") => TracingMode::None,
                    Some("cached") => TracingMode::Cached,
                    other => panic!("--tracing none|cached, not {other:?}"),
                })
            }
            _ => positional.push(arg),
        }
    }
    // Before the runtime exists: every block freed while counting was
    // counted when it was made.
    COUNTING.store(count, Relaxed);
    let side: &'static str = match positional.first().map(String::as_str).unwrap_or("wstp") {
        "wstp" | "spindle" => "wstp",
        "spindle_tokio" => "spindle_tokio",
        "spindle_tokio_ct" => "spindle_tokio_ct",
        "single" => "single",
        "batching" => "batching",
        "tokio" | "tokio_mt" => "tokio",
        "tokio_ct" => "tokio_ct",
        other => panic!(
            "unknown side {other:?} (wstp, spindle_tokio, single, batching, spindle_tokio_ct, tokio, tokio_ct)"
        ),
    };
    let mode = Mode::parse(positional.get(1).map(String::as_str).unwrap_or("gate"));
    let n = positional
        .get(2)
        .map(|s| s.parse::<usize>().expect("N: a number of fibers"))
        .unwrap_or(DEFAULT_FIBERS);
    let single_threaded = matches!(
        side,
        "single" | "batching" | "spindle_tokio_ct" | "tokio_ct"
    );
    let method = if inside || single_threaded {
        Method::Inside
    } else {
        Method::Outside
    };
    let is_tokio = side.starts_with("tokio");
    let measured = if is_tokio {
        tokio(side, method, mode, n)
    } else {
        spindle(side, method, tracing, mode, n)
    };
    Report {
        side,
        method,
        tracing: if is_tokio {
            None
        } else {
            Some(tracing.unwrap_or_default())
        },
        mode,
        fibers: n,
        baseline: measured.baseline,
        suspended: measured.suspended,
        kept_bytes: measured.kept_bytes,
        spawn_time: measured.spawn_time,
        release_time: measured.release_time,
    }
    .print();
}
