//! The hook engine's event source: a thread of memsup that empties every registered area's
//! rings into the event sink, and another that keeps each area's heartbeat fresh so hooks
//! know someone drains. The tracer registers an image's area when it plants hooks, names
//! its threads, and drains it itself (`flush`, `finish`) before it reports anything that
//! must come after the image's records: a thread's or a process's end, an exec.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::{rdtsc, TscClock};
use super::inject::SharedArea;
use super::layout::stacks::StackRef;
use super::layout::{Op, Shape, POLICY_DROP, POLICY_WAIT};
use super::mpi_fold::{CallKey, MpiFold};
use super::mpi_slots::{Sum, SummedCalls};
use super::ring::{Area, Drainer, RawRecord};
use super::stack_section::{SegmentTable, StackSection};
use super::switch::Switch;
use crate::events::calls::{mapping_result, returned_call};
use crate::events::heap::{IntegerMap, IntegerSet};
use crate::events::mpi_nesting::MpiNesting;
use crate::events::{Event, EventKind, EventSink, RawStack};
use crate::failure::lock;
use crate::trace::format::{AllocFunction, HookCallCosts, HookCounters, HookStackCosts, MapCall};

/// Records per ring: fits the caches, and leaves the drain a few milliseconds at millions of
/// calls per second.
pub const RING_CAPACITY: u64 = 4096;
/// Rings per area at most: one per CPU, CPUs beyond share.
const MAX_RINGS: u64 = 8;
/// How long hooks wait for room before they drop a record, while the heartbeat says memsup
/// lives: long enough that a drain starved of CPU on a loaded machine loses nothing, and
/// still a bound should memsup's pipeline ever wedge (its death is told by the heartbeat).
const WAIT_LIMIT: Duration = Duration::from_secs(30);
/// Without a heartbeat this long, a hook that finds its ring full decides memsup is gone.
const STALE_AFTER: Duration = Duration::from_secs(1);
/// How often the heartbeat is written: well within `STALE_AFTER`.
const HEARTBEAT_EVERY: Duration = Duration::from_millis(50);
/// The longest the drain sleeps when its rings were empty.
const IDLE_SLEEP_MAX: Duration = Duration::from_micros(1000);
/// A pass that read fewer records than this naps for `FILL_NAP` instead of yielding: the
/// rings fill meanwhile (a nap's worth is a few hundred records of a ring's 4,096), and the
/// batches, wakes and waits of the stages after the drain come fewer and larger.
const SMALL_PASS: usize = 256;
const FILL_NAP: Duration = Duration::from_micros(50);

/// Records per ring: `RING_CAPACITY`, or for tests that need full rings the power of two
/// `MEMSUP_TEST_RING_RECORDS` gives (at least 2).
pub fn ring_capacity() -> u64 {
    static CAPACITY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CAPACITY.get_or_init(|| {
        std::env::var("MEMSUP_TEST_RING_RECORDS")
            .ok()
            .and_then(|records| records.parse::<u64>().ok())
            .filter(|records| records.is_power_of_two() && *records >= 2)
            .unwrap_or(RING_CAPACITY)
    })
}

/// Rings an area gets on this machine.
pub fn ring_count() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    cpus.next_power_of_two().min(MAX_RINGS)
}

/// What to do when a ring is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingFull {
    Wait,
    Drop,
}

/// What an image's hooks did, told when it is over (`Drain::finish`).
#[derive(Default)]
pub struct Finished {
    pub counters: HookCounters,
    /// What its stack walks cost; None when the hooks recorded callers only.
    pub stacks: Option<HookStackCosts>,
    /// Bytes of its area's table and store regions (`hooks::budget`), and whether a table,
    /// directory or thread list did not fit.
    pub table_region_bytes: u64,
    pub store_region_bytes: u64,
    pub tables_full: bool,
    pub calls: HookCallCosts,
    /// Times its hooks found the heartbeat stale and switched themselves off (counted by
    /// the heartbeats that found them so, and at the end): the calls made until the
    /// heartbeat thread switched them back on went unrecorded.
    pub switched_off: u64,
}

