//! When to snapshot a process for a new high: of its live requested bytes (the interpret
//! stage's) or of its RSS (the status reads'). Memory is resident only once written, so a
//! snapshot taken at the allocation would miss it: after a high, the process's status is
//! read every `FAST_INTERVAL_NS`, and the snapshot is taken as soon as its RSS stopped
//! rising while it sleeps or waits (it writes nothing then), or stayed put while its main
//! thread ran `QUIET_CPU_NS` (a runnable process the scheduler kept waiting proves
//! nothing), or when the window ends: `FOLLOW_NS` of the time the process could use (all
//! of it while asleep, its CPU time while runnable, so that a loaded machine does not cut
//! a write short), `FOLLOW_WALL_NS` at most. So, while the memory is still there. A
//! snapshot taken while the process ran may have caught a rise midway: it is followed on,
//! and any page more is a new high until it settles.

use std::collections::HashMap;

/// Between the status reads of a process following a high.
pub const FAST_INTERVAL_NS: u64 = 2_000_000;
/// How much of the time it could use a high is followed before its snapshot is taken all
/// the same.
const FOLLOW_NS: u64 = 50_000_000;
/// Longest wall time a high is followed, however little CPU time the process was given.
const FOLLOW_WALL_NS: u64 = 500_000_000;
/// CPU time the main thread runs without its RSS rising before the rise is taken as over:
/// writing fresh memory faults in more than a 64th of a process of up to a few hundred MiB
/// in 2 ms (a larger one can look quiet midway: the snapshot is then followed on). The
/// kernel brings a running thread's count in /proc/PID/schedstat up to date only at its
/// tick (every 4 ms at 250 Hz), so the read a quiet stretch starts from may be that far
/// behind: 4 ms more.
const QUIET_CPU_NS: u64 = 6_000_000;
/// What a read's count shows beyond the time since the previous read is carried to the
/// next reads, up to a tick at 100 Hz.
const CARRY_MAX_NS: u64 = 10_000_000;
const MIB: u64 = 1 << 20;

/// RSS above the last snapshotted high by this much is a new high (a tenth, at least 1 MiB,
/// as for requested bytes).
fn rise(mark: u64) -> u64 {
    (mark / 10).max(MIB)
}

/// RSS that grew by less than this since it was last seen rising has stopped rising.
fn level(rss: u64) -> u64 {
    (rss / 64).max(64 << 10)
}

/// After a snapshot that may have caught a rise midway, any page more is a new high.
const PAGE: u64 = 4096;

/// What the sampler should do for a process after one of its status reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// Read its status again in `FAST_INTERVAL_NS`.
    Follow,
    /// Snapshot it now, for this high.
    Snapshot(High),
}

/// What the main thread is doing at a status read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Asleep or waiting in the kernel (not state R): it writes nothing.
    Asleep,
    /// Runnable, having run `ran_ns` on a CPU since the previous read (None when that is
    /// not known): under load, much less than the time between the reads.
    Runnable { ran_ns: Option<u64> },
}

/// The high a snapshot is for: bytes and when they were reached (monotonic ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum High {
    Requested { bytes: u64, time_ns: u64 },
    Rss { bytes: u64, time_ns: u64 },
}

#[derive(Debug, Default)]
struct Watch {
    /// Highest status RSS at which this image was snapshotted, and when the read of its last
    /// snapshot began.
    mark: u64,
    snapshotted_ns: Option<u64>,
    /// RSS of the previous status read (None before the first).
    previous: Option<u64>,
    /// When the previous status read was.
    previous_read_ns: Option<u64>,
    /// A new RSS high not yet snapshotted: its bytes and when first seen at that level.
    rss_high: Option<(u64, u64)>,
    /// A new high of requested bytes not yet snapshotted, and when it was reached.
    requested: Option<(u64, u64)>,
    /// While following a high: since when, until when at most, and how much of the time
    /// the process could use has passed since.
    follow_from_ns: u64,
    follow_until_ns: Option<u64>,
    followed_ns: u64,
    /// CPU time a read's count showed beyond the time since the previous read.
    cpu_carry_ns: u64,
    /// The lowest RSS since it was last seen rising, and the CPU time the main thread ran
    /// since then.
    quiet_from: u64,
    quiet_cpu_ns: u64,
    /// The last snapshot for a high was decided while the process ran or its RSS rose: it
    /// may have caught a rise midway.
    uncertain: bool,
    /// A snapshot was asked for and not taken yet (its credit not saved up), and whether a
    /// rise meanwhile has had its window.
    asked: bool,
    reopened: bool,
}

