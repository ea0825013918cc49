//! The drain against records written by hand, and against the hooks run by many threads
//! and by signal handlers, with a concurrent drainer.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use super::clock::rdtsc;
use super::code::CpuSource;
use super::layout::{self, record, ring, Op};
use super::ring::{Area, Drainer, RawRecord};
use super::test_support::*;

/// An area in a plain buffer, written record by record.
struct HandWritten {
    buffer: Vec<u64>,
    capacity: u64,
}

impl HandWritten {
    fn new(ring_count: u32, capacity: u64) -> (HandWritten, Area) {
        let words = layout::rings_end(ring_count as u64, capacity) as usize / 8;
        let mut buffer = vec![0u64; words];
        // SAFETY: the buffer outlives the area in every test below.
        let area = unsafe { Area::new(buffer.as_mut_ptr().cast(), words * 8) };
        area.initialise(
            &layout::Shape::full(ring_count as u64, capacity),
            layout::POLICY_WAIT,
            0,
            0,
        );
        (HandWritten { buffer, capacity }, area)
    }

    fn word(&mut self, offset: u64) -> &mut u64 {
        &mut self.buffer[offset as usize / 8]
    }

    /// Claims slot `index` of `ring` with op code `op` and TSC `tsc`; publishes it if asked.
    fn write(&mut self, ring: u64, index: u64, op: u32, tsc: u64, publish: bool) {
        let start = layout::ring_offset(ring, self.capacity);
        let head = self.word(start + ring::HEAD);
        *head = (*head).max(index + 1);
        let at = start + layout::record_offset(index, self.capacity);
        *self.word(at + record::OP) = op as u64 | ring << 32;
        *self.word(at + record::TSC) = tsc;
        if publish {
            *self.word(at + record::SEQ) = index + 1;
        }
    }

    fn tail(&mut self, ring: u64) -> u64 {
        *self.word(layout::ring_offset(ring, self.capacity) + ring::TAIL)
    }
}

fn tscs(records: &[RawRecord]) -> Vec<u64> {
    records.iter().map(|record| record.tsc).collect()
}

#[test]
fn drain_releases_only_what_no_later_record_can_precede() {
    let (mut hand, area) = HandWritten::new(2, 4);
    let malloc = Op::Malloc as u32;
    hand.write(0, 0, malloc, 10, true);
    hand.write(0, 1, malloc, 15, false);
    hand.write(1, 0, malloc, 5, true);
    hand.write(1, 1, malloc, 20, true);
    let mut drainer = Drainer::new(&area);
    drainer.set_grace_ticks(0);
    let mut out = Vec::new();
    // First pass: no earlier pass's `now` yet, so nothing is released.
    assert_eq!(drainer.drain(&area, 100, &mut out), 3);
    assert!(out.is_empty());
    assert_eq!((hand.tail(0), hand.tail(1)), (1, 2));
    // Ring 0 waits at an unpublished slot whose record is no older than 10.
    assert_eq!(drainer.drain(&area, 200, &mut out), 0);
    assert_eq!(tscs(&out), [5]);
    hand.write(0, 1, malloc, 15, true);
    hand.write(1, 2, malloc, 250, true);
    assert_eq!(drainer.drain(&area, 300, &mut out), 2);
    assert_eq!(tscs(&out), [5, 10, 15, 20]);
    assert_eq!(drainer.held(), 1);
    // Older than what was released already: out of order, and counted.
    hand.write(0, 2, malloc, 150, true);
    hand.write(0, 3, malloc, 255, false);
    hand.write(1, 3, 99, 270, true);
    hand.write(1, 4, malloc, 280, true);
    drainer.finish(&area, &mut out);
    assert_eq!(tscs(&out), [5, 10, 15, 20, 150, 250, 280]);
    assert_eq!(out[6].cpu, 1);
    assert_eq!(
        (drainer.torn(), drainer.invalid(), drainer.late()),
        (1, 1, 1)
    );
    assert_eq!((hand.tail(0), hand.tail(1)), (4, 5));
}

