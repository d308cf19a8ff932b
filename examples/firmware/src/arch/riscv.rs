//! The RISC-V glue, for QEMU's `virt` machine in machine mode: riscv-rt's
//! entry, output and exit through semihosting (QEMU's `-semihosting`), the
//! 1 ms tick from the CLINT's machine timer, the software interrupt from
//! the CLINT's `msip`, and riscv-rt's heap region.
//!
//! The CLINT of `virt` (at 0x0200_0000, hart 0): `msip` at +0 (writing 1
//! raises the machine software interrupt, 0 clears it), `mtimecmp` at
//! +0x4000 and `mtime` at +0xBFF8, both 64 bits counting at 10 MHz; the
//! machine timer interrupt is pending while `mtime >= mtimecmp`.

use core::ptr;

use riscv::interrupt::Interrupt;
use riscv_rt::{core_interrupt, entry};
use riscv_semihosting::{debug, hio};

use crate::HEAP;

/// The architecture's name in the program's first and last lines.
pub const NAME: &str = "riscv32";

/// What counts the ticks.
pub const TICK_SOURCE: &str = "the machine timer";

/// The interrupt [`pend_soft_interrupt`] fires.
pub const SOFT_INTERRUPT: &str = "the machine software interrupt";

/// The CLINT's `msip` register of hart 0.
const MSIP: *mut u32 = 0x0200_0000 as *mut u32;
/// The CLINT's `mtimecmp` of hart 0 (low word; the high word follows).
const MTIMECMP: *mut u32 = 0x0200_4000 as *mut u32;

/// `mtime` counts per tick: 1 ms at `virt`'s 10 MHz.
const TICK: u32 = 10_000;

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
        riscv::asm::wfi();
    }
}

/// Sleeps until an interrupt is pending (`wfi` wakes on `mip & mie` even
/// with `mstatus.MIE` clear, which the clock's `wait` relies on).
#[inline]
pub fn wait_for_interrupt() {
    riscv::asm::wfi();
}

/// Pends the software interrupt: its handler runs as soon as the running
/// code (or handler) lets it, and calls [`crate::on_soft_interrupt`].
pub fn pend_soft_interrupt() {
    // SAFETY: `MSIP` is the CLINT register of hart 0 on `virt`, mapped and
    // 4-byte aligned; a volatile write of 1 raises the interrupt.
    unsafe { ptr::write_volatile(MSIP, 1) }
}

/// Moves `mtimecmp` one tick further (the next timer interrupt).
fn next_tick() {
    // SAFETY: `MTIMECMP` and the word after it are hart 0's `mtimecmp` on
    // `virt`, mapped and aligned; only this hart writes them. The high word
    // is set to its maximum first, so that no intermediate value of the
    // 64-bit register lies in the past.
    unsafe {
        let lo = ptr::read_volatile(MTIMECMP);
        let hi = ptr::read_volatile(MTIMECMP.add(1));
        let next = ((u64::from(hi) << 32) | u64::from(lo)) + u64::from(TICK);
        ptr::write_volatile(MTIMECMP.add(1), u32::MAX);
        ptr::write_volatile(MTIMECMP, next as u32);
        ptr::write_volatile(MTIMECMP.add(1), (next >> 32) as u32);
    }
}

#[core_interrupt(Interrupt::MachineTimer)]
fn machine_timer() {
    next_tick();
    crate::on_tick();
}

#[core_interrupt(Interrupt::MachineSoft)]
fn machine_soft() {
    // SAFETY: as in `pend_soft_interrupt`; writing 0 clears the interrupt.
    unsafe { ptr::write_volatile(MSIP, 0) }
    crate::on_soft_interrupt();
}

unsafe extern "C" {
    /// The size of riscv-rt's heap region (`_heap_size` in build.rs's
    /// memory.x): the symbol's address is the size.
    static _heap_size: u8;
}

#[entry]
fn main() -> ! {
    let size = &raw const _heap_size as usize;
    // SAFETY: called once, before any allocation; the region from
    // `heap_start` on is riscv-rt's heap (after `.bss`, before the stack),
    // used by nothing else.
    unsafe { HEAP.init(riscv_rt::heap_start() as usize, size) }
    // mtime starts at 0 when QEMU resets the machine: the first tick at 1 ms.
    // SAFETY: as in `next_tick`; high word first, then the low word.
    unsafe {
        ptr::write_volatile(MTIMECMP.add(1), 0);
        ptr::write_volatile(MTIMECMP, TICK);
    }
    // SAFETY: the handlers above are in place (riscv-rt's trap vector) and
    // touch only what they are documented to; nothing here is in a
    // critical section.
    unsafe {
        riscv::interrupt::enable_interrupt(Interrupt::MachineTimer);
        riscv::interrupt::enable_interrupt(Interrupt::MachineSoft);
        riscv::interrupt::enable();
    }
    exit(crate::run())
}
