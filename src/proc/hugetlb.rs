//! Which mappings hold hugetlb pages. pagemap shows such a page present, while smaps counts
//! it apart from Rss (`Private_Hugetlb`, `Shared_Hugetlb`) and VmRSS leaves it out, so a
//! count from pagemap must skip these mappings to agree with either. maps tells them by
//! the device of their file: a hugetlbfs mount's (listed in mountinfo), or one of the
//! kernel's own hugetlbfs mounts, which back `MAP_HUGETLB` (`/anon_hugepage`) and
//! `memfd_create(MFD_HUGETLB)`, and which no mount table lists.

use std::os::fd::{FromRawFd, OwnedFd};

use super::maps::MapEntry;

/// The devices (major, minor) of the hugetlbfs file systems a mapping's file may be on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugetlbDevices(Vec<(u32, u32)>);

impl HugetlbDevices {
    /// Those of the mounts `mountinfo` lists and of the kernel's own mounts, for each huge
    /// page size the kernel knows.
    pub fn find(mountinfo: &[u8]) -> HugetlbDevices {
        let mut devices = mounted(mountinfo);
        devices.extend(kernel_mounts());
        devices.sort_unstable();
        devices.dedup();
        HugetlbDevices(devices)
    }

    #[cfg(test)]
    pub fn of(devices: &[(u32, u32)]) -> HugetlbDevices {
        HugetlbDevices(devices.to_vec())
    }

    /// Whether `map` holds hugetlb pages.
    pub fn holds(&self, map: &MapEntry) -> bool {
        // MAP_HUGETLB's name, on a kernel mount (major 0), when its device is not known.
        let anonymous = matches!(
            map.path.as_deref(),
            Some("/anon_hugepage" | "/anon_hugepage (deleted)")
        );
        map.inode != 0 && (self.0.contains(&map.device) || anonymous && map.device.0 == 0)
    }
}

/// The devices of the hugetlbfs mounts in a mountinfo text: `ID parent major:minor root
/// point options [optional fields] - type source super-options`.
fn mounted(mountinfo: &[u8]) -> Vec<(u32, u32)> {
    let text = String::from_utf8_lossy(mountinfo);
    let device = |line: &str| {
        let (mount, filesystem) = line.split_once(" - ")?;
        if filesystem.split(' ').next()? != "hugetlbfs" {
            return None;
        }
        let (major, minor) = mount.split(' ').nth(2)?.split_once(':')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    };
    text.lines().filter_map(device).collect()
}

/// The devices of the kernel's own hugetlbfs mounts, one per huge page size: those of
/// memory files made on them, which hold nothing (made without any huge page reserved).
fn kernel_mounts() -> Vec<(u32, u32)> {
    // The page size's log2 in bits 26 and up of the flags; 0: the default size.
    const SIZES: [libc::c_uint; 3] = [0, 21 << 26, 30 << 26];
    SIZES
        .iter()
        .filter_map(|&size| {
            let flags = libc::MFD_CLOEXEC | libc::MFD_HUGETLB | size;
            // SAFETY: a name the kernel copies, and flags; the result is checked.
            let fd = unsafe { libc::memfd_create(c"memsup-hugetlb".as_ptr(), flags) };
            if fd < 0 {
                return None;
            }
            // SAFETY: a descriptor just made and owned here alone.
            let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            let device = std::os::unix::fs::MetadataExt::dev(&file.metadata().ok()?);
            Some((libc::major(device), libc::minor(device)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::maps::parse_maps;

    #[test]
    fn hugetlbfs_mounts_are_found_in_mountinfo() {
        let mountinfo = b"\
22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
31 28 0:34 / /dev/hugepages rw,relatime shared:13 - hugetlbfs hugetlbfs rw,pagesize=2M
32 28 0:35 / /mnt/huge\\0401g rw,relatime - hugetlbfs none rw,pagesize=1024M
33 28 0:36 / /tmp rw - tmpfs tmpfs rw
";
        assert_eq!(mounted(mountinfo), [(0, 34), (0, 35)]);
    }

    #[test]
    fn hugetlb_mappings_are_told_by_their_device_or_name() {
        let maps = parse_maps(
            "7f0000000000-7f0000800000 rw-p 00000000 00:11 1105853 /anon_hugepage (deleted)\n\
             7f0000800000-7f0001000000 rw-s 00000000 00:11 1105854 /memfd:pool (deleted)\n\
             7f0001000000-7f0001800000 rw-s 00000000 00:22 9 /dev/hugepages/buffer\n\
             7f0001800000-7f0002000000 rw-s 00000000 00:01 7 /memfd:ring (deleted)\n\
             7f0002000000-7f0002800000 rw-p 00000000 00:00 0\n\
             7f0002800000-7f0003000000 rw-p 00000000 fe:00 77 /anon_hugepage (deleted)\n\
             7f0003000000-7f0003800000 rw-p 00000000 fe:00 78 /anon_hugepages/data\n",
        );
        let devices = HugetlbDevices::of(&[(0, 0x11), (0, 0x22)]);
        let held: Vec<bool> = maps.iter().map(|map| devices.holds(map)).collect();
        // Files of those names on a disk are files.
        assert_eq!(held, [true, true, true, false, false, false, false]);
        // Without the devices, MAP_HUGETLB's mappings are still told by their name.
        let held: Vec<bool> = maps
            .iter()
            .map(|map| HugetlbDevices::default().holds(map))
            .collect();
        assert_eq!(held, [true, false, false, false, false, false, false]);
    }

    #[test]
    fn the_kernels_own_hugetlbfs_mount_backs_map_hugetlb() {
        // Without MAP_NORESERVE the mapping would need huge pages reserved; it is never
        // touched, so none is used.
        let length = 1 << 30;
        // SAFETY: a fresh mapping, never touched, unmapped below.
        let address = unsafe {
            let flags =
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_NORESERVE;
            libc::mmap(std::ptr::null_mut(), length, libc::PROT_READ, flags, -1, 0)
        };
        assert_ne!(address, libc::MAP_FAILED, "no hugetlb in this kernel");
        let maps = crate::proc::maps::read_maps(std::process::id() as i32).unwrap();
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(address, length) };
        let mapping = maps
            .iter()
            .find(|map| map.start == address as u64)
            .expect("the mapping");
        let devices = HugetlbDevices(kernel_mounts());
        assert!(
            devices.0.contains(&mapping.device),
            "{devices:?} {mapping:?}"
        );
        let named = MapEntry {
            path: None,
            ..mapping.clone()
        };
        assert!(devices.holds(&named));
    }
}
