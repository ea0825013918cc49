//! Where every source sends its events: one bounded channel to the interpret stage, never a
//! file, so no source waits on disk. Each event is stamped with the clock while the channel
//! is held, so the channel's order is time order whichever threads send. A message is a
//! batch: the tracer sends its events one at a time, the hook drain thousands at once, with
//! one lock, one clock reading and one channel message per batch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Sender, TrySendError};

use super::stack::CopyWindows;
use super::{Event, EventKind, RawStack, Watched};
use crate::trace::format::StartCause;

/// A raw CLOCK_MONOTONIC reading in nanoseconds: the clock of every event, and one that code
/// injected into a target can read too.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Bytes of stack copies sent and not yet unwound, and events sent and not yet taken, shared
/// by the sources and the interpret stage; and whether that stage is still there to release
/// them.
#[derive(Debug, Default)]
pub struct CopiesInFlight {
    bytes: AtomicU64,
    events: AtomicU64,
    closed: AtomicBool,
}

impl CopiesInFlight {
    /// The interpret stage is done with a copy of `bytes` (`RawStack::copy_bytes`).
    pub fn release(&self, bytes: u64) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The interpret stage has taken `count` events off the channel.
    pub fn release_events(&self, count: u64) {
        self.events.fetch_sub(count, Ordering::Relaxed);
    }

    /// Events sent and not yet taken.
    pub fn events_in_flight(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// The interpret stage is gone (it ended, or panicked): nobody waits for it any more.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Stack copies the interpret stage may be behind by before a source waits: enough for the
/// seconds an image's symbolisation can take at tens of thousands of events per second,
/// and a bound on memory however large the copies grow.
pub const COPIES_IN_FLIGHT_LIMIT: u64 = 256 << 20;

/// Events a batch waits behind before it is sent (the channel itself bounds messages, and a
/// batch is one message): the interpret stage's backlog stays this many events at most,
/// plus one batch.
pub const EVENTS_IN_FLIGHT_LIMIT: u64 = 1 << 16;

/// One channel message: events in the order they were sent.
pub type EventBatch = Vec<Event>;

/// Cloned for each source; all clones feed one channel.
#[derive(Clone)]
pub struct EventSink {
    shared: Arc<Shared>,
}

struct Shared {
    /// Held while an event is stamped and queued.
    sender: Mutex<Sender<EventBatch>>,
    origin_ns: u64,
    copies: Arc<CopiesInFlight>,
    windows: Arc<CopyWindows>,
    /// The supervised processes, for the sampler: a process joins as its start is sent and
    /// leaves before its exit is, so it is sampled exactly while the stream says it lives,
    /// however far behind the interpret stage runs.
    watched: Arc<Watched>,
    /// Times the channel was full and a source had to wait (backpressure, reported).
    stalls: AtomicU64,
}

impl EventSink {
    /// `origin_ns` is time 0 of the recording (a `monotonic_ns` reading).
    pub fn new(
        sender: Sender<EventBatch>,
        origin_ns: u64,
        copies: Arc<CopiesInFlight>,
        windows: Arc<CopyWindows>,
        watched: Arc<Watched>,
    ) -> EventSink {
        EventSink {
            shared: Arc::new(Shared {
                sender: Mutex::new(sender),
                origin_ns,
                copies,
                windows,
                watched,
                stalls: AtomicU64::new(0),
            }),
        }
    }

    /// Nanoseconds since the recording started.
    pub fn elapsed_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.shared.origin_ns)
    }

    /// Where the interpret stage reports copies that were too short.
    pub fn copy_windows(&self) -> &CopyWindows {
        &self.shared.windows
    }

    pub fn stalls(&self) -> u64 {
        self.shared.stalls.load(Ordering::Relaxed)
    }

    /// Sends without dropping: waits when the interpret stage is behind, and counts it.
    /// The event's time is taken here, now.
    pub fn send(&self, pid: u32, tid: u32, kind: EventKind) {
        self.send_stamped(None, pid, tid, kind)
    }

    /// As `send`, for a source that read the clock itself when the event happened (a hook's
    /// record): never later than now, so the channel stays in time order within a pid as
    /// long as that source sends in its own time order.
    pub fn send_at(&self, time_ns: u64, pid: u32, tid: u32, kind: EventKind) {
        self.send_stamped(Some(time_ns), pid, tid, kind)
    }

