//! Room for the first remote system call of an attach, which runs before memsup has a page
//! of its own in the target: the end of an executable file mapping that no segment of the
//! file covers (the padding up to the next page-aligned segment). Nothing executes or reads
//! those bytes, so the stub (`syscall` and the resume block, see `stub`) can live there for
//! the call and be wiped after, and a memsup killed during the call leaves the thread
//! running on through it rather than a `syscall` written over the thread's own code.

use crate::module::{MappedInode, ModuleStore};
use crate::proc::maps::MapEntry;
use crate::ptrace::stub::STUB_BYTES;
use crate::symbols::elf::LoadSegment;

/// The address of `STUB_BYTES` at the end of an executable file mapping among `maps` that
/// lie past every segment's file bytes, if any mapping has that much room.
pub fn stub_room(pid: i32, maps: &[MapEntry], store: &ModuleStore) -> Option<u64> {
    maps.iter()
        .filter(|mapping| mapping.executable && !mapping.shared)
        .filter_map(|mapping| {
            let path = mapping
                .path
                .as_deref()
                .filter(|path| path.starts_with('/'))?;
            let found = store.of_process(pid, path, MappedInode::of(mapping)).ok()?;
            // Another file than the mapped one would place the stub over code.
            if !found.verified {
                return None;
            }
            let segments = found.file.elf().ok()?.load_segments();
            let room = unused_tail(mapping, segments);
            (room >= STUB_BYTES).then_some(mapping.end - STUB_BYTES)
        })
        .next()
}

/// Bytes at the end of `mapping` that hold no segment's file bytes.
fn unused_tail(mapping: &MapEntry, segments: &[LoadSegment]) -> u64 {
    let file_start = mapping.offset;
    let file_end = mapping.offset + (mapping.end - mapping.start);
    let used_end = segments
        .iter()
        .filter(|segment| segment.offset < file_end)
        .map(|segment| segment.offset + segment.file_size)
        .max()
        .unwrap_or(file_end)
        .max(file_start);
    file_end.saturating_sub(used_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, end: u64, offset: u64) -> MapEntry {
        MapEntry {
            start,
            end,
            readable: true,
            writable: false,
            executable: true,
            shared: false,
            offset,
            device: (8, 1),
            inode: 1,
            path: Some("/lib/libc.so.6".into()),
        }
    }

    fn segment(offset: u64, file_size: u64) -> LoadSegment {
        LoadSegment {
            offset,
            virtual_address: offset,
            file_size,
        }
    }

    #[test]
    fn the_room_is_what_follows_the_last_segment_that_starts_in_the_mapping() {
        // libc-like: r--p at 0, r-xp at 0x28000 whose segment ends 0x150 before its end,
        // r--p from 0x17d000.
        let segments = [
            segment(0, 0x27f00),
            segment(0x28000, 0x154eb0),
            segment(0x17d000, 0x4f000),
        ];
        let text = mapping(0x7f00_0002_8000, 0x7f00_0017_d000, 0x28000);
        assert_eq!(unused_tail(&text, &segments), 0x150);
        // A segment that fills its mapping leaves nothing.
        let full = [segment(0x28000, 0x155000)];
        assert_eq!(unused_tail(&text, &full), 0);
        // A segment of the next mapping starting inside this one leaves nothing either.
        let next_inside = [segment(0x28000, 0x100000), segment(0x17c000, 0x1000)];
        assert_eq!(unused_tail(&text, &next_inside), 0);
    }
}
