//! The memory routines the compiler calls (`memcpy`, `memmove`, `memset`
//! and, on ARM, their `__aeabi_*` forms), byte by byte, for flash.
//!
//! compiler_builtins provides them as weak symbols, written for speed:
//! word-wise copies with unaligned heads and tails, 3.1 KB of the thumbv7m
//! image (`memmove` alone 1.6 KB). This program copies small things (nodes,
//! frames, waiter entries, a line of output), where a byte loop is as good,
//! so it defines the strong symbols itself: about 130 bytes in all. A
//! firmware that copies large buffers would keep compiler_builtins' ones.
//!
//! Every access is volatile: a plain byte loop is what LLVM recognises as a
//! `memcpy` idiom and would turn into a call to the very function it is in.

use core::ptr::{read_volatile, write_volatile};

/// Copies `n` bytes from `s` to `d`, lowest address first.
///
/// # Safety
/// `s` is readable and `d` writable for `n` bytes; if they overlap, `d` is
/// not above `s`.
#[inline(never)]
unsafe fn copy_up(d: *mut u8, s: *const u8, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and both ranges are valid for `n` bytes (the
        // caller's contract); copying upwards, a byte is read before an
        // overlapping lower destination could overwrite it.
        unsafe { write_volatile(d.add(i), read_volatile(s.add(i))) };
        i += 1;
    }
}

/// Copies `n` bytes from `s` to `d`, highest address first.
///
/// # Safety
/// `s` is readable and `d` writable for `n` bytes; if they overlap, `d` is
/// not below `s`.
#[inline(never)]
unsafe fn copy_down(d: *mut u8, s: *const u8, n: usize) {
    let mut i = n;
    while i > 0 {
        i -= 1;
        // SAFETY: `i < n`, and both ranges are valid for `n` bytes (the
        // caller's contract); copying downwards, a byte is read before an
        // overlapping higher destination could overwrite it.
        unsafe { write_volatile(d.add(i), read_volatile(s.add(i))) };
    }
}

/// Sets `n` bytes at `d` to `c`.
///
/// # Safety
/// `d` is writable for `n` bytes.
#[inline(never)]
unsafe fn fill(d: *mut u8, c: u8, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and `d` is writable for `n` bytes.
        unsafe { write_volatile(d.add(i), c) };
        i += 1;
    }
}

/// C's `memmove`: `d` and `s` may overlap.
///
/// # Safety
/// `s` is readable and `d` writable for `n` bytes.
unsafe fn move_bytes(d: *mut u8, s: *const u8, n: usize) {
    // SAFETY: the caller's contract; the direction is the one that reads
    // every overlapping byte before writing it.
    unsafe {
        if (d as usize) <= (s as usize) {
            copy_up(d, s, n)
        } else {
            copy_down(d, s, n)
        }
    }
}

/// C's `memcpy`.
///
/// # Safety
/// C's contract: `s` readable and `d` writable for `n` bytes, no overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract (no overlap).
    unsafe { copy_up(d, s, n) };
    d
}

/// C's `memmove`.
///
/// # Safety
/// C's contract: `s` readable and `d` writable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe { move_bytes(d, s, n) };
    d
}

/// C's `memset`.
///
/// # Safety
/// C's contract: `d` writable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(d: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract; C converts `c` to a byte.
    unsafe { fill(d, c as u8, n) };
    d
}

/// The ARM run-time ABI's forms (what LLVM calls on Cortex-M): the same
/// routines; the `4`/`8` forms only promise an alignment, which a byte
/// loop does not need. Note the argument order of `memset`'s.
#[cfg(target_arch = "arm")]
mod aeabi {
    /// `memcpy` without a result.
    ///
    /// # Safety
    /// As `memcpy`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memcpy(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::copy_up(d, s, n) }
    }

    /// `memcpy`, both pointers 4-aligned.
    ///
    /// # Safety
    /// As `memcpy`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memcpy4(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::copy_up(d, s, n) }
    }

    /// `memcpy`, both pointers 8-aligned.
    ///
    /// # Safety
    /// As `memcpy`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memcpy8(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::copy_up(d, s, n) }
    }

    /// `memmove` without a result.
    ///
    /// # Safety
    /// As `memmove`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memmove(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::move_bytes(d, s, n) }
    }

    /// `memmove`, both pointers 4-aligned.
    ///
    /// # Safety
    /// As `memmove`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memmove4(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::move_bytes(d, s, n) }
    }

    /// `memmove`, both pointers 8-aligned.
    ///
    /// # Safety
    /// As `memmove`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memmove8(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::move_bytes(d, s, n) }
    }

    /// `memset` with the ABI's argument order (length before byte).
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memset(d: *mut u8, n: usize, c: i32) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, c as u8, n) }
    }

    /// `memset`, 4-aligned.
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memset4(d: *mut u8, n: usize, c: i32) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, c as u8, n) }
    }

    /// `memset`, 8-aligned.
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memset8(d: *mut u8, n: usize, c: i32) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, c as u8, n) }
    }

    /// Zeroes `n` bytes.
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memclr(d: *mut u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, 0, n) }
    }

    /// Zeroes `n` bytes, 4-aligned.
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memclr4(d: *mut u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, 0, n) }
    }

    /// Zeroes `n` bytes, 8-aligned.
    ///
    /// # Safety
    /// As `memset`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __aeabi_memclr8(d: *mut u8, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { super::fill(d, 0, n) }
    }
}
