//! Puts the memory layout of the QEMU machine the firmware runs on in the
//! linker's search path as `memory.x` (cortex-m-rt's `link.x` includes it).
//!
//! * thumbv7m / thumbv7em: the layout of the lm3s6965 (256 KiB of flash at
//!   0, 64 KiB of RAM at 0x2000_0000), which QEMU's `lm3s6965evb`
//!   (Cortex-M3) has, and which fits in `mps2-an386` (Cortex-M4, 4 MiB at
//!   each address).
//! * thumbv6m: the nRF51 of QEMU's `microbit` (Cortex-M0): 256 KiB of
//!   flash at 0, 16 KiB of RAM at 0x2000_0000.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let target = env::var("TARGET").unwrap_or_default();
    let ram_k = if target.starts_with("thumbv6m") {
        16
    } else {
        64
    };
    let memory = format!(
        "MEMORY\n{{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 256K\n  RAM : ORIGIN = 0x20000000, LENGTH = {ram_k}K\n}}\n"
    );
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    fs::write(out.join("memory.x"), memory).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=build.rs");
}
