//! Where the tracer sends records: a bounded channel, never a file, so it never waits on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use crate::trace::format::Record;
use crate::unwind::StackSnapshot;

/// A copy of a stopped thread's stack, for the collector to unwind.
#[derive(Debug)]
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
#[derive(Debug)]
pub enum StackSource {
    /// Only the return address into the caller.
    Caller(u64),
    Snapshot(Box<Capture>),
}

/// What the tracer sends: a record, and for allocator and mapping events, its stack.
#[derive(Debug)]
pub struct Message {
    pub record: Record,
    pub stack: Option<StackSource>,
}

pub struct RecordSink {
    sender: Sender<Message>,
    origin: Instant,
    /// Times the channel was full and the tracer had to wait (backpressure, reported).
    pub stalls: AtomicU64,
}

impl RecordSink {
    pub fn new(sender: Sender<Message>, origin: Instant) -> RecordSink {
        RecordSink {
            sender,
            origin,
            stalls: AtomicU64::new(0),
        }
    }

    /// Nanoseconds since the recording started.
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Sends without dropping: waits when the consumers are behind, and counts it.
    pub fn send(&self, record: Record) {
        self.send_message(Message {
            record,
            stack: None,
        });
    }

    /// Sends an event whose stack the collector fills in.
    pub fn send_with_stack(&self, record: Record, stack: StackSource) {
        self.send_message(Message {
            record,
            stack: Some(stack),
        });
    }

    fn send_message(&self, message: Message) {
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
