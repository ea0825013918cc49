//! The consumer side of the rings: memsup's view of an area and the drain that turns
//! published records into one stream in TSC order.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::layout::{self, header, record, ring, Op};
use super::mpi_slots;

/// One record as the hook wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord {
    pub op: Op,
    /// The ring the producer chose.
    pub cpu: u32,
    /// The walk's rule lookups and how many missed the rule cache (0 without a walk).
    pub lookups: u32,
    pub misses: u32,
    pub tsc: u64,
    pub thread: u64,
    pub caller: u64,
    pub stack_pointer: u64,
    pub result: u64,
    pub arguments: [u64; 6],
    pub out: u64,
    pub entry_tsc: u64,
    /// The walked call stack (`layout::stacks::StackRef`), 0 when none was walked.
    pub stack: u64,
}

/// The longest a producer sleeps on a full ring before it looks at the heartbeat and its
/// wait limit again: the drain wakes it as soon as it frees room, so this only bounds how
/// late a waiting hook notices that memsup is gone or has switched the hooks off.
pub const SLEEP_BOUND: Duration = Duration::from_millis(10);

/// memsup's view of an area mapped in its own address space.
#[derive(Debug)]
pub struct Area {
    base: *mut u8,
    len: usize,
}

// SAFETY: every access goes through atomics or volatile reads of shared memory.
unsafe impl Send for Area {}
unsafe impl Sync for Area {}

impl Area {
    /// # Safety
    /// `base..base+len` must stay mapped, readable and writable, and 8-byte aligned, for
    /// the life of the `Area`.
    pub unsafe fn new(base: *mut u8, len: usize) -> Area {
        Area { base, len }
    }

    pub(super) fn u64_at(&self, offset: u64) -> &AtomicU64 {
        assert!(
            offset as usize + 8 <= self.len,
            "offset {offset} outside the area"
        );
        // SAFETY: in bounds and aligned (all layout offsets are multiples of 8).
        unsafe { AtomicU64::from_ptr(self.base.add(offset as usize).cast()) }
    }

    pub(super) fn u32_at(&self, offset: u64) -> &AtomicU32 {
        assert!(
            offset as usize + 4 <= self.len,
            "offset {offset} outside the area"
        );
        // SAFETY: in bounds and 4-byte aligned.
        unsafe { AtomicU32::from_ptr(self.base.add(offset as usize).cast()) }
    }