struct Image {
    area: Arc<AreaHandle>,
    drainer: Drainer,
    /// Thread self pointer → thread id.
    threads: IntegerMap<u64, u32>,
    /// Thread self pointer → the vfork child running on that thread's stack and TLS, whose
    /// calls are its own image's (the child's pid is its thread id).
    vfork_children: HashMap<u64, u32>,
    /// Code from which an allocator call is another allocator call's inner call (hooked
    /// function bodies, hook pages): recorded once, by the outer call. Sorted, disjoint.
    internal: Vec<(u64, u64)>,
    /// The hook pages alone: their frames are left out of walked stacks, which then read
    /// as the int3 engine's. Sorted, disjoint.
    pages: Vec<(u64, u64)>,
    /// Where hooked MPI calls return into their hooks: an allocator an MPI function
    /// tail-calls has its caller there, and is the program's call, not an inner one.
    mpi_returns: IntegerSet<u64>,
    counters: HookCounters,
    /// What the hooks' stack walker reads, as memsup wrote it.
    stacks: StackSection,
    /// Walked stacks already sent as `KnownStack` in this image, by `StackRef`.
    known_stacks: IntegerSet<u64>,
    stack_costs: HookStackCosts,
    call_costs: HookCallCosts,
    /// MPI functions whose name was sent, as pid << 32 | number: this image's, and its vfork
    /// children's.
    mpi_declared: IntegerMap<u64, ()>,
    /// MPI calls the hooks summed in their slots; the hooked calls sent and not yet closed,
    /// by thread (sums are sent only outside them); the latest time sent.
    mpi_summed: SummedCalls,
    mpi_open: MpiNesting,
    latest_ns: u64,
}

struct AreaHandle {
    area: Area,
    _local: SharedArea,
    switch: Switch,
}

struct Shared {
    images: Mutex<HashMap<u32, Image>>,
    /// Areas whose heartbeat is kept, apart from `images` so a drain blocked on a full sink
    /// never lets them go stale.
    beating: Mutex<Vec<Arc<AreaHandle>>>,
    stop: AtomicBool,
    /// Processes with a rendezvous hook waiting, for the tracer, and how to wake it.
    rendezvous: Mutex<Vec<u32>>,
    waker: Mutex<Option<fn()>>,
    sink: EventSink,
    /// Calibrated by the drain thread as it starts, while the tracer launches or attaches
    /// (15 ms); whoever needs it first waits for it.
    clock: OnceLock<TscClock>,
    caller_only: bool,
    /// The names of the MPI functions hooked so far, by their recording-wide numbers.
    mpi_names: Mutex<HashMap<u32, String>>,
}

/// Sends a process's published records at once, from any thread: a snapshot must come after
/// every block allocated before it, however recent (the grace pass holds back what is younger
/// than its previous pass, which can be long ago). A producer of the running process caught
/// between its clock reading and its claim (preempted, or interrupted by a signal whose
/// handler allocates) is then released late, and counted. Weak: the drain's sink must close
/// with the drain, whoever keeps a flusher.
#[derive(Clone)]
pub struct Flusher(Weak<Shared>);

impl Flusher {
    pub fn flush(&self, pid: i32) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let mut images = lock(&shared.images);
        if let Some(image) = images.get_mut(&(pid as u32)) {
            drain_image(&shared, pid as u32, image, Pass::Published);
        }
    }
}

impl std::fmt::Debug for Flusher {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Flusher")
    }
}

pub struct Drain {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    policy: RingFull,
}

impl Drain {
    /// `caller_only`: `--stacks caller`; otherwise each event's stack is the one its hook
    /// walked.
    pub fn start(sink: EventSink, caller_only: bool, policy: RingFull) -> Drain {
        let shared = Arc::new(Shared {
            images: Mutex::new(HashMap::new()),
            beating: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            rendezvous: Mutex::new(Vec::new()),
            waker: Mutex::new(None),
            sink,
            clock: OnceLock::new(),
            caller_only,
            mpi_names: Mutex::new(HashMap::new()),
        });
        let drainer = Arc::clone(&shared);
        let beater = Arc::clone(&shared);
        let threads = vec![
            std::thread::Builder::new()
                .name("memsup-drain".into())
                .spawn(move || drain_loop(&drainer))
                .expect("spawning the drain thread"),
            std::thread::Builder::new()
                .name("memsup-heartbeat".into())
                .spawn(move || heartbeat_loop(&beater))
                .expect("spawning the heartbeat thread"),
        ];
        Drain {
            shared,
            threads,
            policy,
        }
    }

