//! The sampler's records, gathered before the replay. The sampler thread writes them apart
//! from the tracer's records, so their place in the file says nothing about their time: each
//! PID's are sorted by time, and a snapshot is taken in just before the first tracer event of
//! its PID that is later than it (so it sees the heap and mappings as they were).

use std::collections::{HashMap, VecDeque};

use super::build::ClosedImage;
use super::tracker::ImageTracker;
use crate::trace::format::{Record, SnapshotReason};

pub(in crate::analysis) struct Samples<'r> {
    records: &'r [Record],
    /// Positions of each PID's snapshot records, in time order, not yet taken in.
    snapshots: HashMap<u32, VecDeque<usize>>,
    /// (time, rss, swap) of each PID's status samples, in time order.
    status: HashMap<u32, Vec<(u64, u64, u64)>>,
    /// (time, pss) of each PID's rollup samples, in time order.
    rollup: HashMap<u32, Vec<(u64, u64)>>,
}

impl<'r> Samples<'r> {
    pub fn new(records: &'r [Record]) -> Samples<'r> {
        let mut snapshots: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
        let mut status: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
        let mut rollup: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        for (index, record) in records.iter().enumerate() {
            match *record {
                Record::SmapsSnapshot { time_ns, pid, .. } => {
                    snapshots.entry(pid).or_default().push((time_ns, index))
                }
                Record::StatusSample {
                    time_ns,
                    pid,
                    rss,
                    swap,
                    ..
                } => status.entry(pid).or_default().push((time_ns, rss, swap)),
                Record::RollupSample {
                    time_ns, pid, pss, ..
                } => rollup.entry(pid).or_default().push((time_ns, pss)),
                _ => {}
            }
        }
        status
            .values_mut()
            .for_each(|samples| samples.sort_by_key(|s| s.0));
        rollup
            .values_mut()
            .for_each(|samples| samples.sort_by_key(|s| s.0));
        let snapshots = snapshots
            .into_iter()
            .map(|(pid, mut list)| {
                list.sort_by_key(|&(time_ns, _)| time_ns);
                (pid, list.into_iter().map(|(_, index)| index).collect())
            })
            .collect();
        Samples {
            records,
            snapshots,
            status,
            rollup,
        }
    }

    /// Takes in `pid`'s snapshots up to `time_ns` (the one an exec at `time_ns` takes stays
    /// for the next image when `before_exec`); those older than the image are dropped.
    pub fn take_snapshots(
        &mut self,
        pid: u32,
        (image_start_ns, time_ns): (u64, u64),
        before_exec: bool,
        tracker: &mut ImageTracker,
    ) {
        let Some(queue) = self.snapshots.get_mut(&pid) else {
            return;
        };
        while let Some(&index) = queue.front() {
            let Record::SmapsSnapshot {
                time_ns: taken_ns,
                reason,
                cost_ns,
                ref mappings,
                ..
            } = self.records[index]
            else {
                unreachable!("only snapshot positions are queued");
            };
            let held_back = before_exec && reason == SnapshotReason::Exec;
            if taken_ns > time_ns || (taken_ns == time_ns && held_back) {
                break;
            }
            queue.pop_front();
            if taken_ns >= image_start_ns {
                tracker.snapshot((taken_ns, reason, cost_ns), mappings);
            }
        }
    }

    /// Forgets `pid`'s snapshots taken before `time_ns` (of an address space an exec replaced).
    pub fn drop_snapshots_before(&mut self, pid: u32, time_ns: u64) {
        let Some(queue) = self.snapshots.get_mut(&pid) else {
            return;
        };
        while let Some(&index) = queue.front() {
            match self.records[index] {
                Record::SmapsSnapshot { time_ns: taken, .. } if taken < time_ns => {
                    queue.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Ends an image at `end_ns`: its last snapshots, and the samples taken during it.
    pub fn close(
        &mut self,
        pid: u32,
        (start_ns, end_ns): (u64, u64),
        by_exec: bool,
        mut tracker: ImageTracker,
    ) -> ClosedImage {
        self.take_snapshots(pid, (start_ns, end_ns), by_exec, &mut tracker);
        let during = |time_ns: u64| start_ns <= time_ns && time_ns <= end_ns;
        let status = self.status.get(&pid).map_or(Vec::new(), |samples| {
            samples.iter().copied().filter(|s| during(s.0)).collect()
        });
        let rollup = self.rollup.get(&pid).map_or(Vec::new(), |samples| {
            samples.iter().copied().filter(|s| during(s.0)).collect()
        });
        ClosedImage {
            tracker,
            status,
            rollup,
        }
    }
}