    /// Writes the header of an area of `shape` and enables the hooks. Rings start empty (a
    /// fresh mapping is zeroed; their counters are reset here in case it is not).
    pub fn initialise(
        &self,
        shape: &layout::Shape,
        policy: u32,
        stale_ticks: u64,
        wait_limit_ticks: u64,
    ) {
        let (ring_count, capacity) = (shape.ring_count as u32, shape.capacity);
        assert!(ring_count.is_power_of_two() && capacity.is_power_of_two());
        let bytes = shape.rings_end();
        assert!(
            bytes <= self.len as u64,
            "{bytes} bytes do not fit in {}",
            self.len
        );
        for index in 0..ring_count as u64 {
            let start = layout::ring_offset(index, capacity);
            self.u64_at(start + ring::HEAD).store(0, Ordering::Relaxed);
            self.u64_at(start + ring::TAIL).store(0, Ordering::Relaxed);
            self.u32_at(start + ring::WAITERS)
                .store(0, Ordering::Relaxed);
            self.u32_at(start + ring::WAKE).store(0, Ordering::Relaxed);
            for slot in 0..capacity {
                let seq = start + layout::record_offset(slot, capacity) + record::SEQ;
                self.u64_at(seq).store(0, Ordering::Relaxed);
            }
        }
        self.u32_at(header::VERSION)
            .store(layout::VERSION, Ordering::Relaxed);
        self.u32_at(header::RING_COUNT)
            .store(ring_count, Ordering::Relaxed);
        self.u64_at(header::CAPACITY)
            .store(capacity, Ordering::Relaxed);
        self.u32_at(header::POLICY).store(policy, Ordering::Relaxed);
        self.u64_at(header::HEARTBEAT)
            .store(super::clock::rdtsc(), Ordering::Relaxed);
        self.u64_at(header::STALE_TICKS)
            .store(stale_ticks, Ordering::Relaxed);
        let wait_limit = header::WAIT_LIMIT_TICKS;
        self.u64_at(wait_limit)
            .store(wait_limit_ticks, Ordering::Relaxed);
        self.u64_at(header::DROPPED).store(0, Ordering::Relaxed);
        self.u64_at(header::FULL_WAITS).store(0, Ordering::Relaxed);
        self.u64_at(header::FULL_SLEEPS).store(0, Ordering::Relaxed);
        self.u32_at(header::SAMPLE_MASK)
            .store(layout::SAMPLE_BITS, Ordering::Relaxed);
        self.u64_at(header::TIMED_CALLS).store(0, Ordering::Relaxed);
        self.u64_at(header::TIMED_TICKS).store(0, Ordering::Relaxed);
        self.set_sleep_bound(SLEEP_BOUND);
        self.u64_at(header::RENDEZVOUS_ASKED)
            .store(0, Ordering::Relaxed);
        self.u64_at(header::RENDEZVOUS_DONE)
            .store(0, Ordering::Relaxed);
        // The MPI section exists only in an area mapped whole (a fresh memfd: zeroed).
        let mpi = shape.mpi_offset();
        let has_mpi = mpi + layout::mpi::SECTION_BYTES <= self.len as u64;
        self.u64_at(header::MPI_OFFSET)
            .store(if has_mpi { mpi } else { 0 }, Ordering::Relaxed);
        self.u32_at(header::MPI_TAKEN).store(0, Ordering::Relaxed);
        self.u32_at(header::OFF_BY_MEMSUP)
            .store(0, Ordering::Relaxed);
        self.u64_at(header::MAGIC)
            .store(layout::MAGIC, Ordering::Relaxed);
        self.set_enabled(true);
    }

    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Copies `bytes` to `offset` (memory no hook writes: tables, directories).
    pub(super) fn write_bytes(&self, offset: u64, bytes: &[u8]) {
        assert!(
            offset as usize + bytes.len() <= self.len,
            "outside the area"
        );
        // SAFETY: in bounds of the live mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.add(offset as usize),
                bytes.len(),
            )
        };
    }

    /// Switches the hooks on or off; off also wakes every producer sleeping on a full
    /// ring, so it passes through now rather than at the end of its sleep.
    pub fn set_enabled(&self, on: bool) {
        self.u32_at(header::ENABLED)
            .store(on as u32, Ordering::Release);
        if !on {
            if let Some((ring_count, capacity)) = self.geometry() {
                for index in 0..ring_count {
                    self.wake_waiters(layout::ring_offset(index, capacity));
                }
            }
        }
    }

    /// The longest a producer sleeps on a full ring between its checks.
    pub fn set_sleep_bound(&self, bound: Duration) {
        let at = header::SLEEP_TIMESPEC;
        self.u64_at(at).store(bound.as_secs(), Ordering::Relaxed);
        self.u64_at(at + 8)
            .store(bound.subsec_nanos() as u64, Ordering::Relaxed);
    }

    /// Wakes the producers sleeping on the ring at `start` if any counted themselves in
    /// `WAITERS`. The caller has just moved its `TAIL` (or switched the hooks off); a
    /// producer counts itself (a locked instruction) before it reads `WAKE` and `TAIL`, so
    /// either it sees the new `TAIL` or this sees it and bumps `WAKE` under its wait.
    fn wake_waiters(&self, start: u64) {
        fence(Ordering::SeqCst);
        if self.u32_at(start + ring::WAITERS).load(Ordering::Relaxed) == 0 {
            return;
        }
        let wake = self.u32_at(start + ring::WAKE);
        wake.fetch_add(1, Ordering::SeqCst);
        // SAFETY: FUTEX_WAKE on a word of the live shared mapping; it reads nothing else.
        // Not FUTEX_PRIVATE: the sleepers are in the target, which maps the same memfd.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                wake.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
                0,
                0,
                0,
            )
        };
    }

    pub fn enabled(&self) -> bool {
        self.u32_at(header::ENABLED).load(Ordering::Acquire) != 0
    }

    /// Whether memsup switched the hooks off for good (`header::OFF_BY_MEMSUP`).
    pub fn off_by_memsup(&self) -> bool {
        self.u32_at(header::OFF_BY_MEMSUP).load(Ordering::Acquire) != 0
    }

    pub fn heartbeat(&self, tsc: u64) {
        self.u64_at(header::HEARTBEAT).store(tsc, Ordering::Release);
    }

    pub fn dropped(&self) -> u64 {
        self.u64_at(header::DROPPED).load(Ordering::Acquire)
    }

    /// Bytes of the stack store the hooks used.
    pub fn stack_store_used(&self) -> u64 {
        self.u64_at(header::STORE_USED).load(Ordering::Acquire)
    }

    /// Walks whose frames did not fit in the stack store.
    pub fn stacks_lost(&self) -> u64 {
        self.u64_at(header::STACKS_LOST).load(Ordering::Acquire)
    }

    pub fn full_waits(&self) -> u64 {
        self.u64_at(header::FULL_WAITS).load(Ordering::Acquire)
    }

    /// Which records the hooks time: those taking a ring whose head has none of `mask`'s
    /// bits set.
    pub fn set_sample_mask(&self, mask: u32) {
        self.u32_at(header::SAMPLE_MASK)
            .store(mask, Ordering::Relaxed);
    }

    /// The timed calls: how many, and their TSC ticks in the hook.
    pub fn timed(&self) -> (u64, u64) {
        let load = |offset: u64| self.u64_at(offset).load(Ordering::Acquire);
        (load(header::TIMED_CALLS), load(header::TIMED_TICKS))
    }

    /// Times a producer slept on a full ring.
    pub fn full_sleeps(&self) -> u64 {
        self.u64_at(header::FULL_SLEEPS).load(Ordering::Acquire)
    }

    /// Rendezvous tickets taken by the hooks so far.
    pub fn rendezvous_asked(&self) -> u64 {
        self.u64_at(header::RENDEZVOUS_ASKED)
            .load(Ordering::Acquire)
    }

    /// Rendezvous tickets served so far.
    pub fn rendezvous_done(&self) -> u64 {
        self.u64_at(header::RENDEZVOUS_DONE).load(Ordering::Acquire)
    }

    /// Releases the rendezvous hooks waiting on tickets below `asked`.
    pub fn serve_rendezvous(&self, asked: u64) {
        self.u64_at(header::RENDEZVOUS_DONE)
            .fetch_max(asked, Ordering::Release);
    }

    /// Ring count and capacity as the header states them, if they describe rings that
    /// fit in the mapping (the target can write anything there).
    fn geometry(&self) -> Option<(u64, u64)> {
        let ring_count = self.u32_at(header::RING_COUNT).load(Ordering::Acquire) as u64;
        let capacity = self.u64_at(header::CAPACITY).load(Ordering::Acquire);
        let fits = ring_count.is_power_of_two()
            && capacity.is_power_of_two()
            && ring_count
                .checked_mul(layout::ring_bytes(capacity.min(u64::MAX / 256)))
                .is_some_and(|bytes| bytes + layout::AREA_HEADER_BYTES <= self.len as u64);
        fits.then_some((ring_count, capacity))
    }

    fn read_record(&self, at: u64) -> Option<RawRecord> {
        let field = |offset: u64| self.u64_at(at + offset).load(Ordering::Relaxed);
        let op = Op::from_code(self.u32_at(at + record::OP).load(Ordering::Relaxed))?;
        let cpu = self.u32_at(at + record::CPU).load(Ordering::Relaxed);
        Some(RawRecord {
            op,
            cpu: cpu & 0xff,
            lookups: cpu >> record::CPU_LOOKUPS_SHIFT,
            misses: (cpu >> record::CPU_MISSES_SHIFT) & 0xfff,
            tsc: field(record::TSC),
            thread: field(record::THREAD),
            caller: field(record::CALLER),
            stack_pointer: field(record::STACK_POINTER),
            result: field(record::RESULT),
            arguments: std::array::from_fn(|i| field(record::ARGUMENTS + 8 * i as u64)),
            out: field(record::OUT),
            entry_tsc: field(record::ENTRY_TSC),
            stack: field(record::STACK),
        })
    }
}

