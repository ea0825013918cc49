//! The unwind sections of module files on disk, read once per path.
//!
//! The unwinder never reads unwind information from the tracee: the sections come from the
//! ELF file, and the load bias maps its virtual addresses to the process's.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use object::elf;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectSection};

use crate::error::{Error, Result};

/// Section bytes shared between every process that maps the same file.
pub type SectionBytes = Arc<[u8]>;

/// The unwind-relevant parts of one ELF file, in ELF virtual addresses.
#[derive(Debug, Default)]
pub struct ModuleFile {
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
}

impl ModuleFile {
    /// Reads the unwind sections and executable segments of the ELF file at `path`.
    pub fn open(path: &str) -> Result<ModuleFile> {
        let data = std::fs::read(path).map_err(|source| Error::io(path, source))?;
        let file = ElfFile64::<Endianness>::parse(&*data).map_err(|error| Error::Elf {
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
                SectionBytes::from(bytes),
            ))
        };
        Ok(ModuleFile {
            text: range_of(".text"),
            got: range_of(".got"),
            eh_frame: section_of(".eh_frame"),
            eh_frame_hdr: section_of(".eh_frame_hdr"),
            debug_frame: section_of(".debug_frame").map(|(_, bytes)| bytes),
            executable: executable_segments(&file),
            sigreturn: sigreturn_trampolines(&file, &data),
        })
    }

    /// Whether any CFI was found (otherwise only frame pointers can walk this module).
    pub fn has_unwind_info(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
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
        Some((range, bytes)) => (Some(range.clone()), Some(Arc::clone(bytes))),
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

/// Parsed module files by path. Shared by the unwinders of every process of a recording,
/// since most of them map the same libc.
#[derive(Default)]
pub struct ModuleCache {
    files: Mutex<HashMap<String, Arc<ModuleFile>>>,
}

impl ModuleCache {
    pub fn new() -> ModuleCache {
        ModuleCache::default()
    }

    /// The parsed file at `path`, reading it on first use. Failures are not cached, so a
    /// file that appears later is read then.
    pub fn get(&self, path: &str) -> Result<Arc<ModuleFile>> {
        if let Some(file) = self.lock().get(path) {
            return Ok(Arc::clone(file));
        }
        // Read outside the lock: other workers keep unwinding meanwhile.
        let file = Arc::new(ModuleFile::open(path)?);
        let mut files = self.lock();
        let entry = files.entry(path.to_string()).or_insert(file);
        Ok(Arc::clone(entry))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ModuleFile>>> {
        // A panic elsewhere cannot leave the map half-updated: insertions are single calls.
        self.files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libc_unwind_sections_once() {
        let cache = ModuleCache::new();
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let libc = cache.get(path).unwrap();
        assert!(libc.eh_frame.is_some() && libc.eh_frame_hdr.is_some());
        assert!(libc.text.is_some());
        assert!(!libc.executable.is_empty());
        // __restore_rt, found although libc.so.6's symbol table does not name it.
        assert_eq!(libc.sigreturn.len(), 1, "{:x?}", libc.sigreturn);
        assert!(Arc::ptr_eq(&libc, &cache.get(path).unwrap()));
        assert!(cache.get("/nonexistent/library.so").is_err());
    }
}
