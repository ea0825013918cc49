//! The processes under supervision, which the sampler reads, and the smaps snapshots asked of
//! it. The pipeline owns the set; the interpret stage keeps it, as it sees every process
//! start, exec and exit in the event stream whichever source sent them, and reports new
//! highs of live requested bytes; memsup's SIGUSR1 asks for a snapshot of every process.
//! Each request wakes the sampler, so a snapshot follows its moment within a read's time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use super::made::MadeRanges;
use super::unmapped::UnmappedLog;
use crate::failure::lock;
use crate::hooks::drain::Flusher;
use crate::trace::format::{MapCall, MappingResidency, SnapshotReason};

#[derive(Debug, Default)]
pub struct Watched {
    pids: Mutex<BTreeSet<i32>>,
    requests: Mutex<Requests>,
    /// Wakes the sampler (a full channel means it is woken already).
    waker: Mutex<Option<Sender<()>>>,
    /// Run before the sampler snapshots a process (the hook engine's flush).
    before_snapshot: Mutex<Option<Flusher>>,
    /// Attached processes whose start snapshot is not taken yet: memsup's own pages (the
    /// scratch page, the hook area) raise their RSS meanwhile, which is no high of theirs.
    awaiting_start: Mutex<BTreeSet<i32>>,
    /// How many times each process exec'd. A sample read while a process execs can be of
    /// the image it left; sent after the exec's events it would land in the new one.
    images: Mutex<BTreeMap<i32, u64>>,
    /// The program each process runs, as the tracer last recorded it: a snapshot that does
    /// not map it was read after an exec the tracer has not handled yet.
    programs: Mutex<BTreeMap<i32, String>>,
    /// The mappings of each process's last snapshot, or the pieces of its last estimate
    /// since, and of which image: what an estimate at a high starts from.
    bases: Mutex<BTreeMap<i32, Base>>,
    /// Each process's mappings made less those removed, by the calls recorded so far: how
    /// many more mappings a snapshot or estimate will find than the last one did, without
    /// reading them.
    mappings_made: Mutex<BTreeMap<i32, i64>>,
    /// The ranges each process's recorded calls mapped: where a snapshot's merged mapping
    /// is cut again. None from a process's exec stop until its exec is sent: the calls of
    /// the image it left, sent meanwhile, made nothing in the new one.
    made: Mutex<BTreeMap<i32, Option<MadeRanges>>>,
    /// Where each process unmapped since its base was read: residency not to take from it.
    unmapped: Mutex<BTreeMap<i32, UnmappedLog>>,
}

/// A snapshot's mappings or an estimate's pieces, the image (`Watched::image`) they are
/// of, and the unmapped log's mark (`Watched::unmapped_mark`) taken before they were read.
type Base = (u64, Arc<Vec<MappingResidency>>, u64);

/// What an estimate of a process starts from (`Watched::base`).
pub struct EstimateBase {
    /// Its last snapshot's mappings, or its last estimate's pieces.
    pub mappings: Arc<Vec<MappingResidency>>,
    /// The unmapped log's mark taken before they were read (`Watched::unmapped_since`).
    pub mark: u64,
}

/// A new high of a process's live requested bytes, and when it was reached (monotonic ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestedHigh {
    pub bytes: u64,
    pub time_ns: u64,
}

#[derive(Debug, Default)]
struct Requests {
    /// One pending snapshot per process: a later reason for that process replaces an earlier
    /// one (a fork child that execs before its start snapshot is taken gets one, of the new
    /// program), except that a periodic one never replaces a pending one, so a start snapshot
    /// delayed on a busy machine keeps its reason.
    snapshots: BTreeMap<i32, SnapshotReason>,
    /// New highs of live requested bytes not yet snapshotted.
    peaks: BTreeMap<i32, RequestedHigh>,
    /// Processes that exec'd since the sampler last looked: their RSS highs start over.
    new_images: BTreeSet<i32>,
}

impl Watched {
    /// A process came under supervision: sample it (its first snapshot is its source's).
    pub fn insert(&self, pid: i32) {
        lock(&self.pids).insert(pid);
    }

    /// An attached process came under supervision: sampled at once, its RSS highs
    /// counted from its start snapshot (`started`).
    pub fn insert_attached(&self, pid: i32) {
        lock(&self.awaiting_start).insert(pid);
        self.insert(pid);
    }

