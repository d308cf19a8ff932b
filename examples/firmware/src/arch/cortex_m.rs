//! The Cortex-M glue: cortex-m-rt's entry, output and exit through
//! semihosting, the 1 ms tick from SysTick, the software interrupt from
//! the NVIC, and the heap in `.uninit`.
//!
//! The software interrupt is a device interrupt, IRQ 20, pended through the
//! NVIC (`NVIC::pend`, a write to its set-pending register) as a peripheral
//! would raise it. No device crate (PAC) covers the three boards, so this
//! file lays out the device part of the vector table itself
//! (`__INTERRUPTS`, with cortex-m-rt's `device` feature; build.rs writes
//! the empty `device.x` that feature includes): IRQs 0 to 19 go to
//! cortex-m-rt's `DefaultHandler`, IRQ 20 to `soft_irq`. IRQ 20 is SWI0,
//! an interrupt for software, on the nRF51 of `microbit`; on `lm3s6965evb`
//! and `mps2-an386` it belongs to a peripheral whose interrupts the
//! firmware never enables, so only the pend raises it. At the reset priority
//! (0, as SysTick) it never preempts the tick handler: it tail-chains
//! after it.

use core::mem::MaybeUninit;

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::NVIC;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hio};

use crate::HEAP;

/// The architecture's name in the program's first and last lines.
pub const NAME: &str = "cortex-m";

/// What counts the ticks.
pub const TICK_SOURCE: &str = "SysTick";

/// The interrupt [`pend_soft_interrupt`] fires.
pub const SOFT_INTERRUPT: &str = "NVIC IRQ 20";

/// The device interrupt that plays the software interrupt (module doc).
#[derive(Clone, Copy)]
struct SoftIrq;

// SAFETY: 20 is a valid device interrupt number on the three boards (the
// nRF51 has 32, the lm3s6965 and the MPS2 more), and `__INTERRUPTS` below
// has an entry for it.
unsafe impl InterruptNumber for SoftIrq {
    fn number(self) -> u16 {
        20
    }
}

unsafe extern "C" {
    /// cortex-m-rt's handler of interrupts nobody handles (its link.x
    /// provides the symbol).
    fn DefaultHandler();
}

/// The device part of the vector table, up to IRQ 20 (module doc).
#[unsafe(link_section = ".vector_table.interrupts")]
#[unsafe(no_mangle)]
static __INTERRUPTS: [unsafe extern "C" fn(); 21] = {
    let mut vectors = [DefaultHandler as unsafe extern "C" fn(); 21];
    vectors[20] = soft_irq;
    vectors
};

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
    NVIC::pend(SoftIrq);
}

#[exception]
fn SysTick() {
    crate::on_tick();
}

/// IRQ 20's handler.
unsafe extern "C" fn soft_irq() {
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
    // SAFETY: IRQ 20's handler is in the vector table and takes no lock the
    // code it interrupts may hold (only critical sections).
    unsafe { NVIC::unmask(SoftIrq) }
    exit(crate::run())
}
