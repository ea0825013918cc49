//! memsup's side of the hooks' stack walker (`code_walk`): what it writes into an image's
//! area before hooks walk (the section's offsets, thread stack bounds, module tables and
//! directories), and how it reads a walked stack back from the store.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::layout::stacks::{self, Section, StackRef};
use super::layout::{header, Shape};
use super::ring::Area;
use crate::trace::format::TRUNCATED_FRAME;
use crate::unwind::tables::rule::ModuleTable;
use crate::unwind::tables::walk::TableModule;

/// An executable segment of a module, in runtime addresses, with its module's table.
#[derive(Debug, Clone)]
pub struct SegmentTable {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub table: Arc<ModuleTable>,
    /// The segment's signal return trampoline, if any.
    pub sigreturn: Option<u64>,
}

impl From<&TableModule> for SegmentTable {
    fn from(segment: &TableModule) -> SegmentTable {
        SegmentTable {
            start: segment.executable.start,
            end: segment.executable.end,
            bias: segment.bias,
            table: Arc::clone(&segment.table),
            sigreturn: segment.sigreturn,
        }
    }
}

/// One image's stack section as memsup wrote it.
#[derive(Debug)]
pub struct StackSection {
    /// The area's address in the target.
    target: u64,
    section: Section,
    /// Bytes of the table region written so far (never reused: a walker may hold an old
    /// directory).
    tables_used: u64,
    /// Whether something did not fit in the table region (a table, directory or list).
    tables_full: bool,
    /// Where each table was written (target addresses of its starts and rules), by table;
    /// the table is kept, so its address names it for the section's life.
    written: HashMap<*const ModuleTable, (Arc<ModuleTable>, u64, u64)>,
    /// The segments of the current directory.
    segments: Vec<SegmentTable>,
    /// The stack of each live thread, by thread id.
    thread_stacks: BTreeMap<u32, (u64, u64)>,
}

// SAFETY: the raw pointers are only compared, never dereferenced; the tables they name are
// kept alive beside them.
unsafe impl Send for StackSection {}

impl StackSection {
    /// Writes the section's offsets into the header of an area of `shape`, mapped at
    /// `target`; `walk` switches the walker on.
    pub fn new(area: &Area, target: u64, shape: &Shape, walk: bool) -> Self {
        let section = shape.section();
        assert!(section.end() <= area.bytes() as u64, "no stack section");
        area.u64_at(header::KNOWN_OFFSET)
            .store(section.known, Ordering::Relaxed);
        area.u64_at(header::STORE_OFFSET)
            .store(section.store, Ordering::Relaxed);
        area.u64_at(header::STORE_SIZE)
            .store(section.store_bytes, Ordering::Relaxed);
        area.u64_at(header::CACHE_OFFSET)
            .store(section.cache, Ordering::Relaxed);
        area.u64_at(header::MEMORY_OFFSET)
            .store(section.memories, Ordering::Relaxed);
        area.u32_at(header::STACKS)
            .store(walk as u32, Ordering::Release);
        StackSection {
            target,
            section,
            tables_used: 0,
            tables_full: false,
            written: HashMap::new(),
            segments: Vec::new(),
            thread_stacks: BTreeMap::new(),
        }
    }

    /// Thread `tid` runs on the stack `[low, high)` (None: it ended). The walkers take the
    /// new list from their next walk on; a stack overlapping the new one is forgotten (its
    /// thread ended unseen, and its memory was reused).
    pub fn set_thread(&mut self, area: &Area, tid: u32, stack: Option<(u64, u64)>) {
        match stack {
            Some((low, high)) => {
                self.thread_stacks
                    .retain(|_, &mut (other_low, other_high)| {
                        other_high <= low || high <= other_low
                    });
                self.thread_stacks.insert(tid, (low, high));
            }
            None => {
                if self.thread_stacks.remove(&tid).is_none() {
                    return;
                }
            }
        }
        let mut stacks: Vec<(u64, u64)> = self.thread_stacks.values().copied().collect();
        stacks.sort_unstable();
        let mut list = Vec::with_capacity(8 + 16 * stacks.len());
        list.extend((stacks.len() as u64).to_le_bytes());
        for (low, high) in stacks {
            list.extend(low.to_le_bytes());
            list.extend(high.to_le_bytes());
        }
        let Some(at) = self.claim_table_bytes(list.len() as u64) else {
            return;
        };
        area.write_bytes(at, &list);
        area.u64_at(header::THREAD_STACKS)
            .store(self.target + at, Ordering::Release);
    }

