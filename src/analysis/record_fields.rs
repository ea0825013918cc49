//! What the replay reads from a record beyond its kind: its time.

use crate::trace::format::Record;

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