impl Watch {
    /// Follows from `now_ns`, unless already following: a new high gets a window of its own
    /// even while an earlier one, its window over, still waits for its snapshot's credit.
    fn follow(&mut self, now_ns: u64) {
        if !self.following(now_ns) {
            self.follow_from_ns = now_ns;
            self.follow_until_ns = Some(now_ns + FOLLOW_WALL_NS);
            self.followed_ns = 0;
        }
    }

    /// Counts the time between the previous read and this one at `now_ns`: returns the CPU
    /// time the main thread ran, if runnable and known, and adds the time it could use to
    /// the window's.
    fn count_time(&mut self, activity: Activity, now_ns: u64) -> Option<u64> {
        let previous = self.previous_read_ns.replace(now_ns);
        let elapsed = previous.map_or(0, |previous| now_ns.saturating_sub(previous));
        let ran_ns = match activity {
            // Its count is brought up to date as it stops running.
            Activity::Asleep => {
                self.cpu_carry_ns = 0;
                None
            }
            // The count of a running thread moves at the scheduler's tick: what it shows
            // beyond the time since the previous read belongs to the next ones.
            Activity::Runnable { ran_ns } => ran_ns.map(|ran| {
                let shown = ran + self.cpu_carry_ns;
                let counted = match previous {
                    Some(_) => shown.min(elapsed),
                    None => shown,
                };
                self.cpu_carry_ns = (shown - counted).min(CARRY_MAX_NS);
                counted
            }),
        };
        // Only what passed since the window began counts towards it: all of it while
        // asleep, the CPU time while runnable.
        let in_window = match previous {
            Some(previous) => now_ns.saturating_sub(previous.max(self.follow_from_ns)),
            None => 0,
        };
        self.followed_ns += match (activity, ran_ns) {
            (Activity::Runnable { .. }, Some(ran)) => ran.min(in_window),
            _ => in_window,
        };
        ran_ns
    }

    fn following(&self, now_ns: u64) -> bool {
        self.follow_until_ns.is_some_and(|until| now_ns < until) && self.followed_ns < FOLLOW_NS
    }

    /// A new stretch of quiet starts at `rss`.
    fn quiet_from(&mut self, rss: u64) {
        self.quiet_from = rss;
        self.quiet_cpu_ns = 0;
    }
}

#[derive(Debug, Default)]
pub struct Highs {
    watches: HashMap<i32, Watch>,
}

impl Highs {
    /// `pid`'s live requested bytes reached `bytes` at `time_ns`: follow its RSS from now.
    /// Whether it rises is told by the reads after the high, the next one being the first.
    /// One reached before the last snapshot (the interpret stage late) is shown by it, as
    /// far as written then; what is written after is a high of RSS.
    pub fn requested(&mut self, pid: i32, bytes: u64, time_ns: u64, now_ns: u64) {
        let watch = self.watches.entry(pid).or_default();
        if watch
            .snapshotted_ns
            .is_some_and(|snapshotted| time_ns < snapshotted)
        {
            return;
        }
        watch.requested = Some((bytes, time_ns));
        watch.previous = None;
        watch.reopened = false;
        watch.follow(now_ns);
    }

