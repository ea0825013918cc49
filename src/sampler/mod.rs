//! Residency sampling without ptrace: a thread per recording reads /proc/PID/status of every
//! supervised process at a fixed interval, /proc/PID/smaps_rollup at a rate adapted to
//! what the reads cost, and full /proc/PID/smaps when asked (attach, SIGUSR1,
//! `--smaps-interval`) and at new highs of requested bytes or RSS (`highs`; estimated from
//! pagemap while a dear snapshot waits, `estimate`), and sends the samples as events through
//! the recording's sink, like any other source.

mod budget;
mod estimate;
mod highs;
pub mod snapshot;
mod split;

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::events::watched::EstimateBase;
use crate::events::{
    monotonic_ns, EventKind, EventSink, RequestedHigh, Residency, RollupCounters, StatusCounters,
    Watched,
};
use crate::proc::hugetlb::HugetlbDevices;
use crate::proc::smaps::{parse_smaps_rollup, read_into};
use crate::proc::status::{parse_status_memory, read_cpu_ns};
use crate::trace::format::{MappingResidency, SamplerCosts, SnapshotReason};
use budget::{
    estimate_cost_now, snapshot_cost_now, thread_cpu_ns, HighsCredit, RollupRate, Size,
    ESTIMATES_PART,
};
use highs::{Activity, High, Highs, Next, FAST_INTERVAL_NS};

