//! DWARF of one file (its own, or a separate debug file's) through addr2line: the function
//! at an address, the functions inlined into it there, and their file:line.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use addr2line::gimli;
use object::{CompressionFormat, Object, ObjectSection};
use rayon::prelude::*;

use super::debug_files::has_dwarf;
use super::demangle::demangle;
use super::symbolizer::SymbolFrame;
use crate::error::{Error, Result};
use crate::module::offset_in;

/// Section data owned through `Arc`s: ranges of the file's one copy, or an inflated section.
type SectionReader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Parsed DWARF of one file. Units are parsed lazily by addr2line, on first lookup.
pub struct DwarfModule {
    context: addr2line::Context<SectionReader>,
}

impl DwarfModule {
    /// The DWARF of `file`, parsed from `data` (the contents of `path`), or `None` when it
    /// has no `.debug_info`. Uncompressed sections share `data`.
    pub fn load(path: &str, file: &object::File, data: &Arc<[u8]>) -> Result<Option<DwarfModule>> {
        if !has_dwarf(file) {
            return Ok(None);
        }
        let dwarf_error = |message: String| Error::Elf {
            path: path.to_string(),
            message: format!("DWARF: {message}"),
        };
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let empty = || gimli::EndianArcSlice::new(Arc::from(&[][..]), endian);
        // Compressed sections are inflated in parallel: libc's take 40 ms one after another.
        let mut wanted = Vec::new();
        let Ok(_) = gimli::DwarfSections::<()>::load(|id| {
            wanted.extend(read_by_symbolization(id).then_some(id));
            Ok::<(), std::convert::Infallible>(())
        });
        let mut sections = wanted
            .into_par_iter()
            .filter_map(|id| {
                let section = file.section_by_name(id.name())?;
                Some(
                    section_reader(&section, data, endian)
                        .map(|reader| (id, reader))
                        .map_err(|message| format!("section {}: {message}", id.name())),
                )
            })
            .collect::<std::result::Result<HashMap<_, _>, String>>()
            .map_err(dwarf_error)?;
        let load_section = |id: gimli::SectionId| -> std::result::Result<SectionReader, String> {
            Ok(sections.remove(&id).unwrap_or_else(empty))
        };
        let dwarf = gimli::Dwarf::load(load_section).map_err(dwarf_error)?;
        let context = addr2line::Context::from_dwarf(dwarf)
            .map_err(|error| dwarf_error(error.to_string()))?;
        Ok(Some(DwarfModule { context }))
    }

    /// The frames at ELF virtual address `address`, innermost inlined function first and
    /// the real function last. Empty when no unit covers the address. A frame whose
    /// function DWARF does not name has an empty `function`.
    pub fn frames(&self, address: u64) -> std::result::Result<Vec<SymbolFrame>, gimli::Error> {
        // Split DWARF (.dwo) is not looked for: those units just yield no frames.
        let mut iterator = self.context.find_frames(address).skip_all_loads()?;
        let mut frames = Vec::new();
        while let Some(frame) = iterator.next()? {
            let raw_name = match &frame.function {
                Some(function) => function.raw_name()?.into_owned(),
                None => String::new(),
            };
            let location = frame.location.as_ref();
            frames.push(SymbolFrame {
                function: demangle(&raw_name),
                raw_name,
                file: location.and_then(|location| location.file.map(str::to_string)),
                line: location.and_then(|location| location.line),
                column: location.and_then(|location| location.column),
                // Corrected below, once the last frame is known.
                inlined: true,
            });
        }
        if let Some(outermost) = frames.last_mut() {
            outermost.inlined = false;
        }
        Ok(frames)
    }
}

/// Whether addr2line reads section `id` to name functions, inlined frames and lines.
/// Location lists, macros and the name index are not: left out, a compressed debug file's
/// largest of them (libc's `.debug_loclists`, 15 % of its compressed DWARF) is never inflated.
fn read_by_symbolization(id: gimli::SectionId) -> bool {
    use gimli::SectionId::*;
    !matches!(
        id,
        DebugLoc | DebugLocLists | DebugMacinfo | DebugMacro | DebugNames
    )
}

