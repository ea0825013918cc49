//! Where glibc's malloc lives in a process, found before the process is stopped: the file
//! (libc.so.6, or the executable when it is linked statically), its glibc version, the
//! addresses of `main_arena` and `mp_` and where each thread's `tcache` pointer is, from the
//! symbols of libc's debug file (by build-id) or of a static executable's symbol table.
//! Without symbols the census falls back on heuristics (`arenas`, `caches`).

use object::elf;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, RelocationFlags, RelocationTarget, SymbolKind};

use super::layout::{arena, parameters, FIRST_KNOWN_VERSION, LAST_KNOWN_VERSION};
use crate::module::loaded::loaded_modules;
use crate::module::{ModuleFile, ModuleStore};
use crate::proc::maps::MapEntry;
use crate::trace::census_format::SymbolSource;

/// Set (to anything) to make the census ignore libc's debug file, as if libc6-dbg were not
/// installed: the tests check that the heuristics find what the symbols find.
pub const IGNORE_DEBUG_FILE_VARIABLE: &str = "MEMSUP_CENSUS_IGNORE_DEBUG_FILE";

/// What the census needs to know of the allocator, with run-time addresses.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    /// Where libc's writable data (its .data, .bss and the anonymous rest) lies.
    pub data: Vec<(u64, u64)>,
    pub main_arena: Option<u64>,
    pub parameters: Option<u64>,
    pub tcache: TcacheLocation,
    pub source: SymbolSource,
}

/// How a thread's `tcache` pointer is found from its thread pointer (fs_base).
#[derive(Debug, Clone, Default)]
pub enum TcacheLocation {
    /// At fs_base plus the value of this GOT slot (an initial-exec TLS access).
    Slot(u64),
    /// At fs_base plus this fixed offset (a static executable's local-exec access).
    Offset(i64),
    /// One of these GOT slots: the census keeps the one that leads to tcache structs.
    Candidates(Vec<u64>),
    #[default]
    Unknown,
}

/// Finds glibc's malloc in the process whose mappings are `maps`, or says in one line why
/// its heap cannot be read.
pub fn locate(pid: i32, maps: &[MapEntry], modules: &ModuleStore) -> Result<Allocator, String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loaded = loaded_modules(maps);
    let libc = loaded.iter().find(|module| is_libc(&module.path));
    let home = match libc {
        Some(libc) => libc,
        None => loaded
            .iter()
            .find(|module| module.path == exe)
            .ok_or("the program's file is not mapped")?,
    };
    if let Some(other) = other_malloc(pid, &loaded, &home.path, modules) {
        return Err(format!("malloc is {other}'s, not glibc's"));
    }
    let found = modules
        .of_process(pid, &home.path, home.inode)
        .map_err(|error| error.to_string())?;
    if !found.verified {
        return Err(format!(
            "{}: memsup cannot tell that the file at that path is the one the process mapped (a file replaced or mounted over since, a process root memsup cannot read, or a filesystem whose maps and stat disagree)",
            home.path
        ));
    }
    let file = found.file;
    let bytes = file.bytes();
    // A static executable carries no version string: the sizes of its symbols tell.
    if libc.is_some() {
        let version = glibc_version(bytes)
            .ok_or_else(|| format!("{}: no glibc version string", home.path))?;
        if version < FIRST_KNOWN_VERSION || version > LAST_KNOWN_VERSION {
            return Err(format!(
                "glibc {}.{}: its malloc layout is not one memsup knows",
                version.0, version.1
            ));
        }
    }
    let elf = file.elf().map_err(|error| error.to_string())?;
    let bias = home.load_bias(elf);
    let parsed = ElfFile64::<Endianness>::parse(&**bytes).map_err(|error| error.to_string())?;
    let mut allocator = Allocator {
        data: writable_ranges(maps, &home.path),
        ..Allocator::default()
    };
    let debug_data = if libc.is_some() {
        debug_file(&file, &parsed, modules)
    } else {
        None
    };
    let symbols = match &debug_data {
        Some(data) => object::File::parse(&**data)
            .ok()
            .and_then(|debug| symbols_of(&debug)),
        None => symbols_of(&parsed).filter(|_| libc.is_none()),
    };
    if let Some(symbols) = &symbols {
        allocator.main_arena = Some(bias.wrapping_add(symbols.main_arena));
        allocator.parameters = Some(bias.wrapping_add(symbols.parameters));
        allocator.source = if libc.is_some() {
            SymbolSource::DebugFile
        } else {
            SymbolSource::SymbolTable
        };
        if symbols.sizes != (arena::SIZE, parameters::SIZE) {
            return Err(format!(
                "main_arena and mp_ are {} and {} bytes: a glibc malloc layout memsup does not know",
                symbols.sizes.0, symbols.sizes.1
            ));
        }
    } else if libc.is_none() {
        return Err(
            "a static program without glibc's main_arena symbol (another C library, or stripped)"
                .to_string(),
        );
    }
    allocator.tcache = if libc.is_some() {
        got_tcache(&parsed, bias, symbols.as_ref().and_then(|s| s.tcache))
    } else {
        static_tcache(&parsed, symbols.as_ref().and_then(|s| s.tcache))
    };
    Ok(allocator)
}

fn is_libc(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "libc.so.6" || (name.starts_with("libc-2.") && name.ends_with(".so"))
}

