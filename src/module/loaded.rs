//! The modules a live process has loaded: the files it maps with at least one executable
//! segment, from /proc/PID/maps.
//!
//! A path in maps is the file's path from memsup's root where memsup's mount namespace
//! reaches it, and else from the process's own root (a container, a mount namespace of its
//! own): there memsup's same path may be another file, or none; so may a path mounted over
//! since the file was mapped. Such a module is read through the process's root
//! (`ModuleStore::of_process`); one whose file is the mapped one (device and inode) in
//! neither place is unverified: memsup places probes in it only where the code in memory is
//! the file's.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::proc::maps::{read_maps, MapEntry};
use crate::symbols::elf::ElfFile;

/// A file mapped with at least one executable segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModule {
    /// As /proc/PID/maps spells it (a " (deleted)" suffix kept: such a file cannot be read).
    pub path: String,
    /// From the lowest start to the highest end of its mappings.
    pub start: u64,
    pub end: u64,
    /// (start, file offset) of each mapping, for the load bias.
    pub mappings: Vec<(u64, u64)>,
    /// The mapped file, as maps gives it.
    pub inode: MappedInode,
}

/// The file a mapping maps: its device (major, minor) and inode, as maps gives them. With
/// the path, what tells a container's libc from the host's at the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MappedInode {
    pub device: (u32, u32),
    pub inode: u64,
}

impl MappedInode {
    pub fn of(entry: &MapEntry) -> MappedInode {
        MappedInode {
            device: entry.device,
            inode: entry.inode,
        }
    }

    /// Whether stat's `device` and `inode` are this file's. A filesystem whose maps and stat
    /// disagree on devices (btrfs subvolumes) answers no: its modules are checked by their
    /// code instead.
    pub fn is(&self, device: u64, inode: u64) -> bool {
        inode == self.inode && device == libc::makedev(self.device.0, self.device.1)
    }
}

impl LoadedModule {
    /// The load bias most of its mappings agree on (see `ElfFile::module_load_bias`).
    pub fn load_bias(&self, elf: &ElfFile) -> u64 {
        elf.module_load_bias(&self.mappings).unwrap_or(0)
    }
}

/// The loaded modules among `maps`, by path. Pseudo-files (`[vdso]`) have no file to read.
pub fn loaded_modules(maps: &[MapEntry]) -> Vec<LoadedModule> {
    let mut by_path: BTreeMap<&str, Vec<&MapEntry>> = BTreeMap::new();
    for entry in maps {
        if let Some(path) = entry.path.as_deref().filter(|p| p.starts_with('/')) {
            by_path.entry(path).or_default().push(entry);
        }
    }
    by_path
        .into_iter()
        .filter(|(_, entries)| entries.iter().any(|e| e.executable))
        .map(|(path, entries)| LoadedModule {
            path: path.to_string(),
            start: entries.iter().map(|e| e.start).min().unwrap_or(0),
            end: entries.iter().map(|e| e.end).max().unwrap_or(0),
            mappings: entries.iter().map(|e| (e.start, e.offset)).collect(),
            inode: MappedInode::of(entries[0]),
        })
        .collect()
}

/// The loaded modules of process `pid` now.
pub fn of_process(pid: i32) -> Result<Vec<LoadedModule>> {
    let maps = read_maps(pid).map_err(|error| Error::maps_read(pid, error))?;
    Ok(loaded_modules(&maps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::maps::parse_maps;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn files_with_code_are_modules_spanning_all_their_mappings() {
        let maps = parse_maps(
            "1000-2000 r--p 00000000 08:01 10 /usr/lib/libx.so\n\
             2000-5000 r-xp 00001000 08:01 10 /usr/lib/libx.so\n\
             5000-6000 rw-p 00004000 08:01 10 /usr/lib/libx.so\n\
             7000-8000 r--p 00000000 08:01 11 /usr/share/locale/data\n\
             9000-a000 r-xp 00000000 00:00 0 [vdso]\n\
             b000-c000 r-xp 00000000 08:01 12 /usr/lib/liby.so (deleted)\n",
        );
        let modules = loaded_modules(&maps);
        assert_eq!(
            modules,
            [
                LoadedModule {
                    path: "/usr/lib/libx.so".to_string(),
                    start: 0x1000,
                    end: 0x6000,
                    mappings: vec![(0x1000, 0), (0x2000, 0x1000), (0x5000, 0x4000)],
                    inode: MappedInode {
                        device: (8, 1),
                        inode: 10,
                    },
                },
                LoadedModule {
                    path: "/usr/lib/liby.so (deleted)".to_string(),
                    start: 0xb000,
                    end: 0xc000,
                    mappings: vec![(0xb000, 0)],
                    inode: MappedInode {
                        device: (8, 1),
                        inode: 12,
                    },
                },
            ]
        );
    }

    #[test]
    fn a_file_is_the_mapped_one_by_its_device_and_inode() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let metadata = std::fs::metadata(exe).unwrap();
        let device = (libc::major(metadata.dev()), libc::minor(metadata.dev()));
        let inode = metadata.ino();
        let is = |device: (u32, u32), inode: u64| {
            MappedInode { device, inode }.is(metadata.dev(), metadata.ino())
        };
        assert!(is(device, inode));
        assert!(!is(device, inode + 1));
        assert!(!is((device.0, device.1 + 1), inode));
        assert!(!is((device.0 + 1, device.1), inode));
    }

    #[test]
    fn a_process_reaped_already_is_gone_not_an_error() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(matches!(of_process(pid), Err(Error::ProcessGone(gone)) if gone == pid));
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        assert!(matches!(Error::maps_read(pid, denied), Error::Io { .. }));
        let released = std::io::Error::from_raw_os_error(libc::ESRCH);
        assert!(matches!(
            Error::maps_read(pid, released),
            Error::ProcessGone(_)
        ));
    }
}
