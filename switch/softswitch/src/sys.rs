//! Operating-system helpers shared by the data plane and the fast path:
//! clocks and shared memory mappings of kernel objects.

use std::io;

/// Monotonic clock, ns (intervals, pacing).
pub fn now_mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `deadline_ns` (CLOCK_MONOTONIC), or less if interrupted.
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as i64,
        tv_nsec: (deadline_ns % 1_000_000_000) as i64,
    };
    // SAFETY: valid timespec; a NULL remainder is allowed with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Wall clock, ns since the Unix epoch (packet timestamps, quality registers).
pub fn now_real_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock ms mod 2^32: the time base of idle timers and `rtp_last_seen`.
pub fn now_ms() -> u32 {
    (now_real_ns() / 1_000_000) as u32
}

/// Maps `len` bytes of what `fd` exposes (a packet ring, a BPF array), shared
/// with the kernel, read-write.
pub fn map_shared(fd: libc::c_int, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping of the kernel object behind fd; no Rust memory aliased.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}
