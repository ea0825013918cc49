//! The sampler's records, held until the replay reaches their time. The sampler thread
//! writes them apart from the tracer's records, so in a version-2 profile their place in the
//! file says little about their time: each PID's are queued in time order, a snapshot is
//! taken in just before the first tracer event of its PID that is not earlier than it (so it
//! sees the heap and mappings as they were), and a status or rollup sample just before the
//! first one that is later. The tracer's records of every PID reach the file from one thread
//! in time order, so one of them at time `t` also releases every PID's samples earlier than
//! `t`: what is held stays within the samples of the last moments, however long a process
//! goes without a tracer record of its own.

use std::collections::VecDeque;

use super::tracker::ImageTracker;
use crate::events::heap::{IntegerMap, LiveHeap};
use crate::trace::format::{MappingResidency, Record, SnapshotReason};

/// A residency sample of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::analysis) enum Sample {
    Status {
        time_ns: u64,
        rss: u64,
        swap: u64,
    },
    Rollup {
        time_ns: u64,
        rss: u64,
        pss: u64,
        swap: u64,
    },
}

impl Sample {
    pub fn time_ns(&self) -> u64 {
        match *self {
            Sample::Status { time_ns, .. } | Sample::Rollup { time_ns, .. } => time_ns,
        }
    }
}

#[derive(Debug)]
struct Snapshot {
    time_ns: u64,
    reason: SnapshotReason,
    cost_ns: u64,
    mappings: Vec<MappingResidency>,
}

#[derive(Debug)]
pub(in crate::analysis) struct Samples {
    /// Each PID's snapshots not yet taken in, in time order.
    snapshots: IntegerMap<u32, VecDeque<Snapshot>>,
    /// Each PID's status and rollup samples not yet handed over, in time order.
    samples: IntegerMap<u32, VecDeque<Sample>>,
    /// No snapshot or sample held is earlier than this (u64::MAX when none is held), so most
    /// records need not look at the queues.
    earliest_ns: u64,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            snapshots: IntegerMap::default(),
            samples: IntegerMap::default(),
            earliest_ns: u64::MAX,
        }
    }
}

/// Inserts `item` into `queue`, kept in time order, after any of the same time.
fn insert_in_time_order<T>(queue: &mut VecDeque<T>, item: T, time_of: impl Fn(&T) -> u64) {
    let time_ns = time_of(&item);
    let position = queue.partition_point(|queued| time_of(queued) <= time_ns);
    queue.insert(position, item);
}

impl Samples {
    /// Holds `record` when it is the sampler's; gives it back otherwise.
    pub fn hold(&mut self, record: Record) -> Option<Record> {
        let (pid, sample) = match record {
            Record::SmapsSnapshot {
                time_ns,
                pid,
                reason,
                cost_ns,
                mappings,
            } => {
                let snapshot = Snapshot {
                    time_ns,
                    reason,
                    cost_ns,
                    mappings,
                };
                self.earliest_ns = self.earliest_ns.min(time_ns);
                let queue = self.snapshots.entry(pid).or_default();
                insert_in_time_order(queue, snapshot, |snapshot| snapshot.time_ns);
                return None;
            }
            Record::StatusSample {
                time_ns,
                pid,
                rss,
                swap,
                ..
            } => (pid, Sample::Status { time_ns, rss, swap }),
            Record::RollupSample {
                time_ns,
                pid,
                rss,
                pss,
                swap,
                ..
            } => (
                pid,
                Sample::Rollup {
                    time_ns,
                    rss,
                    pss,
                    swap,
                },
            ),
            other => return Some(other),
        };
        self.earliest_ns = self.earliest_ns.min(sample.time_ns());
        let queue = self.samples.entry(pid).or_default();
        insert_in_time_order(queue, sample, Sample::time_ns);
        None
    }

