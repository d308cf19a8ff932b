//! An IO program on a Cortex-M, without std: Spindle's `exec-single` driven
//! by a SysTick clock, output through semihosting, run under QEMU by
//! `run.sh`.
//!
//! The program: two fibers hand a value over through a `Deferred` (the
//! producer sleeps 20 ms first, on SysTick time), a `Future` is awaited
//! with `IO::from_future` and woken from the SysTick interrupt handler, an
//! error is recovered with `handle_error_with`, sixteen fibers are left waiting on a
//! `Deferred` to measure the heap cost of a suspended fiber, and a
//! deliberate failure three calls deep is printed with its trace (cached
//! tracing, when compiled in). It exits through semihosting with status 0
//! when every check passed, 1 otherwise.
//!
//! Output goes through a small formatter of its own (text and `u32`s)
//! rather than `core::fmt`, and errors are static strings: on a
//! microcontroller the formatting machinery would cost more flash than
//! the runtime.

#![no_std]
#![no_main]

extern crate alloc;

use core::cell::RefCell;
use core::future::Future;
use core::mem::MaybeUninit;
use core::pin::Pin;
use core::sync::atomic::{AtomicU32, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::debug;
use embedded_alloc::LlffHeap as Heap;
#[cfg(feature = "tracing")]
use spindle_core::FiberConfig;
use spindle_core::{Deferred, FiberHandle, IO, Outcome, Traced};
use spindle_exec_single::{Builder, Clock};

/// Output through semihosting without `core::fmt` (whose formatting
/// machinery would be most of a small image): text and `u32`s only.
mod out {
    /// A piece of a line.
    pub trait Piece {
        fn put(&self, line: &mut Line);
    }
    impl Piece for &str {
        fn put(&self, line: &mut Line) {
            line.push(self.as_bytes());
        }
    }
    impl Piece for u32 {
        fn put(&self, line: &mut Line) {
            let mut digits = [0u8; 10];
            let mut i = digits.len();
            let mut n = *self;
            loop {
                i -= 1;
                digits[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            line.push(&digits[i..]);
        }
    }

    /// A line being built (longer lines are cut).
    pub struct Line {
        buf: [u8; 160],
        len: usize,
    }

    impl Line {
        pub fn new() -> Self {
            Line {
                buf: [0; 160],
                len: 0,
            }
        }
        fn push(&mut self, bytes: &[u8]) {
            let n = bytes.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
        }
        pub fn print(mut self) {
            self.push(b"\n");
            if let Ok(mut stdout) = cortex_m_semihosting::hio::hstdout() {
                let _ = stdout.write_all(&self.buf[..self.len]);
            }
        }
    }
}

/// Prints its pieces (text and `u32`s) as one line.
macro_rules! say {
    ($($piece:expr),* $(,)?) => {{
        let mut line = out::Line::new();
        $( out::Piece::put(&$piece, &mut line); )*
        line.print();
    }};
}

#[global_allocator]
static HEAP: Heap = Heap::empty();

/// The heap: 32 KiB, or 8 KiB on the Cortex-M0 (16 KiB of RAM in all).
#[cfg(target_has_atomic = "ptr")]
const HEAP_SIZE: usize = 32 * 1024;
#[cfg(not(target_has_atomic = "ptr"))]
const HEAP_SIZE: usize = 8 * 1024;

/// Trace events each fiber keeps with cached tracing: 8 (the default is
/// 16) halves each tracing fiber's ring, to 64 bytes on these targets, and
/// still holds the failure's last six events that `report` checks.
#[cfg(feature = "tracing")]
const TRACE_EVENTS: usize = 8;

/// SysTick interrupts since boot (written only by the SysTick handler).
static TICKS: AtomicU32 = AtomicU32::new(0);

/// The SysTick reload: 12,000 core cycles per tick (1 ms at the 12 MHz of
/// QEMU's lm3s6965; a little faster on the other machines).
const RELOAD: u32 = 12_000 - 1;

/// Highest heap use seen at the checkpoints (`checkpoint`).
static PEAK: AtomicU32 = AtomicU32::new(0);

/// The waker of the future waiting for a tick ([`TickAt`]), if any: left
/// by `poll`, taken and woken by the SysTick handler.
static TICK_WAKER: cortex_m::interrupt::Mutex<RefCell<Option<Waker>>> =
    cortex_m::interrupt::Mutex::new(RefCell::new(None));

#[exception]
fn SysTick() {
    // One writer (this handler): a load and a store, no read-modify-write
    // (which thumbv6m does not have).
    TICKS.store(
        TICKS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
    // Wake the waiting future from the interrupt handler: the fiber is
    // queued on exec-single's remote queue, and `wfi` returns.
    let waker = cortex_m::interrupt::free(|cs| TICK_WAKER.borrow(cs).borrow_mut().take());
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A future that is ready once SysTick has counted to its tick: each poll
/// before that leaves its waker for the handler (a device driver's future
/// has this shape).
struct TickAt(u32);

impl Future for TickAt {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        cortex_m::interrupt::free(|cs| {
            let now = TICKS.load(Ordering::Relaxed);
            if now >= self.0 {
                Poll::Ready(now)
            } else {
                *TICK_WAKER.borrow(cs).borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// exec-single's clock: SysTick ticks as milliseconds; waiting is `wfi`
/// (the next SysTick interrupt, or any other, wakes the core).
struct SysTickClock;

impl Clock for SysTickClock {
    fn now(&self) -> Duration {
        // 32-bit arithmetic: `Duration::from_millis` divides a u64, which
        // these cores do in software.
        let ms = TICKS.load(Ordering::Relaxed);
        Duration::new(u64::from(ms / 1000), (ms % 1000) * 1_000_000)
    }

    fn wait(&self, _deadline: Option<Duration>) {
        cortex_m::asm::wfi();
    }
}

/// Errors are static messages: no formatting machinery in the image.
type Error = &'static str;
type Io<A> = IO<A, Error>;

/// Records the heap in use (for the peak), and returns it.
fn checkpoint() -> u32 {
    let used = HEAP.used() as u32;
    if used > PEAK.load(Ordering::Relaxed) {
        PEAK.store(used, Ordering::Relaxed);
    }
    used
}

/// Two fibers: the producer sleeps 20 ms (SysTick), then completes the
/// `Deferred` the consumer waits on; the main fiber joins both.
fn handshake() -> Io<u32> {
    let ready = Deferred::<u32>::new();
    let (tx, rx) = (ready.clone(), ready);
    // The clock is read before the producer starts sleeping: the wait the
    // consumer sees is then at least the 20 ms of the sleep.
    IO::monotonic().flat_map(move |start| {
        let producer: Io<()> = IO::sleep(Duration::from_millis(20))
            .flat_map(move |_| tx.complete::<Error>(42))
            .void();
        let consumer: Io<u32> = rx.get().flat_map(move |v| {
            IO::monotonic().map(move |end| {
                let waited = millis(end) - millis(start);
                say!("handshake: consumer got ", v, " after ", waited, " ms");
                if waited >= 20 { v } else { 0 }
            })
        });
        producer
            .start()
            .flat_map(|producer: FiberHandle<(), Error>| {
                consumer
                    .start()
                    .flat_map(move |consumer: FiberHandle<u32, Error>| {
                        producer
                            .join_with_never()
                            .flat_map(move |_| consumer.join_with_never())
                    })
            })
    })
}

/// Milliseconds of a clock reading (no 128-bit arithmetic).
fn millis(d: Duration) -> u32 {
    (d.as_secs() as u32) * 1000 + d.subsec_millis()
}

/// A future awaited by a fiber (`IO::from_future_with`, built when the step
/// runs), woken from the SysTick interrupt 10 ms later.
fn awaited_future() -> Io<u32> {
    IO::delay(|| TICKS.load(Ordering::Relaxed)).flat_map(|start| {
        IO::from_future_with(move || TickAt(start + 10)).map(move |end| {
            let waited = end - start;
            say!("future: woken by SysTick after ", waited, " ms");
            waited
        })
    })
}

/// An error recovered by `handle_error_with`.
fn recovered() -> Io<u32> {
    IO::<u32, Error>::raise_error("sensor timeout")
        .handle_error_with(|e| IO::delay(move || if e == "sensor timeout" { 7 } else { 0 }))
}

/// A deliberate failure three calls deep (`read` → `scale` → `check`).
fn read(raw: u32) -> Io<u32> {
    IO::delay(move || raw * 2).flat_map(scale)
}

fn scale(value: u32) -> Io<u32> {
    IO::delay(move || value + 1).flat_map(check)
}

fn check(value: u32) -> Io<u32> {
    IO::delay(move || value).flat_map(|v| {
        if v > 100 {
            IO::raise_error("reading out of range")
        } else {
            IO::pure(v)
        }
    })
}

/// Starts `n` fibers that wait on `gate` (their handles are dropped: the
/// fibers run on, as Cats Effect's do).
fn start_waiters(n: u32, gate: Deferred<()>) -> Io<()> {
    if n == 0 {
        IO::unit()
    } else {
        let next = gate.clone();
        gate.get::<Error>()
            .start()
            .flat_map(move |_| start_waiters(n - 1, next))
    }
}

/// The heap cost of one suspended fiber: `n` fibers started and left
/// waiting on one `Deferred`; heap in use after (once they all wait),
/// minus before, over `n`. Then they are released and end.
fn heap_per_suspended_fiber(n: u32) -> Io<u32> {
    let gate = Deferred::<()>::new();
    let release = gate.clone();
    IO::delay(checkpoint).flat_map(move |before| {
        start_waiters(n, gate)
            // Let them all run to their wait.
            .product_r(IO::cede())
            .flat_map(move |_| {
                let after = checkpoint();
                release
                    .complete::<Error>(())
                    .product_r(IO::cede())
                    .map_to((after - before) / n)
            })
    })
}

/// Prints the deliberate failure and its trace; whether both are as
/// expected.
fn report(failure: Traced<Error>) -> bool {
    say!("failure: ", failure.error);
    // Most recent first, as every trace is printed.
    for event in failure.trace.events().iter().rev() {
        let l = event.location();
        say!("  at ", event.op().name(), " @ ", l.file(), ":", l.line());
    }
    // The fiber's last events (it traced the whole program): they end with
    // the three calls that led to the failure, all in this file.
    let names = failure.trace.op_names();
    failure.error == "reading out of range"
        && (cfg!(not(feature = "tracing"))
            || (names.len() >= 6
                && names[names.len() - 6..]
                    == [
                        "flat_map", "delay", "flat_map", "delay", "flat_map", "delay",
                    ]
                && failure
                    .trace
                    .events()
                    .iter()
                    .all(|e| e.location().file().ends_with("src/main.rs"))))
}

/// The whole program: `Ok` when every check passed. The last step fails on
/// purpose; its error and trace are checked, so the program's own error
/// type is `Traced`.
fn program() -> IO<bool, Traced<Error>> {
    let checks: Io<bool> = handshake().flat_map(|v| {
        awaited_future().flat_map(move |waited| {
            recovered().flat_map(move |r| {
                say!("recovered: ", r);
                heap_per_suspended_fiber(16).map(move |bytes| {
                    say!("heap per suspended fiber: ", bytes, " bytes");
                    // The budget holds with tracing compiled out; a fiber
                    // that traces also has its ring of events.
                    v == 42
                        && waited >= 10
                        && r == 7
                        && bytes > 0
                        && (cfg!(feature = "tracing") || bytes < 256)
                })
            })
        })
    });
    checks.trace_errors().flat_map(|ok| {
        read(60)
            .trace_errors()
            .redeem(move |failure| ok && report(failure), |_| false)
    })
}

/// The executor: SysTick time; with cached tracing, rings of
/// [`TRACE_EVENTS`] events.
fn executor() -> Result<spindle_exec_single::SingleThreaded<SysTickClock>, Error> {
    let builder = Builder::with_clock(SysTickClock);
    #[cfg(feature = "tracing")]
    let builder = builder.fiber_config(
        FiberConfig::builder()
            .trace_capacity(TRACE_EVENTS)
            .build()
            .map_err(|_| "the fiber configuration is invalid")?,
    );
    builder
        .build()
        .map_err(|_| "the executor could not be built")
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Neither the panic's location nor its message: reading either keeps,
    // for every panic site in the image, its location record, file name
    // and message, and core's formatting code behind them (6 KB of flash).
    say!("panic");
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

#[entry]
fn main() -> ! {
    {
        // In `.uninit` (cortex-m-rt does not zero it), so that `.bss`
        // counts only the program's own statics.
        #[unsafe(link_section = ".uninit.HEAP")]
        static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_SIZE] = [MaybeUninit::uninit(); HEAP_SIZE];
        // SAFETY: called once, before any allocation; the buffer is used
        // by nothing else.
        unsafe { HEAP.init(&raw mut HEAP_MEM as usize, HEAP_SIZE) }
    }
    let mut core = cortex_m::Peripherals::take().expect("the core peripherals, once");
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(RELOAD);
    core.SYST.clear_current();
    core.SYST.enable_counter();
    core.SYST.enable_interrupt();

    say!("spindle on cortex-m: start");
    let passed = match executor().and_then(|rt| {
        rt.block_on(program())
            .map_err(|_| "block_on refused the program")
    }) {
        Err(why) => {
            say!("no run: ", why);
            false
        }
        Ok(Outcome::Succeeded(passed)) => passed,
        Ok(Outcome::Errored(e)) => {
            say!("program failed: ", e.error);
            false
        }
        Ok(Outcome::Canceled) => {
            say!("program canceled");
            false
        }
        Ok(Outcome::Panicked(p)) => {
            say!("program panicked: ", p.message());
            false
        }
    };
    checkpoint();
    say!("heap peak: ", PEAK.load(Ordering::Relaxed), " bytes");
    say!(
        "spindle on cortex-m: ",
        if passed { "ok" } else { "FAILED" }
    );
    debug::exit(if passed {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}
