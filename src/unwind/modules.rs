//! The unwind sections of a module file, parsed from the bytes the recording's
//! `module::ModuleStore` read.
//!
//! The unwinder never reads unwind information from the tracee: the sections come from the
//! ELF file, and the load bias maps its virtual addresses to the process's.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use object::elf;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectSection};

use crate::error::{Error, Result};
use crate::module::FileBytes;

/// Section bytes: slices of the file's one copy, shared by every process that maps it.
pub type SectionBytes = FileBytes;

/// The unwind-relevant parts of one ELF file, in ELF virtual addresses.
#[derive(Debug, Default)]
pub struct UnwindSections {
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
    pub eh_frame: Option<(Range<u64>, SectionBytes)>,
    pub eh_frame_hdr: Option<(Range<u64>, SectionBytes)>,
    /// `.debug_frame` needs no address: its FDEs hold absolute ELF addresses.
    pub debug_frame: Option<SectionBytes>,
    /// Executable PT_LOAD segments: where return addresses may point.
    pub executable: Vec<Range<u64>>,
    /// Signal return trampolines (`mov $15, %rax; syscall`, glibc's and musl's
    /// `__restore_rt`): a signal handler "returns" to one, with the interrupted context
    /// saved just above. Found by their code, since libc.so's symbol table omits them.
    pub sigreturn: Vec<u64>,
    /// The code at the ELF entry point that no CFI covers, up to the next code that CFI
    /// does: the dynamic linker's `_start` and `_dl_start_user`. The kernel starts the
    /// process there, so a return address into it is the outermost frame.
    pub entry_code: Option<Range<u64>>,
    /// What the CFI covers (see `coverage`), found on first use.
    cfi_coverage: OnceLock<Vec<Range<u64>>>,
}

impl UnwindSections {
    /// The unwind sections and executable segments of `data`, the ELF file at `path`.
    pub fn parse(path: &str, data: &Arc<[u8]>) -> Result<UnwindSections> {
        let file = ElfFile64::<Endianness>::parse(&**data).map_err(|error| Error::Elf {
            path: path.to_string(),
            message: error.to_string(),
        })?;
        let range_of = |name: &str| {
            let section = file.section_by_name(name)?;
            Some(section.address()..section.address() + section.size())
        };
        let section_of = |name: &str| {
            let section = file.section_by_name(name)?;
            // SHT_NOBITS sections (a stripped debug file's placeholders) have no bytes.
            let bytes = section.data().ok().filter(|bytes| !bytes.is_empty())?;
            Some((
                section.address()..section.address() + section.size(),
                FileBytes::within(data, bytes),
            ))
        };
        let eh_frame = section_of(".eh_frame");
        let executable = executable_segments(&file);
        Ok(UnwindSections {
            text: range_of(".text"),
            got: range_of(".got"),
            entry_code: eh_frame
                .as_ref()
                .and_then(|eh_frame| entry_code(file.entry(), eh_frame, &executable)),
            eh_frame,
            eh_frame_hdr: section_of(".eh_frame_hdr"),
            debug_frame: section_of(".debug_frame").map(|(_, bytes)| bytes),
            executable,
            sigreturn: sigreturn_trampolines(&file, data),
            cfi_coverage: OnceLock::new(),
        })
    }

