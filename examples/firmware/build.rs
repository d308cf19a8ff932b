//! Puts the memory layout of the QEMU machine the firmware runs on in the
//! linker's search path as `memory.x` (the runtime crate's `link.x`, from
//! cortex-m-rt or riscv-rt, includes it).
//!
//! * thumbv7m / thumbv7em: the layout of the lm3s6965 (256 KiB of flash at
//!   0, 64 KiB of RAM at 0x2000_0000), which QEMU's `lm3s6965evb`
//!   (Cortex-M3) has, and which fits in `mps2-an386` (Cortex-M4, 4 MiB at
//!   each address).
//! * thumbv6m: the nRF51 of QEMU's `microbit` (Cortex-M0): 256 KiB of
//!   flash at 0, 16 KiB of RAM at 0x2000_0000.
//! * riscv32: QEMU's `virt` has only RAM (at 0x8000_0000, where `-bios none
//!   -kernel` loads the image and starts the hart). Its first 256 KiB play
//!   the flash (code and constants) and the next 64 KiB the RAM, as on the
//!   Cortex-M boards, so that `run.sh --sizes` measures the same things;
//!   the 32 KiB heap is riscv-rt's heap region, after `.bss`.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let target = env::var("TARGET").unwrap_or_default();
    let memory = if target.starts_with("riscv32") {
        "MEMORY\n{\n  FLASH : ORIGIN = 0x80000000, LENGTH = 256K\n  RAM : ORIGIN = 0x80040000, LENGTH = 64K\n}\n\
         REGION_ALIAS(\"REGION_TEXT\", FLASH);\nREGION_ALIAS(\"REGION_RODATA\", FLASH);\n\
         REGION_ALIAS(\"REGION_DATA\", RAM);\nREGION_ALIAS(\"REGION_BSS\", RAM);\n\
         REGION_ALIAS(\"REGION_HEAP\", RAM);\nREGION_ALIAS(\"REGION_STACK\", RAM);\n\
         _heap_size = 32K;\n"
            .to_string()
    } else {
        let ram_k = if target.starts_with("thumbv6m") {
            16
        } else {
            64
        };
        format!(
            "MEMORY\n{{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 256K\n  RAM : ORIGIN = 0x20000000, LENGTH = {ram_k}K\n}}\n"
        )
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::write(out.join("memory.x"), memory).expect("write memory.x");
    // cortex-m-rt's `device` feature includes `device.x` (a device crate's
    // default handlers); src/arch/cortex_m.rs names every vector itself.
    fs::write(out.join("device.x"), "").expect("write device.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=build.rs");
}
