//! What an earlier memsup left in a process: one killed while attached (SIGKILL, OOM) leaves
//! its hook pages, ring area and scratch page, its hooks passing straight through once
//! they notice nobody drains; one that detached while a thread could still be inside its
//! hook code leaves those pages switched off. A new attach finds them (a hook page ends
//! with its trailer, a scratch page starts with `SCRATCH_MAGIC`, an area is the memfd
//! `memsup-hooks`), puts every patched entry's bytes back, switches the areas off and
//! unmaps what no thread can be in; the rest stays, switched off, and memsup says so. What
//! it did is a warning in the profile, printed only when something stays.

use crate::events::EventKind;
use crate::hooks::layout::{header, MAGIC};
use crate::hooks::trailer::Trailer;
use crate::proc::maps::read_maps;
use crate::ptrace::hooks::switch_hooks_off;
use crate::ptrace::inject::{PAGE_SIZE, SCRATCH_MAGIC};
use crate::ptrace::inside::{in_ranges, InsideCheck};
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::tracer::Tracer;

/// The area's name as /proc/PID/maps shows it.
const AREA_PATH: &str = "/memfd:memsup-hooks";
/// Anonymous executable memory read to look for leftovers, at most (a JIT's code cache is
/// not worth reading whole).
const MAX_SCANNED_BYTES: u64 = 64 << 20;
const JUMP_REL32: u8 = 0xe9;

/// (start, length) of a mapping.
type Range = (u64, u64);

/// What an earlier memsup left in one process.
#[derive(Debug, Default)]
struct Leftovers {
    hook_pages: Vec<Trailer>,
    scratch_pages: Vec<u64>,
    areas: Vec<Range>,
    /// The scan stopped at its budget: hook pages past it, still patched in, may read any
    /// area found.
    incomplete: bool,
}

impl Leftovers {
    fn is_empty(&self) -> bool {
        self.hook_pages.is_empty() && self.scratch_pages.is_empty() && self.areas.is_empty()
    }
}

/// Finds leftovers in `pid`, skipping the scratch page at `own_scratch` (just made).
fn find(pid: i32, memory: &dyn RemoteMemory, own_scratch: Option<u64>) -> Leftovers {
    let mut found = Leftovers::default();
    let Ok(maps) = read_maps(pid) else {
        return found;
    };
    let mut budget = MAX_SCANNED_BYTES;
    let mut page = vec![0u8; PAGE_SIZE as usize];
    for mapping in &maps {
        let path = mapping.path.as_deref().unwrap_or_default();
        if path.starts_with(AREA_PATH) {
            if read_u64(memory, mapping.start + header::MAGIC) == Some(MAGIC) {
                found
                    .areas
                    .push((mapping.start, mapping.end - mapping.start));
            }
            continue;
        }
        if mapping.path.is_some() || !mapping.executable {
            continue;
        }
        let mut address = mapping.start;
        found.incomplete |= mapping.end - address > budget;
        while address < mapping.end && budget >= PAGE_SIZE {
            budget -= PAGE_SIZE;
            let start = address;
            address += PAGE_SIZE;
            if memory.read(start, &mut page).is_err() {
                continue;
            }
            if page[..8] == SCRATCH_MAGIC.to_le_bytes() && Some(start) != own_scratch {
                found.scratch_pages.push(start);
            }
            if let Some(trailer) = Trailer::decode(&page, address) {
                found.hook_pages.push(trailer);
            }
        }
    }
    found
}

fn read_u64(memory: &dyn RemoteMemory, address: u64) -> Option<u64> {
    let mut word = [0u8; 8];
    memory.read(address, &mut word).ok()?;
    Some(u64::from_le_bytes(word))
}

/// Whether the bytes at `address` are still the page's jump: `jmp rel32` into the page.
fn still_patched(memory: &dyn RemoteMemory, address: u64, page: &Trailer) -> bool {
    let mut jump = [0u8; 5];
    if memory.read(address, &mut jump).is_err() || jump[0] != JUMP_REL32 {
        return false;
    }
    let offset = i32::from_le_bytes(jump[1..5].try_into().expect("4 bytes"));
    let target = (address + 5).wrapping_add(offset as i64 as u64);
    (page.base..page.base + page.length).contains(&target)
}

impl Tracer<'_> {
    /// At attach, with every thread of `pid` (`tids`) stopped and this memsup's scratch page
    /// made: undoes what an earlier memsup left (module comment).
    pub(crate) fn remove_leftovers(&mut self, pid: i32, tids: &[i32], injector: i32) {
        let check = InsideCheck::for_process(pid, &self.modules);
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        let own_scratch = process.scratch.as_ref().map(|scratch| scratch.base);
        let found = find(pid, &process.memory, own_scratch);
        if found.is_empty() {
            return;
        }
        // Off first: a hook reads ENABLED before anything else and then passes through.
        for &(area, _) in &found.areas {
            switch_hooks_off(self.drain.as_ref(), process.memory.as_mut(), area);
        }
        let mut restored = 0;
        // Pages an entry still jumps into (its bytes could not be written back) stay.
        let mut still_used: Vec<Range> = Vec::new();
        for page in &found.hook_pages {
            for entry in &page.entries {
                if !still_patched(&process.memory, entry.address, page) {
                    continue;
                }
                if process
                    .memory
                    .write_code(entry.address, &entry.original)
                    .is_ok()
                {
                    restored += 1;
                } else {
                    still_used.push((page.base, page.length));
                }
            }
        }
        let mut code: Vec<Range> = found
            .hook_pages
            .iter()
            .map(|page| (page.base, page.length))
            .collect();
        code.extend(found.scratch_pages.iter().map(|&base| (base, PAGE_SIZE)));
        let references: Vec<u64> = tids
            .iter()
            .flat_map(|&tid| check.code_references(tid, &process.memory))
            .collect();
        let (busy, free): (Vec<Range>, Vec<Range>) = code.into_iter().partition(|&range| {
            still_used.contains(&range)
                || references
                    .iter()
                    .any(|&address| in_ranges(&[range], address))
        });
        // An area stays while a page that writes to it stays.
        let (kept_areas, free_areas): (Vec<Range>, Vec<Range>) =
            found.areas.iter().partition(|&&(area, _)| {
                found.incomplete
                    || found
                        .hook_pages
                        .iter()
                        .any(|page| page.area == area && busy.contains(&(page.base, page.length)))
            });
        let unmapped = self.with_injector(pid, injector, |injector| {
            for &(start, length) in free.iter().chain(&free_areas) {
                injector.unmap(start, length)?;
            }
            Ok(())
        });
        let mut note = format!(
            "an earlier memsup left its code here: {restored} patched entries restored, {} pages and {} ring areas removed",
            free.len(),
            free_areas.len()
        );
        if let Err(error) = &unmapped {
            note = format!("{note} (unmapping failed: {error})");
        }
        if busy.is_empty() && unmapped.is_ok() {
            // Housekeeping that left the process clean: the profile says it, stderr does not.
            self.send(pid, pid, EventKind::Warning { message: note });
            return;
        }
        if !busy.is_empty() {
            note = format!(
                "{note}; {} pages and {} areas stay mapped, switched off: a thread may still be inside them",
                busy.len(),
                kept_areas.len()
            );
        }
        self.warn(pid, note);
    }
}
