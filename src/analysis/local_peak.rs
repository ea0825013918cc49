//! The live-byte changes of one image by raw stack, for what needs them grouped once the
//! image's symbols are known: local peaks of call sites (a site may gather several raw
//! stacks, whose highest live bytes do not add up) and the components' series.
//!
//! Memory is bounded: the newest changes are kept exactly; older ones are folded into
//! segments that keep, per stack, the net change and the highest rise within the segment,
//! and neighbouring segments merge when they hold too many entries. A group of one stack
//! keeps its exact peak; a group of several may see, inside one folded segment, the sum of
//! its stacks' highest rises, which is never below the true one.

use crate::events::heap::IntegerMap;
use crate::trace::stacks::StackId;

/// Changes kept exactly before the oldest are folded: 24 MiB at most per image, so local
/// peaks stay exact for images of up to a million allocator calls (a C++ compile makes
/// ~750 k). The unit tests fold at a smaller count, to exercise folding quickly.
const RECENT_CAPACITY: usize = if cfg!(test) { 1 << 16 } else { 1 << 20 };
/// Changes folded into one segment.
const SEGMENT_CHANGES: usize = 1 << 10;
/// Stack entries of all segments together, and segments, before neighbouring ones merge.
const SEGMENT_ENTRIES: usize = 1 << 17;
const MAX_SEGMENTS: usize = 1 << 10;

#[derive(Debug, Clone, Copy)]
struct Change {
    time_ns: u64,
    stack: StackId,
    bytes: i64,
}

/// What one stack's blocks did over a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StackRun {
    pub stack: StackId,
    pub net: i64,
    /// The highest the stack's live bytes rose above their value at the start (at least 0).
    pub rise: i64,
}

#[derive(Debug)]
struct Segment {
    start_ns: u64,
    end_ns: u64,
    /// By stack.
    runs: Vec<StackRun>,
}

/// What one group did over one stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GroupStep {
    pub start_ns: u64,
    pub end_ns: u64,
    pub before: u64,
    /// Highest value within the stretch (at least `before` and `after`).
    pub high: u64,
    pub after: u64,
}

/// The live-byte changes of one image, in the order they happened.
#[derive(Debug, Default)]
pub(super) struct LiveChanges {
    segments: Vec<Segment>,
    segment_entries: usize,
    recent: Vec<Change>,
}

impl LiveChanges {
    pub fn grew(&mut self, time_ns: u64, stack: StackId, size: u64) {
        self.push(time_ns, stack, size as i64);
    }

    pub fn shrank(&mut self, time_ns: u64, stack: StackId, size: u64) {
        self.push(time_ns, stack, -(size as i64));
    }

    fn push(&mut self, time_ns: u64, stack: StackId, bytes: i64) {
        if bytes == 0 {
            return;
        }
        if self.recent.len() == RECENT_CAPACITY {
            self.fold_recent();
        }
        self.recent.push(Change {
            time_ns,
            stack,
            bytes,
        });
    }

    fn fold_recent(&mut self) {
        for chunk in self.recent.chunks(SEGMENT_CHANGES) {
            let segment = fold(chunk);
            self.segment_entries += segment.runs.len();
            self.segments.push(segment);
        }
        self.recent.clear();
        while self.segments.len() > 1
            && (self.segment_entries > SEGMENT_ENTRIES || self.segments.len() > MAX_SEGMENTS)
        {
            let segments = std::mem::take(&mut self.segments);
            let mut pairs = segments.into_iter();
            while let Some(first) = pairs.next() {
                let merged = match pairs.next() {
                    Some(second) => merge(first, second),
                    None => first,
                };
                self.segments.push(merged);
            }
            self.segment_entries = self.segments.iter().map(|s| s.runs.len()).sum();
        }
    }