    /// Whether `pid` was attached and its start snapshot is not taken yet.
    pub fn awaiting_start(&self, pid: i32) -> bool {
        lock(&self.awaiting_start).contains(&pid)
    }

    /// `pid`'s first snapshot was taken.
    pub fn started(&self, pid: i32) {
        lock(&self.awaiting_start).remove(&pid);
    }

    pub fn contains(&self, pid: i32) -> bool {
        lock(&self.pids).contains(&pid)
    }

    pub fn remove(&self, pid: i32) {
        lock(&self.pids).remove(&pid);
        lock(&self.bases).remove(&pid);
        lock(&self.mappings_made).remove(&pid);
        lock(&self.made).remove(&pid);
        lock(&self.unmapped).remove(&pid);
        self.started(pid);
        let mut requests = lock(&self.requests);
        requests.snapshots.remove(&pid);
        requests.peaks.remove(&pid);
        requests.new_images.remove(&pid);
    }

    /// `pid` made a mapping call with `args` that returned `result`: one mapping more for
    /// an mmap or shmat, one less for a munmap or shmdt (merges and splits aside); what it
    /// unmapped is logged (`UnmappedLog::call`).
    pub fn mapping_call(&self, pid: i32, call: MapCall, args: &[u64; 6], result: i64) {
        // A call sent after its process's exit would leave an entry nothing removes.
        if (-4095..0).contains(&result) || !self.contains(pid) {
            return;
        }
        lock(&self.unmapped)
            .entry(pid)
            .or_default()
            .call(call, args, result);
        if let Some(made) = lock(&self.made)
            .entry(pid)
            .or_insert_with(|| Some(MadeRanges::default()))
        {
            made.call(call, args, result);
        }
        let change = match call {
            MapCall::Mmap | MapCall::Shmat => 1,
            MapCall::Munmap | MapCall::Shmdt => -1,
            MapCall::Mremap | MapCall::Brk => return,
        };
        *lock(&self.mappings_made).entry(pid).or_default() += change;
    }

    /// The unmapped log's mark of `pid`, to take before reading the maps of a base (after
    /// `before_snapshot`, which sends what the hooks recorded).
    pub fn unmapped_mark(&self, pid: i32) -> u64 {
        lock(&self.unmapped).get(&pid).map_or(0, UnmappedLog::mark)
    }

    /// The ranges `pid`'s recorded calls mapped, cut to [start, end), in address order.
    pub fn made_inside(&self, pid: i32, start: u64, end: u64) -> Vec<(u64, u64)> {
        match lock(&self.made).get(&pid) {
            Some(Some(made)) => made.inside(start, end),
            _ => Vec::new(),
        }
    }

    /// `pid`'s mappings made less those removed so far (`mapping_call`).
    pub fn mappings_made(&self, pid: i32) -> i64 {
        lock(&self.mappings_made).get(&pid).copied().unwrap_or(0)
    }

    /// Which image of `pid` a sample about to be read belongs to, for `send_if_same_image`.
    pub fn image(&self, pid: i32) -> u64 {
        lock(&self.images).get(&pid).copied().unwrap_or(0)
    }

    /// `pid` stopped at its exec, before the exec's events are sent: samples read earlier
    /// are of the image it left. (A snapshot read between the kernel's switch to the new
    /// program and this stop does not map the old program: `maps_program` refuses it.)
    pub fn exec_begins(&self, pid: i32) {
        *lock(&self.images).entry(pid).or_default() += 1;
        // Unknown until the exec is recorded: no snapshot is refused meanwhile.
        lock(&self.programs).remove(&pid);
        lock(&self.made).insert(pid, None);
    }

    /// `pid` reached its exit stop, where its last snapshot is taken: nothing read of it
    /// meanwhile or later (a high the interpret stage passes on late, a snapshot for a high
    /// being read) may follow that snapshot in the stream, so it is no longer sampled and
    /// what was read of it before is dropped, as at an exec.
    pub fn exit_begins(&self, pid: i32) {
        // Both under the images lock: a send sees the old image or the process gone.
        let mut images = lock(&self.images);
        *images.entry(pid).or_default() += 1;
        lock(&self.pids).remove(&pid);
        drop(images);
        let mut requests = lock(&self.requests);
        requests.snapshots.remove(&pid);
        requests.peaks.remove(&pid);
    }

