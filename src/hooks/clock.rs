//! The TSC the hooks stamp records with, and its map to CLOCK_MONOTONIC.

use std::time::Duration;

use crate::events::monotonic_ns;

/// The time-stamp counter, as the hooks read it.
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc reads a counter; it has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// A linear map from TSC ticks to CLOCK_MONOTONIC nanoseconds, measured at creation.
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    tsc_origin: u64,
    ns_origin: u64,
    ticks_per_ns: f64,
}

/// How long the calibration watches both clocks.
const CALIBRATION: Duration = Duration::from_millis(15);

impl TscClock {
    /// Calibrates over about 15 ms.
    pub fn new() -> TscClock {
        let (tsc_origin, ns_origin) = paired_reading();
        std::thread::sleep(CALIBRATION);
        let (tsc_end, ns_end) = paired_reading();
        let ticks = tsc_end.wrapping_sub(tsc_origin) as f64;
        let ns = ns_end.saturating_sub(ns_origin).max(1) as f64;
        TscClock {
            tsc_origin,
            ns_origin,
            ticks_per_ns: (ticks / ns).max(f64::MIN_POSITIVE),
        }
    }

    pub fn ticks_per_second(&self) -> f64 {
        self.ticks_per_ns * 1e9
    }

    /// The CLOCK_MONOTONIC time of a TSC reading (before the calibration too).
    pub fn to_monotonic_ns(&self, tsc: u64) -> u64 {
        let ticks = tsc.wrapping_sub(self.tsc_origin) as i64 as f64;
        let ns = self.ns_origin as f64 + ticks / self.ticks_per_ns;
        ns.max(0.0) as u64
    }

    /// Nanoseconds in `ticks` TSC ticks.
    pub fn nanoseconds(&self, ticks: u64) -> u64 {
        (ticks as f64 / self.ticks_per_ns) as u64
    }

    /// TSC ticks in `duration`.
    pub fn ticks(&self, duration: Duration) -> u64 {
        (duration.as_nanos() as f64 * self.ticks_per_ns) as u64
    }
}

impl Default for TscClock {
    fn default() -> Self {
        TscClock::new()
    }
}

/// A TSC reading and a monotonic reading taken as close together as possible: the TSC
/// midway between two TSC readings around the clock call, from the tightest of a few
/// tries (a preemption inside one try only widens that try).
fn paired_reading() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let before = rdtsc();
        let ns = monotonic_ns();
        let after = rdtsc();
        let width = after.wrapping_sub(before);
        if width < best.0 {
            best = (width, before + width / 2, ns);
        }
    }
    (best.1, best.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_tsc_onto_the_monotonic_clock() {
        let clock = TscClock::new();
        // Any x86-64 TSC of the last decades runs between 0.5 and 10 GHz.
        let rate = clock.ticks_per_second();
        assert!((0.5e9..10e9).contains(&rate), "{rate} ticks per second");
        std::thread::sleep(Duration::from_millis(50));
        let (tsc, ns) = paired_reading();
        let mapped = clock.to_monotonic_ns(tsc);
        // 50 ms after a 15 ms calibration: a 10 % rate error would be 5 ms off; a wrong
        // formula (an offset left out, a rate inverted) is off by far more. Noise (a
        // preemption between the paired reads) stays well under 2 ms.
        let error = mapped.abs_diff(ns);
        assert!(
            error < 2_000_000,
            "mapped {mapped} against {ns}: {error} ns apart"
        );
        assert_eq!(clock.ticks(Duration::from_secs(1)), rate as u64);
    }
}
