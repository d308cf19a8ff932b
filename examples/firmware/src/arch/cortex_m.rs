//! The Cortex-M glue: cortex-m-rt's entry, output and exit through
//! semihosting, the 1 ms tick from SysTick, the software interrupt from
//! PendSV, and the heap in `.uninit`.
//!
//! The software interrupt is the PendSV exception (pended by writing
//! `ICSR.PENDSVSET`), not an NVIC device interrupt: cortex-m-rt lays out
//! device vectors only with a device crate (a PAC), and this firmware runs
//! on three boards without one. PendSV is pended and taken exactly as a
//! software-pended NVIC interrupt would be (it tail-chains after SysTick at
//! the same priority).

use core::mem::MaybeUninit;

use cortex_m::peripheral::SCB;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hio};

use crate::HEAP;

/// The architecture's name in the program's first and last lines.
pub const NAME: &str = "cortex-m";

/// What counts the ticks.
pub const TICK_SOURCE: &str = "SysTick";

/// The interrupt [`pend_soft_interrupt`] fires.
pub const SOFT_INTERRUPT: &str = "PendSV";

/// The heap: 32 KiB, or 8 KiB on the Cortex-M0 (16 KiB of RAM in all).
#[cfg(target_has_atomic = "ptr")]
const HEAP_SIZE: usize = 32 * 1024;
#[cfg(not(target_has_atomic = "ptr"))]
const HEAP_SIZE: usize = 8 * 1024;

/// The SysTick reload: 12,000 core cycles per tick (1 ms at the 12 MHz of
/// QEMU's lm3s6965; a little faster on the other machines).
const RELOAD: u32 = 12_000 - 1;

/// Writes `bytes` to the host's standard output (semihosting).
pub fn write(bytes: &[u8]) {
    if let Ok(mut stdout) = hio::hstdout() {
        let _ = stdout.write_all(bytes);
    }
}

/// Ends the run: QEMU exits with status 0 if `passed`, 1 otherwise.
pub fn exit(passed: bool) -> ! {
    debug::exit(if passed {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}

/// Sleeps until an interrupt is pending (it wakes even with interrupts
/// masked, which the clock's `wait` relies on).
#[inline]
pub fn wait_for_interrupt() {
    cortex_m::asm::wfi();
}

/// Pends the software interrupt: its handler runs as soon as the running
/// code (or handler) lets it, and calls [`crate::on_soft_interrupt`].
pub fn pend_soft_interrupt() {
    SCB::set_pendsv();
}

#[exception]
fn SysTick() {
    crate::on_tick();
}

#[exception]
fn PendSV() {
    crate::on_soft_interrupt();
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
    exit(crate::run())
}