    /// The highest live bytes of each of `site_count` sites, `site_of` mapping a raw stack
    /// to its site.
    pub fn local_peaks(&self, site_count: usize, site_of: impl Fn(StackId) -> usize) -> Vec<u64> {
        let mut peaks = vec![0u64; site_count];
        self.replay_groups(site_of, |site, step| {
            peaks[site] = peaks[site].max(step.high)
        });
        peaks
    }

    /// The live bytes of each of `groups` groups at each of `times` (ascending): the changes
    /// at or before the time counted; a folded stretch only once it has ended.
    pub fn live_at(
        &self,
        times: &[u64],
        groups: usize,
        group_of: impl FnMut(StackId) -> usize,
    ) -> Vec<Vec<u64>> {
        let mut live = vec![0u64; groups];
        let mut states = Vec::with_capacity(times.len());
        self.replay_groups(group_of, |group, step| {
            while states.len() < times.len() && step.end_ns > times[states.len()] {
                states.push(live.clone());
            }
            live[group] = step.after;
        });
        states.resize(times.len(), live);
        states
    }

    /// Replays the changes with stacks gathered into groups (`group_of`, small numbers):
    /// `visit` sees every stretch of time in order, once for each group that changed in it.
    pub fn replay_groups(
        &self,
        mut group_of: impl FnMut(StackId) -> usize,
        mut visit: impl FnMut(usize, GroupStep),
    ) {
        let mut live: Vec<i64> = Vec::new();
        // Per group touched in the current segment: (sum of rises, sum of nets).
        let mut pending: IntegerMap<usize, (i64, i64)> = IntegerMap::default();
        let mut groups: Vec<(usize, (i64, i64))> = Vec::new();
        for segment in &self.segments {
            for run in &segment.runs {
                let sums = pending.entry(group_of(run.stack)).or_default();
                sums.0 += run.rise;
                sums.1 += run.net;
            }
            groups.extend(pending.drain());
            groups.sort_unstable_by_key(|&(group, _)| group);
            for (group, (rise, net)) in groups.drain(..) {
                let (start_ns, end_ns) = (segment.start_ns, segment.end_ns);
                visit(group, step(&mut live, group, rise, net, start_ns, end_ns));
            }
        }
        // A change kept exactly is a stretch of one stack: no sums to gather.
        for change in &self.recent {
            let group = group_of(change.stack);
            let (rise, time_ns) = (change.bytes.max(0), change.time_ns);
            visit(
                group,
                step(&mut live, group, rise, change.bytes, time_ns, time_ns),
            );
        }
    }
}

/// Moves `group`'s live bytes by `net` over a stretch in which they rose by `rise` at most.
fn step(
    live: &mut Vec<i64>,
    group: usize,
    rise: i64,
    net: i64,
    start_ns: u64,
    end_ns: u64,
) -> GroupStep {
    if live.len() <= group {
        live.resize(group + 1, 0);
    }
    let before = live[group];
    live[group] += net;
    let clamp = |value: i64| value.max(0) as u64;
    GroupStep {
        start_ns,
        end_ns,
        before: clamp(before),
        high: clamp((before + rise).max(live[group])),
        after: clamp(live[group]),
    }
}

fn fold(changes: &[Change]) -> Segment {
    let mut runs: IntegerMap<StackId, (i64, i64)> = IntegerMap::default();
    for change in changes {
        let (net, rise) = runs.entry(change.stack).or_default();
        *net += change.bytes;
        *rise = (*rise).max(*net);
    }
    let mut runs: Vec<StackRun> = runs
        .into_iter()
        .map(|(stack, (net, rise))| StackRun { stack, net, rise })
        .collect();
    runs.sort_unstable_by_key(|run| run.stack);
    Segment {
        start_ns: changes.first().map_or(0, |change| change.time_ns),
        end_ns: changes.last().map_or(0, |change| change.time_ns),
        runs,
    }
}