    /// `pid`'s exec was sent: the mapping calls sent from now on are the new image's.
    pub fn exec_sent(&self, pid: i32) {
        lock(&self.made).remove(&pid);
    }

    /// `pid` runs `exe` (recorded at its launch, attach or exec).
    pub fn program_is(&self, pid: i32, exe: &str) {
        lock(&self.programs).insert(pid, exe.to_string());
    }

    /// Fork child `child` runs its parent's program until it execs, in a copy of its
    /// parent's mappings.
    pub fn forked(&self, parent: i32, child: i32) {
        let mut programs = lock(&self.programs);
        if let Some(exe) = programs.get(&parent).cloned() {
            programs.insert(child, exe);
        }
        drop(programs);
        let mut made = lock(&self.made);
        if let Some(Some(ranges)) = made.get(&parent).cloned() {
            made.entry(child).or_insert(Some(ranges));
        }
    }

    /// Whether snapshot `mappings` of `pid` map its program (" (deleted)" may follow the
    /// path); true when the program is not known or nothing is mapped.
    pub fn maps_program(&self, pid: i32, mappings: &[MappingResidency]) -> bool {
        let programs = lock(&self.programs);
        let Some(exe) = programs.get(&pid).filter(|exe| !exe.is_empty()) else {
            return true;
        };
        mappings.is_empty() || mappings.iter().any(|mapping| mapping.path.starts_with(exe))
    }

    /// `mappings` are of `pid`'s snapshot of image `image`, just sent, read after `mark`:
    /// the base of its next estimate, unless one read after a later mark is kept already
    /// (an estimate's, sent while the tracer read this at a stop).
    pub fn keep_base(&self, pid: i32, image: u64, mappings: Arc<Vec<MappingResidency>>, mark: u64) {
        let mut bases = lock(&self.bases);
        if let Some((of, _, newer)) = bases.get(&pid) {
            if *of == image && *newer > mark {
                return;
            }
        }
        bases.insert(pid, (image, mappings, mark));
        // Under the bases' lock: no older base can be kept after this forgets its ranges.
        self.forget_unmapped_before(pid, mark);
    }

    fn forget_unmapped_before(&self, pid: i32, mark: u64) {
        if let Some(log) = lock(&self.unmapped).get_mut(&pid) {
            log.forget_before(mark);
        }
    }

    /// `pieces` of `pid`'s estimate of image `image`, just sent, started from `from`: kept
    /// unless a snapshot (the tracer's, at an MPI call, a fork) replaced `from` meanwhile.
    pub fn keep_estimate_base(
        &self,
        pid: i32,
        (image, from): (u64, &Arc<Vec<MappingResidency>>),
        pieces: Arc<Vec<MappingResidency>>,
        mark: u64,
    ) {
        let mut bases = lock(&self.bases);
        if let Some((of, base, base_mark)) = bases.get_mut(&pid) {
            if *of == image && Arc::ptr_eq(base, from) {
                (*base, *base_mark) = (pieces, mark);
                self.forget_unmapped_before(pid, mark);
            }
        }
    }

    /// The base of `pid`'s next estimate, when it is of image `image`.
    pub fn base(&self, pid: i32, image: u64) -> Option<EstimateBase> {
        let bases = lock(&self.bases);
        let (of, base, mark) = bases.get(&pid)?;
        (*of == image).then(|| EstimateBase {
            mappings: Arc::clone(base),
            mark: *mark,
        })
    }

    /// The unmapped log's mark of `pid` now, to take before reading the maps of a base
    /// (after `before_snapshot`, which sends what the hooks recorded), and the ranges logged
    /// since `base`'s mark (sorted, merged; None when they were forgotten: a newer base
    /// replaced it meanwhile).
    pub fn unmapped_since(&self, pid: i32, base: &EstimateBase) -> (u64, Option<Vec<(u64, u64)>>) {
        match lock(&self.unmapped).get(&pid) {
            Some(log) => (log.mark(), log.since(base.mark)),
            None => (0, Some(Vec::new())),
        }
    }

