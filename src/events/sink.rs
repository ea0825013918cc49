//! Where the tracer sends records: a bounded channel, never a file, so it never waits on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use crate::events::watched::Watched;
use crate::trace::format::{Record, StartCause};
use crate::unwind::StackSnapshot;

/// A copy of a stopped thread's stack, for the collector to unwind.
#[derive(Debug, Clone)]
pub struct Capture {
    pub snapshot: StackSnapshot,
    /// The copy ends before the stack mapping does (a walk that runs off it was cut short).
    pub window_limited: bool,
    /// memsup's return trampoline in this process, if any.
    pub trampoline: Option<u64>,
    /// The return addresses the trampoline stands in for on this stack, innermost first.
    pub hijacked: Vec<u64>,
    /// The thread's copy size, grown by the collector when `window_limited` cut a walk short.
    pub window: Arc<AtomicU32>,
}

/// How the collector learns the stack of an event.
#[derive(Debug, Clone)]
pub enum StackSource {
    /// Only the return address into the caller (`--stacks caller`).
    Caller(u64),
    /// With full stacks, a stack that could not be copied: the caller is known, the rest is
    /// recorded as truncated.
    Uncopied(u64),
    Snapshot(Box<Capture>),
}

/// What the tracer sends: a record, and for allocator and mapping events, its stack.
#[derive(Debug)]
pub struct Message {
    pub record: Record,
    pub stack: Option<StackSource>,
}

/// Bytes of stack copies sent and not yet unwound, shared by the tracer and the collector.
#[derive(Debug, Default)]
pub struct CopiesInFlight {
    bytes: AtomicU64,
}

impl CopiesInFlight {
    /// The collector is done with a copy of `bytes` (`copy_bytes` of its message).
    pub fn release(&self, bytes: u64) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Bytes of stack copy a message carries.
pub fn copy_bytes(stack: &Option<StackSource>) -> u64 {
    match stack {
        Some(StackSource::Snapshot(capture)) => capture.snapshot.stack.len() as u64,
        _ => 0,
    }
}

/// Stack copies the collector may be behind by before the tracer waits: enough for the
/// seconds an image's symbolisation can take at tens of thousands of events per second,
/// and a bound on memory however large the copies grow.
pub const COPIES_IN_FLIGHT_LIMIT: u64 = 256 << 20;

pub struct RecordSink {
    sender: Sender<Message>,
    origin: Instant,
    copies: Arc<CopiesInFlight>,
    /// Times the channel was full and the tracer had to wait (backpressure, reported).
    pub stalls: AtomicU64,
    /// The processes under supervision, for the residency sampler: every process start and
    /// exit passes through here, whichever part of the tracer records it.
    watched: Arc<Watched>,
}

impl RecordSink {
    pub fn new(
        sender: Sender<Message>,
        origin: Instant,
        copies: Arc<CopiesInFlight>,
    ) -> RecordSink {
        RecordSink {
            sender,
            origin,
            copies,
            stalls: AtomicU64::new(0),
            watched: Arc::new(Watched::default()),
        }
    }

    /// Time 0 of the records.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// The processes started and not yet exited, as recorded so far.
    pub fn watched(&self) -> Arc<Watched> {
        Arc::clone(&self.watched)
    }

    /// Nanoseconds since the recording started.
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Sends without dropping: waits when the consumers are behind, and counts it.
    pub fn send(&self, record: Record) {
        // A process is sampled only between its start and exit records, so that every
        // sample falls within the lifetime the profile records for it.
        let (started, exited) = match record {
            Record::ProcessStart { pid, cause, .. } => (Some((pid as i32, cause)), None),
            Record::ProcessExit { pid, .. } => (None, Some(pid as i32)),
            _ => (None, None),
        };
        if let Some(pid) = exited {
            self.watched.remove(pid);
        }
        self.send_message(Message {
            record,
            stack: None,
        });
        if let Some((pid, cause)) = started {
            // A fork child starts as a copy of its parent: its exec, peaks or exit say more.
            let copy = matches!(cause, StartCause::Fork | StartCause::Vfork);
            self.watched.insert(pid, !copy);
        }
    }

    /// Sends an event whose stack the collector fills in.
    pub fn send_with_stack(&self, record: Record, stack: StackSource) {
        self.send_message(Message {
            record,
            stack: Some(stack),
        });
    }

    fn send_message(&self, message: Message) {
        let bytes = copy_bytes(&message.stack);
        if bytes > 0 {
            // Lossless backpressure by bytes, as the channel gives by count.
            if self.copies.bytes.load(Ordering::Relaxed) + bytes > COPIES_IN_FLIGHT_LIMIT {
                self.stalls.fetch_add(1, Ordering::Relaxed);
                while self.copies.bytes.load(Ordering::Relaxed) + bytes > COPIES_IN_FLIGHT_LIMIT
                    && !self.sender.is_empty()
                    // A collector that panicked never drains the channel.
                    && !crate::ptrace::signals::failure_reported()
                {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            self.copies.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        match self.sender.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(message)) => {
                self.stalls.fetch_add(1, Ordering::Relaxed);
                let _ = self.sender.send(message);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::Record;

    fn snapshot_of(bytes: usize) -> StackSource {
        StackSource::Snapshot(Box::new(Capture {
            snapshot: StackSnapshot {
                stack: vec![0; bytes],
                ..StackSnapshot::default()
            },
            window_limited: false,
            trampoline: None,
            hijacked: Vec::new(),
            window: Arc::new(AtomicU32::new(0)),
        }))
    }

    #[test]
    fn copies_in_flight_are_counted_until_released() {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let copies = Arc::new(CopiesInFlight::default());
        let sink = RecordSink::new(sender, Instant::now(), Arc::clone(&copies));
        let end = || Record::End { time_ns: 0 };
        sink.send_with_stack(end(), snapshot_of(4096));
        sink.send_with_stack(end(), StackSource::Caller(0x1000));
        sink.send_with_stack(end(), snapshot_of(100));
        sink.send(end());
        assert_eq!(copies.bytes.load(Ordering::Relaxed), 4196);
        let carried: Vec<u64> = receiver
            .try_iter()
            .map(|message| copy_bytes(&message.stack))
            .collect();
        assert_eq!(carried, [4096, 0, 100, 0]);
        for bytes in carried {
            copies.release(bytes);
        }
        assert_eq!(copies.bytes.load(Ordering::Relaxed), 0);
        assert_eq!(sink.stalls.load(Ordering::Relaxed), 0);
    }
}
