//! /proc/PID/smaps and /proc/PID/smaps_rollup: residency per mapping and per process.
//!
//! Both are read often by the sampler, so the field lines are parsed in place, from bytes,
//! without allocating; only a mapping's path is copied (once per mapping). Sizes are given
//! by the kernel in kB and returned in bytes.

use super::maps::{lines, parse_line, MapEntry};

/// Residency of a mapping or of a whole process, in bytes.
///
/// `pss_anon`, `pss_file` and `pss_shmem` exist only in smaps_rollup (Linux 5.3 and later):
/// they stay 0 in per-mapping entries and on older kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residency {
    pub rss: u64,
    pub pss: u64,
    pub pss_anon: u64,
    pub pss_file: u64,
    pub pss_shmem: u64,
    pub shared_clean: u64,
    pub shared_dirty: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    pub anonymous: u64,
    pub swap: u64,
    pub swap_pss: u64,
}

impl Residency {
    /// Takes one `Key:   N kB` line; other lines (VmFlags, THPeligible, unknown keys) are
    /// ignored. Returns whether the line was a field line at all.
    fn take_line(&mut self, line: &[u8]) -> bool {
        let Some((key, value)) = split_field(line) else {
            return false;
        };
        let field = match key {
            b"Rss" => &mut self.rss,
            b"Pss" => &mut self.pss,
            b"Pss_Anon" => &mut self.pss_anon,
            b"Pss_File" => &mut self.pss_file,
            b"Pss_Shmem" => &mut self.pss_shmem,
            b"Shared_Clean" => &mut self.shared_clean,
            b"Shared_Dirty" => &mut self.shared_dirty,
            b"Private_Clean" => &mut self.private_clean,
            b"Private_Dirty" => &mut self.private_dirty,
            b"Anonymous" => &mut self.anonymous,
            b"Swap" => &mut self.swap,
            b"SwapPss" => &mut self.swap_pss,
            _ => return true,
        };
        *field = kilobytes(value).unwrap_or(0);
        true
    }
}

/// One mapping of /proc/PID/smaps and its residency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmapsEntry {
    pub map: MapEntry,
    pub residency: Residency,
}

/// Parses the text of /proc/PID/smaps_rollup (the `[rollup]` header line is skipped).
pub fn parse_smaps_rollup(text: &[u8]) -> Residency {
    let mut residency = Residency::default();
    for line in lines(text) {
        residency.take_line(line);
    }
    residency
}

/// Parses the text of /proc/PID/smaps. Field lines before the first mapping line, and
/// mapping lines that do not parse (with their fields), are skipped.
pub fn parse_smaps(text: &[u8]) -> Vec<SmapsEntry> {
    let mut entries = Vec::new();
    let mut current: Option<SmapsEntry> = None;
    for line in lines(text) {
        if is_mapping_line(line) {
            entries.extend(current.take());
            current = parse_line(line).map(|map| SmapsEntry {
                map,
                residency: Residency::default(),
            });
        } else if let Some(entry) = current.as_mut() {
            entry.residency.take_line(line);
        }
    }
    entries.extend(current);
    entries
}

/// Reads `path` whole into `buffer` (cleared first), reusing its allocation.
pub fn read_into(path: &str, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buffer.clear();
    std::fs::File::open(path)?.read_to_end(buffer)?;
    Ok(())
}

pub fn read_smaps_rollup(pid: i32) -> std::io::Result<Residency> {
    let mut buffer = Vec::new();
    read_into(&format!("/proc/{pid}/smaps_rollup"), &mut buffer)?;
    Ok(parse_smaps_rollup(&buffer))
}

pub fn read_smaps(pid: i32) -> std::io::Result<Vec<SmapsEntry>> {
    let mut buffer = Vec::new();
    read_into(&format!("/proc/{pid}/smaps"), &mut buffer)?;
    Ok(parse_smaps(&buffer))
}

/// Whether the mapping of smaps `text` that holds `address` is locked in memory (`lo` among
/// its VmFlags: mlock, or mlockall's `MCL_FUTURE` when it was mapped); false when none holds it.
pub fn locked_at(text: &[u8], address: u64) -> bool {
    let mut holds = false;
    for line in lines(text) {
        if is_mapping_line(line) {
            holds = parse_line(line).is_some_and(|map| map.start <= address && address < map.end);
        } else if holds {
            if let Some((b"VmFlags", flags)) = split_field(line) {
                return flags.split(|&byte| byte == b' ').any(|flag| flag == b"lo");
            }
        }
    }
    false
}

/// Mapping lines start with the lowercase hex start address; field keys start with an
/// uppercase letter (`Anonymous` and `FilePmdMapped` begin with hex letters, but uppercase).
fn is_mapping_line(line: &[u8]) -> bool {
    line.first()
        .is_some_and(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte))
}

/// `Key:   value` into the key and the trimmed value.
pub(crate) fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&byte| byte == b':')?;
    Some((&line[..colon], line[colon + 1..].trim_ascii()))
}

/// `1234 kB` in bytes; `None` when the value is not a number of kB.
pub(crate) fn kilobytes(value: &[u8]) -> Option<u64> {
    let digits = value.strip_suffix(b" kB")?.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    let mut number: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        number = number
            .checked_mul(10)?
            .checked_add(u64::from(byte - b'0'))?;
    }
    number.checked_mul(1024)
}

#[cfg(test)]
#[path = "smaps_tests.rs"]
mod tests;