/// One ring's consumer position.
#[derive(Debug, Clone, Copy, Default)]
struct RingCursor {
    next: u64,
    last_tsc: u64,
    /// The unpublished slot reading stopped at, and the pass's `now` when it first did.
    stuck: Option<(u64, u64)>,
}

/// Per-area consumer state: each ring's next index and the TSC of its last record read,
/// and the records read but not yet released, in TSC order.
#[derive(Debug)]
pub struct Drainer {
    capacity: u64,
    cursors: Vec<RingCursor>,
    /// Per ring, in ring order (TSC order, since producers stamp in claim order); then the
    /// entries of MPI calls kept in slots (`mpi_slots`), in TSC order.
    held: Vec<VecDeque<RawRecord>>,
    previous_now: u64,
    grace_ticks: u64,
    released_below: u64,
    /// MPI slots seen flushing their return records (`mpi_slots`).
    flushing: mpi_slots::Flushing,
    /// How long a claimed slot may stay unpublished before its producer counts as gone.
    abandon_ticks: u64,
    invalid: u64,
    torn: u64,
    late: u64,
}

/// A claimed slot still unpublished this long after reading first stopped at it (about
/// 11 s at 3 GHz: far beyond any descheduling, within the 30 s a waiting producer allows)
/// was abandoned: its thread died, or a signal handler jumped out of the
/// hook, between the claim and the publication. It is skipped and counted as torn, so the
/// ring moves on instead of filling and holding every producer of that CPU.
pub const DEFAULT_ABANDON_TICKS: u64 = 1 << 35;

