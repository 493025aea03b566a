//! `shellward-init-static`: pid 1 of a session's sandbox (and the watchdog) as a program of its own, with no C
//! library: the kernel jumps to `_start` below, which reads the initial stack (argument count, arguments,
//! environment), runs [`shellward_init::session`] or the watchdog, and exits with what it returns. Linked statically and without start files (`build.rs`), it maps one small file and
//! runs no loader, no relocation and no libc start-up, so an exec costs little more than the kernel's own work.
//! shellward-exec's build script builds it and embeds it in the executor, which runs it from a sealed memfd.
//!
//! Only this binary is `no_main`: it defines the process entry, a panic handler (the library never panics by design;
//! if it did, the namespace ends with 127) and the few memory functions `core` may call, which a C library would
//! otherwise provide.

#![no_std]
#![no_main]

use core::ffi::CStr;

// The process entry: the kernel starts a static executable at `_start` with the stack pointer at `argc`. Pass that
// address to `start` with the stack aligned as the C ABI wants for a call.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".globl _start",
    "_start:",
    "xor ebp, ebp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {start}",
    "ud2",
    start = sym start,
);

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".globl _start",
    "_start:",
    "mov x29, xzr",
    "mov x30, xzr",
    "mov x0, sp",
    "and sp, x0, #-16",
    "bl {start}",
    "brk #1",
    start = sym start,
);

/// Reads the initial stack and runs the init.
///
/// # Safety
/// Called once, by `_start`, with the stack pointer the kernel started the process with.
unsafe extern "C" fn start(stack: *const usize) -> ! {
    // SAFETY: the kernel's initial stack is `argc`, `argc` argument pointers, NULL, the environment pointers, NULL.
    let code = unsafe {
        let argc = *stack;
        let argv = stack.add(1) as *const *const u8;
        let envp = argv.add(argc + 1);
        let first = (argc > 1).then(|| CStr::from_ptr((*argv.add(1)).cast()));
        if first.map(CStr::to_bytes) == Some(shellward_init::SESSION_ARG.as_bytes()) {
            shellward_init::session()
        } else if first.map(CStr::to_bytes) == Some(shellward_init::WATCHDOG_ARG.as_bytes()) {
            shellward_init::watchdog::run(argv.add(2))
        } else {
            let stderr = rustix::fd::BorrowedFd::borrow_raw(2);
            let _ = rustix::io::write(
                stderr,
                b"shellward-init is started by shellward's executor as pid 1 of a session's sandbox; \
                  it is not run by hand.\n",
            );
            2
        }
    };
    shellward_init::exit(code)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    shellward_init::exit(127)
}

// The memory functions `core` and the compiler may call (copies of arrays, zeroed structures). A C library provides
// them elsewhere; here they are byte loops through volatile accesses, so the compiler cannot turn them back into
// calls to themselves. The init moves a few hundred bytes in its life: speed does not matter.

/// `memcpy`.
///
/// # Safety
/// As C's: `n` bytes readable at `src`, writable at `dst`, not overlapping.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: as the caller guarantees; the regions do not overlap.
    unsafe {
        for i in 0..n {
            dst.add(i).write_volatile(src.add(i).read_volatile());
        }
    }
    dst
}

/// `memmove`.
///
/// # Safety
/// As C's: `n` bytes readable at `src` and writable at `dst`; the regions may overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: as the caller guarantees; copying backwards when `dst` is above `src` keeps overlapping bytes intact.
    unsafe {
        if (dst as usize) <= (src as usize) {
            for i in 0..n {
                dst.add(i).write_volatile(src.add(i).read_volatile());
            }
        } else {
            for i in (0..n).rev() {
                dst.add(i).write_volatile(src.add(i).read_volatile());
            }
        }
    }
    dst
}

/// `memset`.
///
/// # Safety
/// As C's: `n` bytes writable at `dst`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: as the caller guarantees.
    unsafe {
        for i in 0..n {
            dst.add(i).write_volatile(c as u8);
        }
    }
    dst
}

/// `memcmp`.
///
/// # Safety
/// As C's: `n` bytes readable at `a` and `b`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: as the caller guarantees.
    unsafe {
        for i in 0..n {
            let (x, y) = (a.add(i).read_volatile(), b.add(i).read_volatile());
            if x != y {
                return i32::from(x) - i32::from(y);
            }
        }
    }
    0
}

/// `strlen` (what `CStr::from_ptr` measures with).
///
/// # Safety
/// As C's: `s` points to a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn strlen(s: *const u8) -> usize {
    let mut n = 0;
    // SAFETY: the string is NUL-terminated (caller), so every byte up to the NUL is readable.
    unsafe {
        while s.add(n).read_volatile() != 0 {
            n += 1;
        }
    }
    n
}

/// `bcmp`: zero when equal, like `memcmp`.
///
/// # Safety
/// As C's: `n` bytes readable at `a` and `b`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: as the caller guarantees.
    unsafe { memcmp(a, b, n) }
}
