//! /proc/PID/maps, and choosing free address ranges near code (for out-of-line probe copies).

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
    /// `s` (shared) rather than `p` (private).
    pub shared: bool,
    pub offset: u64,
    /// Device major and minor numbers of a file mapping (0, 0 when anonymous).
    pub device: (u32, u32),
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[stack]`, `[vdso]`), if any. " (deleted)" is kept.
    pub path: Option<String>,
}

const DELETED_SUFFIX: &str = " (deleted)";

impl MapEntry {
    /// Whether `address` lies in `[start, end)`.
    pub fn contains(&self, address: u64) -> bool {
        self.start <= address && address < self.end
    }

    /// A pseudo-name such as `[heap]`, `[vdso]` or `[anon:name]` rather than a file.
    pub fn is_pseudo(&self) -> bool {
        self.path
            .as_deref()
            .is_some_and(|path| path.starts_with('['))
    }

    /// The file was unlinked (or replaced) after it was mapped.
    pub fn is_deleted(&self) -> bool {
        !self.is_pseudo()
            && self
                .path
                .as_deref()
                .is_some_and(|path| path.ends_with(DELETED_SUFFIX))
    }

    /// The path of the mapped file without " (deleted)"; `None` for anonymous and pseudo
    /// mappings.
    pub fn file_path(&self) -> Option<&str> {
        let path = self.path.as_deref()?;
        if self.is_pseudo() {
            return None;
        }
        Some(path.strip_suffix(DELETED_SUFFIX).unwrap_or(path))
    }
}

/// Parses the text of /proc/PID/maps. Lines that do not parse are skipped.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    parse_maps_bytes(text.as_bytes())
}

/// Parses /proc/PID/maps as read: a path is arbitrary bytes (kept as lossy UTF-8), the rest
/// of a line ASCII, so nothing else of the text is converted.
pub fn parse_maps_bytes(text: &[u8]) -> Vec<MapEntry> {
    lines(text).filter_map(parse_line).collect()
}

/// The lines of `text`, without their newlines. maps and smaps of many mappings are
/// megabytes of short lines: memchr finds their ends several bytes at a time.
pub(crate) fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
        Some(line)
    })
}

/// Reads and parses /proc/PID/maps.
pub fn read_maps(pid: i32) -> std::io::Result<Vec<MapEntry>> {
    // Not as a string: a file's name may be any bytes.
    let text = std::fs::read(format!("/proc/{pid}/maps"))?;
    Ok(parse_maps_bytes(&text))
}

/// The mapping that contains `address`.
pub fn mapping_containing(maps: &[MapEntry], address: u64) -> Option<&MapEntry> {
    maps.iter().find(|entry| entry.contains(address))
}

/// Splits off the next space-separated field; `None` when there is none.
fn next_field(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let text = trim_spaces(text);
    let end = memchr::memchr(b' ', text).unwrap_or(text.len());
    if end == 0 {
        return None;
    }
    Some(text.split_at(end))
}

fn trim_spaces(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&byte| byte != b' ');
    &text[start.unwrap_or(text.len())..]
}

fn split_once(text: &[u8], separator: u8) -> Option<(&[u8], &[u8])> {
    let at = memchr::memchr(separator, text)?;
    Some((&text[..at], &text[at + 1..]))
}

/// `digits` in base `radix` (at most 16): all of them digits, at least one, no overflow.
fn number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &digit| {
        let digit = (digit as char).to_digit(radix)?;
        value.checked_mul(radix as u64)?.checked_add(digit as u64)
    })
}

/// `start-end perms offset major:minor inode [path]`. The path is everything after the
/// padding that follows the inode, so it may contain spaces. Shared with the smaps parser,
/// whose mapping lines are the same.
pub(crate) fn parse_line(line: &[u8]) -> Option<MapEntry> {
    let (range, rest) = next_field(line)?;
    let (permissions, rest) = next_field(rest)?;
    let (offset, rest) = next_field(rest)?;
    let (device, rest) = next_field(rest)?;
    let (major, minor) = split_once(device, b':')?;
    let (inode, rest) = next_field(rest)?;
    let (start, end) = split_once(range, b'-')?;
    if permissions.len() < 4 {
        return None;
    }
    let path = trim_spaces(rest);
    Some(MapEntry {
        start: number(start, 16)?,
        end: number(end, 16)?,
        readable: permissions[0] == b'r',
        writable: permissions[1] == b'w',
        executable: permissions[2] == b'x',
        shared: permissions[3] == b's',
        offset: number(offset, 16)?,
        device: (
            u32::try_from(number(major, 16)?).ok()?,
            u32::try_from(number(minor, 16)?).ok()?,
        ),
        inode: number(inode, 10)?,
        path: (!path.is_empty()).then(|| String::from_utf8_lossy(path).into_owned()),
    })
}

const PAGE_SIZE: u64 = 0x1000;
/// Never place anything in the lowest 64 KiB (mmap_min_addr, NULL-pointer guard).
const LOW_LIMIT: u64 = 0x1_0000;
/// Room left above the heap so that brk can keep growing.
const HEAP_GROWTH_RESERVE: u64 = 1 << 30;
/// The kernel places the initial brk up to 32 MiB above the executable (brk randomisation).
const BRK_RANDOMIZATION: u64 = 32 << 20;
/// Room left below the stack so that it can keep growing (the default 8 MiB rlimit).
const STACK_GROWTH_RESERVE: u64 = 8 << 20;
/// End of the x86-64 user address space with 4-level page tables.
const USER_SPACE_END: u64 = 0x7fff_ffff_f000;

fn page_down(value: u64) -> u64 {
    value & !(PAGE_SIZE - 1)
}

fn page_up(value: u64) -> u64 {
    page_down(value.saturating_add(PAGE_SIZE - 1))
}

/// A page-aligned free range of `size` bytes, every byte of which is within `reach` bytes of
/// `anchor`, with a free page on either side, clear of the heap's and the stack's room to grow.
/// Prefers the highest such range below `anchor`, else the lowest above it.
pub fn find_gap(maps: &[MapEntry], anchor: u64, size: u64, reach: u64) -> Option<u64> {
    let size = page_up(size.max(1));
    let lowest = page_up(anchor.saturating_sub(reach).max(LOW_LIMIT));
    let highest = page_down(anchor.saturating_add(reach).min(USER_SPACE_END));
    let mut best_below: Option<u64> = None;
    let mut best_above: Option<u64> = None;
    for (free_start, free_end) in free_ranges(&reserved_ranges(maps), lowest, highest) {
        let below_end = free_end.min(anchor);
        if below_end >= free_start.saturating_add(size) {
            let candidate = page_down(below_end - size);
            if candidate >= free_start {
                best_below = best_below.max(Some(candidate));
            }
        }
        let candidate = page_up(free_start.max(anchor));
        if candidate.saturating_add(size) <= free_end {
            best_above = Some(best_above.map_or(candidate, |best| best.min(candidate)));
        }
    }
    best_below.or(best_above)
}

/// Address ranges a new mapping must not touch, sorted and merged.
fn reserved_ranges(maps: &[MapEntry]) -> Vec<(u64, u64)> {
    let mut reserved = vec![(0, LOW_LIMIT)];
    for entry in maps {
        // One free page on either side of every mapping.
        reserved.push((
            entry.start.saturating_sub(PAGE_SIZE),
            entry.end.saturating_add(PAGE_SIZE),
        ));
        match entry.path.as_deref() {
            Some("[heap]") => {
                reserved.push((entry.start, entry.end.saturating_add(HEAP_GROWTH_RESERVE)))
            }
            Some("[stack]") => {
                reserved.push((entry.start.saturating_sub(STACK_GROWTH_RESERVE), entry.end))
            }
            _ => {}
        }
    }
    if let Some(heap_base) = future_heap_base(maps) {
        let reserve = BRK_RANDOMIZATION + HEAP_GROWTH_RESERVE;
        reserved.push((heap_base, heap_base.saturating_add(reserve)));
    }
    reserved.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(reserved.len());
    for (start, end) in reserved {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Before the first brk (e.g. right after exec) there is no `[heap]` yet: the heap will start
/// above the main executable, which in the usual layout is the lowest file mapping.
fn future_heap_base(maps: &[MapEntry]) -> Option<u64> {
    if maps
        .iter()
        .any(|entry| entry.path.as_deref() == Some("[heap]"))
    {
        return None;
    }
    let executable = maps
        .iter()
        .filter(|entry| entry.file_path().is_some())
        .min_by_key(|entry| entry.start)?;
    maps.iter()
        .filter(|entry| entry.path == executable.path)
        .map(|entry| entry.end)
        .max()
}

/// The complement of sorted, merged `reserved` ranges within `[lowest, highest)`.
fn free_ranges(reserved: &[(u64, u64)], lowest: u64, highest: u64) -> Vec<(u64, u64)> {
    let mut free = Vec::new();
    let mut cursor = lowest;
    for &(start, end) in reserved {
        if cursor >= highest {
            break;
        }
        if start > cursor {
            free.push((cursor, start.min(highest)));
        }
        cursor = cursor.max(end);
    }
    if cursor < highest {
        free.push((cursor, highest));
    }
    free
}

#[cfg(test)]
#[path = "maps_tests.rs"]
mod tests;