/// Default interval between /proc/PID/status rounds.
pub const DEFAULT_INTERVAL_MS: u32 = 20;

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
        let (waker, woken) = crossbeam_channel::bounded(1);
        watched.set_waker(waker);
        let thread = std::thread::Builder::new()
            .name("memsup-sampler".into())
            .spawn(move || {
                let mut work = Work::new(watched, output, rates);
                work.run(&stopped, &woken);
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
    peaks: Vec<(i32, RequestedHigh)>,
    highs: Highs,
    /// The main thread's CPU time at each process's last status read.
    cpu_ns: HashMap<i32, u64>,
    credit: HighsCredit,
    /// What the last snapshot of each process cost (what its next one is expected to), and
    /// the size it found.
    last_cost: HashMap<i32, (Duration, Size)>,
    /// How many mappings each process's last snapshot or estimate found, and its mappings
    /// made (`Watched::mappings_made`) before that read.
    mappings: HashMap<i32, (usize, i64)>,
    /// The most mappings a process can have (vm.max_map_count): what the mapping calls
    /// counted say beyond it was merged by the kernel.
    max_mappings: usize,
    /// The credit for estimates at highs, apart, so that a dear snapshot saved for does not
    /// hold them up; what the last estimate of each process cost; the high (its time) each
    /// process was last estimated for.
    estimates: HighsCredit,
    /// What each process's next estimate is expected to cost, whether its last one was
    /// counted again, and on how many mappings (when known).
    last_estimate_cost: HashMap<i32, (Duration, Counted, Option<usize>)>,
    estimated: HashMap<i32, u64>,
    /// Where mappings of hugetlb pages are, which estimates do not count.
    hugetlb: HugetlbDevices,
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
            highs: Highs::default(),
            cpu_ns: HashMap::new(),
            credit: HighsCredit::new(Instant::now()),
            last_cost: HashMap::new(),
            mappings: HashMap::new(),
            estimates: HighsCredit::new(Instant::now()),
            last_estimate_cost: HashMap::new(),
            estimated: HashMap::new(),
            max_mappings: std::fs::read_to_string("/proc/sys/vm/max_map_count")
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or(65_530),
            hugetlb: HugetlbDevices::find(
                &std::fs::read("/proc/self/mountinfo").unwrap_or_default(),
            ),
        }
    }

    fn run(&mut self, stopped: &Receiver<()>, woken: &Receiver<()>) {
        let started = Instant::now();
        let fast_interval = Duration::from_nanos(FAST_INTERVAL_NS);
        let mut next_status = started;
        let mut next_fast = started;
        let mut next_rollup = started;
        let mut last_rollup = started;
        let mut next_interval_snapshot = self.smaps_interval.map(|interval| started + interval);
        loop {
            let now = Instant::now();
            if let Some(next) = next_interval_snapshot.filter(|&next| now >= next) {
                self.watched.request_all(SnapshotReason::Interval);
                let interval = self.smaps_interval.unwrap_or_default();
                next_interval_snapshot = Some((next + interval).max(now));
            }
            for pid in self.watched.take_new_images() {
                self.forget_image(pid);
            }
            self.snapshot_round(next_status);
            if now >= next_status {
                self.watched.snapshot(&mut self.pids);
                self.highs.keep_only(&self.pids);
                self.credit.keep_only(&self.pids);
                self.estimates.keep_only(&self.pids);
                let pids = &self.pids;
                self.cpu_ns.retain(|pid, _| pids.contains(pid));
                self.estimated.retain(|pid, _| pids.contains(pid));
                self.last_estimate_cost.retain(|pid, _| pids.contains(pid));
                self.last_cost.retain(|pid, _| pids.contains(pid));
                self.mappings.retain(|pid, _| pids.contains(pid));
                let reads = self.status_round(false);
                self.rollup.status_round_cost(reads);
                let share = self.rollup.highs_share();
                self.credit.set_share(share * (1.0 - ESTIMATES_PART), now);
                self.estimates.set_share(share * ESTIMATES_PART, now);
                // A round that overran is not made up for: the next one is an interval later.
                next_status = (next_status + self.interval).max(now);
                next_fast = now + fast_interval;
            } else if now >= next_fast && self.fast_reads_allowed(now) {
                self.watched.snapshot(&mut self.pids);
                let cost = self.status_round(true);
                self.spend_on_reads(cost, now);
                next_fast = now + fast_interval;
            }
            if now >= next_rollup {
                let cpu = thread_cpu_ns();
                self.rollup_round();
                let interval = self.rollup.rollup_round_cost(
                    thread_cpu_ns().saturating_sub(cpu),
                    now.saturating_duration_since(last_rollup),
                    self.credit.filling_share() + self.estimates.filling_share(),
                );
                last_rollup = now;
                next_rollup = now + interval;
            }
            let mut wake = next_status.min(next_rollup);
            if let Some(next) = next_interval_snapshot {
                wake = wake.min(next);
            }
            if self.fast_reads_allowed(now) {
                wake = wake.min(next_fast);
            }
            let timeout = wake.saturating_duration_since(Instant::now());
            crossbeam_channel::select! {
                recv(stopped) -> _ => break,
                recv(woken) -> _ => {}
                default(timeout) => {}
            }
        }
        self.costs.rollup_interval_ns = self.rollup.interval().as_nanos() as u64;
        self.costs.elapsed_ns = started.elapsed().as_nanos() as u64;
        self.output.send(0, 0, EventKind::SamplerCosts(self.costs));
    }

    /// Whether a process is followed and a credit for highs is not spent: the one for
    /// estimates pays for the reads while a dear snapshot is saved for, but not out of
    /// what an estimate waits for (reads every 2 ms at each high would keep it from ever
    /// holding the cost of one; the status rounds still see the highs).
    fn fast_reads_allowed(&mut self, now: Instant) -> bool {
        self.highs.any_followed(monotonic_ns())
            && (self.credit.allows_reads(now) || self.estimates.allows_reads_beside_waiting(now))
    }

    fn spend_on_reads(&mut self, cost: u64, now: Instant) {
        match self.credit.allows_reads(now) {
            true => self.credit.spend(cost),
            false => self.estimates.spend(cost),
        }
        self.rollup.highs_cost(cost);
    }

    /// Takes the snapshots asked for since the last round, and starts following the new
    /// highs of requested bytes (their snapshots wait until the memory is written).
    fn snapshot_round(&mut self, status_due: Instant) {
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
        let now_ns = monotonic_ns();
        for index in 0..self.peaks.len() {
            let (pid, high) = self.peaks[index];
            self.highs.requested(pid, high.bytes, high.time_ns, now_ns);
        }
    }

    /// Takes and sends a snapshot of `pid`; None when the process had none to take.
    fn send_snapshot(&mut self, pid: i32, asked: SnapshotReason) -> Option<Duration> {
        // Blocks recorded by hooks and not yet sent must precede the snapshot.
        self.watched.before_snapshot(pid);
        let image = self.watched.image(pid);
        let made = self.watched.mappings_made(pid);
        let mark = self.watched.unmapped_mark(pid);
        let read_from_ns = monotonic_ns();
        let mut snapshot = snapshot::take(pid, asked, &mut self.buffer)?;
        let now_ns = monotonic_ns();
        let EventKind::SmapsSnapshot {
            reason,
            cost_ns,
            mappings,
        } = &mut snapshot
        else {
            return None;
        };
        // Read after the kernel ran a new program, before the tracer handled that exec (its
        // stop snapshots the new image): of neither image as the stream stands.
        if !self.watched.maps_program(pid, mappings) {
            return None;
        }
        let base_mappings = mappings.len();
        *cost_ns += cut_merged(&self.watched, pid, mappings);
        // A high's delay runs to the snapshot's time, the end of its read.
        if let SnapshotReason::RequestedHigh { delay_ns, .. }
        | SnapshotReason::RssHigh { delay_ns, .. } = reason
        {
            *delay_ns = now_ns.saturating_sub(*delay_ns);
        }
        let cost = Duration::from_nanos(*cost_ns);
        let rss = mappings.iter().map(|mapping| mapping.rss).sum();
        // Copied before the lock that the tracer's exec handling waits on.
        let base = Arc::new(mappings.clone());
        let (output, watched) = (&self.output, &self.watched);
        let sent = self.watched.send_if_same_image(pid, image, || {
            watched.keep_base(pid, image, base, mark);
            output.send_at(now_ns, pid as u32, pid as u32, snapshot)
        });
        if !sent {
            // The process exec'd during the read: a high was its old image's, while what was
            // asked of the process (a signal, an interval, an attach) is asked of the new one.
            let of_the_process = matches!(
                asked,
                SnapshotReason::Signal | SnapshotReason::Interval | SnapshotReason::Start
            );
            if of_the_process {
                self.watched.request_unless_pending(pid, asked);
            }
            self.forget_image(pid);
            return None;
        }
        // Whatever its reason (an exec or a signal may have replaced a pending start).
        self.watched.started(pid);
        // An estimate waiting for its credit would start from this snapshot: a new high's.
        self.estimates.forget(pid);
        self.highs.snapshotted(pid, read_from_ns, now_ns);
        let size = Size {
            rss,
            mappings: base_mappings,
        };
        self.last_cost.insert(pid, (cost, size));
        self.mappings.insert(pid, (base_mappings, made));
        Some(cost)
    }

    /// `pid` exec'd: the highs and CPU time of its old image say nothing about the new one
    /// (the interpret stage says so too, later).
    fn forget_image(&mut self, pid: i32) {
        self.highs.forget(pid);
        self.credit.forget(pid);
        self.estimates.forget(pid);
        self.cpu_ns.remove(&pid);
        self.estimated.remove(&pid);
        self.last_estimate_cost.remove(&pid);
        self.last_cost.remove(&pid);
        self.mappings.remove(&pid);
    }

    /// How many mappings `pid` has now, as its last snapshot or estimate and the mapping
    /// calls recorded since tell: an upper bound, since neighbours made apart may be merged
    /// into one (a slab allocator's), and no more than the kernel allows.
    fn mappings_now(&self, pid: i32) -> Option<usize> {
        let &(found, made) = self.mappings.get(&pid)?;
        let since = self.watched.mappings_made(pid) - made;
        Some(((found as i64 + since).max(0) as usize).min(self.max_mappings.max(found)))
    }

    /// Snapshots `pid` for `high` when the credit for highs allows; else the high waits for
    /// a later read. `rss`: its status RSS read just now.
    fn snapshot_high(&mut self, pid: i32, high: High, rss: u64) {
        let (expected, then) = self.last_cost.get(&pid).copied().unwrap_or_default();
        if !self.credit.allows_snapshot(pid, expected, Instant::now()) {
            let mappings = self.mappings_now(pid).unwrap_or(then.mappings);
            let now = snapshot_cost_now(expected, then, Size { rss, mappings });
            self.estimate_high(pid, high, rss, now);
            return;
        }
        // The delay field holds the high's time until the read ends (`send_snapshot`).
        let reason = match high {
            High::Requested { bytes, time_ns } => SnapshotReason::RequestedHigh {
                bytes,
                delay_ns: time_ns,
            },
            High::Rss { bytes, time_ns } => SnapshotReason::RssHigh {
                bytes,
                delay_ns: time_ns,
            },
        };
        let cpu = thread_cpu_ns();
        self.send_snapshot(pid, reason);
        let cost = thread_cpu_ns().saturating_sub(cpu);
        self.credit.spend(cost);
        self.rollup.highs_cost(cost);
    }

    /// Estimates `pid`'s residency at `high` while its snapshot, expected to cost
    /// `snapshot_cost` now, waits for the credit: once per high, when the process has a snapshot
    /// of its image to start from and the estimate is the cheaper by half (a first one is
    /// expected to cost a tenth, what reading maps costs next to smaps, and may take the
    /// credit below zero, like a first snapshot). Paid for whether or not it is sent. Each
    /// estimate starts from the last snapshot or estimate of the image, so that a program
    /// growing by GiBs has only what it added since the previous one counted.
    fn estimate_high(&mut self, pid: i32, high: High, rss: u64, snapshot_cost: Duration) {
        let time_ns = match high {
            High::Requested { time_ns, .. } | High::Rss { time_ns, .. } => time_ns,
        };
        if self.estimated.get(&pid) == Some(&time_ns) {
            return;
        }
        let image = self.watched.image(pid);
        let Some(base) = self.watched.base(pid, image) else {
            return;
        };
        let now = self.mappings_now(pid);
        let last = self
            .last_estimate_cost
            .get(&pid)
            .map(|&(cost, _, then)| estimate_cost_now(cost, then, now));
        let expected = last.unwrap_or(snapshot_cost / 10);
        let credit = last.unwrap_or_default();
        if expected * 2 > snapshot_cost
            || !self.estimates.allows_snapshot(pid, credit, Instant::now())
        {
            return;
        }
        let cpu = thread_cpu_ns();
        let sent = self.send_estimate(pid, (image, &base), high, rss, cpu);
        let cost_ns = thread_cpu_ns().saturating_sub(cpu);
        if sent.is_none() && self.watched.image(pid) != image {
            self.forget_image(pid);
            return;
        }
        self.estimated.insert(pid, time_ns);
        let counted = sent.unwrap_or(Counted::Once);
        let cost = Duration::from_nanos(cost_ns);
        let mappings = self.mappings_now(pid);
        // A recount's cost is not what the next estimate, starting from its pieces, is
        // expected to cost, unless that one was counted again too (pages written in place
        // at every high) or none came before.
        let expected = match (self.last_estimate_cost.get(&pid), counted) {
            (Some(&(last, Counted::Once, then)), Counted::Again) => {
                estimate_cost_now(last, then, mappings)
            }
            _ => cost,
        };
        self.last_estimate_cost
            .insert(pid, (expected, counted, mappings));
        self.estimates.spend(cost_ns);
        self.rollup.highs_cost(cost_ns);
    }

    /// Reads and sends the estimate of `pid` (image `image`) at `high` from `base` and the
    /// status RSS `rss` read just before; keeps its pieces as the base of the next. None
    /// when the process had none to give or exec'd meanwhile.
    fn send_estimate(
        &mut self,
        pid: i32,
        (image, base): (u64, &EstimateBase),
        high: High,
        rss: u64,
        cpu: u64,
    ) -> Option<Counted> {
        let (bytes, time_ns) = match high {
            High::Requested { bytes, time_ns } | High::Rss { bytes, time_ns } => (bytes, time_ns),
        };
        self.watched.before_snapshot(pid);
        let made = self.watched.mappings_made(pid);
        // What was unmapped up to now (the hooks' records flushed just above) is counted;
        // anything later, by the next estimate, from this mark.
        let (mark, unmapped) = self.watched.unmapped_since(pid, base);
        let (parts, unmapped) = match &unmapped {
            Some(unmapped) => (&base.mappings[..], &unmapped[..]),
            None => (&[][..], &[][..]),
        };
        let estimate::Estimate {
            mut mappings,
            sampled,
            pieces,
            recounted,
        } = estimate::take(pid, (parts, unmapped), rss, &self.hugetlb, &mut self.buffer)?;
        let mappings_now = mappings.len();
        cut_merged(&self.watched, pid, &mut mappings);
        let now_ns = monotonic_ns();
        let delay_ns = now_ns.saturating_sub(time_ns);
        let reason = match high {
            High::Requested { .. } => SnapshotReason::RequestedHighEstimate {
                bytes,
                delay_ns,
                sampled,
            },
            High::Rss { .. } => SnapshotReason::RssHighEstimate {
                bytes,
                delay_ns,
                sampled,
            },
        };
        let cost_ns = thread_cpu_ns().saturating_sub(cpu);
        if !self.watched.maps_program(pid, &mappings) {
            return None;
        }
        let next_base = Arc::new(pieces);
        let estimate = EventKind::SmapsSnapshot {
            reason,
            cost_ns,
            mappings,
        };
        let (output, watched) = (&self.output, &self.watched);
        let sent = self.watched.send_if_same_image(pid, image, || {
            watched.keep_estimate_base(pid, (image, &base.mappings), next_base, mark);
            output.send_at(now_ns, pid as u32, pid as u32, estimate)
        });
        if sent {
            self.mappings.insert(pid, (mappings_now, made));
        }
        sent.then_some(match recounted {
            true => Counted::Again,
            false => Counted::Once,
        })
    }

    /// Reads the status of every process, or (`fast`) of those following a high; returns
    /// the CPU time of the reads, without the snapshots for highs taken meanwhile (those
    /// are paid for apart).
    fn status_round(&mut self, fast: bool) -> u64 {
        let cpu = thread_cpu_ns();
        let mut highs_ns = 0;
        for index in 0..self.pids.len() {
            let pid = self.pids[index];
            if fast && !self.highs.following(pid, monotonic_ns()) {
                continue;
            }
            let image = self.watched.image(pid);
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
            let now_ns = monotonic_ns();
            let output = &self.output;
            let sent = self.watched.send_if_same_image(pid, image, || {
                output.send_at(
                    now_ns,
                    pid as u32,
                    pid as u32,
                    EventKind::StatusSample(counters),
                )
            });
            if !sent {
                self.forget_image(pid);
                continue;
            }
            let activity = self.activity(pid, memory.running, now_ns);
            if self.watched.awaiting_start(pid) {
                // Every read is a first read until the start snapshot: no high yet.
                self.highs.forget(pid);
            }
            if let Next::Snapshot(high) = self.highs.status(pid, memory.rss, activity, now_ns) {
                let before = thread_cpu_ns();
                self.snapshot_high(pid, high, memory.rss);
                highs_ns += thread_cpu_ns().saturating_sub(before);
            }
        }
        let reads = thread_cpu_ns().saturating_sub(cpu).saturating_sub(highs_ns);
        self.costs.status_cpu_ns += reads;
        reads
    }

    /// What `pid`'s main thread is doing: not runnable, or runnable and how long it ran on a
    /// CPU since the previous read. Its CPU time is read while it runs or is followed (so
    /// that what it ran before it slept never counts as run since); otherwise the count is
    /// dropped, and the next runnable read has none to compare with.
    fn activity(&mut self, pid: i32, running: bool, now_ns: u64) -> Activity {
        let cpu_ns = match running || self.highs.following(pid, now_ns) {
            true => read_cpu_ns(pid),
            false => None,
        };
        let previous = match cpu_ns {
            Some(cpu_ns) => self.cpu_ns.insert(pid, cpu_ns),
            None => self.cpu_ns.remove(&pid),
        };
        match running {
            false => Activity::Asleep,
            true => Activity::Runnable {
                ran_ns: previous
                    .zip(cpu_ns)
                    .map(|(before, now)| now.saturating_sub(before)),
            },
        }
    }

    fn rollup_round(&mut self) {
        let cpu = thread_cpu_ns();
        for index in 0..self.pids.len() {
            let pid = self.pids[index];
            let image = self.watched.image(pid);
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
            let output = &self.output;
            self.watched.send_if_same_image(pid, image, || {
                output.send(pid as u32, pid as u32, EventKind::RollupSample(counters))
            });
        }
        self.costs.rollup_cpu_ns += thread_cpu_ns().saturating_sub(cpu);
    }
}

