//! Residency sampling without ptrace: a thread per recording reads /proc/PID/status of every
//! supervised process at a fixed interval, /proc/PID/smaps_rollup at a rate adapted to
//! what the reads cost, and full /proc/PID/smaps when asked (start, exec, new peaks, SIGUSR1,
//! `--smaps-interval`), and sends the samples as events through the recording's sink, like
//! any other source.

mod budget;
pub mod snapshot;

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::events::{EventKind, EventSink, Residency, RollupCounters, StatusCounters, Watched};
use crate::proc::smaps::{parse_smaps_rollup, read_into};
use crate::proc::status::parse_status_memory;
use crate::trace::format::{SamplerCosts, SnapshotReason};
use budget::{thread_cpu_ns, RollupRate};

/// Default interval between /proc/PID/status rounds.
pub const DEFAULT_INTERVAL_MS: u32 = 20;

/// Shortest time between two snapshots of one process for new peaks: a program whose heap
/// grows steadily would otherwise be snapshotted at every 10 % of growth.
const PEAK_SNAPSHOT_GAP: Duration = Duration::from_secs(1);

/// How often the sampler reads what.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Between /proc/PID/status rounds.
    pub interval: Duration,
    /// Between full smaps snapshots of every process, when asked for.
    pub smaps_interval: Option<Duration>,
}

/// The running sampler; `stop` ends it and writes its costs.
pub struct Sampler {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling the processes in `watched`, sending to `output`.
    pub fn spawn(watched: Arc<Watched>, output: EventSink, rates: Rates) -> Sampler {
        let (stop, stopped) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("memsup-sampler".into())
            .spawn(move || {
                let mut work = Work::new(watched, output, rates);
                work.run(&stopped);
            })
            .expect("spawning the sampler thread");
        Sampler { stop, thread }
    }

    /// Stops the thread after its current round; its `SamplerCosts` record is sent by then.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

struct Work {
    watched: Arc<Watched>,
    output: EventSink,
    interval: Duration,
    smaps_interval: Option<Duration>,
    rollup: RollupRate,
    costs: SamplerCosts,
    pids: Vec<i32>,
    buffer: Vec<u8>,
    requested: Vec<(i32, SnapshotReason)>,
    peaks: Vec<(i32, u64)>,
    /// When each process was last snapshotted for a peak, and what that snapshot cost.
    last_peak_snapshot: HashMap<i32, (Instant, Duration)>,
}

impl Work {
    fn new(watched: Arc<Watched>, output: EventSink, rates: Rates) -> Work {
        let interval = rates.interval;
        Work {
            watched,
            output,
            interval,
            smaps_interval: rates.smaps_interval,
            rollup: RollupRate::new(interval),
            costs: SamplerCosts {
                status_interval_ns: interval.as_nanos() as u64,
                ..SamplerCosts::default()
            },
            pids: Vec::new(),
            // Large enough for any status file and a rollup: no reallocation while sampling.
            buffer: Vec::with_capacity(16 << 10),
            requested: Vec::new(),
            peaks: Vec::new(),
            last_peak_snapshot: HashMap::new(),
        }
    }