/// A section's contents: a range of `data` (the file's bytes), or inflated when compressed.
/// Debian's debug files (`-dbgsym`, `libc6-dbg`) have zlib-compressed sections
/// (SHF_COMPRESSED), which object decompresses only with its `compression` feature (that
/// would add a zstd decoder): flate2 does it here.
fn section_reader(
    section: &object::Section,
    data: &Arc<[u8]>,
    endian: gimli::RunTimeEndian,
) -> std::result::Result<SectionReader, String> {
    use gimli::Reader;
    let compressed = section
        .compressed_data()
        .map_err(|error| error.to_string())?;
    match compressed.format {
        CompressionFormat::None => match offset_in(data, compressed.data) {
            Some(start) => {
                let mut reader = gimli::EndianArcSlice::new(Arc::clone(data), endian);
                reader.skip(start).map_err(|error| error.to_string())?;
                reader
                    .truncate(compressed.data.len())
                    .map_err(|error| error.to_string())?;
                Ok(reader)
            }
            None => Ok(gimli::EndianArcSlice::new(
                Arc::from(compressed.data),
                endian,
            )),
        },
        CompressionFormat::Zlib => Ok(gimli::EndianArcSlice::new(
            inflate(compressed.data, compressed.uncompressed_size)?,
            endian,
        )),
        other => Err(format!("unsupported compression {other:?}")),
    }
}

/// Inflates zlib `data` that the section header says is `size` bytes once inflated.
fn inflate(data: &[u8], size: u64) -> std::result::Result<Arc<[u8]>, String> {
    let size = usize::try_from(size).map_err(|_| "uncompressed size too large".to_string())?;
    let mut inflated = Vec::new();
    // A corrupt header must not abort the process on allocation.
    inflated
        .try_reserve_exact(size)
        .map_err(|error| error.to_string())?;
    let mut decoder = flate2::read::ZlibDecoder::new(data);
    (&mut decoder)
        .take(size as u64)
        .read_to_end(&mut inflated)
        .map_err(|error| format!("inflating: {error}"))?;
    if inflated.len() != size {
        return Err(format!(
            "inflated {} bytes, expected {size}",
            inflated.len()
        ));
    }
    // A stream longer than its header says is as damaged as a shorter one.
    let mut past_the_end = [0u8; 1];
    match decoder.read(&mut past_the_end) {
        Ok(0) => Ok(Arc::from(inflated)),
        Ok(_) => Err(format!("inflates past the {size} bytes expected")),
        Err(error) => Err(format!("inflating: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::debug_files::DebugFileLocator;
    use crate::symbols::elf::ElfFile;

    fn deflated(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_section_inflates_to_the_size_its_header_gives_or_is_refused() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let data = deflated(&bytes);
        assert_eq!(&*inflate(&data, bytes.len() as u64).unwrap(), &bytes[..]);
        assert_eq!(
            inflate(&data, bytes.len() as u64 + 1).unwrap_err(),
            "inflated 100000 bytes, expected 100001"
        );
        assert_eq!(
            inflate(&data, bytes.len() as u64 - 1).unwrap_err(),
            "inflates past the 99999 bytes expected"
        );
        // A header claiming more than memory can hold is refused, not an abort.
        assert_eq!(
            inflate(&data, 1 << 60).unwrap_err(),
            "memory allocation failed because the memory allocator returned an error"
        );
        let mut damaged = data.clone();
        damaged[data.len() / 2] ^= 0xff;
        assert_eq!(
            inflate(&damaged, bytes.len() as u64).unwrap_err(),
            "inflating: corrupt deflate stream"
        );
    }

    /// What loading the C library's DWARF (libc6-dbg's compressed debug file) costs, best
    /// of 8: `cargo test --release --lib libc_dwarf_load_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn libc_dwarf_load_cost() {
        let libc = ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        let debug_file = DebugFileLocator::default()
            .build_id_path(&libc.build_id().unwrap())
            .unwrap();
        let data: Arc<[u8]> = std::fs::read(&debug_file)
            .expect("libc6-dbg's debug file of libc")
            .into();
        let path = debug_file.to_string_lossy();
        let mut best = std::time::Duration::MAX;
        for _ in 0..8 {
            let start = std::time::Instant::now();
            let file = object::File::parse(&*data).unwrap();
            assert!(DwarfModule::load(&path, &file, &data).unwrap().is_some());
            best = best.min(start.elapsed());
        }
        println!(
            "libc's DWARF loaded in {:.1} ms (best of 8)",
            best.as_secs_f64() * 1e3
        );
    }
}
