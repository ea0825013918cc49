//! Separate debug files: the DWARF that `objcopy --only-keep-debug` (or a distribution's
//! `-dbg` package) moved out of a stripped file.
//!
//! Looked up the way gdb does: first by build-id under the debug root
//! (`<root>/.build-id/xx/yyyy.debug`), then by the `.gnu_debuglink` section's file name next to
//! the file, in its `.debug/` subdirectory and under `<root>/<directory of the file>/`. A
//! build-id candidate must carry the same build-id and a debuglink candidate must have the
//! CRC32 the section records, so a stale debug file of another build is never used.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

/// Where distributions install debug files.
pub const DEFAULT_DEBUG_ROOT: &str = "/usr/lib/debug";

/// A separate debug file that matched, with its contents (read once, for the check).
pub struct DebugFile {
    pub path: PathBuf,
    pub data: Vec<u8>,
}

/// Finds separate debug files under one debug root.
#[derive(Debug, Clone)]
pub struct DebugFileLocator {
    root: PathBuf,
}

impl Default for DebugFileLocator {
    fn default() -> DebugFileLocator {
        DebugFileLocator::new(DEFAULT_DEBUG_ROOT)
    }
}

impl DebugFileLocator {
    /// Searches `root` (normally `/usr/lib/debug`) besides the file's own directory.
    pub fn new(root: impl Into<PathBuf>) -> DebugFileLocator {
        DebugFileLocator { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The separate debug file of the ELF file at `path`, already parsed as `file`.
    pub fn find(&self, path: &Path, file: &object::File) -> Option<DebugFile> {
        let read = |candidate: &Path| std::fs::read(candidate).ok();
        if let Some(found) = self.find_by_build_id(file, &read) {
            return Some(found);
        }
        // The real directory, as gdb uses: symlinked libraries have their debug files
        // next to the target.
        let real_path = std::fs::canonicalize(path).ok()?;
        self.find_by_debuglink(&real_path, file, &read)
    }

    /// `find`, with the candidate files read by `read` (as another process sees them), and
    /// `path` taken as it is (its links resolve where `read` reads).
    pub fn find_with(
        &self,
        path: &Path,
        file: &object::File,
        read: impl Fn(&Path) -> Option<Vec<u8>>,
    ) -> Option<DebugFile> {
        if let Some(found) = self.find_by_build_id(file, &read) {
            return Some(found);
        }
        self.find_by_debuglink(path, file, &read)
    }

    /// `<root>/.build-id/<first byte>/<other bytes>.debug`, in lower-case hex.
    pub fn build_id_path(&self, build_id: &[u8]) -> Option<PathBuf> {
        let (first, rest) = build_id.split_first()?;
        if rest.is_empty() {
            return None;
        }
        let rest: String = rest.iter().map(|byte| format!("{byte:02x}")).collect();
        Some(
            self.root
                .join(".build-id")
                .join(format!("{first:02x}"))
                .join(format!("{rest}.debug")),
        )
    }

    fn find_by_build_id(
        &self,
        file: &object::File,
        read: &impl Fn(&Path) -> Option<Vec<u8>>,
    ) -> Option<DebugFile> {
        let build_id = file.build_id().ok().flatten()?;
        let candidate = self.build_id_path(build_id)?;
        let data = read(&candidate)?;
        let candidate_file = object::File::parse(&*data).ok()?;
        if candidate_file.build_id().ok().flatten() != Some(build_id) {
            return None;
        }
        Some(DebugFile {
            path: candidate,
            data,
        })
    }

    fn find_by_debuglink(
        &self,
        path: &Path,
        file: &object::File,
        read: &impl Fn(&Path) -> Option<Vec<u8>>,
    ) -> Option<DebugFile> {
        let (name, expected_crc) = file.gnu_debuglink().ok().flatten()?;
        let name = std::str::from_utf8(name).ok()?;
        // A relative or `..` name could point anywhere; the section holds a bare file name.
        if name.is_empty() || name.contains('/') {
            return None;
        }
        let directory = path.parent()?;
        let candidates = [
            directory.join(name),
            directory.join(".debug").join(name),
            self.root
                .join(directory.strip_prefix("/").unwrap_or(directory))
                .join(name),
        ];
        candidates
            .into_iter()
            .filter(|candidate| candidate != path)
            .find_map(|candidate| {
                let data = read(&candidate)?;
                (debuglink_crc(&data) == expected_crc).then_some(DebugFile {
                    path: candidate,
                    data,
                })
            })
    }
}

/// The CRC `.gnu_debuglink` records: CRC-32 (IEEE 802.3, as zlib's `crc32`) of the whole file.
pub fn debuglink_crc(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// Whether `file` has DWARF of its own: a `.debug_info` with contents in the file. A file
/// stripped with `strip --strip-debug` has none; in its `--only-keep-debug` file the debug
/// sections have contents and the others are NOBITS.
pub fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|section| section.size() > 0 && section.file_range().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_split_the_first_byte() {
        let locator = DebugFileLocator::new("/tmp/debug-root");
        assert_eq!(
            locator.build_id_path(&[0xab, 0x01, 0xcd]),
            Some(PathBuf::from("/tmp/debug-root/.build-id/ab/01cd.debug"))
        );
        assert_eq!(locator.build_id_path(&[0xab]), None);
        assert_eq!(locator.build_id_path(&[]), None);
    }

    #[test]
    fn debuglink_crc_is_the_ieee_crc32() {
        // The check value of CRC-32/ISO-HDLC.
        assert_eq!(debuglink_crc(b"123456789"), 0xcbf4_3926);
    }
}