/// A loaded library other than libc and the dynamic loader that defines `malloc`
/// (jemalloc, tcmalloc, mimalloc...): it serves the program's calls instead of glibc.
fn other_malloc(
    pid: i32,
    loaded: &[crate::module::loaded::LoadedModule],
    home: &str,
    modules: &ModuleStore,
) -> Option<String> {
    loaded
        .iter()
        .filter(|module| module.path != home && !module.path.contains("/ld-linux"))
        .find(|module| {
            let found = modules.of_process(pid, &module.path, module.inode);
            found.is_ok_and(|found| {
                found
                    .file
                    .elf()
                    .is_ok_and(|elf| !elf.find_functions(&["malloc"]).is_empty())
            })
        })
        .map(|module| module.path.rsplit('/').next().unwrap_or("").to_string())
}

/// "GNU C Library ... release version 2.36." as (2, 36).
pub fn glibc_version(bytes: &[u8]) -> Option<(u32, u32)> {
    let marker = b"GNU C Library";
    let start = bytes.windows(marker.len()).position(|w| w == marker)?;
    let text = &bytes[start..bytes.len().min(start + 200)];
    let text = String::from_utf8_lossy(text.split(|&b| b == 0).next()?);
    let (_, after) = text.split_once("version ")?;
    let mut numbers = after.split(|c: char| !c.is_ascii_digit());
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next()?.parse().ok()?;
    Some((major, minor))
}

/// The file's writable mappings and the anonymous mapping right after the last (its .bss).
fn writable_ranges(maps: &[MapEntry], path: &str) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    for (index, entry) in maps.iter().enumerate() {
        if entry.writable && entry.file_path() == Some(path) {
            ranges.push((entry.start, entry.end));
            if let Some(next) = maps.get(index + 1) {
                if next.path.is_none() && next.start == entry.end && next.writable {
                    ranges.push((next.start, next.end));
                }
            }
        }
    }
    ranges
}

/// libc's separate debug file (libc6-dbg's), as the process sees it first.
fn debug_file(
    libc: &ModuleFile,
    parsed: &ElfFile64<Endianness>,
    modules: &ModuleStore,
) -> Option<Vec<u8>> {
    if std::env::var_os(IGNORE_DEBUG_FILE_VARIABLE).is_some_and(|value| !value.is_empty()) {
        return None;
    }
    let file = object::File::Elf64(ElfFile64::parse(parsed.data()).ok()?);
    let found = libc.find_debug_file(&file, modules.debug_files())?;
    Some(found.data)
}

/// File addresses of `main_arena` and `mp_`, and the TLS offset of `tcache`.
struct Symbols {
    main_arena: u64,
    parameters: u64,
    tcache: Option<u64>,
    /// The sizes of main_arena and mp_: the layout check.
    sizes: (u64, u64),
}

fn symbols_of<'data>(file: &impl Object<'data>) -> Option<Symbols> {
    let (mut main_arena, mut parameters, mut tcache) = (None, None, None);
    for symbol in file.symbols() {
        let found = Some((symbol.address(), symbol.size()));
        match (symbol.name(), symbol.kind()) {
            (Ok("main_arena"), SymbolKind::Data) => main_arena = found,
            (Ok("mp_"), SymbolKind::Data) => parameters = found,
            (Ok("tcache"), SymbolKind::Tls) => tcache = Some(symbol.address()),
            _ => {}
        }
    }
    let (main_arena, parameters) = (main_arena?, parameters?);
    Some(Symbols {
        main_arena: main_arena.0,
        parameters: parameters.0,
        tcache,
        sizes: (main_arena.1, parameters.1),
    })
}

/// libc reaches `tcache` through a GOT slot that the dynamic loader fills with its offset
/// from the thread pointer (an R_X86_64_TPOFF64 relocation without symbol, whose addend is
/// the variable's offset in libc's TLS block). Without symbols: every such slot.
fn got_tcache(file: &ElfFile64<Endianness>, bias: u64, tls_offset: Option<u64>) -> TcacheLocation {
    let mut slots = Vec::new();
    for (offset, relocation) in file.dynamic_relocations().into_iter().flatten() {
        let is_tpoff = matches!(
            relocation.flags(),
            RelocationFlags::Elf { r_type } if r_type == elf::R_X86_64_TPOFF64
        );
        if !is_tpoff || relocation.target() != RelocationTarget::Absolute {
            continue;
        }
        let slot = bias.wrapping_add(offset);
        if Some(relocation.addend() as u64) == tls_offset {
            return TcacheLocation::Slot(slot);
        }
        slots.push(slot);
    }
    TcacheLocation::Candidates(slots)
}

/// A static executable's TLS block ends at the thread pointer (x86-64 TLS variant II), so a
/// variable at `offset` in it lies at fs_base - round_up(memsz, align) + offset.
fn static_tcache(file: &ElfFile64<Endianness>, tls_offset: Option<u64>) -> TcacheLocation {
    let endian = file.endian();
    let tls = file
        .elf_program_headers()
        .iter()
        .find(|header| header.p_type(endian) == elf::PT_TLS);
    match (tls, tls_offset) {
        (Some(tls), Some(offset)) => {
            let align = tls.p_align(endian).max(1);
            let block = tls.p_memsz(endian).div_ceil(align) * align;
            TcacheLocation::Offset(offset as i64 - block as i64)
        }
        _ => TcacheLocation::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_banner() {
        let banner =
            b"\0GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\n\0";
        assert_eq!(glibc_version(banner), Some((2, 36)));
        assert_eq!(glibc_version(b"musl libc"), None);
    }
}