    /// Starts draining `pid`'s new area (fills its header: hooks may run from now on).
    /// With full stacks the hooks walk them, over the tables `publish_segments` gives.
    pub fn register(&self, pid: u32, shared_area: SharedArea, shape: &Shape) {
        // SAFETY: the mapping lives in the handle as long as the view.
        let area = unsafe { Area::new(shared_area.local.pointer(), shared_area.local.len()) };
        let clock = self.shared.clock();
        let ticks = |d: Duration| clock.ticks(d);
        let policy = match self.policy {
            RingFull::Wait => POLICY_WAIT,
            RingFull::Drop => POLICY_DROP,
        };
        area.initialise(shape, policy, ticks(STALE_AFTER), ticks(WAIT_LIMIT));
        area.heartbeat(rdtsc());
        let stacks = StackSection::new(&area, shared_area.address, shape, !self.shared.caller_only);
        let handle = Arc::new(AreaHandle {
            area,
            _local: shared_area,
            switch: Switch::default(),
        });
        let drainer = Drainer::new(&handle.area);
        lock(&self.shared.beating).push(Arc::clone(&handle));
        let image = Image {
            area: handle,
            drainer,
            threads: IntegerMap::default(),
            vfork_children: HashMap::new(),
            internal: Vec::new(),
            pages: Vec::new(),
            mpi_returns: IntegerSet::default(),
            counters: HookCounters::default(),
            stacks,
            known_stacks: IntegerSet::default(),
            stack_costs: HookStackCosts::default(),
            call_costs: HookCallCosts::default(),
            mpi_declared: IntegerMap::default(),
            mpi_summed: SummedCalls::default(),
            mpi_open: MpiNesting::default(),
            latest_ns: 0,
        };
        lock(&self.shared.images).insert(pid, image);
    }

    /// MPI function `function` is hooked under `name` (in some image): an image's first
    /// record of it is preceded by its `MpiFunction` event.
    pub fn name_mpi_function(&self, function: u32, name: &str) {
        lock(&self.shared.mpi_names).insert(function, name.to_string());
    }

    /// Thread `tid` of `pid` runs on the stack `[low, high)` (None: it ended): hooks
    /// called on it may walk it.
    pub fn set_thread_stack(&self, pid: u32, tid: u32, stack: Option<(u64, u64)>) {
        if let Some(image) = lock(&self.shared.images).get_mut(&pid) {
            image.stacks.set_thread(&image.area.area, tid, stack);
        }
    }

    /// The executable segments of `pid`'s modules are now `segments` (their tables are
    /// written before the directory that names them).
    pub fn publish_segments(&self, pid: u32, segments: Vec<SegmentTable>) {
        if let Some(image) = lock(&self.shared.images).get_mut(&pid) {
            image.stacks.publish(&image.area.area, segments);
        }
    }

    /// The segments published last for `pid` (a fork child starts with its parent's).
    pub fn published_segments(&self, pid: u32) -> Vec<SegmentTable> {
        lock(&self.shared.images)
            .get(&pid)
            .map(|image| image.stacks.segments().to_vec())
            .unwrap_or_default()
    }

    /// `wake` interrupts the tracer: called (again every pass, about every millisecond) while
    /// a process's rendezvous hooks wait and the tracer has not taken the request.
    pub fn set_waker(&self, wake: fn()) {
        *lock(&self.shared.waker) = Some(wake);
    }

    /// The processes whose rendezvous hooks wait, since the last call.
    pub fn take_rendezvous_requests(&self) -> Vec<u32> {
        std::mem::take(&mut *lock(&self.shared.rendezvous))
    }

    /// Rendezvous tickets `pid`'s hooks have taken and not yet been served: the tickets
    /// taken so far, if some wait.
    pub fn rendezvous_waiting(&self, pid: u32) -> Option<u64> {
        let images = lock(&self.shared.images);
        let area = &images.get(&pid)?.area.area;
        let asked = area.rendezvous_asked();
        (asked > area.rendezvous_done()).then_some(asked)
    }

    /// Lets `pid`'s rendezvous hooks with tickets below `asked` continue.
    pub fn serve_rendezvous(&self, pid: u32, asked: u64) {
        if let Some(image) = lock(&self.shared.images).get(&pid) {
            image.area.area.serve_rendezvous(asked);
        }
    }

    pub fn is_registered(&self, pid: u32) -> bool {
        lock(&self.shared.images).contains_key(&pid)
    }

    /// Calls from `[start, end)` are inner calls of another allocator call.
    pub fn add_internal_range(&self, pid: u32, start: u64, end: u64) {
        if let Some(image) = lock(&self.shared.images).get_mut(&pid) {
            add_range(&mut image.internal, start, end);
        }
    }