#[test]
fn a_flush_releases_what_is_published_below_now_without_the_grace() {
    let (mut hand, area) = HandWritten::new(2, 4);
    let malloc = Op::Malloc as u32;
    hand.write(0, 0, malloc, 10, true);
    hand.write(1, 0, malloc, 90, true);
    hand.write(1, 1, malloc, 120, true);
    let mut drainer = Drainer::new(&area);
    drainer.set_grace_ticks(1000);
    let mut out = Vec::new();
    // A pass holds everything a grace behind `now` (and below an earlier pass's `now`).
    assert_eq!(drainer.drain(&area, 100, &mut out), 3);
    assert!(out.is_empty());
    // A flush at 100 releases what is below 100, however recent.
    hand.write(0, 1, malloc, 95, true);
    assert_eq!(drainer.drain_published(&area, 100, &mut out), 1);
    assert_eq!(tscs(&out), [10, 90, 95]);
    // Still below an unpublished slot's ring: its last record read bounds the flush.
    hand.write(0, 2, malloc, 130, false);
    hand.write(1, 2, malloc, 140, true);
    assert_eq!(drainer.drain_published(&area, 200, &mut out), 1);
    assert_eq!(tscs(&out), [10, 90, 95]);
    hand.write(0, 2, malloc, 130, true);
    assert_eq!(drainer.drain_published(&area, 200, &mut out), 1);
    assert_eq!(tscs(&out), [10, 90, 95, 120, 130, 140]);
    assert_eq!(drainer.late(), 0);
}

#[test]
fn a_slot_claimed_and_never_published_is_skipped_once_abandoned() {
    let (mut hand, area) = HandWritten::new(1, 4);
    let malloc = Op::Malloc as u32;
    hand.write(0, 0, malloc, 10, true);
    // Claimed by a thread that died before publishing; later claims are published.
    hand.write(0, 1, malloc, 20, false);
    hand.write(0, 2, malloc, 30, true);
    let mut drainer = Drainer::new(&area);
    drainer.set_grace_ticks(0);
    drainer.set_abandon_ticks(1000);
    let mut out = Vec::new();
    assert_eq!(drainer.drain(&area, 100, &mut out), 1);
    // Reading first stopped at slot 1 at 100: not abandoned yet at 1099, and the ring's
    // last record read bounds what is released.
    assert_eq!(drainer.drain(&area, 1099, &mut out), 0);
    assert_eq!((tscs(&out), drainer.torn(), hand.tail(0)), (vec![], 0, 1));
    // At 1100 it is: skipped, counted, and the ring moves on (two slots read).
    assert_eq!(drainer.drain(&area, 1100, &mut out), 2);
    assert_eq!(
        (tscs(&out), drainer.torn(), hand.tail(0)),
        (vec![10, 30], 1, 3)
    );
    hand.write(0, 3, malloc, 1200, true);
    assert_eq!(drainer.drain(&area, 1300, &mut out), 1);
    drainer.finish(&area, &mut out);
    assert_eq!(tscs(&out), [10, 30, 1200]);
    assert_eq!((drainer.torn(), drainer.late(), hand.tail(0)), (1, 0, 4));
}

/// Drains `harness` until `stop`, then finishes; returns every record in release order.
fn drain_until(harness: &Harness, stop: &AtomicBool) -> (Tally, Drainer) {
    let mut drainer = Drainer::new(&harness.area);
    let (mut out, mut tally) = (Vec::new(), Tally::default());
    while !stop.load(Ordering::Acquire) {
        let now = rdtsc();
        harness.area.heartbeat(now);
        let read = drainer.drain(&harness.area, now, &mut out);
        out.drain(..).for_each(|record| tally.add(&record));
        if read == 0 {
            std::thread::yield_now();
        }
    }
    drainer.finish(&harness.area, &mut out);
    out.drain(..).for_each(|record| tally.add(&record));
    (tally, drainer)
}

/// The released stream, checked as it goes (storing millions of records would weigh
/// on every other test of the process).
#[derive(Debug, Default)]
struct Tally {
    records: u64,
    last_tsc: u64,
    /// Records older than the one released before them.
    inversions: u64,
    /// Blocks malloc'd and not yet freed.
    live: HashSet<u64>,
    /// A malloc of a live block, or a free of a block not live.
    out_of_order: u64,
    /// Per thread: records, mallocs, the sum of malloc sizes.
    per_thread: HashMap<u64, (u64, u64, u64)>,
    /// mallocs of 7 bytes.
    sevens: u64,
}