    /// Runs `send` if `pid` has not exec'd since `image` was read and is still sampled (its
    /// exit did not begin, even after `image` was read), and says whether it ran. `send`
    /// runs under the lock `exec_begins` and `exit_begins` take, so what it sends precedes
    /// the exec's events and the exit's snapshot; a sample of the new image read before its
    /// exec stop is dropped too (the exec stop snapshots the new image itself).
    pub fn send_if_same_image(&self, pid: i32, image: u64, send: impl FnOnce()) -> bool {
        let images = lock(&self.images);
        if images.get(&pid).copied().unwrap_or(0) != image || !lock(&self.pids).contains(&pid) {
            return false;
        }
        send();
        true
    }

    /// The sampler's channel, woken at each request.
    pub fn set_waker(&self, waker: Sender<()>) {
        *lock(&self.waker) = Some(waker);
    }

    pub fn set_before_snapshot(&self, flush: Flusher) {
        *lock(&self.before_snapshot) = Some(flush);
    }

    /// The sampler is about to snapshot `pid`.
    pub fn before_snapshot(&self, pid: i32) {
        let flush = lock(&self.before_snapshot).clone();
        if let Some(flush) = flush {
            flush.flush(pid);
        }
    }

    fn wake(&self) {
        if let Some(waker) = &*lock(&self.waker) {
            let _ = waker.try_send(());
        }
    }

    /// Asks for a snapshot of `pid` at once.
    pub fn request(&self, pid: i32, reason: SnapshotReason) {
        lock(&self.requests).snapshots.insert(pid, reason);
        self.wake();
    }

    /// Asks for a snapshot of `pid` unless one is pending already (whose reason stays).
    pub fn request_unless_pending(&self, pid: i32, reason: SnapshotReason) {
        lock(&self.requests).snapshots.entry(pid).or_insert(reason);
        self.wake();
    }

    /// `pid` exec'd: the highs of its earlier image say nothing about the new one.
    pub fn new_image(&self, pid: i32) {
        lock(&self.requests).new_images.insert(pid);
    }

    /// Asks for a snapshot of every supervised process.
    pub fn request_all(&self, reason: SnapshotReason) {
        let pids: Vec<i32> = lock(&self.pids).iter().copied().collect();
        let mut requests = lock(&self.requests);
        for pid in pids {
            if reason == SnapshotReason::Interval {
                requests.snapshots.entry(pid).or_insert(reason);
            } else {
                requests.snapshots.insert(pid, reason);
            }
        }
        drop(requests);
        self.wake();
    }

    /// `pid`'s live requested bytes reached a new high worth a snapshot.
    pub fn note_peak(&self, pid: i32, high: RequestedHigh) {
        lock(&self.requests).peaks.insert(pid, high);
        self.wake();
    }

    /// Copies the current set into `into`, reusing its allocation; the lock is held only
    /// for the copy, never while /proc is read.
    pub fn snapshot(&self, into: &mut Vec<i32>) {
        into.clear();
        into.extend(lock(&self.pids).iter().copied());
    }

    /// Takes the pending snapshot requests and peaks of processes still supervised (a late
    /// request may name one that is gone).
    pub fn take_requests(
        &self,
        snapshots: &mut Vec<(i32, SnapshotReason)>,
        peaks: &mut Vec<(i32, RequestedHigh)>,
    ) {
        let pids = lock(&self.pids);
        let mut requests = lock(&self.requests);
        snapshots.clear();
        snapshots.extend(
            std::mem::take(&mut requests.snapshots)
                .into_iter()
                .filter(|(pid, _)| pids.contains(pid)),
        );
        peaks.clear();
        peaks.extend(
            std::mem::take(&mut requests.peaks)
                .into_iter()
                .filter(|(pid, _)| pids.contains(pid)),
        );
    }

    /// Takes the processes that exec'd since the last call.
    pub fn take_new_images(&self) -> BTreeSet<i32> {
        std::mem::take(&mut lock(&self.requests).new_images)
    }