    /// A hook page at `[start, end)`, its MPI hooks' calls returning at `mpi_returns`.
    pub fn add_hook_page(&self, pid: u32, start: u64, end: u64, mpi_returns: &[u64]) {
        if let Some(image) = lock(&self.shared.images).get_mut(&pid) {
            add_range(&mut image.internal, start, end);
            add_range(&mut image.pages, start, end);
            image.mpi_returns.extend(mpi_returns);
        }
    }

    /// Records whose thread self pointer is `key` come from thread `tid`.
    pub fn name_thread(&self, pid: u32, key: u64, tid: u32) {
        let mut images = lock(&self.shared.images);
        if let Some(image) = images.get_mut(&pid) {
            // A thread that ended left its self pointer to this one (a cached stack): its
            // records, all published by now, go out under its own name first.
            if image.threads.get(&key).is_some_and(|&old| old != tid) {
                drain_image(&self.shared, pid, image, Pass::Published);
            }
            image.threads.insert(key, tid);
        }
    }

    /// Sends every record `pid`'s hooks have published so far (no grace: see
    /// `Drainer::drain_published`).
    pub fn flush(&self, pid: u32) {
        let mut images = lock(&self.shared.images);
        if let Some(image) = images.get_mut(&pid) {
            drain_image(&self.shared, pid, image, Pass::Published);
        }
    }

    /// What sends `pid`'s published records from another thread (the sampler, before a
    /// snapshot, so that the blocks allocated before it precede it in the stream).
    pub fn flusher(&self) -> Flusher {
        Flusher(Arc::downgrade(&self.shared))
    }

    /// The image is over (exit, exec, detach): sends everything left, counting what could
    /// not be read, and forgets the area. Returns its counters, what its stack walks cost
    /// when the hooks walked stacks, and what its calls cost.
    pub fn finish(&self, pid: u32) -> Option<Finished> {
        let mut images = lock(&self.shared.images);
        let mut image = images.remove(&pid)?;
        drain_image(&self.shared, pid, &mut image, Pass::Finish);
        let area = &image.area.area;
        image.counters.dropped = area.dropped();
        image.counters.full_waits = area.full_waits();
        image.counters.torn = image.drainer.torn();
        image.counters.invalid = image.drainer.invalid();
        image.counters.late = image.drainer.late();
        lock(&self.shared.beating).retain(|handle| !Arc::ptr_eq(handle, &image.area));
        let stacks = (!self.shared.caller_only).then(|| {
            let mut costs = image.stack_costs;
            costs.stored_stacks = image.known_stacks.len() as u64;
            // Claims that did not fit count in the store's use too.
            costs.stored_bytes = area.stack_store_used().min(image.stacks.region_bytes().1);
            costs.lost = area.stacks_lost();
            costs.table_bytes = image.stacks.table_bytes();
            costs
        });
        let (timed_calls, timed_ticks) = area.timed();
        let calls = HookCallCosts {
            timed_calls,
            timed_ns: self.shared.clock().nanoseconds(timed_ticks),
            ..image.call_costs
        };
        let (table_region_bytes, store_region_bytes) = image.stacks.region_bytes();
        Some(Finished {
            counters: image.counters,
            stacks,
            table_region_bytes,
            store_region_bytes,
            tables_full: image.stacks.tables_full(),
            calls,
            switched_off: image.area.switch.times_off(area),
        })
    }

    /// Records of `pid`'s thread `key` come from vfork child `child` from now on, until
    /// `end_vfork_child`. What the thread recorded before goes to `pid` first.
    pub fn start_vfork_child(&self, pid: u32, key: u64, child: u32) {
        self.flush(pid);
        if let Some(image) = lock(&self.shared.images).get_mut(&pid) {
            image.vfork_children.insert(key, child);
        }
    }

    /// The vfork child `child` execs or ends, or its parent resumes: what it recorded is
    /// sent, and its parent's thread records as itself again.
    pub fn end_vfork_child(&self, child: u32) {
        let mut images = lock(&self.shared.images);
        for (&pid, image) in images.iter_mut() {
            if !image.vfork_children.values().any(|&c| c == child) {
                continue;
            }
            drain_image(&self.shared, pid, image, Pass::Published);
            image.vfork_children.retain(|_, c| *c != child);
        }
    }

