//! The profile record of an event, once its time is relative to the recording and its stack
//! interned. Events that only change the interpret stage's state have none.

use crate::events::EventKind;
use crate::trace::format::Record;
use crate::trace::stacks::StackId;

pub fn record_of(
    time_ns: u64,
    pid: u32,
    tid: u32,
    kind: EventKind,
    stack: StackId,
) -> Option<Record> {
    call_record(time_ns, pid, tid, kind, stack)
        .or_else(|kind| snapshot_record(time_ns, pid, tid, kind, stack))
        .or_else(|kind| sample_record(time_ns, pid, kind))
        .or_else(|kind| process_record(time_ns, pid, tid, kind))
        .ok()
}

/// Reallocations and mapping calls (allocations and frees take `Interpreter::take`'s direct
/// path); any other event back.
fn call_record(
    time_ns: u64,
    pid: u32,
    tid: u32,
    kind: EventKind,
    stack: StackId,
) -> Result<Record, EventKind> {
    Ok(match kind {
        EventKind::Realloc {
            function,
            old_address,
            new_address,
            size,
            ..
        } => Record::Realloc {
            time_ns,
            pid,
            tid,
            function,
            old_address,
            new_address,
            size,
            stack,
        },
        EventKind::Mapping {
            call, args, result, ..
        } => Record::Mapping {
            time_ns,
            pid,
            tid,
            call,
            args,
            result,
            stack,
        },
        EventKind::AbandonedCall { function } => Record::AbandonedCall {
            time_ns,
            pid,
            tid,
            function,
        },
        other => return Err(other),
    })
}

/// What a snapshot saw of threads and how long it stopped the process; any other event back.
fn snapshot_record(
    time_ns: u64,
    pid: u32,
    tid: u32,
    kind: EventKind,
    stack: StackId,
) -> Result<Record, EventKind> {
    Ok(match kind {
        EventKind::ThreadState {
            activity,
            kernel_state,
            wchan,
            ..
        } => Record::ThreadState {
            time_ns,
            pid,
            tid,
            activity,
            kernel_state,
            wchan,
            stack,
        },
        EventKind::SnapshotStop {
            stopped_ns,
            threads,
        } => Record::SnapshotStop {
            time_ns,
            pid,
            stopped_ns,
            threads,
        },
        EventKind::HeapCensus(census) => Record::HeapCensus {
            time_ns,
            pid,
            census,
        },
        EventKind::BlocksAtAttach(blocks) => Record::BlocksAtAttach {
            time_ns,
            pid,
            blocks,
        },
        other => return Err(other),
    })
}

/// Residency samples and the sampler's costs; any other event back.
fn sample_record(time_ns: u64, pid: u32, kind: EventKind) -> Result<Record, EventKind> {
    Ok(match kind {
        EventKind::StatusSample(sample) => Record::StatusSample {
            time_ns,
            pid,
            rss: sample.rss,
            anon: sample.anon,
            file: sample.file,
            shmem: sample.shmem,
            swap: sample.swap,
        },
        EventKind::RollupSample(sample) => Record::RollupSample {
            time_ns,
            pid,
            rss: sample.rss,
            pss: sample.pss,
            pss_anon: sample.pss_anon,
            pss_file: sample.pss_file,
            pss_shmem: sample.pss_shmem,
            swap: sample.swap,
            swap_pss: sample.swap_pss,
        },
        EventKind::SmapsSnapshot {
            reason,
            cost_ns,
            mappings,
        } => Record::SmapsSnapshot {
            time_ns,
            pid,
            reason,
            cost_ns,
            mappings,
        },
        EventKind::SamplerCosts(costs) => Record::SamplerCosts(costs),
        other => return Err(other),
    })
}

/// Processes, threads, images and the end of the recording; any other event back
/// (`KnownStack` changes only the interpret stage's state, and has no record).
fn process_record(time_ns: u64, pid: u32, tid: u32, kind: EventKind) -> Result<Record, EventKind> {
    Ok(match kind {
        EventKind::ProcessStart { parent_pid, cause } => Record::ProcessStart {
            time_ns,
            pid,
            parent_pid,
            cause,
        },
        EventKind::Exec { exe, argv } => Record::Exec {
            time_ns,
            pid,
            exe,
            argv,
        },
        EventKind::ThreadStart => Record::ThreadStart { time_ns, pid, tid },
        EventKind::ProcessRole(role) => Record::ProcessRole { time_ns, pid, role },
        EventKind::MpiFunction { function, name } => Record::MpiFunction {
            pid,
            function,
            name,
        },
        EventKind::MpiCall {
            function, entry, ..
        } => Record::MpiCall {
            time_ns,
            pid,
            tid,
            function,
            entry,
        },
        EventKind::MpiCalls {
            function,
            calls,
            inside_ns,
        } => Record::MpiCalls {
            time_ns,
            pid,
            tid,
            function,
            calls,
            inside_ns,
        },
        EventKind::ThreadExit => Record::ThreadExit { time_ns, pid, tid },
        EventKind::ThreadStack { address } => Record::ThreadStack {
            time_ns,
            pid,
            tid,
            address,
        },
        EventKind::Module {
            path,
            inode: _,
            start,
            end,
            bias,
        } => Record::Module {
            time_ns,
            pid,
            path,
            start,
            end,
            bias,
        },
        EventKind::ScratchPage { address } => Record::ScratchPage {
            time_ns,
            pid,
            address,
        },
        EventKind::Warning { message } => Record::Warning {
            time_ns,
            pid,
            message,
        },
        EventKind::ImageCounters { counters } => Record::ImageCounters { pid, counters },
        EventKind::ProcessExit { status, counters } => Record::ProcessExit {
            time_ns,
            pid,
            status,
            counters,
        },
        EventKind::ProbeSites {
            engine,
            sites,
            hooks,
        } => Record::ProbeSites {
            time_ns,
            pid,
            engine,
            sites,
            hooks,
        },
        EventKind::HookStacks(costs) => Record::HookStacks {
            time_ns,
            pid,
            costs,
        },
        EventKind::HookCalls(costs) => Record::HookCalls {
            time_ns,
            pid,
            costs,
        },
        EventKind::End => Record::End { time_ns },
        other => return Err(other),
    })
}
