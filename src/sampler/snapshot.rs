//! Full /proc/PID/smaps snapshots: every mapping with its residency, for attributing resident
//! memory to components. They cost far more than a rollup (text per mapping), so they are
//! taken at key moments only, and each one records its own CPU time.

use super::budget::thread_cpu_ns;
use crate::events::EventKind;
use crate::proc::maps::MapEntry;
use crate::proc::smaps::{parse_smaps, read_into, SmapsEntry};
use crate::trace::format::{
    MappingResidency, SnapshotReason, MAPPING_EXECUTE, MAPPING_READ, MAPPING_SHARED, MAPPING_WRITE,
};

/// Reads /proc/PID/smaps into a `SmapsSnapshot` event; None when the process is gone or
/// has no address space left (a zombie).
pub fn take(pid: i32, reason: SnapshotReason, buffer: &mut Vec<u8>) -> Option<EventKind> {
    let cpu = thread_cpu_ns();
    read_into(&format!("/proc/{pid}/smaps"), buffer).ok()?;
    if buffer.is_empty() {
        // A main thread that ended with pthread_exit is a zombie with no memory to show;
        // the process's other threads still see it.
        read_through_a_live_thread(pid, "smaps", buffer)?;
    }
    let mappings: Vec<MappingResidency> = parse_smaps(buffer).into_iter().map(residency).collect();
    Some(EventKind::SmapsSnapshot {
        reason,
        cost_ns: thread_cpu_ns().saturating_sub(cpu),
        mappings,
    })
}

/// Reads /proc/PID/task/TID/`file` of the first thread that shows any; None when none does.
pub fn read_through_a_live_thread(pid: i32, file: &str, buffer: &mut Vec<u8>) -> Option<()> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let path = task.path().join(file);
        let readable = read_into(&path.to_string_lossy(), buffer).is_ok();
        if readable && !buffer.is_empty() {
            return Some(());
        }
    }
    None
}

/// A mapping's permissions as the profile stores them.
pub fn flags_of(map: &MapEntry) -> u8 {
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    flag(map.readable, MAPPING_READ)
        | flag(map.writable, MAPPING_WRITE)
        | flag(map.executable, MAPPING_EXECUTE)
        | flag(map.shared, MAPPING_SHARED)
}

/// A mapping of maps with no residency measured yet.
pub fn unmeasured(map: MapEntry) -> MappingResidency {
    MappingResidency {
        start: map.start,
        end: map.end,
        flags: flags_of(&map),
        offset: map.offset,
        inode: map.inode,
        path: map.path.unwrap_or_default(),
        ..MappingResidency::default()
    }
}

fn residency(entry: SmapsEntry) -> MappingResidency {
    let residency = &entry.residency;
    MappingResidency {
        rss: residency.rss,
        pss: residency.pss,
        shared: residency.shared_clean + residency.shared_dirty,
        private_dirty: residency.private_dirty,
        anonymous: residency.anonymous,
        swap: residency.swap,
        swap_pss: residency.swap_pss,
        ..unmeasured(entry.map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_of_this_process_holds_its_heap_and_stack() {
        // A page-touched block that shows up as resident in some writable mapping.
        let block = vec![1u8; 4 << 20];
        let mut buffer = Vec::new();
        let mut take_mappings = || {
            let snapshot = take(
                std::process::id() as i32,
                SnapshotReason::Signal,
                &mut buffer,
            )
            .expect("this process has a smaps file");
            let EventKind::SmapsSnapshot {
                reason, mappings, ..
            } = snapshot
            else {
                panic!("not a snapshot: {snapshot:?}");
            };
            (reason, mappings)
        };
        let sorted = |mappings: &[MappingResidency]| {
            mappings.windows(2).all(|pair| pair[0].end <= pair[1].start)
        };
        // The kernel lists the mappings sorted by address, but other tests of this process
        // map and unmap while smaps is read in several pieces: a listing that overlapped
        // such a change is taken again (at most a few times).
        let (mut reason, mut mappings) = take_mappings();
        for _ in 0..4 {
            if sorted(&mappings) {
                break;
            }
            (reason, mappings) = take_mappings();
        }
        assert_eq!(reason, SnapshotReason::Signal);
        let address = block.as_ptr() as u64;
        let holding = mappings
            .iter()
            .find(|m| m.start <= address && address < m.end)
            .expect("the block's mapping");
        assert_eq!(holding.flags & (MAPPING_READ | MAPPING_WRITE), 3);
        assert!(holding.rss >= 4 << 20, "{holding:?}");
        assert!(holding.pss <= holding.rss);
        assert!(mappings.iter().any(|m| m.path == "[stack]"));
        assert!(sorted(&mappings), "{mappings:#?}");
        std::hint::black_box(&block);
    }

    #[test]
    fn a_process_that_does_not_exist_has_no_snapshot() {
        let mut buffer = Vec::new();
        assert!(take(i32::MAX, SnapshotReason::Exit, &mut buffer).is_none());
    }
}