    /// Runs `switch_off`, which marks an area switched off by memsup
    /// (`header::OFF_BY_MEMSUP`) and then clears its `ENABLED` through the target's memory,
    /// with the heartbeat held: it never switches that area back on, whichever image it is
    /// registered for.
    pub fn switch_off<T>(&self, switch_off: impl FnOnce() -> T) -> T {
        let _held = lock(&self.shared.beating);
        switch_off()
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn clock(&self) -> &TscClock {
        self.clock.get_or_init(TscClock::new)
    }
}

fn drain_loop(shared: &Shared) {
    shared.clock();
    let mut idle = Duration::from_micros(20);
    while !shared.stop.load(Ordering::Relaxed) {
        let mut read = 0;
        let mut waiting = Vec::new();
        {
            let mut images = lock(&shared.images);
            for (pid, image) in images.iter_mut() {
                read += drain_image(shared, *pid, image, Pass::Grace);
                let area = &image.area.area;
                if area.rendezvous_asked() > area.rendezvous_done() {
                    waiting.push(*pid);
                }
            }
        }
        ask_for_rendezvous(shared, waiting);
        if read > 0 {
            idle = Duration::from_micros(20);
            match read < SMALL_PASS {
                true => std::thread::sleep(FILL_NAP),
                false => std::thread::yield_now(),
            }
        } else {
            std::thread::sleep(idle);
            idle = (idle * 2).min(IDLE_SLEEP_MAX);
        }
    }
}

/// Hands the processes whose rendezvous hooks wait to the tracer and wakes it. Every pass
/// asks again: a wake that came just before the tracer blocked in waitpid is lost.
fn ask_for_rendezvous(shared: &Shared, waiting: Vec<u32>) {
    if waiting.is_empty() {
        return;
    }
    *lock(&shared.rendezvous) = waiting;
    if let Some(wake) = *lock(&shared.waker) {
        wake();
    }
}

fn heartbeat_loop(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        let now = rdtsc();
        for handle in lock(&shared.beating).iter() {
            handle.area.heartbeat(now);
            handle.switch.back_on(&handle.area);
        }
        std::thread::sleep(HEARTBEAT_EVERY);
    }
}

/// Events the drain sends in one message at most: the interpret stage starts on the first
/// while the drain converts the next.
const EVENT_BATCH: usize = 1024;

/// What one pass over an image's rings releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The drain thread's pass: records a grace behind now (`Drainer::drain`).
    Grace,
    /// Everything published so far, for a thread stopped at an event of its own
    /// (`Drainer::drain_published`).
    Published,
    /// Everything left, the image being over.
    Finish,
}

/// One pass over an image's rings: its records go out as events, in the drainer's order, a
/// batch at a time. Returns how many records were read.
fn drain_image(shared: &Shared, pid: u32, image: &mut Image, pass: Pass) -> usize {
    let Image {
        area,
        drainer,
        threads,
        vfork_children,
        internal,
        pages,
        mpi_returns,
        counters,
        stacks,
        known_stacks,
        stack_costs,
        call_costs,
        mpi_declared,
        mpi_summed,
        mpi_open,
        latest_ns,
    } = image;
    let mut batcher = EventBatcher {
        shared,
        pid,
        threads,
        vfork_children,
        internal,
        pages,
        mpi_returns,
        counters,
        stacks,
        known_stacks,
        stack_costs,
        call_costs,
        mpi_declared,
        mpi_summed,
        mpi_open,
        latest_ns,
        area: &area.area,
        batch: Vec::new(),
        mpi_fold: MpiFold::default(),
    };
    let read = match pass {
        Pass::Grace => drainer.drain(&area.area, rdtsc(), &mut batcher),
        Pass::Published => drainer.drain_published(&area.area, rdtsc(), &mut batcher),
        Pass::Finish => {
            let read = drainer.drain(&area.area, rdtsc(), &mut batcher);
            drainer.finish(&area.area, &mut batcher);
            read
        }
    };
    batcher.mpi_fold.finish(&mut batcher.batch);
    let horizon = drainer.released_below();
    let horizon_ns = shared.clock().to_monotonic_ns(horizon);
    *batcher.latest_ns = (*batcher.latest_ns).max(horizon_ns);
    batcher.send_summed(pass == Pass::Finish);
    batcher.send();
    read
}