    /// The segments of the image's modules are now `segments`: tables not written yet
    /// are written, then a new directory, which the walkers take from their next walk on.
    pub fn publish(&mut self, area: &Area, mut segments: Vec<SegmentTable>) {
        segments.sort_by_key(|segment| segment.start);
        let mut directory = Vec::with_capacity(
            (stacks::DIRECTORY_ENTRIES + stacks::ENTRY_BYTES * segments.len() as u64) as usize,
        );
        directory.extend((segments.len() as u64).to_le_bytes());
        for segment in &segments {
            let Some((starts, rules)) = self.write_table(area, &segment.table) else {
                continue;
            };
            let fields = [
                segment.start,
                segment.end,
                segment.bias,
                starts,
                rules,
                segment.table.starts.len() as u64,
                segment.sigreturn.unwrap_or(0),
                0,
            ];
            directory.extend(fields.iter().flat_map(|field| field.to_le_bytes()));
        }
        let count = (directory.len() as u64 - stacks::DIRECTORY_ENTRIES) / stacks::ENTRY_BYTES;
        directory[..8].copy_from_slice(&count.to_le_bytes());
        let Some(at) = self.claim_table_bytes(directory.len() as u64) else {
            return;
        };
        area.write_bytes(at, &directory);
        // Rules cached for a module that is gone could be taken for one mapped there now.
        area.write_bytes(
            self.section.cache,
            &vec![0; (stacks::CACHE_SLOTS * stacks::CACHE_SLOT_BYTES) as usize],
        );
        area.u64_at(header::DIRECTORY)
            .store(self.target + at, Ordering::Release);
        self.segments = segments;
    }

    /// The segments published last.
    pub fn segments(&self) -> &[SegmentTable] {
        &self.segments
    }

    /// Target addresses of `table`'s starts and rules, written on first use.
    fn write_table(&mut self, area: &Area, table: &Arc<ModuleTable>) -> Option<(u64, u64)> {
        if let Some((_, starts, rules)) = self.written.get(&Arc::as_ptr(table)) {
            return Some((*starts, *rules));
        }
        let rows = table.starts.len() as u64;
        let at = self.claim_table_bytes(8 * rows)?;
        let starts: Vec<u8> = table.starts.iter().flat_map(|s| s.to_le_bytes()).collect();
        let rules: Vec<u8> = table.rules.iter().flat_map(|r| r.0.to_le_bytes()).collect();
        area.write_bytes(at, &starts);
        area.write_bytes(at + 4 * rows, &rules);
        let (starts, rules) = (self.target + at, self.target + at + 4 * rows);
        self.written
            .insert(Arc::as_ptr(table), (Arc::clone(table), starts, rules));
        Some((starts, rules))
    }

    /// `bytes` of the table region (8-aligned), None when it is full.
    fn claim_table_bytes(&mut self, bytes: u64) -> Option<u64> {
        let at = self.tables_used.next_multiple_of(8);
        let fits = at + bytes <= self.section.table_bytes;
        self.tables_full |= !fits;
        fits.then(|| {
            self.tables_used = at + bytes;
            self.section.tables + at
        })
    }

    /// Bytes of tables and directories written.
    pub fn table_bytes(&self) -> u64 {
        self.tables_used
    }

    /// Whether a table, directory or thread list did not fit in the table region.
    pub fn tables_full(&self) -> bool {
        self.tables_full
    }

    /// Bytes of the table and store regions.
    pub fn region_bytes(&self) -> (u64, u64) {
        (self.section.table_bytes, self.section.store_bytes)
    }

    /// The frames of a walked stack, ending in `TRUNCATED_FRAME` when the walk stopped
    /// early; None when the reference is not one a walker could have written.
    pub fn frames(&self, area: &Area, stack: StackRef) -> Option<Vec<u64>> {
        let count = stack.frames();
        let bytes = count.checked_mul(8)?;
        let end = stack.offset().checked_add(bytes)?;
        if count == 0 || end > self.section.store_bytes {
            return None;
        }
        let mut frames: Vec<u64> = (0..count)
            .map(|index| {
                area.u64_at(self.section.store + stack.offset() + 8 * index)
                    .load(Ordering::Relaxed)
            })
            .collect();
        if stack.truncated() {
            frames.push(TRUNCATED_FRAME);
        }
        Some(frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_does_not_fit_in_the_table_region_is_told() {
        let shape = Shape {
            table_bytes: 4096,
            store_bytes: 4096,
            ..Shape::full(1, 4)
        };
        let mut memory = vec![0u64; (shape.bytes() / 8) as usize];
        // SAFETY: the vector outlives the view, and is 8-aligned.
        let area = unsafe { Area::new(memory.as_mut_ptr().cast(), memory.len() * 8) };
        let target = 0x7f00_0000_0000;
        let mut section = StackSection::new(&area, target, &shape, true);
        assert_eq!(section.region_bytes(), (4096, 4096));
        // Each new thread writes a list of them all, 8 + 16 bytes a thread, never reused:
        // 21 threads' lists take 3,864 bytes, the 22nd's 360 more do not fit.
        let stack = |tid: u32| Some((u64::from(tid) << 20, (u64::from(tid) << 20) + 0x8000));
        for tid in 1..=21 {
            section.set_thread(&area, tid, stack(tid));
        }
        assert!(!section.tables_full());
        assert_eq!(section.table_bytes(), 3864);
        let list = area.u64_at(header::THREAD_STACKS).load(Ordering::Relaxed);
        section.set_thread(&area, 22, stack(22));
        assert!(section.tables_full());
        assert_eq!(section.table_bytes(), 3864);
        // The walkers keep the last list that fit.
        let kept = area.u64_at(header::THREAD_STACKS).load(Ordering::Relaxed);
        assert_eq!(kept, list);
        assert_eq!(area.u64_at(kept - target).load(Ordering::Relaxed), 21);
    }
}