    /// Whether any CFI was found (otherwise only frame pointers can walk this module).
    pub fn has_unwind_info(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// Whether CFI covers the code at `address` (an ELF virtual address).
    pub fn has_cfi_at(&self, address: u64) -> bool {
        let ranges = self
            .cfi_coverage
            .get_or_init(|| super::coverage::cfi_ranges(self));
        super::coverage::covers(ranges, address)
    }

    /// The section description framehop builds its index from.
    pub fn section_info(&self) -> framehop::ExplicitModuleSectionInfo<SectionBytes> {
        let (eh_frame_svma, eh_frame) = split(&self.eh_frame);
        let (eh_frame_hdr_svma, eh_frame_hdr) = split(&self.eh_frame_hdr);
        framehop::ExplicitModuleSectionInfo {
            // ELF unwind information is in ELF virtual addresses, relative to 0.
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}

fn split(
    section: &Option<(Range<u64>, SectionBytes)>,
) -> (Option<Range<u64>>, Option<SectionBytes>) {
    match section {
        Some((range, bytes)) => (Some(range.clone()), Some(bytes.clone())),
        None => (None, None),
    }
}

fn executable_segments(file: &ElfFile64<Endianness>) -> Vec<Range<u64>> {
    let endian = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|header| {
            header.p_type(endian) == elf::PT_LOAD && header.p_flags(endian) & elf::PF_X != 0
        })
        .map(|header| {
            let start = header.p_vaddr(endian);
            start..start.saturating_add(header.p_memsz(endian))
        })
        .collect()
}

/// `[entry, next FDE start)` when `entry` lies in executable code that no FDE of `eh_frame`
/// covers; None when one does (glibc's `_start` ends the stack with its own CFI) or when the
/// file has no entry point.
fn entry_code(
    entry: u64,
    eh_frame: &(Range<u64>, SectionBytes),
    executable: &[Range<u64>],
) -> Option<Range<u64>> {
    if entry == 0 {
        return None;
    }
    let segment = executable.iter().find(|segment| segment.contains(&entry))?;
    let ranges = super::coverage::eh_frame_ranges(eh_frame);
    if ranges.iter().any(|range| range.contains(&entry)) {
        return None;
    }
    let end = ranges
        .iter()
        .map(|range| range.start)
        .filter(|&start| start > entry)
        .fold(segment.end, u64::min);
    Some(entry..end)
}

/// `mov $0xf, %rax; syscall`: rt_sigreturn, the whole body of a signal return trampoline.
const SIGRETURN_CODE: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

fn sigreturn_trampolines(file: &ElfFile64<Endianness>, data: &[u8]) -> Vec<u64> {
    let endian = file.endian();
    let mut found = Vec::new();
    for header in file.elf_program_headers() {
        if header.p_type(endian) != elf::PT_LOAD || header.p_flags(endian) & elf::PF_X == 0 {
            continue;
        }
        let Ok(code) = header.data(endian, data) else {
            continue;
        };
        let start = header.p_vaddr(endian);
        found.extend(
            code.windows(SIGRETURN_CODE.len())
                .enumerate()
                .filter(|(_, window)| *window == SIGRETURN_CODE)
                .map(|(offset, _)| start + offset as u64),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::module::ModuleStore;

    #[test]
    fn finds_libcs_unwind_sections() {
        let store = ModuleStore::new();
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let file = store.get(path).unwrap();
        let libc = file.unwind().unwrap();
        assert!(libc.eh_frame.is_some() && libc.eh_frame_hdr.is_some());
        assert!(libc.text.is_some());
        assert!(!libc.executable.is_empty());
        // __restore_rt, found although libc.so.6's symbol table does not name it.
        assert_eq!(libc.sigreturn.len(), 1, "{:x?}", libc.sigreturn);
        assert!(std::ptr::eq(
            libc,
            store.get(path).unwrap().unwind().unwrap()
        ));
        // libc.so.6's entry point (it prints its version when run) has CFI.
        assert_eq!(libc.entry_code, None);
    }

    #[test]
    fn finds_the_dynamic_linkers_entry_code() {
        let path = "/lib64/ld-linux-x86-64.so.2";
        let data: Arc<[u8]> = Arc::from(std::fs::read(path).unwrap());
        let ld_so = UnwindSections::parse(path, &data).unwrap();
        let entry = ElfFile64::<Endianness>::parse(&*data).unwrap().entry();
        let code = ld_so.entry_code.expect("no CFI covers ld.so's _start");
        assert_eq!(code.start, entry);
        // _start and _dl_start_user: a few dozen bytes up to the next function's CFI.
        assert!(code.end > entry + 16 && code.end < entry + 256, "{code:x?}");
    }
}
