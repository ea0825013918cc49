//! Where the tracer sends records: a bounded channel, never a file, so it never waits on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};

use crate::trace::format::Record;

pub struct RecordSink {
    sender: Sender<Record>,
    origin: Instant,
    /// Times the channel was full and the tracer had to wait (backpressure, reported).
    pub stalls: AtomicU64,
}

impl RecordSink {
    pub fn new(sender: Sender<Record>, origin: Instant) -> RecordSink {
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
        match self.sender.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(record)) => {
                self.stalls.fetch_add(1, Ordering::Relaxed);
                let _ = self.sender.send(record);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}