impl Tally {
    fn add(&mut self, record: &RawRecord) {
        self.records += 1;
        self.inversions += (record.tsc < self.last_tsc) as u64;
        self.last_tsc = self.last_tsc.max(record.tsc);
        let thread = self.per_thread.entry(record.thread).or_default();
        thread.0 += 1;
        match record.op {
            Op::Malloc => {
                self.out_of_order += !self.live.insert(record.result) as u64;
                thread.1 += 1;
                thread.2 += record.arguments[0];
                self.sevens += (record.arguments[0] == 7) as u64;
            }
            Op::Free => self.out_of_order += !self.live.remove(&record.arguments[0]) as u64,
            op => panic!("unexpected {op:?}"),
        }
    }

    /// Nondecreasing TSC but for records the drain counted late; every block malloc'd
    /// once and freed once after its malloc.
    fn check(&self, drainer: &Drainer) {
        assert!(self.inversions <= drainer.late());
        assert_eq!((self.out_of_order, self.live.len()), (0, 0));
    }
}

fn fake_targets() -> [u64; 2] {
    [
        fake_malloc as *const () as u64,
        fake_free as *const () as u64,
    ]
}

/// `threads` threads each malloc `calls / 2` blocks, pass each to the next thread, and
/// free the blocks passed to them, against a concurrent drainer.
fn producers_against_a_drainer(threads: usize, calls: usize, cpu: CpuSource, rings: u32) {
    let config = AreaConfig::waiting(rings, 64);
    let harness = Arc::new(Harness::new(
        cpu,
        config,
        &[Op::Malloc, Op::Free],
        &fake_targets(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let (harness, stop) = (harness.clone(), stop.clone());
        std::thread::spawn(move || drain_until(&harness, &stop))
    };
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads).map(|_| mpsc::channel()).unzip();
    let mut workers = Vec::new();
    for (index, receiver) in receivers.into_iter().enumerate() {
        let next: mpsc::Sender<u64> = senders[(index + 1) % threads].clone();
        let harness = harness.clone();
        workers.push(std::thread::spawn(move || {
            let (malloc, free) = (harness.malloc(), harness.free());
            let mut freed = 0;
            for call in 0..calls / 2 {
                next.send(malloc((index * 1_000_000 + call) as u64))
                    .unwrap();
                while let Ok(block) = receiver.try_recv() {
                    free(block);
                    freed += 1;
                }
            }
            while freed < calls / 2 {
                free(receiver.recv().unwrap());
                freed += 1;
            }
            thread_pointer()
        }));
    }
    drop(senders);
    let threads_seen: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Release);
    let (tally, drainer) = drain.join().unwrap();
    assert_eq!(
        (drainer.torn(), drainer.invalid(), harness.area.dropped()),
        (0, 0, 0)
    );
    assert_eq!(tally.records, (threads * calls) as u64);
    tally.check(&drainer);
    assert_eq!(tally.per_thread.len(), threads);
    let half = (calls / 2) as u64;
    for (index, thread) in threads_seen.iter().enumerate() {
        let sizes = index as u64 * 1_000_000 * half + half * (half - 1) / 2;
        assert_eq!(tally.per_thread[thread], (calls as u64, half, sizes));
    }
    let (waits, late) = (harness.area.full_waits(), drainer.late());
    println!("{threads} threads: {waits} full-ring waits, {late} records late");
}

#[test]
fn eight_threads_on_per_cpu_rings_lose_nothing_and_release_in_order() {
    producers_against_a_drainer(8, 100_000, rseq_source(), 4);
}

#[test]
fn sixty_four_threads_on_one_small_ring_lose_nothing_and_release_in_order() {
    producers_against_a_drainer(64, 100_000, CpuSource::Single, 1);
}