    /// Takes a status read of `pid` showing `rss` at `now_ns`, and what it is doing.
    pub fn status(&mut self, pid: i32, rss: u64, activity: Activity, now_ns: u64) -> Next {
        let watch = self.watches.entry(pid).or_default();
        let ran_ns = watch.count_time(activity, now_ns);
        if watch.previous.replace(rss).is_none() {
            // The image's first read (what it starts with is no high), or the first since a
            // requested high.
            watch.mark = watch.mark.max(rss);
            watch.quiet_from(rss);
            return match watch.requested {
                Some(_) => Next::Follow,
                None => Next::Nothing,
            };
        }
        let rising = rss >= watch.quiet_from + level(watch.quiet_from);
        match rising {
            true => watch.quiet_from(rss),
            false => {
                watch.quiet_from = watch.quiet_from.min(rss);
                watch.quiet_cpu_ns += ran_ns.unwrap_or(0);
            }
        }
        if rising && watch.asked && !watch.reopened && !watch.following(now_ns) {
            // Rising again while its snapshot waits for credit: one window more, for this
            // rise, so that the snapshot, once paid for, does not cut it midway.
            watch.reopened = true;
            watch.follow(now_ns);
        }
        let settled =
            !rising && (activity == Activity::Asleep || watch.quiet_cpu_ns >= QUIET_CPU_NS);
        let threshold = match watch.uncertain {
            true => PAGE,
            false => rise(watch.mark),
        };
        match watch.rss_high {
            Some((high, _)) if rss + level(high) < high => {
                // Gone before it was snapshotted: a later snapshot would not show it.
                watch.rss_high = None;
            }
            Some((high, _)) if rss >= high + level(high) => watch.rss_high = Some((rss, now_ns)),
            None if rss >= watch.mark + threshold => {
                watch.rss_high = Some((rss, now_ns));
                watch.follow(now_ns);
            }
            _ => {}
        }
        let following = watch.following(now_ns);
        let high = match (watch.requested, watch.rss_high) {
            (Some((bytes, time_ns)), _) => High::Requested { bytes, time_ns },
            (None, Some((bytes, time_ns))) => High::Rss { bytes, time_ns },
            (None, None) => {
                // No rise past the last snapshot once the process settled: it showed all.
                if settled {
                    watch.uncertain = false;
                }
                if watch.uncertain && following {
                    return Next::Follow;
                }
                watch.follow_until_ns = None;
                return Next::Nothing;
            }
        };
        if following && !settled {
            return Next::Follow;
        }
        watch.uncertain = activity != Activity::Asleep || rising;
        watch.asked = true;
        Next::Snapshot(high)
    }

    /// `pid` was snapshotted by a read from `read_from_ns` to `now_ns`: the highs so far are
    /// taken. After one that may have caught a rise midway, the process is followed on.
    pub fn snapshotted(&mut self, pid: i32, read_from_ns: u64, now_ns: u64) {
        let watch = self.watches.entry(pid).or_default();
        let seen = watch.previous.unwrap_or(0);
        let high = watch.rss_high.map_or(0, |(bytes, _)| bytes);
        watch.mark = watch.mark.max(seen).max(high);
        watch.snapshotted_ns = Some(read_from_ns);
        watch.rss_high = None;
        watch.requested = None;
        watch.asked = false;
        watch.reopened = false;
        watch.quiet_from(seen);
        watch.follow_until_ns = None;
        if watch.uncertain {
            watch.follow(now_ns);
        }
    }

    /// Whether `pid` is followed at `now_ns` (its status read every `FAST_INTERVAL_NS`);
    /// after its window, its normal reads ask for the snapshot until one is taken.
    pub fn following(&self, pid: i32, now_ns: u64) -> bool {
        self.watches
            .get(&pid)
            .is_some_and(|watch| watch.following(now_ns))
    }

    /// Whether any process is followed at `now_ns`.
    pub fn any_followed(&self, now_ns: u64) -> bool {
        self.watches.values().any(|watch| watch.following(now_ns))
    }

    /// Forgets the processes no longer supervised (`pids` sorted).
    pub fn keep_only(&mut self, pids: &[i32]) {
        self.watches
            .retain(|pid, _| pids.binary_search(pid).is_ok());
    }