/// Turns an image's records into events as the drainer releases them, and sends them
/// `EVENT_BATCH` at a time (`EventSink::send_batch`: each keeps its record's time).
struct EventBatcher<'a> {
    shared: &'a Shared,
    pid: u32,
    threads: &'a IntegerMap<u64, u32>,
    vfork_children: &'a HashMap<u64, u32>,
    internal: &'a [(u64, u64)],
    pages: &'a [(u64, u64)],
    mpi_returns: &'a IntegerSet<u64>,
    counters: &'a mut HookCounters,
    stacks: &'a StackSection,
    known_stacks: &'a mut IntegerSet<u64>,
    stack_costs: &'a mut HookStackCosts,
    call_costs: &'a mut HookCallCosts,
    mpi_declared: &'a mut IntegerMap<u64, ()>,
    mpi_summed: &'a mut SummedCalls,
    mpi_open: &'a mut MpiNesting,
    latest_ns: &'a mut u64,
    area: &'a Area,
    batch: Vec<Event>,
    /// MPI calls in which nothing happened, summed instead of sent.
    mpi_fold: MpiFold,
}

impl Extend<RawRecord> for EventBatcher<'_> {
    fn extend<T: IntoIterator<Item = RawRecord>>(&mut self, records: T) {
        let mut records = records.into_iter();
        while let Some(record) = records.next() {
            if self.batch.capacity() == 0 {
                let (coming, _) = records.size_hint();
                self.batch.reserve_exact((coming + 1).min(EVENT_BATCH));
            }
            self.take(&record);
            if self.batch.len() >= EVENT_BATCH {
                self.send();
            }
        }
    }
}