    fn run(&mut self, stopped: &Receiver<()>) {
        let started = Instant::now();
        let mut next_status = started;
        let mut next_rollup = started;
        let mut next_interval_snapshot = self.smaps_interval.map(|interval| started + interval);
        loop {
            let now = Instant::now();
            if let Some(next) = next_interval_snapshot.filter(|&next| now >= next) {
                self.watched.request_all(SnapshotReason::Interval);
                let interval = self.smaps_interval.unwrap_or_default();
                next_interval_snapshot = Some((next + interval).max(now));
            }
            self.snapshot_round(now, next_status);
            if now >= next_status {
                self.watched.snapshot(&mut self.pids);
                let cpu = thread_cpu_ns();
                self.status_round();
                self.rollup
                    .status_round_cost(thread_cpu_ns().saturating_sub(cpu));
                // A round that overran is not made up for: the next one is an interval later.
                next_status = (next_status + self.interval).max(now);
            }
            if now >= next_rollup {
                let cpu = thread_cpu_ns();
                self.rollup_round();
                let interval = self
                    .rollup
                    .rollup_round_cost(thread_cpu_ns().saturating_sub(cpu));
                next_rollup = now + interval;
            }
            let mut wake = next_status.min(next_rollup);
            if let Some(next) = next_interval_snapshot {
                wake = wake.min(next);
            }
            match stopped.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.costs.rollup_interval_ns = self.rollup.interval().as_nanos() as u64;
        self.costs.elapsed_ns = started.elapsed().as_nanos() as u64;
        self.output.send(0, 0, EventKind::SamplerCosts(self.costs));
    }

    /// Takes the snapshots asked for since the last round, and those of new peaks the rate
    /// limit allows (at most one per `PEAK_SNAPSHOT_GAP`, and 20 times its own cost, so
    /// peak snapshots stay within the sampler's budget); the others wait.
    fn snapshot_round(&mut self, now: Instant, status_due: Instant) {
        self.watched
            .take_requests(&mut self.requested, &mut self.peaks);
        for index in 0..self.requested.len() {
            let (pid, reason) = self.requested[index];
            // Many snapshots at once (a signal, many processes) must not hold up the RSS
            // timeline: past the next status round, the rest waits for the next pass.
            if Instant::now() >= status_due {
                self.watched.request(pid, reason);
                continue;
            }
            self.send_snapshot(pid, reason);
        }
        for index in 0..self.peaks.len() {
            let (pid, bytes) = self.peaks[index];
            let allowed = match self.last_peak_snapshot.get(&pid) {
                Some(&(when, cost)) => now >= when + PEAK_SNAPSHOT_GAP.max(cost * 20),
                None => true,
            };
            if !allowed || Instant::now() >= status_due {
                self.watched.defer_peak(pid, bytes);
                continue;
            }
            if let Some(cost) = self.send_snapshot(pid, SnapshotReason::Peak) {
                self.last_peak_snapshot.insert(pid, (now, cost));
            }
        }
    }

    /// Returns what the snapshot cost, None when the process had none to take.
    fn send_snapshot(&mut self, pid: i32, reason: SnapshotReason) -> Option<Duration> {
        let snapshot = snapshot::take(pid, reason, &mut self.buffer)?;
        let cost = match snapshot {
            EventKind::SmapsSnapshot { cost_ns, .. } => Duration::from_nanos(cost_ns),
            _ => Duration::ZERO,
        };
        self.output.send(pid as u32, pid as u32, snapshot);
        Some(cost)
    }

    fn status_round(&mut self) {
        let cpu = thread_cpu_ns();
        for index in 0..self.pids.len() {
            let pid = self.pids[index];
            // A process gone meanwhile, or a zombie, has nothing to sample.
            if read_into(&format!("/proc/{pid}/status"), &mut self.buffer).is_err() {
                continue;
            }
            let Some(memory) = parse_status_memory(&self.buffer) else {
                continue;
            };
            self.costs.status_samples += 1;
            let counters = StatusCounters {
                rss: memory.rss,
                anon: memory.anon,
                file: memory.file,
                shmem: memory.shmem,
                swap: memory.swap,
            };
            let pid = pid as u32;
            self.output
                .send(pid, pid, EventKind::StatusSample(counters));
        }
        self.costs.status_cpu_ns += thread_cpu_ns().saturating_sub(cpu);
    }

    fn rollup_round(&mut self) {
        let cpu = thread_cpu_ns();
        for index in 0..self.pids.len() {
            let pid = self.pids[index];
            // Reopened every time: an open smaps_rollup keeps the address space it was
            // opened on, which an exec replaces.
            if read_into(&format!("/proc/{pid}/smaps_rollup"), &mut self.buffer).is_err()
                || self.buffer.is_empty()
            {
                continue;
            }
            let rollup = parse_smaps_rollup(&self.buffer);
            self.costs.rollup_samples += 1;
            let counters = RollupCounters {
                rss: rollup.rss,
                pss: rollup.pss,
                pss_anon: rollup.pss_anon,
                pss_file: rollup.pss_file,
                pss_shmem: rollup.pss_shmem,
                swap: rollup.swap,
                swap_pss: rollup.swap_pss,
            };
            let pid = pid as u32;
            self.output
                .send(pid, pid, EventKind::RollupSample(counters));
        }
        self.costs.rollup_cpu_ns += thread_cpu_ns().saturating_sub(cpu);
    }
}

/// The sampler's side of `Residency`, for sources that ask for snapshots.
pub struct Snapshots {
    watched: Arc<Watched>,
}

impl Snapshots {
    pub fn new(watched: Arc<Watched>) -> Snapshots {
        Snapshots { watched }
    }
}

impl Residency for Snapshots {
    fn request_all(&self, reason: SnapshotReason) {
        self.watched.request_all(reason);
    }

    fn snapshot_now(&self, pid: i32, reason: SnapshotReason) -> Option<EventKind> {
        snapshot::take(pid, reason, &mut Vec::new())
    }
}
