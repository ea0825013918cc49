//! Hooked MPI calls in which nothing happened, counted instead of sent. A message loop
//! makes millions of MPI calls a second, each an entry and a return record; turned into two
//! profile records each, they took most of memsup's CPU on a ping-pong. A call whose entry
//! and return are consecutive in its image's records (nothing allocated, freed or mapped
//! inside it by any thread, so the image's live bytes did not change across it) says no
//! more than "one more call, this long": such calls are summed per thread and function and
//! sent as one `MpiCalls` event. Every other call is sent as its entry and return, in order.
//! "Nothing happened" is judged on the events sent: any event between the two (an
//! allocator call, a mapping, a stack, another thread's MPI event that is sent) keeps the
//! call whole.
//!
//! The order of what is sent stays the records' order: an entry is held back only until the
//! next event that is sent (every held entry is sent first, so times never go back), and a
//! thread's sums are sent before any other MPI event of that thread (so the interpret stage
//! sees them with the thread's nesting as it was during the calls: inside an outer call
//! they are inner calls and dropped). Whatever is held or summed is sent at the end of each
//! drain pass.

use crate::events::{Event, EventKind};

/// What an MPI call's entry and return records both carry, by which a return finds its
/// entry: the thread's key (its self pointer), the function's number and the stack pointer
/// at entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallKey {
    pub thread: u64,
    pub function: u32,
    pub stack_pointer: u64,
}

/// An entry held back.
#[derive(Debug)]
struct Held {
    key: CallKey,
    event: Event,
}

/// Calls of one function by one thread summed since they were last sent.
#[derive(Debug)]
struct Summed {
    pid: u32,
    tid: u32,
    function: u32,
    calls: u64,
    inside_ns: u64,
}

#[derive(Debug, Default)]
pub struct MpiFold {
    /// In the order they came (which is time order).
    held: Vec<Held>,
    summed: Vec<Summed>,
    /// The latest time among the records seen: what sums sent at the end are stamped with.
    latest_ns: u64,
}

impl MpiFold {
    /// A record of time `time_ns` was read (any record, sent or not).
    pub fn saw(&mut self, time_ns: u64) {
        self.latest_ns = self.latest_ns.max(time_ns);
    }

    /// An MPI entry: held back. A thread entering a call while its previous entry is still
    /// held is calling one MPI function inside another: the held entry is sent first.
    pub fn enter(&mut self, key: CallKey, event: Event, out: &mut Vec<Event>) {
        if self.held.iter().any(|held| held.key.thread == key.thread) {
            self.release(out);
        }
        self.held.push(Held { key, event });
    }

    /// An MPI return: summed when its entry is still held (nothing came between them),
    /// else sent after everything held and the thread's sums.
    pub fn leave(&mut self, key: CallKey, event: Event, out: &mut Vec<Event>) {
        let Some(index) = self.held.iter().rposition(|held| held.key == key) else {
            self.send(event, out);
            return;
        };
        let entry = self.held.remove(index).event;
        let inside_ns = event.time_ns.saturating_sub(entry.time_ns);
        let function = key.function;
        let found = self.summed.iter_mut().find(|summed| {
            summed.pid == entry.pid && summed.tid == entry.tid && summed.function == function
        });
        match found {
            Some(summed) => {
                summed.calls += 1;
                summed.inside_ns += inside_ns;
            }
            None => self.summed.push(Summed {
                pid: entry.pid,
                tid: entry.tid,
                function,
                calls: 1,
                inside_ns,
            }),
        }
    }

    /// Sends `event` (anything but a held entry) after every held entry and, for an MPI
    /// event, its thread's sums. Called for every record: the common case (nothing held,
    /// nothing summed) is two tests.
    #[inline]
    pub fn send(&mut self, event: Event, out: &mut Vec<Event>) {
        if self.held.is_empty() && self.summed.is_empty() {
            out.push(event);
            return;
        }
        self.release(out);
        if matches!(event.kind, EventKind::MpiCall { .. }) {
            self.send_sums_of(event.pid, event.tid, event.time_ns, out);
        }
        out.push(event);
    }

    /// Sends every held entry, each after its thread's sums.
    #[inline]
    pub fn release(&mut self, out: &mut Vec<Event>) {
        if self.held.is_empty() {
            return;
        }
        for held in std::mem::take(&mut self.held) {
            let event = held.event;
            self.send_sums_of(event.pid, event.tid, event.time_ns, out);
            out.push(event);
        }
    }

    /// The end of a drain pass: everything held, then every sum.
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        self.release(out);
        let latest_ns = self.latest_ns;
        out.extend(
            self.summed
                .drain(..)
                .map(|summed| summed.to_event(latest_ns)),
        );
    }

    fn send_sums_of(&mut self, pid: u32, tid: u32, time_ns: u64, out: &mut Vec<Event>) {
        if self.summed.is_empty() {
            return;
        }
        self.summed.retain(|summed| {
            let theirs = summed.pid == pid && summed.tid == tid;
            if theirs {
                out.push(summed.to_event(time_ns));
            }
            !theirs
        });
    }
}

impl Summed {
    fn to_event(&self, time_ns: u64) -> Event {
        Event {
            time_ns,
            pid: self.pid,
            tid: self.tid,
            kind: EventKind::MpiCalls {
                function: self.function,
                calls: self.calls,
                inside_ns: self.inside_ns,
            },
        }
    }
}

#[cfg(test)]
#[path = "mpi_fold_tests.rs"]
mod tests;