    /// As `send_at` for many events of one source, already in its time order, each with its
    /// own time, pid and tid: one lock, one clock reading and one channel message for all.
    /// Waits while the interpret stage is more than `EVENTS_IN_FLIGHT_LIMIT` events behind.
    pub fn send_batch(&self, mut events: EventBatch) {
        if events.is_empty() {
            return;
        }
        let bytes: u64 = events
            .iter()
            .filter_map(|event| event.kind.stack())
            .map(RawStack::copy_bytes)
            .sum();
        let sender = self.lock_sender();
        self.wait_for_events_room(&sender);
        if bytes > 0 {
            self.wait_for_room(&sender, bytes);
        }
        let now = monotonic_ns();
        for event in &mut events {
            event.time_ns = event.time_ns.min(now);
            self.follow_processes_before(event.pid, &event.kind);
        }
        // A process started in the batch joins the watched set after it is queued, unless
        // the batch also ends it.
        let exits_later = |index: usize, pid: u32| {
            events[index + 1..].iter().any(|later| {
                later.pid == pid && matches!(later.kind, EventKind::ProcessExit { .. })
            })
        };
        let started: Vec<_> = events
            .iter()
            .enumerate()
            .filter_map(|(index, event)| Some((index, event.pid, start_of(&event.kind)?)))
            .filter(|&(index, pid, _)| !exits_later(index, pid))
            .map(|(_, pid, attached)| (pid, attached))
            .collect();
        self.queue(&sender, events);
        for (pid, attached) in started {
            self.follow_start(pid, attached);
        }
    }

    fn send_stamped(&self, time_ns: Option<u64>, pid: u32, tid: u32, kind: EventKind) {
        let bytes = kind.stack().map_or(0, |stack| stack.copy_bytes());
        let sender = self.lock_sender();
        if bytes > 0 {
            self.wait_for_room(&sender, bytes);
        }
        let started = start_of(&kind);
        self.follow_processes_before(pid, &kind);
        let now = monotonic_ns();
        let event = Event {
            time_ns: time_ns.map_or(now, |time| time.min(now)),
            pid,
            tid,
            kind,
        };
        self.queue(&sender, vec![event]);
        if let Some(attached) = started {
            self.follow_start(pid, attached);
        }
    }

    fn lock_sender(&self) -> std::sync::MutexGuard<'_, Sender<EventBatch>> {
        self.shared
            .sender
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues one message, waiting (and counting a stall) when the channel is full.
    fn queue(&self, sender: &Sender<EventBatch>, events: EventBatch) {
        let count = events.len() as u64;
        self.shared
            .copies
            .events
            .fetch_add(count, Ordering::Relaxed);
        match sender.try_send(events) {
            Ok(()) => {}
            Err(TrySendError::Full(events)) => {
                self.shared.stalls.fetch_add(1, Ordering::Relaxed);
                let _ = sender.send(events);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// A process leaves the supervised set as its exit is sent; its mapping calls are
    /// counted as they are sent, those of an image until its exec is.
    fn follow_processes_before(&self, pid: u32, kind: &EventKind) {
        match kind {
            EventKind::ProcessExit { .. } => self.shared.watched.remove(pid as i32),
            EventKind::Exec { .. } => self.shared.watched.exec_sent(pid as i32),
            EventKind::Mapping {
                call, args, result, ..
            } => self
                .shared
                .watched
                .mapping_call(pid as i32, *call, args, *result),
            _ => {}
        }
    }

    /// A process joins the supervised set once its start is sent (the tracer sees to its
    /// first snapshot).
    fn follow_start(&self, pid: u32, attached: bool) {
        match attached {
            true => self.shared.watched.insert_attached(pid as i32),
            false => self.shared.watched.insert(pid as i32),
        }
    }

    /// Lossless backpressure by events, for batches (one message may hold thousands).
    fn wait_for_events_room(&self, sender: &Sender<EventBatch>) {
        let copies = &self.shared.copies;
        let full = || copies.events_in_flight() >= EVENTS_IN_FLIGHT_LIMIT;
        if full() {
            self.shared.stalls.fetch_add(1, Ordering::Relaxed);
            while full() && !sender.is_empty() && !copies.closed.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Lossless backpressure by bytes of stack copies, as the channel gives by count.
    fn wait_for_room(&self, sender: &Sender<EventBatch>, bytes: u64) {
        let copies = &self.shared.copies;
        let full = || copies.in_flight() + bytes > COPIES_IN_FLIGHT_LIMIT;
        if full() {
            self.shared.stalls.fetch_add(1, Ordering::Relaxed);
            while full() && !sender.is_empty() && !copies.closed.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        copies.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// For a process's start: whether memsup attached to it.
fn start_of(kind: &EventKind) -> Option<bool> {
    match kind {
        EventKind::ProcessStart { cause, .. } => Some(*cause == StartCause::Attach),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