impl EventBatcher<'_> {
    fn send(&mut self) {
        self.shared.sink.send_batch(std::mem::take(&mut self.batch));
    }

    /// Turns one record into the events it makes, in order, into the batch.
    fn take(&mut self, record: &RawRecord) {
        let Some((event, mpi)) = self.event_of(record) else {
            return;
        };
        self.mpi_fold.saw(event.time_ns);
        *self.latest_ns = (*self.latest_ns).max(event.time_ns);
        let key = CallKey {
            thread: record.thread,
            function: record.out as u32,
            stack_pointer: record.stack_pointer,
        };
        match mpi {
            Some(true) => {
                // The calls its hooks summed came before, outside any call in the stream.
                let nesting = &mut self.mpi_open;
                if nesting.is_outermost(event.pid, event.tid, true, record.stack_pointer) {
                    let mut sums = Vec::new();
                    self.mpi_summed
                        .take_thread(self.area, record.thread, &mut sums);
                    self.send_sums(sums, event.time_ns);
                }
                self.mpi_fold.enter(key, event, &mut self.batch)
            }
            Some(false) => {
                let nesting = &mut self.mpi_open;
                nesting.is_outermost(event.pid, event.tid, false, record.stack_pointer);
                self.mpi_fold.leave(key, event, &mut self.batch)
            }
            None => self.mpi_fold.send(event, &mut self.batch),
        }
    }

    /// Sends what the hooks summed in the slots of threads with no call open in the stream
    /// (all of them when `all`), stamped with the latest time sent.
    fn send_summed(&mut self, all: bool) {
        // Nothing released yet to stamp them with: the next pass sends them.
        if *self.latest_ns == 0 && !all {
            return;
        }
        let mut sums = Vec::new();
        let (image, threads, vfork_children) = (self.pid, self.threads, self.vfork_children);
        let nesting = &*self.mpi_open;
        let ready = |thread: u64| {
            let (pid, tid) = owner_of(image, threads, vfork_children, thread);
            all || !nesting.is_inside(pid, tid)
        };
        self.mpi_summed.take(self.area, ready, &mut sums);
        self.send_sums(sums, *self.latest_ns);
    }

    fn send_sums(&mut self, sums: Vec<Sum>, time_ns: u64) {
        for sum in sums {
            let (pid, tid) = self.owner_of(sum.thread);
            self.declare_mpi_function(sum.function, pid, tid, time_ns);
            let event = Event {
                time_ns,
                pid,
                tid,
                kind: EventKind::MpiCalls {
                    function: sum.function,
                    calls: sum.calls,
                    inside_ns: self.shared.clock().nanoseconds(sum.ticks),
                },
            };
            self.mpi_fold.send(event, &mut self.batch);
        }
    }

    /// The process and thread of a thread pointer.
    fn owner_of(&self, thread: u64) -> (u32, u32) {
        owner_of(self.pid, self.threads, self.vfork_children, thread)
    }

    /// The event of one record, with its thread and time, and for an MPI call whether it is
    /// the entry; None for an inner call. Events it needs before (a stack, a name) go into
    /// the batch, after what `mpi_fold` holds.
    fn event_of(&mut self, record: &RawRecord) -> Option<(Event, Option<bool>)> {
        self.counters.records += 1;
        // A mapping call made inside an allocator call is the program's as well (the int3
        // engine records it too); only allocator calls nest.
        if function_of(record.op).is_some()
            && in_sorted_spans(self.internal, record.caller)
            && !self.mpi_returns.contains(&record.caller)
        {
            self.counters.nested += 1;
            return None;
        }
        let (pid, tid) = self.owner_of(record.thread);
        let time_ns = self.shared.clock().to_monotonic_ns(record.tsc);
        if let Some(kind) = self.mpi_event(record, pid, tid, time_ns) {
            let entry = matches!(kind, EventKind::MpiCall { entry: true, .. });
            let event = Event {
                time_ns,
                pid,
                tid,
                kind,
            };
            return Some((event, Some(entry)));
        }
        let stack = self.stack_of(record, pid, tid, time_ns);
        let kind = event_of(record, stack)?;
        let event = Event {
            time_ns,
            pid,
            tid,
            kind,
        };
        Some((event, None))
    }

    /// The `MpiCall` of an MPI record (None for the others), its function's name sent
    /// first when this image has not named it yet. Every call is sent, nested or not: the
    /// interpret stage keeps the outermost, with the int3 engine's.
    fn mpi_event(
        &mut self,
        record: &RawRecord,
        pid: u32,
        tid: u32,
        time_ns: u64,
    ) -> Option<EventKind> {
        let entry = match record.op {
            Op::MpiEntry => true,
            Op::MpiReturn => false,
            _ => return None,
        };
        let function = record.out as u32;
        self.declare_mpi_function(function, pid, tid, time_ns);
        Some(EventKind::MpiCall {
            function,
            entry,
            stack_pointer: record.stack_pointer,
        })
    }

    /// Sends MPI function `function`'s name first when this image has not named it yet.
    fn declare_mpi_function(&mut self, function: u32, pid: u32, tid: u32, time_ns: u64) {
        // Looked up for every MPI record: a message loop makes millions a second.
        let declared = (u64::from(pid) << 32) | u64::from(function);
        if self.mpi_declared.insert(declared, ()).is_none() {
            self.mpi_fold.release(&mut self.batch);
            let name = lock(&self.shared.mpi_names)
                .get(&function)
                .cloned()
                .unwrap_or_default();
            self.batch.push(Event {
                time_ns,
                pid,
                tid,
                kind: EventKind::MpiFunction { function, name },
            });
        }
    }

    /// The stack of a record: what its hook walked, registered with the interpret stage the
    /// first time this image sees it (a vfork child's records carry their frames).
    fn stack_of(&mut self, record: &RawRecord, pid: u32, tid: u32, time_ns: u64) -> RawStack {
        if self.shared.caller_only {
            return RawStack::Caller(record.caller);
        }
        if record.op == Op::Free {
            return RawStack::Uncopied(record.caller);
        }
        if record.stack == 0 {
            self.stack_costs.unwalked += 1;
            return RawStack::Uncopied(record.caller);
        }
        let walked = StackRef(record.stack);
        self.stack_costs.walks += 1;
        self.call_costs.rule_lookups += u64::from(record.lookups);
        self.call_costs.cache_misses += u64::from(record.misses);
        self.stack_costs.frames += walked.frames();
        self.stack_costs.truncated += u64::from(walked.truncated());
        if self.known_stacks.contains(&record.stack) && pid == self.pid {
            return RawStack::Known(record.stack);
        }
        let Some(mut frames) = self.stacks.frames(self.area, StackRef(record.stack)) else {
            return RawStack::Uncopied(record.caller);
        };
        frames.retain(|&frame| !in_sorted_spans(self.pages, frame));
        if pid != self.pid {
            return RawStack::Frames(frames);
        }
        self.known_stacks.insert(record.stack);
        self.mpi_fold.release(&mut self.batch);
        self.batch.push(Event {
            time_ns,
            pid,
            tid,
            kind: EventKind::KnownStack {
                id: record.stack,
                frames,
            },
        });
        RawStack::Known(record.stack)
    }
}

