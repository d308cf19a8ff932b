//! An IO program on a Cortex-M, without std: Spindle's `exec-single` driven
//! by a SysTick clock, output through semihosting, run under QEMU by
//! `run.sh`.
//!
//! The program: two fibers hand a value over through a `Deferred` (one
//! sleeps first), four fibers sleep in parallel, an error is recovered with
//! `handle_error_with`, a deliberate failure is printed with its trace
//! (cached tracing, when compiled in), and the heap cost of a suspended
//! fiber is measured. It exits through semihosting with status 0 when every
//! check passed, 1 otherwise.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use embedded_alloc::LlffHeap as Heap;
use exec_single::{Clock, SingleThreaded};
use io_core::{Deferred, FiberHandle, IO, Outcome};

#[global_allocator]
static HEAP: Heap = Heap::empty();

/// The heap: 32 KiB, or 8 KiB on the Cortex-M0 (16 KiB of RAM in all).
#[cfg(target_has_atomic = "ptr")]
const HEAP_SIZE: usize = 32 * 1024;
#[cfg(not(target_has_atomic = "ptr"))]
const HEAP_SIZE: usize = 8 * 1024;

/// SysTick interrupts since boot (written only by the SysTick handler).
static TICKS: AtomicU32 = AtomicU32::new(0);

/// The SysTick reload: 12,000 core cycles per tick (1 ms at the 12 MHz of
/// QEMU's lm3s6965; a little faster on the other machines).
const RELOAD: u32 = 12_000 - 1;

/// Highest heap use seen at the checkpoints (`checkpoint`).
static PEAK: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // One writer (this handler): a load and a store, no read-modify-write
    // (which thumbv6m does not have).
    TICKS.store(
        TICKS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
}

/// exec-single's clock: SysTick ticks as milliseconds; waiting is `wfi`
/// (the next SysTick interrupt, or any other, wakes the core).
struct SysTickClock;

impl Clock for SysTickClock {
    fn now(&self) -> Duration {
        Duration::from_millis(u64::from(TICKS.load(Ordering::Relaxed)))
    }

    fn wait(&self, _deadline: Option<Duration>) {
        cortex_m::asm::wfi();
    }
}

type Error = String;
type Io<A> = IO<A, Error>;

/// Records the heap in use (for the peak), and returns it.
fn checkpoint() -> u32 {
    let used = HEAP.used() as u32;
    if used > PEAK.load(Ordering::Relaxed) {
        PEAK.store(used, Ordering::Relaxed);
    }
    used
}

/// Two fibers: the producer sleeps, then completes the `Deferred` the
/// consumer waits on.
fn handshake() -> Io<u32> {
    let ready = Deferred::<u32>::new();
    let (tx, rx) = (ready.clone(), ready);
    let producer: Io<()> = IO::sleep(Duration::from_millis(20))
        .flat_map(move |_| tx.complete::<Error>(42))
        .void();
    let consumer: Io<u32> = rx.get().map(|v| {
        hprintln!("handshake: consumer got {}", v);
        v
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
}

/// Four fibers sleeping 10 to 40 ms in parallel: about 40 ms in all.
fn parallel_sleeps() -> Io<(u32, u64)> {
    IO::monotonic().flat_map(|start| {
        IO::par_traverse((1..=4u32).collect(), |i| {
            IO::sleep(Duration::from_millis(u64::from(i) * 10)).as_(i)
        })
        .flat_map(move |done| {
            IO::monotonic().map(move |end| (done.iter().sum(), (end - start).as_millis() as u64))
        })
    })
}

/// An error recovered by `handle_error_with`.
fn recovered() -> Io<u32> {
    IO::<u32, Error>::raise_error(String::from("sensor timeout"))
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
            IO::raise_error(alloc::format!("reading {} out of range", v))
        } else {
            IO::pure(v)
        }
    })
}

/// The heap cost of one suspended fiber: `n` fibers started and left
/// waiting on one `Deferred`; heap in use after, minus before, over `n`.
fn heap_per_suspended_fiber(n: u32) -> Io<u32> {
    let gate = Deferred::<()>::new();
    let release = gate.clone();
    IO::delay(checkpoint).flat_map(move |before| {
        IO::traverse((0..n).collect(), move |_| gate.get::<Error>().start())
            // Let them all run to their wait.
            .flat_map(|fibers| IO::cede().as_(fibers))
            .flat_map(move |fibers: Vec<FiberHandle<(), Error>>| {
                let after = checkpoint();
                release
                    .complete::<Error>(())
                    .flat_map(move |_| IO::traverse(fibers, |f| f.join_with_never()))
                    .map(move |_| (after - before) / n)
            })
    })
}

fn program() -> Io<bool> {
    let mut ok = true;
    handshake().flat_map(move |v| {
        ok &= v == 42;
        parallel_sleeps().flat_map(move |(sum, ms)| {
            hprintln!("parallel: 4 fibers done, sum {}, in {} ms", sum, ms);
            ok &= sum == 10 && ms < 100;
            recovered().flat_map(move |r| {
                hprintln!("recovered: {}", r);
                ok &= r == 7;
                read(60)
                    .trace_errors()
                    .attempt()
                    // `attempt` never fails: back to the program's error type.
                    .map_error(|traced| traced.error)
                    .flat_map(move |result| {
                        match &result {
                            Err(failure) => {
                                hprintln!("failure: {}", failure.error);
                                for event in failure.trace.events() {
                                    let l = event.location();
                                    hprintln!(
                                        "  at {} @ {}:{}",
                                        event.op().name(),
                                        l.file(),
                                        l.line()
                                    );
                                }
                                ok &= failure.error == "reading 121 out of range";
                                // The fiber's last events (it traced the whole
                                // program): they end with the three calls that
                                // led to the failure, all in this file.
                                let names = failure.trace.op_names();
                                ok &=
                                    cfg!(not(feature = "tracing"))
                                        || (names.len() >= 6
                                            && names[names.len() - 6..]
                                                == [
                                                    "flat_map", "delay", "flat_map", "delay",
                                                    "flat_map", "delay",
                                                ]
                                            && failure.trace.events().iter().all(|e| {
                                                e.location().file().ends_with("src/main.rs")
                                            }));
                            }
                            Ok(v) => {
                                hprintln!("unexpected success: {}", v);
                                ok = false;
                            }
                        }
                        heap_per_suspended_fiber(16).map(move |bytes| {
                            hprintln!("heap per suspended fiber: {} bytes", bytes);
                            // The budget holds with tracing compiled out; a
                            // fiber that traces also has its ring of events.
                            ok && bytes > 0 && (cfg!(feature = "tracing") || bytes < 256)
                        })
                    })
            })
        })
    })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
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

    hprintln!("spindle on cortex-m: start");
    let mut rt = SingleThreaded::with_clock(SysTickClock);
    let passed = match rt.block_on(program()) {
        Outcome::Succeeded(passed) => passed,
        other => {
            hprintln!("program ended: {:?}", other.map(|_| ()));
            false
        }
    };
    checkpoint();
    hprintln!("heap peak: {} bytes", PEAK.load(Ordering::Relaxed));
    hprintln!(
        "spindle on cortex-m: {}",
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
