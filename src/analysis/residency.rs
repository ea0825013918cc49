//! Residency of each process image from the sampler's records: how many samples fell in the
//! image and the highest RSS, PSS and swap they saw. Samples reach the profile apart from the
//! tracer's records, so they are matched to images by PID and time, not by position.

use super::ProcessAnalysis;
use crate::trace::format::Record;

/// What the samples taken during one process image saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResidencySummary {
    /// `/proc/PID/status` samples.
    pub status_samples: u64,
    /// `/proc/PID/smaps_rollup` samples.
    pub rollup_samples: u64,
    /// Highest VmRSS (status) or Rss (rollup) sampled.
    pub peak_rss_bytes: u64,
    /// Highest Pss sampled (rollup samples only).
    pub peak_pss_bytes: u64,
    /// Highest swap sampled.
    pub peak_swap_bytes: u64,
}

/// Adds every sample of `records` to the image of its PID whose time span holds it.
pub(super) fn add_samples(records: &[Record], images: &mut [ProcessAnalysis]) {
    for record in records {
        let (time_ns, pid, rss, pss, swap, is_rollup) = match *record {
            Record::StatusSample {
                time_ns,
                pid,
                rss,
                swap,
                ..
            } => (time_ns, pid, rss, 0, swap, false),
            Record::RollupSample {
                time_ns,
                pid,
                rss,
                pss,
                swap,
                ..
            } => (time_ns, pid, rss, pss, swap, true),
            _ => continue,
        };
        let Some(image) = images.iter_mut().rev().find(|image| {
            image.pid == pid
                && image.start_ns <= time_ns
                && time_ns <= image.start_ns + image.duration_ns
        }) else {
            continue;
        };
        let summary = &mut image.residency;
        if is_rollup {
            summary.rollup_samples += 1;
            summary.peak_pss_bytes = summary.peak_pss_bytes.max(pss);
        } else {
            summary.status_samples += 1;
        }
        summary.peak_rss_bytes = summary.peak_rss_bytes.max(rss);
        summary.peak_swap_bytes = summary.peak_swap_bytes.max(swap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::StartCause;

    fn status(time_ns: u64, pid: u32, rss: u64, swap: u64) -> Record {
        Record::StatusSample {
            time_ns,
            pid,
            rss,
            anon: 0,
            file: 0,
            shmem: 0,
            swap,
        }
    }

    fn rollup(time_ns: u64, pid: u32, rss: u64, pss: u64) -> Record {
        Record::RollupSample {
            time_ns,
            pid,
            rss,
            pss,
            pss_anon: 0,
            pss_file: 0,
            pss_shmem: 0,
            swap: 0,
            swap_pss: 0,
        }
    }

    fn image(pid: u32, start_ns: u64, duration_ns: u64) -> ProcessAnalysis {
        let mut image = ProcessAnalysis::new(pid, None, StartCause::Launch, start_ns);
        image.duration_ns = duration_ns;
        image
    }

    #[test]
    fn samples_go_to_the_image_of_their_pid_and_time() {
        // PID 10 runs one program until 1000 ns, then execs another; PID 11 runs throughout.
        let mut images = [
            image(10, 0, 1000),
            image(11, 0, 5000),
            image(10, 1000, 4000),
        ];
        let records = [
            status(100, 10, 4096, 0),
            rollup(150, 10, 8192, 6000),
            status(200, 11, 1 << 20, 4096),
            status(2000, 10, 12288, 0),
            rollup(2500, 10, 16384, 9000),
            status(2600, 10, 8192, 0),
            // Outside every image of its PID: ignored.
            status(9000, 10, 1 << 30, 0),
            status(100, 12, 1 << 30, 0),
        ];
        add_samples(&records, &mut images);
        let summary = |index: usize| images[index].residency;
        assert_eq!(
            summary(0),
            ResidencySummary {
                status_samples: 1,
                rollup_samples: 1,
                peak_rss_bytes: 8192,
                peak_pss_bytes: 6000,
                peak_swap_bytes: 0,
            }
        );
        assert_eq!(
            summary(1),
            ResidencySummary {
                status_samples: 1,
                rollup_samples: 0,
                peak_rss_bytes: 1 << 20,
                peak_pss_bytes: 0,
                peak_swap_bytes: 4096,
            }
        );
        assert_eq!(
            summary(2),
            ResidencySummary {
                status_samples: 2,
                rollup_samples: 1,
                peak_rss_bytes: 16384,
                peak_pss_bytes: 9000,
                peak_swap_bytes: 0,
            }
        );
    }
}
