//! Residency of each process image from the sampler's records: how many samples fell in the
//! image and the highest RSS, PSS and swap they saw. Samples reach the profile apart from the
//! tracer's records, so the replay matches them to images by PID and time, not by position.

use super::components::Sample;

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

impl ResidencySummary {
    /// Counts one sample of the image.
    pub(super) fn add(&mut self, sample: Sample) {
        let (rss, swap) = match sample {
            Sample::Status { rss, swap, .. } => {
                self.status_samples += 1;
                (rss, swap)
            }
            Sample::Rollup { rss, pss, swap, .. } => {
                self.rollup_samples += 1;
                self.peak_pss_bytes = self.peak_pss_bytes.max(pss);
                (rss, swap)
            }
        };
        self.peak_rss_bytes = self.peak_rss_bytes.max(rss);
        self.peak_swap_bytes = self.peak_swap_bytes.max(swap);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::analysis::replay::Replay;
    use crate::analysis::{analyze_records, SampleOrder, Settings};
    use crate::trace::format::{
        AllocFunction, ExitKind, Header, ProbeCounters, Record, RecordMode, StartCause,
    };

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

    /// PID 10 runs one program until 1000 ns, then execs another; PID 11 runs throughout;
    /// both exit at 5000 ns.
    fn tracer_records() -> Vec<Record> {
        let start = |pid| Record::ProcessStart {
            time_ns: 0,
            pid,
            parent_pid: None,
            cause: StartCause::Launch,
        };
        let exit = |pid| Record::ProcessExit {
            time_ns: 5000,
            pid,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        };
        vec![
            start(10),
            start(11),
            Record::Alloc {
                time_ns: 10,
                pid: 10,
                tid: 10,
                function: AllocFunction::Malloc,
                address: 0x100,
                size: 8,
                stack: 0,
            },
            Record::Exec {
                time_ns: 1000,
                pid: 10,
                exe: "/bin/second".to_string(),
                argv: Vec::new(),
            },
            exit(10),
            exit(11),
            Record::End { time_ns: 5000 },
        ]
    }

    fn samples() -> Vec<Record> {
        vec![
            status(100, 10, 4096, 0),
            rollup(150, 10, 8192, 6000),
            status(200, 11, 1 << 20, 4096),
            status(2000, 10, 12288, 0),
            rollup(2500, 10, 16384, 9000),
            status(2600, 10, 8192, 0),
            // Outside every image of its PID: ignored.
            status(9000, 10, 1 << 30, 0),
            status(100, 12, 1 << 30, 0),
        ]
    }

    fn summaries(records: Vec<Record>, order: SampleOrder) -> Vec<ResidencySummary> {
        let header = Header {
            memsup_version: String::new(),
            host: String::new(),
            mode: RecordMode::Run,
            target: Vec::new(),
            start_unix_ns: 0,
            options: Vec::new(),
        };
        let settings = Settings::default();
        let analysis = analyze_records(&header, records, order, Path::new("p"), &settings);
        let images = analysis.processes.iter();
        images.map(|image| image.residency).collect()
    }

    #[test]
    fn samples_go_to_the_image_of_their_pid_and_time() {
        let early: Vec<Record> = samples().into_iter().chain(tracer_records()).collect();
        let late: Vec<Record> = tracer_records().into_iter().chain(samples()).collect();
        let mut in_time_order = late.clone();
        in_time_order.sort_by_key(Record::time_ns);
        let cases = [
            (early, SampleOrder::Apart),
            (late, SampleOrder::Apart),
            (in_time_order, SampleOrder::InTimeOrder),
        ];
        for (records, order) in cases {
            let summary = summaries(records, order);
            assert_eq!(summary.len(), 3);
            assert_eq!(
                summary[0],
                ResidencySummary {
                    status_samples: 1,
                    rollup_samples: 1,
                    peak_rss_bytes: 8192,
                    peak_pss_bytes: 6000,
                    peak_swap_bytes: 0,
                }
            );
            assert_eq!(
                summary[1],
                ResidencySummary {
                    status_samples: 1,
                    rollup_samples: 0,
                    peak_rss_bytes: 1 << 20,
                    peak_pss_bytes: 0,
                    peak_swap_bytes: 4096,
                }
            );
            assert_eq!(
                summary[2],
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

    const SAMPLE_INTERVAL_NS: u64 = 20_000_000;
    const IDLE_SAMPLES: u64 = 100_000;

    fn malloc(time_ns: u64, pid: u32, address: u64) -> Record {
        crate::analysis::tests::alloc_for(time_ns, pid, address, 64)
    }

    /// The `index`th sample of the process that stopped allocating: RSS rises by a page a
    /// sample for 1,000 samples and starts again; swap is the index.
    fn idle_sample(index: u64) -> Record {
        let rss = 4096 * (1 + index % 1000);
        status(index * SAMPLE_INTERVAL_NS + 1, 10, rss, index)
    }

    /// Replays `records` one at a time; the image of PID 10 and the most samples held at once.
    fn replay_idle(records: Vec<Record>, order: SampleOrder) -> (ResidencySummary, usize) {
        let mut replay = Replay::new(RecordMode::Run, order);
        let mut most_held = 0;
        for record in records {
            replay.apply(record);
            most_held = most_held.max(replay.held());
        }
        let images = replay.finish(&Settings::default());
        let idle = images.iter().find(|image| image.pid == 10).expect("PID 10");
        (idle.residency, most_held)
    }

    const IDLE_SUMMARY: ResidencySummary = ResidencySummary {
        status_samples: IDLE_SAMPLES,
        rollup_samples: 0,
        peak_rss_bytes: 4096 * 1000,
        peak_pss_bytes: 0,
        peak_swap_bytes: IDLE_SAMPLES - 1,
    };

    #[test]
    fn a_process_that_stops_allocating_holds_no_samples_when_they_are_in_time_order() {
        let mut records = vec![malloc(0, 10, 0x100)];
        records.extend((0..IDLE_SAMPLES).map(idle_sample));
        let (summary, most_held) = replay_idle(records, SampleOrder::InTimeOrder);
        assert_eq!(most_held, 0);
        assert_eq!(summary, IDLE_SUMMARY);
    }

    #[test]
    fn a_process_that_stops_allocating_holds_only_samples_no_tracer_record_has_passed() {
        // PID 11 allocates on; each sample of PID 10 reaches the file before a record of
        // PID 11 of an earlier time, as the sampler wrote apart from the tracer.
        let mut records = vec![malloc(0, 10, 0x100)];
        for index in 0..IDLE_SAMPLES {
            let start_ns = index * SAMPLE_INTERVAL_NS;
            records.push(idle_sample(index));
            records.push(malloc(start_ns, 11, 0x1000 + index * 64));
            records.push(malloc(start_ns + 2, 11, 0x1000 + index * 64 + 32));
        }
        let (summary, most_held) = replay_idle(records, SampleOrder::Apart);
        assert_eq!(most_held, 1);
        assert_eq!(summary, IDLE_SUMMARY);
    }
}
