//! The sampler's CPU budget. smaps_rollup's cost grows with the resident memory it walks
//! (about 15 ms per GiB), so its interval follows the measured CPU time of the reads, and of
//! the snapshots, estimates and fast status reads taken for new highs, so that the sampler
//! as a whole stays within `BUDGET` of one core. Those for highs spend credits that fill at
//! `HIGHS_SHARE` of a core between them: a few in a burst, then as many as that share pays
//! for.

use std::time::{Duration, Instant};

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
/// Share of one core the snapshots, estimates and fast status reads for new highs may use
/// on average, at most: less when the status reads leave less than that above the rollups'
/// floor. Taken from the rollups only while highs come.
pub const HIGHS_SHARE: f64 = 0.03;
/// The part of the highs' share that pays for estimates at highs (`estimate`), apart from
/// the snapshots' credit: 2 % of a core, since counting pagemap costs about 10 ms a GiB
/// resident and estimates should keep up with a program growing by GiBs a second, so that
/// the level it stops at finds the credit to be measured.
pub const ESTIMATES_PART: f64 = 2.0 / 3.0;
/// CPU the credit for highs holds at most: a burst of snapshots of small processes (a few
/// hundred µs each) is taken at once.
const HIGHS_CREDIT_CAP_NS: f64 = 10e6;

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
    /// CPU ns spent on highs since the last rollup round, and its smoothed share of a core.
    highs_ns: u64,
    highs_share: f64,
    interval: Duration,
}

impl RollupRate {
    pub fn new(status_interval: Duration) -> RollupRate {
        RollupRate {
            status_interval,
            status_cost: 0.0,
            rollup_cost: 0.0,
            highs_ns: 0,
            highs_share: 0.0,
            interval: FIRST_INTERVAL,
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn status_round_cost(&mut self, cpu_ns: u64) {
        self.status_cost = smooth(self.status_cost, cpu_ns as f64);
    }

    /// The share highs may use: what status reads and the rollups' floor leave of the
    /// target, at most `HIGHS_SHARE`.
    pub fn highs_share(&self) -> f64 {
        let status_share = self.status_cost / self.status_interval.as_nanos().max(1) as f64;
        (TARGET - status_share - ROLLUP_FLOOR).clamp(0.0, HIGHS_SHARE)
    }

    /// CPU spent on a snapshot or a fast status read for a new high.
    pub fn highs_cost(&mut self, cpu_ns: u64) {
        self.highs_ns += cpu_ns;
    }

    /// Takes the cost of a rollup round, `since` the previous one, and the share of a core
    /// the credit for highs is filling at (`HighsCredit::filling_share`); returns the
    /// interval until the next one.
    pub fn rollup_round_cost(
        &mut self,
        cpu_ns: u64,
        since: Duration,
        credit_share: f64,
    ) -> Duration {
        let cost = cpu_ns as f64;
        // Back off at once when a round costs more (memory grew), speed up gradually.
        self.rollup_cost = smooth(self.rollup_cost, cost).max(cost);
        let status_share = self.status_cost / self.status_interval.as_nanos().max(1) as f64;
        let highs_share =
            std::mem::take(&mut self.highs_ns) as f64 / since.as_nanos().max(1) as f64;
        self.highs_share = (self.highs_share + highs_share) / 2.0;
        // What highs spent, or what their credit is saving meanwhile: counting both would
        // count the same CPU twice.
        let highs_share = self.highs_share.max(credit_share);
        let share = (TARGET - status_share - highs_share).max(ROLLUP_FLOOR);
        let wanted = Duration::from_nanos((self.rollup_cost / share) as u64);
        self.interval = wanted.clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.interval
    }
}

/// What snapshots and fast reads for new highs may still spend: fills at its share of the
/// wall time, up to `HIGHS_CREDIT_CAP_NS` or, while one dearer waits, up to its cost. A
/// process's first snapshot (its cost unknown) may take it below zero.
#[derive(Debug)]
pub struct HighsCredit {
    credit_ns: f64,
    filled_at: Instant,
    share: f64,
    /// The expected cost of each process's snapshot refused and not taken since: the credit
    /// saves up to the dearest, however often it is filled meanwhile.
    waiting: Vec<(i32, f64)>,
}

impl HighsCredit {
    pub fn new(now: Instant) -> HighsCredit {
        HighsCredit {
            credit_ns: HIGHS_CREDIT_CAP_NS,
            filled_at: now,
            share: HIGHS_SHARE,
            waiting: Vec::new(),
        }
    }

    /// Fills at `share` of a core from `now` (`RollupRate::highs_share`).
    pub fn set_share(&mut self, share: f64, now: Instant) {
        self.fill(now);
        self.share = share;
    }

    /// The share of a core the credit takes while it fills, 0 once full: what the rollups
    /// must leave it.
    pub fn filling_share(&self) -> f64 {
        if self.credit_ns < self.ceiling() {
            self.share
        } else {
            0.0
        }
    }

    fn ceiling(&self) -> f64 {
        self.waiting
            .iter()
            .map(|&(_, cost)| cost)
            .fold(HIGHS_CREDIT_CAP_NS, f64::max)
    }

    fn fill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.filled_at).as_nanos() as f64;
        let filled = self.credit_ns + elapsed * self.share;
        // A credit above the ceiling (spent down since) is kept, not cut.
        self.credit_ns = filled.min(self.ceiling().max(self.credit_ns));
        self.filled_at = now;
    }

