//! When to snapshot a process for a new high: of its live requested bytes (the interpret
//! stage's) or of its RSS (the status reads'). Memory is resident only once written, so a
//! snapshot taken at the allocation would miss it: after a high, the process's status is
//! read every `FAST_INTERVAL_NS`, and the snapshot is taken as soon as its RSS stopped
//! rising while it sleeps or waits (it writes nothing then), or stayed put for two reads
//! between which it ran (its CPU time grew: a runnable process the scheduler kept waiting
//! proves nothing), or when the window ends; so, while the memory is still there. A
//! snapshot taken while the process ran may have caught a rise midway: it is followed on,
//! and any page more is a new high until it settles.

use std::collections::HashMap;

/// Between the status reads of a process following a high.
pub const FAST_INTERVAL_NS: u64 = 2_000_000;
/// Longest time a high is followed before its snapshot is taken all the same.
const FOLLOW_NS: u64 = 50_000_000;
const MIB: u64 = 1 << 20;

/// RSS above the last snapshotted high by this much is a new high (a tenth, at least 1 MiB,
/// as for requested bytes).
fn rise(mark: u64) -> u64 {
    (mark / 10).max(MIB)
}

/// RSS that grew by less than this between two reads has stopped rising.
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

/// What the main thread did since the previous status read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Asleep or waiting in the kernel (not state R): it writes nothing.
    Asleep,
    /// Runnable and given CPU time since the previous read: it may be writing.
    Ran,
    /// Runnable but given no CPU time since the previous read (a loaded machine): an RSS
    /// that stayed put says nothing about whether it stopped writing.
    Waited,
}

/// The high a snapshot is for: bytes and when they were reached (monotonic ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum High {
    Requested { bytes: u64, time_ns: u64 },
    Rss { bytes: u64, time_ns: u64 },
}

#[derive(Debug, Default)]
struct Watch {
    /// Highest status RSS at which this image was snapshotted.
    mark: u64,
    /// RSS of the previous status read (None before the first).
    previous: Option<u64>,
    /// A new RSS high not yet snapshotted: its bytes and when first seen at that level.
    rss_high: Option<(u64, u64)>,
    /// A new high of requested bytes not yet snapshotted, and when it was reached.
    requested: Option<(u64, u64)>,
    /// While following a high: until when.
    follow_until_ns: Option<u64>,
    /// Reads in a row that saw the process run with its RSS put.
    quiet_reads: u32,
    /// The last snapshot for a high was decided while the process ran or its RSS rose: it
    /// may have caught a rise midway.
    uncertain: bool,
}

#[derive(Debug, Default)]
pub struct Highs {
    watches: HashMap<i32, Watch>,
}

impl Highs {
    /// `pid`'s live requested bytes reached `bytes` at `time_ns`: follow its RSS from now.
    /// Whether it rises is told by two reads after the high, the next one being the first.
    pub fn requested(&mut self, pid: i32, bytes: u64, time_ns: u64, now_ns: u64) {
        let watch = self.watches.entry(pid).or_default();
        watch.requested = Some((bytes, time_ns));
        watch.previous = None;
        watch.follow_until_ns.get_or_insert(now_ns + FOLLOW_NS);
    }

    /// Takes a status read of `pid` showing `rss` at `now_ns`, and what it did since the last.
    pub fn status(&mut self, pid: i32, rss: u64, activity: Activity, now_ns: u64) -> Next {
        let watch = self.watches.entry(pid).or_default();
        let Some(previous) = watch.previous.replace(rss) else {
            // The image's first read (what it starts with is no high), or the first since a
            // requested high.
            watch.mark = watch.mark.max(rss);
            watch.quiet_reads = 0;
            return match watch.requested {
                Some(_) => Next::Follow,
                None => Next::Nothing,
            };
        };
        let rising = rss >= previous + level(previous);
        watch.quiet_reads = match (rising, activity) {
            (false, Activity::Ran) => watch.quiet_reads + 1,
            // No CPU time, no evidence either way.
            (false, Activity::Waited) => watch.quiet_reads,
            _ => 0,
        };
        let settled = !rising && (activity == Activity::Asleep || watch.quiet_reads >= 2);
        let threshold = match watch.uncertain {
            true => PAGE,
            false => rise(watch.mark),
        };
        match watch.rss_high {
            Some((high, _)) if rss + level(high) < high => {
                // Gone before it was snapshotted: a later snapshot would not show it.
                watch.rss_high = None;
            }
            Some(_) if rising => watch.rss_high = Some((rss, now_ns)),
            None if rss >= watch.mark + threshold => {
                watch.rss_high = Some((rss, now_ns));
                watch.follow_until_ns.get_or_insert(now_ns + FOLLOW_NS);
            }
            _ => {}
        }
        let following = watch.follow_until_ns.is_some_and(|until| now_ns < until);
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
        Next::Snapshot(high)
    }