/// How an estimate sent was counted: once, or again after the status reads disagreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    Once,
    Again,
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
    fn request(&self, pid: i32, reason: SnapshotReason) {
        self.watched.request(pid, reason);
    }

    fn request_all(&self, reason: SnapshotReason) {
        self.watched.request_all(reason);
    }

    fn before_snapshots(&self, flush: crate::hooks::drain::Flusher) {
        self.watched.set_before_snapshot(flush);
    }

    fn snapshot_now(&self, pid: i32, reason: SnapshotReason) -> Option<EventKind> {
        if reason == SnapshotReason::Exit {
            self.watched.exit_begins(pid);
        }
        let image = self.watched.image(pid);
        let mark = self.watched.unmapped_mark(pid);
        let mut snapshot = snapshot::take(pid, reason, &mut Vec::new())?;
        // The process waits meanwhile: no copy for an estimate after its end.
        if let EventKind::SmapsSnapshot {
            mappings, cost_ns, ..
        } = &mut snapshot
        {
            *cost_ns += cut_merged(&self.watched, pid, mappings);
            if reason != SnapshotReason::Exit {
                self.watched
                    .keep_base(pid, image, Arc::new(mappings.clone()), mark);
            }
        }
        Some(snapshot)
    }

    fn exec_begins(&self, pid: i32) {
        self.watched.exec_begins(pid);
    }

    fn program_is(&self, pid: i32, exe: &str) {
        self.watched.program_is(pid, exe);
    }

    fn forked(&self, parent: i32, child: i32) {
        self.watched.forked(parent, child);
    }
}

/// `mappings` of `pid` with those the kernel merged cut again where the ranges its recorded
/// calls mapped begin and end (`split`); returns the CPU time that took, part of the
/// snapshot's cost.
fn cut_merged(watched: &Watched, pid: i32, mappings: &mut Vec<MappingResidency>) -> u64 {
    let cpu = thread_cpu_ns();
    let made = |start, end| watched.made_inside(pid, start, end);
    *mappings = split::cut_merged(pid, std::mem::take(mappings), made);
    thread_cpu_ns().saturating_sub(cpu)
}