    /// Whether fast status reads may go on now: while the credit is not below zero.
    pub fn allows_reads(&mut self, now: Instant) -> bool {
        self.fill(now);
        self.credit_ns >= 0.0
    }

    /// Whether reads may be paid from this credit without holding up what waits on it:
    /// while it holds the dearest cost waited for (nothing waiting: while not below zero).
    pub fn allows_reads_beside_waiting(&mut self, now: Instant) -> bool {
        self.fill(now);
        let waited = self
            .waiting
            .iter()
            .map(|&(_, cost)| cost)
            .fold(0.0, f64::max);
        self.credit_ns >= waited
    }

    /// Whether `pid`'s snapshot, expected to cost `expected`, may be taken now: when the
    /// credit pays for it. One refused is waited for: the credit saves up to its cost until
    /// it is taken or its process forgotten.
    pub fn allows_snapshot(&mut self, pid: i32, expected: Duration, now: Instant) -> bool {
        let expected = expected.as_nanos() as f64;
        self.waiting.retain(|&(waiting, _)| waiting != pid);
        // Counted as waiting from the last fill on, should it have to wait.
        self.waiting.push((pid, expected));
        self.fill(now);
        if self.credit_ns >= expected {
            self.waiting.pop();
            return true;
        }
        false
    }

    /// `pid` wants no snapshot any more (it ended, exec'd or its high went): what was saved
    /// for it beyond what others wait for is given up.
    pub fn forget(&mut self, pid: i32) {
        self.waiting.retain(|&(waiting, _)| waiting != pid);
        self.credit_ns = self.credit_ns.min(self.ceiling());
    }

    /// Forgets every process not in `pids`.
    pub fn keep_only(&mut self, pids: &[i32]) {
        let gone: Vec<i32> = self
            .waiting
            .iter()
            .map(|&(pid, _)| pid)
            .filter(|pid| !pids.contains(pid))
            .collect();
        for pid in gone {
            self.forget(pid);
        }
    }

    pub fn spend(&mut self, cpu_ns: u64) {
        self.credit_ns -= cpu_ns as f64;
    }
}

/// What a process measured: its RSS and how many mappings it had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Size {
    pub rss: u64,
    pub mappings: usize,
}

/// What a snapshot of a process of size `now` is expected to cost, its last one having cost
/// `last` at size `then` (0 RSS: not known): smaps walks every resident page and prints
/// every mapping, so it costs more by about 15 ms for each GiB the process grew since and
/// 3 µs for each mapping it gained (55 ms on 20,000 mappings of a page); what it cost stays.
pub fn snapshot_cost_now(last: Duration, then: Size, now: Size) -> Duration {
    const NS_PER_GIB: f64 = 15e6;
    const NS_PER_MAPPING: u64 = 3_000;
    if then.rss == 0 {
        return last;
    }
    let grown = now.rss.saturating_sub(then.rss) as f64 / (1u64 << 30) as f64;
    let mappings = now.mappings.saturating_sub(then.mappings) as u64;
    last + Duration::from_nanos((grown * NS_PER_GIB) as u64 + mappings * NS_PER_MAPPING)
}