    /// Puts back a peak the sampler could not snapshot yet (budget), unless a newer one
    /// arrived meanwhile.
    pub fn defer_peak(&self, pid: i32, high: RequestedHigh) {
        if lock(&self.pids).contains(&pid) {
            lock(&self.requests).peaks.entry(pid).or_insert(high);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn high(bytes: u64) -> RequestedHigh {
        RequestedHigh {
            bytes,
            time_ns: bytes * 10,
        }
    }

    /// A high followed since before the exit, read after it began: the image read then is
    /// the one the exit made, and the send is still refused.
    #[test]
    fn nothing_is_sent_of_a_process_whose_exit_began_whenever_its_image_was_read() {
        let watched = Watched::default();
        watched.insert(9);
        let before = watched.image(9);
        assert!(watched.send_if_same_image(9, before, || {}));
        watched.exit_begins(9);
        let after = watched.image(9);
        assert_eq!(after, before + 1);
        let mut sent = 0;
        assert!(!watched.send_if_same_image(9, before, || sent += 1));
        assert!(!watched.send_if_same_image(9, after, || sent += 1));
        assert_eq!(sent, 0);
        // A process that came under supervision again under that pid is sampled again.
        watched.insert(9);
        assert!(watched.send_if_same_image(9, after, || sent += 1));
        assert_eq!(sent, 1);
    }

    #[test]
    fn keeps_the_current_processes() {
        let watched = Watched::default();
        let mut pids = vec![99];
        watched.insert(7);
        watched.insert(3);
        watched.insert(7);
        watched.snapshot(&mut pids);
        assert_eq!(pids, [3, 7]);
        watched.remove(3);
        watched.remove(42);
        watched.snapshot(&mut pids);
        assert_eq!(pids, [7]);
    }

    #[test]
    fn an_attached_process_awaits_its_start_snapshot_until_it_is_taken_or_gone() {
        let watched = Watched::default();
        let mut pids = Vec::new();
        watched.insert(4);
        watched.insert_attached(5);
        watched.insert_attached(6);
        watched.snapshot(&mut pids);
        assert_eq!(pids, [4, 5, 6]);
        let awaiting = |pid| watched.awaiting_start(pid);
        assert_eq!((awaiting(4), awaiting(5), awaiting(6)), (false, true, true));
        watched.started(5);
        watched.remove(6);
        assert_eq!((awaiting(5), awaiting(6)), (false, false));
    }

    #[test]
    fn snapshot_requests_are_one_per_process_and_gone_with_it() {
        let watched = Watched::default();
        let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
        watched.insert(5);
        watched.insert(6);
        watched.insert(8);
        watched.request(5, SnapshotReason::Exec);
        watched.request(6, SnapshotReason::Start);
        watched.note_peak(6, high(100));
        watched.note_peak(6, high(300));
        watched.take_requests(&mut snapshots, &mut peaks);
        assert_eq!(
            snapshots,
            [(5, SnapshotReason::Exec), (6, SnapshotReason::Start)]
        );
        assert_eq!(peaks, [(6, high(300))]);
        watched.take_requests(&mut snapshots, &mut peaks);
        assert!(snapshots.is_empty() && peaks.is_empty());
        watched.request_all(SnapshotReason::Signal);
        watched.defer_peak(6, high(300));
        watched.note_peak(6, high(400));
        watched.defer_peak(6, high(300));
        watched.remove(5);
        watched.defer_peak(5, high(1));
        watched.take_requests(&mut snapshots, &mut peaks);
        assert_eq!(
            snapshots,
            [(6, SnapshotReason::Signal), (8, SnapshotReason::Signal)]
        );
        assert_eq!(peaks, [(6, high(400))]);
        // A request that reaches a process already gone (a late peak) is dropped.
        watched.note_peak(5, high(500));
        watched.request(5, SnapshotReason::Exec);
        watched.take_requests(&mut snapshots, &mut peaks);
        assert!(snapshots.is_empty() && peaks.is_empty());
    }

    #[test]
    fn a_periodic_request_keeps_the_reason_pending_before_it() {
        let watched = Watched::default();
        let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
        watched.insert(5);
        watched.insert(6);
        watched.insert(7);
        watched.request(5, SnapshotReason::Start);
        watched.request(7, SnapshotReason::Exec);
        watched.request_all(SnapshotReason::Interval);
        watched.take_requests(&mut snapshots, &mut peaks);
        assert_eq!(
            snapshots,
            [
                (5, SnapshotReason::Start),
                (6, SnapshotReason::Interval),
                (7, SnapshotReason::Exec)
            ]
        );
        // Asked again after an exec: a pending reason stays.
        watched.request(5, SnapshotReason::Signal);
        watched.request_unless_pending(5, SnapshotReason::Interval);
        watched.request_unless_pending(6, SnapshotReason::Interval);
        watched.take_requests(&mut snapshots, &mut peaks);
        assert_eq!(
            snapshots,
            [(5, SnapshotReason::Signal), (6, SnapshotReason::Interval)]
        );
    }

    #[test]
    fn requests_wake_the_sampler_and_execs_are_passed_on() {
        let watched = Watched::default();
        let (waker, woken) = crossbeam_channel::bounded(1);
        watched.set_waker(waker);
        watched.insert(5);
        assert!(woken.try_recv().is_err());
        watched.note_peak(5, high(1));
        watched.request(5, SnapshotReason::Signal);
        assert_eq!(woken.try_iter().count(), 1);
        watched.new_image(5);
        watched.new_image(6);
        watched.remove(6);
        assert_eq!(watched.take_new_images(), BTreeSet::from([5]));
        assert!(watched.take_new_images().is_empty());
    }

    #[test]
    fn a_snapshot_must_map_the_program_last_recorded() {
        let mapping = |path: &str| MappingResidency {
            start: 0x1000,
            end: 0x2000,
            path: path.to_string(),
            ..MappingResidency::default()
        };
        let proxy = [mapping("/usr/bin/hydra_pmi_proxy"), mapping("[heap]")];
        let rank = [mapping("/tmp/rank"), mapping("[stack]")];
        let replaced = [mapping("/tmp/rank (deleted)")];
        let watched = Watched::default();
        // Nothing recorded yet: anything goes.
        assert!(watched.maps_program(7, &rank));
        watched.program_is(7, "/usr/bin/hydra_pmi_proxy");
        watched.forked(7, 8);
        watched.forked(99, 9);
        assert!(watched.maps_program(8, &proxy));
        // Read after the kernel ran the new program, before the tracer saw the exec.
        assert!(!watched.maps_program(8, &rank));
        assert!(watched.maps_program(9, &rank));
        watched.exec_begins(8);
        assert!(watched.maps_program(8, &proxy));
        watched.program_is(8, "/tmp/rank");
        assert!(watched.maps_program(8, &rank) && watched.maps_program(8, &replaced));
        assert!(!watched.maps_program(8, &proxy));
        assert!(watched.maps_program(8, &[]));
    }

    #[test]
    fn a_sample_read_across_an_exec_is_not_sent() {
        let watched = Watched::default();
        let mut sent = Vec::new();
        watched.insert(5);
        let before = watched.image(5);
        assert!(watched.send_if_same_image(5, before, || sent.push("first image")));
        watched.exec_begins(5);
        assert!(!watched.send_if_same_image(5, before, || sent.push("read before the exec")));
        let after = watched.image(5);
        assert_ne!(after, before);
        assert!(watched.send_if_same_image(5, after, || sent.push("new image")));
        // Another process's exec changes nothing of this one's.
        watched.exec_begins(6);
        assert!(watched.send_if_same_image(5, after, || sent.push("still new image")));
        // Gone (nothing of it is sent) and back (a reused pid): the count goes on.
        watched.remove(5);
        assert!(!watched.send_if_same_image(5, after, || sent.push("gone")));
        watched.insert(5);
        assert!(!watched.send_if_same_image(5, before, || sent.push("stale")));
        assert!(watched.send_if_same_image(5, after, || sent.push("reused")));
        assert_eq!(
            sent,
            ["first image", "new image", "still new image", "reused"]
        );
    }

    #[test]
    fn nothing_read_of_a_process_follows_its_exit_snapshot() {
        let watched = Watched::default();
        watched.insert(5);
        let image = watched.image(5);
        watched.request(5, SnapshotReason::Signal);
        let high = RequestedHigh {
            bytes: 1 << 20,
            time_ns: 1,
        };
        watched.exit_begins(5);
        // A high the interpret stage passes on after the exit stop.
        watched.note_peak(5, high);
        assert!(!watched.contains(5));
        let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
        watched.take_requests(&mut snapshots, &mut peaks);
        assert_eq!((snapshots, peaks), (vec![], vec![]));
        // A snapshot read before the exit stop.
        assert!(!watched.send_if_same_image(5, image, || panic!("sent after the exit")));
    }
}