    /// PIDs holding a snapshot or sample earlier than `time_ns`, in order.
    pub fn pids_holding_before(&self, time_ns: u64) -> Vec<u32> {
        if self.earliest_ns >= time_ns {
            return Vec::new();
        }
        let fronts = self
            .snapshots
            .iter()
            .map(|(pid, queue)| (pid, queue.front().map(|snapshot| snapshot.time_ns)))
            .chain(
                self.samples
                    .iter()
                    .map(|(pid, queue)| (pid, queue.front().map(Sample::time_ns))),
            );
        let mut pids: Vec<u32> = fronts
            .filter(|(_, front)| front.is_some_and(|front_ns| front_ns < time_ns))
            .map(|(&pid, _)| pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Forgets emptied queues and finds the earliest time still held, after a release.
    pub fn settle(&mut self) {
        self.snapshots.retain(|_, queue| !queue.is_empty());
        self.samples.retain(|_, queue| !queue.is_empty());
        let snapshot_fronts = self.snapshots.values().filter_map(|queue| queue.front());
        let sample_fronts = self.samples.values().filter_map(|queue| queue.front());
        self.earliest_ns = snapshot_fronts
            .map(|snapshot| snapshot.time_ns)
            .chain(sample_fronts.map(Sample::time_ns))
            .min()
            .unwrap_or(u64::MAX);
    }

    /// How many snapshots and samples are held, of every PID.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        let snapshots: usize = self.snapshots.values().map(VecDeque::len).sum();
        let samples: usize = self.samples.values().map(VecDeque::len).sum();
        snapshots + samples
    }

    /// Takes in `pid`'s snapshots up to `time_ns` (those at `time_ns` stay for the next image
    /// when `before_exec`: the tracer snapshots a new program right after its exec);
    /// those older than the image are dropped.
    pub fn take_snapshots(
        &mut self,
        pid: u32,
        (image_start_ns, time_ns): (u64, u64),
        before_exec: bool,
        (tracker, heap): (&mut ImageTracker, &LiveHeap),
    ) {
        let Some(queue) = self.snapshots.get_mut(&pid) else {
            return;
        };
        while let Some(snapshot) = queue.front() {
            if snapshot.time_ns > time_ns || (snapshot.time_ns == time_ns && before_exec) {
                break;
            }
            let snapshot = queue.pop_front().expect("looked at above");
            if snapshot.time_ns >= image_start_ns {
                let taken = (snapshot.time_ns, snapshot.reason, snapshot.cost_ns);
                tracker.snapshot(taken, &snapshot.mappings, heap);
            }
        }
    }

    /// Forgets `pid`'s snapshots taken before `time_ns` (of an address space an exec replaced).
    pub fn drop_snapshots_before(&mut self, pid: u32, time_ns: u64) {
        if let Some(queue) = self.snapshots.get_mut(&pid) {
            while queue
                .front()
                .is_some_and(|snapshot| snapshot.time_ns < time_ns)
            {
                queue.pop_front();
            }
        }
    }

    /// Hands over `pid`'s samples earlier than `time_ns` (or at it too, when `inclusive`).
    pub fn due(&mut self, pid: u32, time_ns: u64, inclusive: bool) -> Vec<Sample> {
        let Some(queue) = self.samples.get_mut(&pid) else {
            return Vec::new();
        };
        let due = |sample: &Sample| {
            sample.time_ns() < time_ns || (inclusive && sample.time_ns() == time_ns)
        };
        let count = queue.iter().take_while(|sample| due(sample)).count();
        queue.drain(..count).collect()
    }

    /// Every sample still held, of every PID, by PID and time.
    pub fn remaining(&mut self) -> Vec<(u32, Sample)> {
        let mut pids: Vec<u32> = self.samples.keys().copied().collect();
        pids.sort_unstable();
        pids.into_iter()
            .flat_map(|pid| {
                let queue = self.samples.remove(&pid).unwrap_or_default();
                queue.into_iter().map(move |sample| (pid, sample))
            })
            .collect()
    }
}
