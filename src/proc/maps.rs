//! /proc/PID/maps.

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
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[stack]`, `[vdso]`), if any. " (deleted)" is kept.
    pub path: Option<String>,
}

/// Parses the text of /proc/PID/maps.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let _ = text;
    todo!()
}

/// Reads and parses /proc/PID/maps.
pub fn read_maps(pid: i32) -> std::io::Result<Vec<MapEntry>> {
    let _ = pid;
    todo!()
}

/// A free, page-aligned range of `size` bytes within `reach` of `anchor` (see the tests).
pub fn find_gap(maps: &[MapEntry], anchor: u64, size: u64, reach: u64) -> Option<u64> {
    let _ = (maps, anchor, size, reach);
    todo!()
}

/// The mapping containing `address`.
pub fn mapping_containing(maps: &[MapEntry], address: u64) -> Option<&MapEntry> {
    maps.iter().find(|m| (m.start..m.end).contains(&address))
}