/// Two neighbouring segments as one: a stack's rise is its rise in the first, or its net in
/// the first plus its rise in the second.
fn merge(first: Segment, second: Segment) -> Segment {
    let mut runs = Vec::with_capacity(first.runs.len().max(second.runs.len()));
    let (mut left, mut right) = (first.runs.iter().peekable(), second.runs.iter().peekable());
    loop {
        let run = match (left.peek(), right.peek()) {
            (Some(a), Some(b)) if a.stack == b.stack => {
                let run = StackRun {
                    stack: a.stack,
                    net: a.net + b.net,
                    rise: a.rise.max(a.net + b.rise),
                };
                left.next();
                right.next();
                run
            }
            (Some(a), Some(b)) if a.stack < b.stack => *left.next().expect("peeked"),
            (Some(_), Some(_)) | (None, Some(_)) => *right.next().expect("peeked"),
            (Some(_), None) => *left.next().expect("peeked"),
            (None, None) => break,
        };
        runs.push(run);
    }
    Segment {
        start_ns: first.start_ns,
        end_ns: second.end_ns,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_of_one_site_peak_together() {
        let mut changes = LiveChanges::default();
        changes.grew(1, 1, 100); // site 0: 100
        changes.grew(2, 2, 50); // site 0: 150, the peak of stacks 1 and 2 together
        changes.shrank(3, 1, 100); // 50
        changes.grew(4, 1, 80); // 130
        changes.grew(5, 3, 10); // site 1: 10
        let peaks = changes.local_peaks(2, |stack| usize::from(stack == 3));
        assert_eq!(peaks, vec![150, 10]);
        let separate = changes.local_peaks(4, |stack| stack as usize);
        assert_eq!(separate, vec![0, 100, 50, 10]);
    }

    /// Stack 1 churns 64-byte blocks around a level of 1000 live bytes; at change 300,000
    /// stack 2 holds 5000 bytes for one change.
    fn churn_with_a_spike() -> LiveChanges {
        let mut changes = LiveChanges::default();
        changes.grew(0, 1, 1000);
        for index in 1..=600_000u64 {
            match index {
                300_000 => changes.grew(index, 2, 5000),
                300_001 => changes.shrank(index, 2, 5000),
                _ if index % 2 == 1 => changes.grew(index, 1, 64),
                _ => changes.shrank(index, 1, 64),
            }
        }
        changes
    }

    #[test]
    fn folded_changes_keep_each_stack_s_peak_exactly() {
        let changes = churn_with_a_spike();
        assert!(!changes.segments.is_empty(), "the changes were folded");
        assert_eq!(
            changes.local_peaks(3, |stack| stack as usize),
            [0, 1064, 5000]
        );
        // One group of both: a folded segment adds the two stacks' rises, which here is
        // exactly the truth (1064 + 5000).
        let together = changes.local_peaks(1, |_| 0);
        assert_eq!(together, [6064]);
    }

    #[test]
    fn merged_segments_stay_bounded_and_keep_each_stack_s_peak() {
        // 5000 stacks each grow 40 times by 10 bytes, then shrink back to nothing: every
        // folded segment names about 1000 stacks, so neighbours must merge.
        let mut changes = LiveChanges::default();
        for index in 0..400_000u64 {
            let stack = (index % 5000) as StackId;
            if index < 200_000 {
                changes.grew(index, stack, 10);
            } else {
                changes.shrank(index, stack, 10);
            }
        }
        let stored = changes.recent.len() + changes.segment_entries;
        assert!(stored <= RECENT_CAPACITY + SEGMENT_ENTRIES, "{stored}");
        assert!(
            changes.segments.len() < 400_000 / SEGMENT_CHANGES,
            "segments merged"
        );
        let peaks = changes.local_peaks(5000, |stack| stack as usize);
        assert!(peaks.iter().all(|&peak| peak == 400), "{:?}", &peaks[..4]);
        let mut last_after = vec![u64::MAX; 5000];
        changes.replay_groups(
            |stack| stack as usize,
            |group, step| last_after[group] = step.after,
        );
        assert!(
            last_after.iter().all(|&after| after == 0),
            "nets add up to the final value"
        );
    }
}
