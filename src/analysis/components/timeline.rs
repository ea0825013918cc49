//! Downsampling that keeps every peak (as MALT does): the image's span is cut into at most
//! `MAX_POINTS` equal buckets and each keeps the highest value it saw, so a spike shorter
//! than a bucket still shows at full height.

use super::TimePoint;

pub(super) const MAX_POINTS: u64 = 512;

/// Equal buckets over [start, end].
#[derive(Debug, Clone, Copy)]
pub(super) struct Buckets {
    start: u64,
    width: u64,
    count: usize,
}

impl Buckets {
    pub fn new(start: u64, end: u64) -> Buckets {
        let span = end.saturating_sub(start).max(1);
        let width = span.div_ceil(MAX_POINTS).max(1);
        Buckets {
            start,
            width,
            count: span.div_ceil(width) as usize,
        }
    }

    /// The bucket of `time_ns` (times outside the span go to the first or last).
    fn index(&self, time_ns: u64) -> usize {
        let index = time_ns.saturating_sub(self.start) / self.width;
        (index as usize).min(self.count - 1)
    }

    fn time(&self, index: usize) -> u64 {
        self.start + index as u64 * self.width
    }
}

/// A step function (a value that holds until the next change), downsampled: every bucket
/// gives the highest value held in it, the value carried in included; a point is kept where
/// that changes, and at the last bucket.
#[derive(Debug, Clone)]
pub(super) struct StepSeries {
    buckets: Buckets,
    maxima: Vec<u64>,
    current: u64,
    pub peak: u64,
}

impl StepSeries {
    pub fn new(buckets: Buckets) -> StepSeries {
        StepSeries {
            buckets,
            maxima: Vec::new(),
            current: 0,
            peak: 0,
        }
    }

    /// The value becomes `value` at `time_ns`.
    pub fn set(&mut self, time_ns: u64, value: u64) {
        let index = self.buckets.index(time_ns);
        while self.maxima.len() <= index {
            self.maxima.push(self.current);
        }
        let maximum = &mut self.maxima[index];
        *maximum = (*maximum).max(value);
        self.current = value;
        self.peak = self.peak.max(value);
    }

    pub fn points(mut self) -> Vec<TimePoint> {
        while self.maxima.len() < self.buckets.count {
            self.maxima.push(self.current);
        }
        let buckets = self.buckets;
        let last = self.maxima.len().saturating_sub(1);
        let mut points: Vec<TimePoint> = Vec::new();
        for (index, bytes) in self.maxima.into_iter().enumerate() {
            // A bucket holding the previous one's value adds nothing to a step function;
            // the last one stays, to say how long the value held.
            if index != last && points.last().is_some_and(|point| point.bytes == bytes) {
                continue;
            }
            points.push(TimePoint {
                time_ns: buckets.time(index),
                bytes,
            });
        }
        points
    }
}

/// Point samples kept before neighbouring pairs merge.
const POINT_CAPACITY: usize = 4096;

/// Point samples (time, value) of one image, in time order and bounded: past
/// `POINT_CAPACITY`, neighbouring pairs merge into one at the first's time with the higher
/// value, so no peak is lost and `sampled` buckets them as before.
#[derive(Debug, Clone, Default)]
pub(in crate::analysis) struct PointSeries {
    points: Vec<(u64, u64)>,
}

impl PointSeries {
    pub fn add(&mut self, time_ns: u64, value: u64) {
        // Samples arrive in time order but for one that reached the replay late.
        let position = self.points.partition_point(|point| point.0 <= time_ns);
        self.points.insert(position, (time_ns, value));
        if self.points.len() > POINT_CAPACITY {
            let merged = self.points.chunks(2).map(|pair| {
                let highest = pair.iter().map(|point| point.1).max().unwrap_or(0);
                (pair[0].0, highest)
            });
            self.points = merged.collect();
        }
    }

    pub fn points(&self) -> &[(u64, u64)] {
        &self.points
    }
}

/// Point samples (time, value), in time order: kept as they are when there are few enough,
/// else one point per non-empty bucket at its start, with the bucket's highest sample.
pub(super) fn sampled(buckets: Buckets, samples: &[(u64, u64)]) -> Vec<TimePoint> {
    if samples.len() as u64 <= MAX_POINTS {
        return samples
            .iter()
            .map(|&(time_ns, bytes)| TimePoint { time_ns, bytes })
            .collect();
    }
    let mut points: Vec<TimePoint> = Vec::new();
    let mut last_index = None;
    for &(time_ns, bytes) in samples {
        let index = buckets.index(time_ns);
        match points.last_mut() {
            Some(point) if last_index == Some(index) => point.bytes = point.bytes.max(bytes),
            _ => {
                points.push(TimePoint {
                    time_ns: buckets.time(index),
                    bytes,
                });
                last_index = Some(index);
            }
        }
    }
    points
}