/// The longest a pass for a stopped thread waits for MPI calls flushing their return
/// records (a few stores each, unless their thread is preempted).
const FLUSH_WAIT: Duration = Duration::from_millis(2);

/// How far behind `now` the drain releases by default: a producer stalled longer than
/// this between its TSC reading and its claim lands late (about 3 ms at 3 GHz).
pub const DEFAULT_GRACE_TICKS: u64 = 1 << 23;

/// Where a ring's reading stopped.
enum Stop {
    /// At its head: nothing more claimed.
    Caught,
    /// At a claimed slot not yet published.
    Unpublished,
}

impl Drainer {
    pub fn new(area: &Area) -> Drainer {
        let (ring_count, capacity) = area.geometry().unwrap_or((0, 1));
        Drainer {
            capacity,
            cursors: vec![RingCursor::default(); ring_count as usize],
            held: vec![VecDeque::new(); ring_count as usize + 1],
            previous_now: 0,
            grace_ticks: DEFAULT_GRACE_TICKS,
            released_below: 0,
            flushing: mpi_slots::Flushing::default(),
            abandon_ticks: DEFAULT_ABANDON_TICKS,
            invalid: 0,
            torn: 0,
            late: 0,
        }
    }

    /// Records whose operation code was not one memsup knows.
    pub fn invalid(&self) -> u64 {
        self.invalid
    }

    /// Claimed slots never published: skipped by `finish`, or once abandoned.
    pub fn torn(&self) -> u64 {
        self.torn
    }

    /// Records read after younger ones were released: released out of TSC order.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Sets how far behind `now` records are held (see `drain`).
    pub fn set_grace_ticks(&mut self, ticks: u64) {
        self.grace_ticks = ticks;
    }

    /// Sets how long a claimed slot may stay unpublished (see `DEFAULT_ABANDON_TICKS`).
    pub fn set_abandon_ticks(&mut self, ticks: u64) {
        self.abandon_ticks = ticks;
    }

    /// The highest cutoff released below so far (not raised by `finish`).
    pub fn released_below(&self) -> u64 {
        self.released_below
    }

    /// Records read and held, not yet released.
    pub fn held(&self) -> usize {
        self.held.iter().map(VecDeque::len).sum()
    }

    /// One pass; `now` is a TSC reading taken before any ring is read. Reads every ring's
    /// published records up to its first unpublished slot, frees their slots, and appends
    /// to `out`, in TSC order, the records that no record still to come can precede.
    ///
    /// A free is published before its block can be reused, and a malloc claims after it
    /// returns; the TSC is monotonic in claim order within a ring. So a ring stopped at an
    /// unpublished slot can still bring records no older than its last record read, and a
    /// ring read to its head only records stamped after this pass began — except for a
    /// producer that read its TSC before `now` and claimed after the head was read here
    /// (preempted in between, with no other claim on its ring meanwhile). So records are
    /// released only below the previous pass's `now` and `now` less the grace: a claim
    /// stalled longer than both is released out of order and counted (`late`).
    /// Returns how many were read.
    pub fn drain(&mut self, area: &Area, now: u64, out: &mut impl Extend<RawRecord>) -> usize {
        let cutoff = self.previous_now.min(now.saturating_sub(self.grace_ticks));
        self.previous_now = now;
        self.drain_below(area, now, cutoff, out)
    }

    /// As `drain`, releasing everything published below `now` without the grace: for a
    /// thread stopped at an event of its own (an int3 probe's, its exit), whose calls are
    /// all published and must go first. A producer stalled between its TSC reading and its
    /// claim is then released late, and counted.
    pub fn drain_published(
        &mut self,
        area: &Area,
        now: u64,
        out: &mut impl Extend<RawRecord>,
    ) -> usize {
        self.previous_now = now;
        mpi_slots::wait_for_flushes(area, FLUSH_WAIT);
        self.drain_below(area, now, now, out)
    }