/// What an estimate is expected to cost now, its process's last one having cost `last` on
/// `then` mappings and the process having `now` (either unknown: as the last): reading maps
/// and composing the estimate cost about 0.75 µs a mapping (12–19 ms on 20,000 of a page),
/// so a process that made thousands since costs that much more, however little the last
/// one cost.
pub fn estimate_cost_now(last: Duration, then: Option<usize>, now: Option<usize>) -> Duration {
    const NS_PER_MAPPING: u64 = 750;
    let Some((then, now)) = then.zip(now) else {
        return last;
    };
    last + Duration::from_nanos(now.saturating_sub(then) as u64 * NS_PER_MAPPING)
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

    const PID: i32 = 100;

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
        let second = Duration::from_secs(1);
        assert_eq!(rate.rollup_round_cost(100_000, second, 0.0), MIN_INTERVAL);
        // 10 ms a round at 4.5 %: every 222 ms, at once.
        assert!(about(
            rate.rollup_round_cost(10_000_000, second, 0.0),
            10.0,
            TARGET
        ));
        // Cheaper again: halfway back, not all the way.
        assert!(rate.rollup_round_cost(1_000_000, second, 0.0) > Duration::from_millis(100));
        // Status reads take 4 % of the core: the 1 % floor is left, 2 ms rounds every 200 ms.
        let mut rate = RollupRate::new(Duration::from_millis(20));
        rate.status_round_cost(800_000);
        assert!(about(
            rate.rollup_round_cost(2_000_000, second, 0.0),
            2.0,
            ROLLUP_FLOOR
        ));
        // 1 s a round (a huge process): never slower than the longest interval.
        assert_eq!(
            rate.rollup_round_cost(1_000_000_000, second, 0.0),
            MAX_INTERVAL
        );
    }

    #[test]
    fn what_highs_cost_leaves_the_rollups_less() {
        let mut rate = RollupRate::new(Duration::from_millis(20));
        let second = Duration::from_secs(1);
        // Highs took 25 ms of the last second (2.5 %), smoothed from none: 1.25 %.
        rate.highs_cost(25_000_000);
        assert!(about(
            rate.rollup_round_cost(10_000_000, second, 0.0),
            10.0,
            TARGET - 0.0125
        ));
        // Then none in the next second: half of that.
        assert!(about(
            rate.rollup_round_cost(10_000_000, second, 0.0),
            10.0,
            TARGET - 0.00625
        ));
    }

    #[test]
    fn highs_get_what_status_reads_and_the_rollup_floor_leave() {
        let mut rate = RollupRate::new(Duration::from_millis(20));
        assert_eq!(rate.highs_share(), HIGHS_SHARE);
        // Status reads take 2.5 % of a core: 4.5 - 2.5 - 1 = 1 % is left.
        rate.status_round_cost(500_000);
        assert!((rate.highs_share() - 0.01).abs() < 1e-9);
        // Above 3.5 %: nothing.
        let mut rate = RollupRate::new(Duration::from_millis(20));
        rate.status_round_cost(800_000);
        assert_eq!(rate.highs_share(), 0.0);
        let start = Instant::now();
        let mut credit = HighsCredit::new(start);
        credit.spend(10_000_000);
        credit.set_share(0.0, start);
        let later = start + Duration::from_secs(100);
        assert!(!credit.allows_snapshot(PID, Duration::from_millis(1), later));
    }

    /// The share the credits below fill at.
    const SHARE: f64 = 0.02;

    #[test]
    fn the_credit_for_highs_allows_a_burst_then_its_share() {
        let start = Instant::now();
        let mut credit = HighsCredit::new(start);
        credit.set_share(SHARE, start);
        let ms = Duration::from_millis(1);
        // A full credit pays for ten 1 ms snapshots at once, not for an eleventh.
        for _ in 0..10 {
            assert!(credit.allows_snapshot(PID, ms, start));
            credit.spend(1_000_000);
        }
        assert!(!credit.allows_snapshot(PID, ms, start));
        assert!(credit.allows_reads(start));
        // 1 ms at 2 % takes 50 ms to earn.
        assert!(!credit.allows_snapshot(PID, ms, start + 40 * ms));
        assert!(credit.allows_snapshot(PID, ms, start + 60 * ms));
        // One dearer than the cap waits until the credit pays for it (1.2 ms now, 40 ms in
        // 1940 ms), and the rest after it.
        let dear = Duration::from_millis(40);
        assert!(!credit.allows_snapshot(PID, dear, start + 1960 * ms));
        assert!(credit.allows_snapshot(PID, dear, start + 2010 * ms));
        credit.spend(40_000_000);
        assert!(!credit.allows_snapshot(PID, ms, start + 2040 * ms));
        assert!(credit.allows_snapshot(PID, ms, start + 2070 * ms));
    }

    #[test]
    fn a_dear_snapshot_is_saved_for_while_the_credit_is_filled_every_status_round() {
        let start = Instant::now();
        let mut credit = HighsCredit::new(start);
        credit.set_share(SHARE, start);
        credit.spend(10_000_000);
        let ms = Duration::from_millis(1);
        let dear = Duration::from_millis(40);
        assert!(!credit.allows_snapshot(PID, dear, start));
        // The sampler asks during each 20 ms status round and fills the credit after it;
        // 40 ms at 2 % takes 2 s to earn.
        let mut at = start;
        let mut allowed = None;
        while allowed.is_none() && at < start + 5000 * ms {
            at += 20 * ms;
            if credit.allows_snapshot(PID, dear, at) {
                allowed = Some(at - start);
            }
            credit.set_share(SHARE, at);
        }
        assert_eq!(allowed, Some(2000 * ms));
        // While it saves, the rollups leave it its share; once paid, and full, no more.
        let mut saving = HighsCredit::new(start);
        saving.set_share(SHARE, start);
        saving.spend(5_000_000);
        assert_eq!(saving.filling_share(), SHARE);
        assert!(saving.allows_snapshot(PID, ms, start + 250 * ms));
        assert_eq!(saving.filling_share(), 0.0);
    }

    #[test]
    fn reads_leave_an_estimate_waited_for_its_credit() {
        let start = Instant::now();
        let mut credit = HighsCredit::new(start);
        credit.set_share(SHARE, start);
        let ms = Duration::from_millis(1);
        credit.spend(8_000_000);
        assert!(credit.allows_reads_beside_waiting(start));
        // An 8 ms estimate refused with 2 ms held: reads wait until 8 ms are, 300 ms later.
        assert!(!credit.allows_snapshot(PID, 8 * ms, start));
        assert!(credit.allows_reads(start));
        assert!(!credit.allows_reads_beside_waiting(start + 290 * ms));
        assert!(credit.allows_reads_beside_waiting(start + 310 * ms));
    }

    #[test]
    fn what_was_saved_for_a_process_that_went_is_given_up() {
        let start = Instant::now();
        let mut credit = HighsCredit::new(start);
        let ms = Duration::from_millis(1);
        // Saving for two: 40 ms for one, 20 ms for another, the credit at 40 ms (10 ms and
        // a second at 3 %).
        assert!(!credit.allows_snapshot(PID, 40 * ms, start));
        assert!(!credit.allows_snapshot(PID + 1, 20 * ms, start));
        credit.set_share(HIGHS_SHARE, start + 1000 * ms);
        // The dearer one's process ends: the credit keeps what the other waits for.
        credit.keep_only(&[PID + 1]);
        assert_eq!(credit.ceiling(), 20e6);
        assert!(credit.allows_snapshot(PID + 1, 20 * ms, start + 1000 * ms));
        credit.spend(20_000_000);
        // Its snapshot paid, the credit fills to the cap again, no further.
        credit.set_share(HIGHS_SHARE, start + 5000 * ms);
        assert_eq!(credit.ceiling(), HIGHS_CREDIT_CAP_NS);
        assert!(!credit.allows_snapshot(PID, 11 * ms, start + 5000 * ms));
    }

    #[test]
    fn the_rollups_leave_the_credit_what_it_fills_at() {
        let second = Duration::from_secs(1);
        let mut rate = RollupRate::new(Duration::from_millis(20));
        assert!(about(
            rate.rollup_round_cost(10_000_000, second, HIGHS_SHARE),
            10.0,
            TARGET - HIGHS_SHARE
        ));
    }

    #[test]
    fn a_snapshot_costs_more_by_what_the_process_grew_since_the_last() {
        let ms = Duration::from_millis(1);
        const GIB: u64 = 1 << 30;
        let size = |rss, mappings| Size { rss, mappings };
        // 13 ms at half a GiB, 3.5 GiB more: 52.5 ms more.
        let now = snapshot_cost_now(13 * ms, size(GIB / 2, 50), size(4 * GIB, 50));
        assert_eq!(now, Duration::from_micros(65_500));
        // 45 ms on 20,000 mappings at 80 MiB, 80 MiB more: the mappings still cost 45 ms.
        let now = snapshot_cost_now(45 * ms, size(80 << 20, 20_000), size(160 << 20, 20_000));
        assert_eq!(now, Duration::from_nanos(46_171_875));
        // 9 ms on 3,000 mappings, 17,000 more and 68 MiB: 51 ms and 0.99 ms more.
        let now = snapshot_cost_now(9 * ms, size(13 << 20, 3_000), size(81 << 20, 20_000));
        assert_eq!(now, Duration::from_nanos(60_996_093));
        // Shrunk, or no RSS known: as the last.
        assert_eq!(
            snapshot_cost_now(13 * ms, size(4 * GIB, 900), size(GIB, 100)),
            13 * ms
        );
        assert_eq!(
            snapshot_cost_now(13 * ms, size(0, 0), size(4 * GIB, 20_000)),
            13 * ms
        );
    }

    #[test]
    fn an_estimate_costs_more_by_the_mappings_made_since_the_last() {
        let ms = Duration::from_millis(1);
        // 3 ms on 4,000 mappings, 16,000 more: 12 ms more.
        assert_eq!(
            estimate_cost_now(3 * ms, Some(4_000), Some(20_000)),
            15 * ms
        );
        // Fewer, or either count unknown: as the last.
        assert_eq!(estimate_cost_now(3 * ms, Some(4_000), Some(1_000)), 3 * ms);
        assert_eq!(estimate_cost_now(3 * ms, None, Some(20_000)), 3 * ms);
        assert_eq!(estimate_cost_now(3 * ms, Some(4_000), None), 3 * ms);
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
