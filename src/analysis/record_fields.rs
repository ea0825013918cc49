//! What the replay reads from a record beyond its kind: its time, and the heap model's
//! event of an allocator record.

use crate::events::heap::{HeapCall, HeapEvent};
use crate::trace::format::{AllocFunction, Record};
use crate::trace::stacks::EMPTY_STACK;

/// The PID, function and model event of a heap record.
pub(super) fn heap_event(record: &Record) -> Option<(u32, AllocFunction, HeapEvent)> {
    let (time_ns, pid, function, stack, call) = match *record {
        Record::Alloc {
            time_ns,
            pid,
            function,
            address,
            size,
            stack,
            ..
        } => (
            time_ns,
            pid,
            function,
            stack,
            HeapCall::Alloc { address, size },
        ),
        Record::Free {
            time_ns,
            pid,
            address,
            ..
        } => {
            let call = HeapCall::Free { address };
            (time_ns, pid, AllocFunction::Free, EMPTY_STACK, call)
        }
        Record::Realloc {
            time_ns,
            pid,
            function,
            old_address,
            new_address,
            size,
            stack,
            ..
        } => {
            let call = HeapCall::Realloc {
                old_address,
                new_address,
                size,
            };
            (time_ns, pid, function, stack, call)
        }
        _ => return None,
    };
    let event = HeapEvent {
        time_ns,
        stack,
        call,
    };
    Some((pid, function, event))
}

pub(super) fn record_time(record: &Record) -> Option<u64> {
    match record {
        Record::ProcessStart { time_ns, .. }
        | Record::Exec { time_ns, .. }
        | Record::ThreadStart { time_ns, .. }
        | Record::ThreadExit { time_ns, .. }
        | Record::Module { time_ns, .. }
        | Record::Alloc { time_ns, .. }
        | Record::Free { time_ns, .. }
        | Record::Realloc { time_ns, .. }
        | Record::Mapping { time_ns, .. }
        | Record::Warning { time_ns, .. }
        | Record::ProcessExit { time_ns, .. }
        | Record::End { time_ns }
        | Record::AbandonedCall { time_ns, .. }
        | Record::StatusSample { time_ns, .. }
        | Record::RollupSample { time_ns, .. }
        | Record::SmapsSnapshot { time_ns, .. }
        | Record::ScratchPage { time_ns, .. }
        | Record::ThreadStack { time_ns, .. } => Some(*time_ns),
        Record::Symbol { .. }
        | Record::ImageCounters { .. }
        | Record::StackNode { .. }
        | Record::UnwindCosts(_)
        | Record::SamplerCosts(_) => None,
    }
}