    /// `pid` was snapshotted at `now_ns`: the highs so far are taken. After one that may have
    /// caught a rise midway, the process is followed on.
    pub fn snapshotted(&mut self, pid: i32, now_ns: u64) {
        let watch = self.watches.entry(pid).or_default();
        let seen = watch.previous.unwrap_or(0);
        let high = watch.rss_high.map_or(0, |(bytes, _)| bytes);
        watch.mark = watch.mark.max(seen).max(high);
        watch.rss_high = None;
        watch.requested = None;
        watch.quiet_reads = 0;
        watch.follow_until_ns = watch.uncertain.then_some(now_ns + FOLLOW_NS);
    }

    /// Whether `pid` is followed at `now_ns` (its status read every `FAST_INTERVAL_NS`);
    /// after its window, its normal reads ask for the snapshot until one is taken.
    pub fn following(&self, pid: i32, now_ns: u64) -> bool {
        self.watches
            .get(&pid)
            .is_some_and(|watch| watch.follow_until_ns.is_some_and(|until| now_ns < until))
    }

    /// Whether any process is followed at `now_ns`.
    pub fn any_followed(&self, now_ns: u64) -> bool {
        self.watches
            .values()
            .any(|watch| watch.follow_until_ns.is_some_and(|until| now_ns < until))
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
    const RUNNING: Activity = Activity::Ran;
    const ASLEEP: Activity = Activity::Asleep;

    #[test]
    fn a_requested_high_is_snapshotted_once_the_rss_stopped_rising_and_the_program_sleeps() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 0), Next::Nothing);
        highs.requested(7, 12 * MIB, 10 * MS, 11 * MS);
        assert!(highs.following(7, 0));
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
        highs.snapshotted(7, 19 * MS);
        assert!(!highs.following(7, 0) && !highs.any_followed(0));
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
            assert_eq!(
                highs.status(7, 8 * MIB, Activity::Waited, now),
                Next::Follow
            );
        }
        assert_eq!(highs.status(7, 12 * MIB, RUNNING, 13 * MS), Next::Follow);
        assert_eq!(highs.status(7, 12 * MIB, RUNNING, 15 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 12 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, 12 * MIB, RUNNING, 17 * MS),
            Next::Snapshot(high)
        );
    }

    #[test]
    fn a_running_program_is_snapshotted_after_two_reads_without_a_rise() {
        let mut highs = Highs::default();
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 0), Next::Nothing);
        highs.requested(7, 256 * MIB, MS, MS);
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, MS), Next::Follow);
        assert_eq!(highs.status(7, 5 * MIB, RUNNING, 3 * MS), Next::Follow);
        let high = High::Requested {
            bytes: 256 * MIB,
            time_ns: MS,
        };
        assert_eq!(
            highs.status(7, 5 * MIB, RUNNING, 5 * MS),
            Next::Snapshot(high)
        );
        highs.snapshotted(7, 5 * MS);
        // Taken while it ran: followed on, and a page more is a new high, snapshotted once
        // the process sleeps.
        assert!(highs.following(7, 0));
        let more = 5 * MIB + MIB / 8;
        assert_eq!(highs.status(7, more, RUNNING, 7 * MS), Next::Follow);
        let high = High::Rss {
            bytes: more,
            time_ns: 7 * MS,
        };
        assert_eq!(highs.status(7, more, ASLEEP, 9 * MS), Next::Snapshot(high));
        highs.snapshotted(7, 9 * MS);
        assert!(!highs.following(7, 0));
        assert_eq!(highs.status(7, more + 8192, ASLEEP, 29 * MS), Next::Nothing);
    }

    #[test]
    fn a_snapshot_that_may_have_cut_a_rise_is_followed_until_the_process_settles() {
        let mut highs = Highs::default();
        highs.status(7, 5 * MIB, RUNNING, 0);
        highs.requested(7, 8 * MIB, MS, MS);
        highs.status(7, 6 * MIB, RUNNING, MS);
        highs.status(7, 6 * MIB, RUNNING, 3 * MS);
        assert!(matches!(
            highs.status(7, 6 * MIB, RUNNING, 5 * MS),
            Next::Snapshot(_)
        ));
        highs.snapshotted(7, 5 * MS);
        // No page more once it sleeps: nothing to add, and no longer followed.
        assert_eq!(highs.status(7, 6 * MIB, RUNNING, 7 * MS), Next::Follow);
        assert_eq!(highs.status(7, 6 * MIB, ASLEEP, 9 * MS), Next::Nothing);
        assert!(!highs.following(7, 0));
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
        highs.snapshotted(3, 64 * MS);
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
