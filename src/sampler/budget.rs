//! How often smaps_rollup may be read: its cost grows with the resident memory it walks
//! (about 15 ms per GiB), so its interval follows the measured CPU time of the reads, so that
//! the sampler as a whole stays within `BUDGET` of one core.

use std::time::Duration;

/// Share of one core the sampler may use, status reads included.
pub const BUDGET: f64 = 0.05;
/// What the interval aims at: a tenth below the budget, since it adapts only after a dearer
/// read and would otherwise sit on the line (measured: 5.01–5.03 % in 2 runs of 18).
const TARGET: f64 = BUDGET * 0.9;
/// Share always left to smaps_rollup, even when status reads alone use up `BUDGET` (many
/// processes): residency then degrades to a slow PSS timeline rather than none.
const ROLLUP_FLOOR: f64 = 0.01;
pub const FIRST_INTERVAL: Duration = Duration::from_millis(100);
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);
pub const MAX_INTERVAL: Duration = Duration::from_secs(10);

/// CPU time of the calling thread, in ns: what the sampler itself costs, whatever the
/// load of the machine.
pub fn thread_cpu_ns() -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) } != 0 {
        return 0;
    }
    time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
}

/// The adaptive smaps_rollup interval.
#[derive(Debug)]
pub struct RollupRate {
    status_interval: Duration,
    /// Smoothed CPU ns of a status round and of a rollup round (over every process).
    status_cost: f64,
    rollup_cost: f64,
    interval: Duration,
}

impl RollupRate {
    pub fn new(status_interval: Duration) -> RollupRate {
        RollupRate {
            status_interval,
            status_cost: 0.0,
            rollup_cost: 0.0,
            interval: FIRST_INTERVAL,
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn status_round_cost(&mut self, cpu_ns: u64) {
        self.status_cost = smooth(self.status_cost, cpu_ns as f64);
    }

    /// Takes the cost of a rollup round; returns the interval until the next one.
    pub fn rollup_round_cost(&mut self, cpu_ns: u64) -> Duration {
        let cost = cpu_ns as f64;
        // Back off at once when a round costs more (memory grew), speed up gradually.
        self.rollup_cost = smooth(self.rollup_cost, cost).max(cost);
        let status_share = self.status_cost / self.status_interval.as_nanos().max(1) as f64;
        let share = (TARGET - status_share).max(ROLLUP_FLOOR);
        let wanted = Duration::from_nanos((self.rollup_cost / share) as u64);
        self.interval = wanted.clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.interval
    }
}

/// Exponential smoothing with weight 1/2 on the newest value (the first value as is).
fn smooth(old: f64, new: f64) -> f64 {
    if old == 0.0 {
        new
    } else {
        (old + new) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `interval` is what `cost_ms` of CPU a round takes at `share` of a core.
    fn about(interval: Duration, cost_ms: f64, share: f64) -> bool {
        let expected = Duration::from_secs_f64(cost_ms / 1000.0 / share);
        interval.abs_diff(expected) < Duration::from_micros(1)
    }

    #[test]
    fn the_interval_follows_the_cost_within_bounds() {
        let mut rate = RollupRate::new(Duration::from_millis(20));
        assert_eq!(rate.interval(), FIRST_INTERVAL);
        // Cheap reads: as fast as allowed.
        assert_eq!(rate.rollup_round_cost(100_000), MIN_INTERVAL);
        // 10 ms a round at 4.5 %: every 222 ms, at once.
        assert!(about(rate.rollup_round_cost(10_000_000), 10.0, TARGET));
        // Cheaper again: halfway back, not all the way.
        assert!(rate.rollup_round_cost(1_000_000) > Duration::from_millis(100));
        // Status reads take 4 % of the core: the 1 % floor is left, 2 ms rounds every 200 ms.
        let mut rate = RollupRate::new(Duration::from_millis(20));
        rate.status_round_cost(800_000);
        assert!(about(rate.rollup_round_cost(2_000_000), 2.0, ROLLUP_FLOOR));
        // 1 s a round (a huge process): never slower than the longest interval.
        assert_eq!(rate.rollup_round_cost(1_000_000_000), MAX_INTERVAL);
    }

    #[test]
    fn the_thread_clock_advances_with_work() {
        let before = thread_cpu_ns();
        let mut sum = 0u64;
        for value in 0..2_000_000u64 {
            sum = std::hint::black_box(sum.wrapping_add(value * value));
        }
        assert!(thread_cpu_ns() > before, "{sum}");
    }
}
