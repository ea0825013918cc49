//! What memsup's own process has used so far, from the kernel's resource accounting.

use crate::trace::format::RecorderCosts;

/// memsup's peak resident set and the CPU time of all its threads, as `getrusage` tells.
pub fn own_costs() -> RecorderCosts {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let nanoseconds =
        |time: libc::timeval| time.tv_sec as u64 * 1_000_000_000 + time.tv_usec as u64 * 1_000;
    RecorderCosts {
        // ru_maxrss is in KiB on Linux.
        peak_rss_bytes: usage.ru_maxrss as u64 * 1024,
        cpu_ns: nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_covers_memory_this_process_touched() {
        let bytes = vec![1u8; 64 << 20];
        std::hint::black_box(&bytes);
        let costs = own_costs();
        assert!(costs.peak_rss_bytes >= 64 << 20, "{costs:?}");
        assert!(costs.cpu_ns > 0);
    }
}