extern "C" {
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// glibc's rseq area of this process.
pub(super) fn rseq_source() -> CpuSource {
    // SAFETY: glibc exports both as constants set before main.
    let (offset, size) = unsafe { (__rseq_offset, __rseq_size) };
    assert!(size > 0, "glibc registered no rseq area");
    CpuSource::Rseq {
        offset: offset as i64,
    }
}

static SIGNAL_MALLOC: AtomicU64 = AtomicU64::new(0);
static SIGNAL_FREE: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn hooked_calls_in_a_handler(_signal: i32) {
    // SAFETY: the entries are set before any signal is sent and outlive the handler.
    let (malloc, free) = unsafe {
        (
            std::mem::transmute::<u64, extern "C" fn(u64) -> u64>(
                SIGNAL_MALLOC.load(Ordering::Relaxed),
            ),
            std::mem::transmute::<u64, extern "C" fn(u64)>(SIGNAL_FREE.load(Ordering::Relaxed)),
        )
    };
    free(malloc(7));
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn signal_handlers_calling_hooks_inside_hooks_lose_nothing() {
    let config = AreaConfig::waiting(1, 256);
    let harness = Arc::new(Harness::new(
        CpuSource::Single,
        config,
        &[Op::Malloc, Op::Free],
        &fake_targets(),
    ));
    SIGNAL_MALLOC.store(harness.entry(Op::Malloc), Ordering::Relaxed);
    SIGNAL_FREE.store(harness.entry(Op::Free), Ordering::Relaxed);
    // SAFETY: installs a handler that only calls the hooks and an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = hooked_calls_in_a_handler as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        assert_eq!(
            libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut()),
            0
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let (harness, stop) = (harness.clone(), stop.clone());
        std::thread::spawn(move || drain_until(&harness, &stop))
    };
    let worker_done = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel();
    let worker = {
        let (harness, done) = (harness.clone(), worker_done.clone());
        std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            sender.send(unsafe { libc::pthread_self() }).unwrap();
            let (malloc, free) = (harness.malloc(), harness.free());
            let mut calls = 0u64;
            while calls < 200_000 || HANDLED.load(Ordering::Relaxed) < 1000 {
                free(malloc(calls));
                calls += 1;
            }
            done.store(true, Ordering::Release);
            calls
        })
    };
    let target = receiver.recv().unwrap();
    while !worker_done.load(Ordering::Acquire) {
        // SAFETY: the worker thread is alive until `worker_done`.
        unsafe { libc::pthread_kill(target, libc::SIGALRM) };
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
    let calls = worker.join().unwrap();
    stop.store(true, Ordering::Release);
    let (tally, drainer) = drain.join().unwrap();
    let handled = HANDLED.load(Ordering::Relaxed);
    assert_eq!(
        (drainer.torn(), drainer.invalid(), harness.area.dropped()),
        (0, 0, 0)
    );
    assert_eq!(tally.records, 2 * calls + 2 * handled);
    tally.check(&drainer);
    // Size 7 also comes from the loop's own call 7.
    assert_eq!(tally.sevens, handled + 1);
}

/// ns per call of malloc+free pairs through the hooks against a concurrent drainer, and
/// directly. `cargo test --release --lib hooks::ring_tests::cost -- --ignored --nocapture`
#[test]
#[ignore]
fn cost_of_a_hooked_call() {
    const CALLS: u64 = 10_000_000;
    for threads in [1, 2] {
        let config = AreaConfig::waiting(4, 4096);
        let hooks = Harness::new(
            rseq_source(),
            config,
            &[Op::Malloc, Op::Free],
            &fake_targets(),
        );
        let harness = Arc::new(hooks);
        let stop = Arc::new(AtomicBool::new(false));
        let drain = {
            let (harness, stop) = (harness.clone(), stop.clone());
            std::thread::spawn(move || drain_until(&harness, &stop))
        };
        let run = |hooked: bool| {
            let start = std::time::Instant::now();
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let harness = harness.clone();
                    std::thread::spawn(move || {
                        let (malloc, free): (extern "C" fn(u64) -> u64, extern "C" fn(u64)) =
                            if hooked {
                                (harness.malloc(), harness.free())
                            } else {
                                (fake_malloc, fake_free)
                            };
                        for size in 0..CALLS / 2 {
                            free(malloc(size));
                        }
                    })
                })
                .collect();
            workers.into_iter().for_each(|w| w.join().unwrap());
            start.elapsed().as_nanos() as f64 / CALLS as f64
        };
        let direct = run(false);
        let hooked = run(true);
        stop.store(true, Ordering::Release);
        let (tally, _) = drain.join().unwrap();
        assert_eq!(tally.records, threads * CALLS);
        println!(
            "{threads} thread(s), {CALLS} calls each: hooked {hooked:.1} ns per call, direct {direct:.1} ns, {} full-ring waits",
            harness.area.full_waits()
        );
    }
}