    fn drain_below(
        &mut self,
        area: &Area,
        now: u64,
        mut cutoff: u64,
        out: &mut impl Extend<RawRecord>,
    ) -> usize {
        let mut entries = Vec::new();
        cutoff = mpi_slots::claim_pending(
            area,
            cutoff,
            now,
            self.abandon_ticks,
            &mut self.flushing,
            &mut entries,
        );
        self.hold_entries(entries);
        let mut read = 0;
        for index in 0..self.cursors.len() {
            let (count, stop) = self.read_ring(area, index, Some(now));
            read += count;
            if let Stop::Unpublished = stop {
                cutoff = cutoff.min(self.cursors[index].last_tsc);
            }
        }
        self.release_below(cutoff, out);
        self.released_below = self.released_below.max(cutoff);
        read
    }

    /// The process is gone or stopped for good: releases everything, skipping claimed
    /// slots never published (counted as torn).
    pub fn finish(&mut self, area: &Area, out: &mut impl Extend<RawRecord>) {
        let mut entries = Vec::new();
        let mut flushing = mpi_slots::Flushing::default();
        mpi_slots::claim_pending(area, u64::MAX, 0, 0, &mut flushing, &mut entries);
        self.hold_entries(entries);
        for index in 0..self.cursors.len() {
            self.read_ring(area, index, None);
        }
        self.release_below(u64::MAX, out);
    }

    /// Merges the rings' held records below `cutoff` into `out`, oldest first (by TSC, then
    /// ring). The ring with the oldest front gives a run of records at a time, up to the
    /// oldest front of the others.
    fn release_below(&mut self, cutoff: u64, out: &mut impl Extend<RawRecord>) {
        let releasable = |tsc: u64| tsc < cutoff || cutoff == u64::MAX;
        loop {
            let mut fronts = self
                .held
                .iter()
                .enumerate()
                .filter_map(|(ring, queue)| Some((queue.front()?.tsc, ring)));
            let Some(mut oldest) = fronts.next() else {
                return;
            };
            let mut next = (u64::MAX, usize::MAX);
            for front in fronts {
                if front < oldest {
                    next = oldest;
                    oldest = front;
                } else {
                    next = next.min(front);
                }
            }
            let ring = oldest.1;
            let queue = &mut self.held[ring];
            let run = queue
                .iter()
                .take_while(|record| releasable(record.tsc) && (record.tsc, ring) < next)
                .count();
            if run == 0 {
                return;
            }
            out.extend(queue.drain(..run));
        }
    }

    /// Reads ring `index` from its cursor, stopping at a claimed slot not yet published
    /// unless it was abandoned (see `DEFAULT_ABANDON_TICKS`; `now` is the pass's TSC
    /// reading); without `now` (the end), steps over every such slot up to the head. Frees
    /// what it read (release store of TAIL).
    fn read_ring(&mut self, area: &Area, index: usize, now: Option<u64>) -> (usize, Stop) {
        let start = layout::ring_offset(index as u64, self.capacity);
        let head = area.u64_at(start + ring::HEAD).load(Ordering::Acquire);
        let mut carried = Vec::new();
        let cursor = &mut self.cursors[index];
        // A head further ahead than a full ring can only come from a corrupt target.
        let end = head.min(cursor.next + self.capacity);
        let mut read = 0;
        let mut stop = Stop::Caught;
        while cursor.next < end {
            let at = start + layout::record_offset(cursor.next, self.capacity);
            let seq = area.u64_at(at + record::SEQ).load(Ordering::Acquire);
            if seq != cursor.next + 1 {
                if let Some(now) = now {
                    let since = match cursor.stuck {
                        Some((slot, since)) if slot == cursor.next => since,
                        _ => {
                            cursor.stuck = Some((cursor.next, now));
                            now
                        }
                    };
                    if now.saturating_sub(since) < self.abandon_ticks {
                        stop = Stop::Unpublished;
                        break;
                    }
                }
                self.torn += 1;
            } else if let Some(record) = area.read_record(at) {
                cursor.last_tsc = record.tsc;
                self.late += (record.tsc < self.released_below) as u64;
                carried.extend(mpi_slots::carried_entry(&record));
                self.held[index].push_back(record);
            } else {
                self.invalid += 1;
            }
            cursor.next += 1;
            read += 1;
        }
        area.u64_at(start + ring::TAIL)
            .store(cursor.next, Ordering::Release);
        if read > 0 {
            area.wake_waiters(start);
        }
        self.hold_entries(carried);
        (read, stop)
    }

    /// Holds the entries of MPI calls kept in slots, each in its place by TSC: a call's
    /// entry is older than the records around the one that brought it.
    fn hold_entries(&mut self, entries: Vec<RawRecord>) {
        let queue = self.held.last_mut().expect("the entries' queue");
        for entry in entries {
            self.late += (entry.tsc < self.released_below) as u64;
            let at = queue.partition_point(|held| held.tsc <= entry.tsc);
            queue.insert(at, entry);
        }
    }
}