    /// The process exec'd or is gone: its next image starts from nothing.
    pub fn forget(&mut self, pid: i32) {
        self.watches.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    /// Ran the whole time between two fast reads.
    const RUNNING: Activity = Activity::Runnable {
        ran_ns: Some(FAST_INTERVAL_NS),
    };
    const WAITED: Activity = Activity::Runnable { ran_ns: Some(0) };
    const ASLEEP: Activity = Activity::Asleep;

    /// Reads process 7 at `rss` every fast interval after `from_ns` until `last_ns`, each
    /// read followed on; returns the last read's time.
    fn followed_through(
        highs: &mut Highs,
        rss: u64,
        activity: Activity,
        from_ns: u64,
        last_ns: u64,
    ) -> u64 {
        let mut now = from_ns;
        while now < last_ns {
            now += FAST_INTERVAL_NS;
            assert_eq!(highs.status(7, rss, activity, now), Next::Follow, "{now}");
        }
        now
    }

    #[test]
    fn a_requested_high_is_snapshotted_once_the_rss_stopped_rising_and_the_program_sleeps() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 0), Next::Nothing);
        highs.requested(7, 12 * MIB, 10 * MS, 11 * MS);
        assert!(highs.following(7, 11 * MS));
        // Being written: 8, 11 MiB, put for one read (preempted), then 13 MiB; it stays
        // there once the program sleeps.
        assert_eq!(highs.status(7, 8 * MIB, RUNNING, 11 * MS), Next::Follow);
        assert_eq!(highs.status(7, 11 * MIB, RUNNING, 13 * MS), Next::Follow);
        assert_eq!(highs.status(7, 11 * MIB, RUNNING, 15 * MS), Next::Follow);
        assert_eq!(highs.status(7, 13 * MIB, RUNNING, 17 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 12 * MIB,
            time_ns: 10 * MS,
        };
        let put = 13 * MIB + 4096;
        assert_eq!(highs.status(7, put, ASLEEP, 19 * MS), Next::Snapshot(high));
        highs.snapshotted(7, 19 * MS, 19 * MS);
        assert!(!highs.following(7, 19 * MS) && !highs.any_followed(19 * MS));
        // The same level again is no new high, nor a rise of less than a tenth.
        assert_eq!(highs.status(7, 13 * MIB, ASLEEP, 39 * MS), Next::Nothing);
        assert_eq!(highs.status(7, 14 * MIB, RUNNING, 59 * MS), Next::Nothing);
    }

    #[test]
    fn reads_the_scheduler_kept_it_waiting_do_not_count_as_quiet() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 0), Next::Nothing);
        highs.requested(7, 12 * MIB, MS, MS);
        assert_eq!(highs.status(7, 8 * MIB, RUNNING, MS), Next::Follow);
        // Runnable without CPU time: its RSS stays put, yet it is not done writing.
        for read in 1..=5 {
            let now = MS + 2 * read * MS;
            assert_eq!(highs.status(7, 8 * MIB, WAITED, now), Next::Follow);
        }
        assert_eq!(highs.status(7, 12 * MIB, RUNNING, 13 * MS), Next::Follow);
        // Its count behind by a tick at the read the quiet starts from: no more than the
        // time between two reads is taken as run.
        let behind = Activity::Runnable {
            ran_ns: Some(4 * MS),
        };
        assert_eq!(highs.status(7, 12 * MIB, behind, 15 * MS), Next::Follow);
        assert_eq!(highs.status(7, 12 * MIB, RUNNING, 17 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 12 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, 12 * MIB, RUNNING, 19 * MS),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_rise_while_a_snapshot_waits_for_its_credit_gets_a_window_of_its_own() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 20 * MIB, ASLEEP, 0), Next::Nothing);
        highs.requested(7, 24 * MIB, MS, MS);
        // Below a tenth more than the first read after the high: no RSS high, so no window
        // from one.
        let rss = |mib: u64| 20 * MIB + mib * MIB / 2;
        assert_eq!(highs.status(7, rss(1), RUNNING, MS), Next::Follow);
        let high = High::Requested {
            bytes: 24 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, rss(1), ASLEEP, 3 * MS),
            Next::Snapshot(high)
        );
        // Not taken; asleep past the window, then rising again: one window more, for that
        // rise.
        assert_eq!(
            highs.status(7, rss(1), ASLEEP, 90 * MS),
            Next::Snapshot(high)
        );
        assert!(!highs.following(7, 90 * MS));
        assert_eq!(highs.status(7, rss(2), RUNNING, 92 * MS), Next::Follow);
        assert!(highs.following(7, 92 * MS));
        assert_eq!(highs.status(7, rss(3), RUNNING, 94 * MS), Next::Follow);
        assert_eq!(
            highs.status(7, rss(3), ASLEEP, 96 * MS),
            Next::Snapshot(high)
        );
        // Still not taken: a later rise has no window of its own, the snapshot is asked at
        // once.
        assert_eq!(
            highs.status(7, rss(3), ASLEEP, 200 * MS),
            Next::Snapshot(high)
        );
        assert_eq!(
            highs.status(7, rss(4), RUNNING, 202 * MS),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_requested_high_reached_before_the_last_snapshot_is_not_followed() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, ASLEEP, 0), Next::Nothing);
        assert_eq!(highs.status(7, 12 * MIB, RUNNING, 2 * MS), Next::Follow);
        let high = High::Rss {
            bytes: 12 * MIB,
            time_ns: 2 * MS,
        };
        assert_eq!(
            highs.status(7, 12 * MIB, ASLEEP, 4 * MS),
            Next::Snapshot(high)
        );
        highs.snapshotted(7, 4 * MS, 4 * MS);
        // The allocation of those 7 MiB, passed on after the snapshot that showed them.
        highs.requested(7, 12 * MIB, MS, 6 * MS);
        assert!(!highs.any_followed(6 * MS));
        assert_eq!(highs.status(7, 12 * MIB, ASLEEP, 8 * MS), Next::Nothing);
        // One reached after it is followed.
        highs.requested(7, 14 * MIB, 5 * MS, 10 * MS);
        assert!(highs.following(7, 10 * MS));
    }

    #[test]
    fn a_count_that_moves_at_the_tick_is_counted_whole_and_the_window_from_its_start() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, ASLEEP, 0), Next::Nothing);
        // The read before the high was 100 ms before it: none of that time is the window's.
        highs.requested(7, 12 * MIB, 100 * MS, 100 * MS);
        assert_eq!(highs.status(7, 5 * MIB, ASLEEP, 100 * MS), Next::Follow);
        assert!(highs.following(7, 100 * MS));
        let none = Activity::Runnable { ran_ns: Some(0) };
        let tick = Activity::Runnable {
            ran_ns: Some(4 * MS),
        };
        // Running all along, its count moving 4 ms every other read: 2 ms a read, 6 ms
        // after three reads without a rise, not 2 ms per tick.
        assert_eq!(highs.status(7, 12 * MIB, tick, 102 * MS), Next::Follow);
        assert_eq!(highs.status(7, 12 * MIB, none, 104 * MS), Next::Follow);
        assert_eq!(highs.status(7, 12 * MIB, tick, 106 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 12 * MIB,
            time_ns: 100 * MS,
        };
        assert_eq!(
            highs.status(7, 12 * MIB, none, 108 * MS),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_write_slowed_by_a_loaded_machine_is_followed_until_it_is_done() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 12 * MIB, ASLEEP, 0), Next::Nothing);
        highs.requested(7, 36 * MIB, MS, MS);
        assert_eq!(highs.status(7, 12 * MIB, WAITED, MS), Next::Follow);
        // Given a tenth of a CPU: each read finds less than a 64th more, yet it rises.
        let slowly = Activity::Runnable {
            ran_ns: Some(MS / 5),
        };
        let mut rss = 12 * MIB;
        let mut now = MS;
        while rss < 36 * MIB {
            rss += MIB / 8;
            now += FAST_INTERVAL_NS;
            assert_eq!(highs.status(7, rss, slowly, now), Next::Follow, "{now}");
        }
        // Far past 50 ms of wall time, not of the time it could use.
        assert!(now > 300 * MS && highs.following(7, now));
        let high = High::Requested {
            bytes: 36 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, rss, ASLEEP, now + FAST_INTERVAL_NS),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_process_never_given_a_cpu_is_snapshotted_at_the_end_of_the_wall_window() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 12 * MIB, ASLEEP, 0), Next::Nothing);
        highs.requested(7, 36 * MIB, MS, MS);
        assert_eq!(highs.status(7, 12 * MIB, WAITED, MS), Next::Follow);
        let last = MS + FOLLOW_WALL_NS - FAST_INTERVAL_NS;
        followed_through(&mut highs, 12 * MIB, WAITED, MS, last);
        let high = High::Requested {
            bytes: 36 * MIB,
            time_ns: MS,
        };
        let end = MS + FOLLOW_WALL_NS;
        assert_eq!(highs.status(7, 12 * MIB, WAITED, end), Next::Snapshot(high));
        // Its CPU time unknown: no read counts as quiet, and the window is wall time.
        highs.snapshotted(7, end, end);
        highs.requested(7, 48 * MIB, end, end);
        let unknown = Activity::Runnable { ran_ns: None };
        assert_eq!(highs.status(7, 12 * MIB, unknown, end), Next::Follow);
        let last = end + FOLLOW_NS - FAST_INTERVAL_NS;
        let now = followed_through(&mut highs, 12 * MIB, unknown, end, last);
        let high = High::Requested {
            bytes: 48 * MIB,
            time_ns: end,
        };
        let now = now + FAST_INTERVAL_NS;
        assert_eq!(
            highs.status(7, 12 * MIB, unknown, now),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_running_program_is_snapshotted_once_it_ran_6_ms_without_a_rise() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 0), Next::Nothing);
        highs.requested(7, 256 * MIB, MS, MS);
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, MS), Next::Follow);
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 3 * MS), Next::Follow);
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 5 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 256 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, 5 * MIB, RUNNING, 7 * MS),
            Next::Snapshot(high)
        );
        highs.snapshotted(7, 7 * MS, 7 * MS);
        // Taken while it ran: followed on, and a page more is a new high, snapshotted once
        // the process sleeps.
        assert!(highs.following(7, 7 * MS));
        let more = 5 * MIB + MIB / 8;
        assert_eq!(highs.status(7, more, RUNNING, 9 * MS), Next::Follow);
        let high = High::Rss {
            bytes: more,
            time_ns: 9 * MS,
        };
        assert_eq!(highs.status(7, more, ASLEEP, 11 * MS), Next::Snapshot(high));
        highs.snapshotted(7, 11 * MS, 11 * MS);
        assert!(!highs.following(7, 11 * MS));
        assert_eq!(highs.status(7, more + 8192, ASLEEP, 29 * MS), Next::Nothing);
    }

    #[test]
    fn a_snapshot_that_may_have_cut_a_rise_is_followed_until_the_process_settles() {
        let mut highs = Highs::default();
        highs.status(7, 5 * MIB, RUNNING, 0);
        highs.requested(7, 8 * MIB, MS, MS);
        highs.status(7, 6 * MIB, RUNNING, MS);
        highs.status(7, 6 * MIB, RUNNING, 3 * MS);
        highs.status(7, 6 * MIB, RUNNING, 5 * MS);
        assert!(matches!(
            highs.status(7, 6 * MIB, RUNNING, 7 * MS),
            Next::Snapshot(_)
        ));
        highs.snapshotted(7, 7 * MS, 7 * MS);
        // No page more once it sleeps: nothing to add, and no longer followed.
        assert_eq!(highs.status(7, 6 * MIB, RUNNING, 9 * MS), Next::Follow);
        assert_eq!(highs.status(7, 6 * MIB, ASLEEP, 11 * MS), Next::Nothing);
        assert!(!highs.following(7, 11 * MS));
    }

    #[test]
    fn an_rss_high_is_followed_and_dated_from_when_it_levelled() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(3, 20 * MIB, ASLEEP, 0), Next::Nothing);
        // Below a tenth more: nothing; then 30 MiB and still rising.
        assert_eq!(highs.status(3, 21 * MIB, RUNNING, 20 * MS), Next::Nothing);
        assert_eq!(highs.status(3, 30 * MIB, RUNNING, 40 * MS), Next::Follow);
        assert_eq!(highs.status(3, 40 * MIB, RUNNING, 42 * MS), Next::Follow);
        let high = High::Rss {
            bytes: 40 * MIB,
            time_ns: 42 * MS,
        };
        assert_eq!(
            highs.status(3, 40 * MIB, ASLEEP, 44 * MS),
            Next::Snapshot(high)
        );
        // Not snapshotted yet (no budget): asked again, from the same moment.
        assert_eq!(
            highs.status(3, 40 * MIB, ASLEEP, 64 * MS),
            Next::Snapshot(high)
        );
        highs.snapshotted(3, 64 * MS, 64 * MS);
        assert_eq!(highs.status(3, 43 * MIB, ASLEEP, 84 * MS), Next::Nothing);
    }

    #[test]
    fn a_high_gone_before_its_snapshot_is_dropped_and_a_steady_rise_is_taken_at_the_end() {
        let mut highs = Highs::default();
        highs.status(3, 10 * MIB, ASLEEP, 0);
        assert_eq!(highs.status(3, 30 * MIB, RUNNING, 20 * MS), Next::Follow);
        assert_eq!(highs.status(3, 10 * MIB, ASLEEP, 22 * MS), Next::Nothing);
        assert!(!highs.following(3, 0));
        // Rising at every read for longer than the window: snapshotted at its end.
        let mut rss = 30 * MIB;
        let mut now = 40 * MS;
        assert_eq!(highs.status(3, rss, RUNNING, now), Next::Follow);
        while now < 40 * MS + FOLLOW_NS - FAST_INTERVAL_NS {
            rss += MIB;
            now += FAST_INTERVAL_NS;
            assert_eq!(highs.status(3, rss, RUNNING, now), Next::Follow, "{now}");
        }
        let high = High::Rss {
            bytes: rss + MIB,
            time_ns: now + FAST_INTERVAL_NS,
        };
        assert_eq!(
            highs.status(3, rss + MIB, RUNNING, now + FAST_INTERVAL_NS),
            Next::Snapshot(high)
        );
        // A new image starts over: its first read is no high.
        highs.forget(3);
        assert_eq!(
            highs.status(3, 90 * MIB, RUNNING, now + 20 * MS),
            Next::Nothing
        );
        highs.keep_only(&[]);
        assert!(!highs.any_followed(0));
    }
}