/// The process and thread of a thread pointer in image `pid`: a vfork child running on that
/// thread's stack, or the thread named for it, or the process.
fn owner_of(
    pid: u32,
    threads: &IntegerMap<u64, u32>,
    vfork_children: &HashMap<u64, u32>,
    thread: u64,
) -> (u32, u32) {
    let vfork_child = match vfork_children.is_empty() {
        true => None,
        false => vfork_children.get(&thread),
    };
    match vfork_child {
        Some(&child) => (child, child),
        None => (pid, threads.get(&thread).copied().unwrap_or(pid)),
    }
}

/// Adds `[start, end)` to sorted, disjoint `ranges`, merging what it overlaps or touches.
fn add_range(ranges: &mut Vec<(u64, u64)>, mut start: u64, mut end: u64) {
    if start >= end {
        return;
    }
    ranges.retain(|&(other_start, other_end)| {
        let apart = other_end < start || end < other_start;
        if !apart {
            start = start.min(other_start);
            end = end.max(other_end);
        }
        apart
    });
    let at = ranges.partition_point(|&(other_start, _)| other_start < start);
    ranges.insert(at, (start, end));
}

/// Whether `address` lies in one of sorted, disjoint `ranges` (a binary search: every
/// allocator record is checked).
fn in_sorted_spans(ranges: &[(u64, u64)], address: u64) -> bool {
    let after = ranges.partition_point(|&(start, _)| start <= address);
    after > 0 && address < ranges[after - 1].1
}

/// The event a hook's record reports, with `stack`.
fn event_of(record: &RawRecord, stack: RawStack) -> Option<EventKind> {
    if let Some(call) = map_call_of(record.op) {
        return Some(EventKind::Mapping {
            call,
            args: record.arguments,
            result: mapping_result(call, &record.arguments, record.result),
            stack,
        });
    }
    let function = function_of(record.op)?;
    if function == AllocFunction::Free {
        return Some(EventKind::Free {
            address: record.arguments[0],
        });
    }
    returned_call(
        function,
        &record.arguments,
        record.result,
        || Some(record.out),
        stack,
    )
}

/// The allocator function an operation's hook wraps (None for the others).
pub fn function_of(op: Op) -> Option<AllocFunction> {
    Some(match op {
        Op::Malloc => AllocFunction::Malloc,
        Op::Calloc => AllocFunction::Calloc,
        Op::Realloc => AllocFunction::Realloc,
        Op::Reallocarray => AllocFunction::Reallocarray,
        Op::Free => AllocFunction::Free,
        Op::PosixMemalign => AllocFunction::PosixMemalign,
        Op::AlignedAlloc => AllocFunction::AlignedAlloc,
        Op::Memalign => AllocFunction::Memalign,
        Op::Valloc => AllocFunction::Valloc,
        Op::Pvalloc => AllocFunction::Pvalloc,
        _ => return None,
    })
}

/// The libc mapping wrapper an operation's hook wraps (None for the others).
pub fn map_call_of(op: Op) -> Option<MapCall> {
    Some(match op {
        Op::Mmap => MapCall::Mmap,
        Op::Munmap => MapCall::Munmap,
        Op::Mremap => MapCall::Mremap,
        Op::Brk => MapCall::Brk,
        Op::Shmat => MapCall::Shmat,
        Op::Shmdt => MapCall::Shmdt,
        _ => return None,
    })
}

pub fn op_of(function: AllocFunction) -> Op {
    Op::ALL
        .into_iter()
        .find(|op| function_of(*op) == Some(function))
        .expect("every allocator function has an operation")
}

pub fn op_of_map_call(call: MapCall) -> Op {
    Op::ALL
        .into_iter()
        .find(|op| map_call_of(*op) == Some(call))
        .expect("every mapping wrapper has an operation")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_ranges_merge_and_hold_exactly_their_addresses() {
        let mut ranges = Vec::new();
        for (start, end) in [(50, 60), (10, 20), (30, 40), (18, 31), (70, 70), (60, 65)] {
            add_range(&mut ranges, start, end);
        }
        assert_eq!(ranges, [(10, 40), (50, 65)]);
        let inside: Vec<u64> = (0..80).filter(|&a| in_sorted_spans(&ranges, a)).collect();
        let expected: Vec<u64> = (10..40).chain(50..65).collect();
        assert_eq!(inside, expected);
        assert!(!in_sorted_spans(&[], 5));
    }
}
