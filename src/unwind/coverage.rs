//! Which code a module's CFI covers. framehop walks code without CFI with a guess (the
//! return address at rsp in the first frame, the frame-pointer chain above), and a guess may
//! end a walk early yet look complete: a caller that must not miss a frame (is a thread still
//! inside memsup's hook code?) asks whether each frame of a walk was covered.

use std::ops::Range;

use gimli::{BaseAddresses, CieOrFde, DebugFrame, EhFrame, LittleEndian, UnwindSection};

use crate::unwind::modules::{SectionBytes, UnwindSections};

/// The code ranges (ELF virtual addresses) of the FDEs framehop reads for this module:
/// `.eh_frame` when there is one, else `.debug_frame`. Sorted and merged.
pub fn cfi_ranges(sections: &UnwindSections) -> Vec<Range<u64>> {
    let mut ranges = if let Some(eh_frame) = &sections.eh_frame {
        eh_frame_ranges(eh_frame)
    } else if let Some(bytes) = &sections.debug_frame {
        fde_ranges(
            &DebugFrame::new(&bytes[..], LittleEndian),
            &BaseAddresses::default(),
        )
    } else {
        Vec::new()
    };
    // An empty range covers nothing, and would hide a range starting before it from `covers`.
    ranges.retain(|range| !range.is_empty());
    ranges.sort_by_key(|range| range.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

/// Whether `address` lies in one of `ranges` (sorted, disjoint).
pub fn covers(ranges: &[Range<u64>], address: u64) -> bool {
    let index = ranges.partition_point(|range| range.start <= address);
    index
        .checked_sub(1)
        .is_some_and(|index| ranges[index].contains(&address))
}

/// The code range of each FDE of `.eh_frame` (its address and bytes), in file order.
pub fn eh_frame_ranges((range, bytes): &(Range<u64>, SectionBytes)) -> Vec<Range<u64>> {
    let bases = BaseAddresses::default().set_eh_frame(range.start);
    fde_ranges(&EhFrame::new(&bytes[..], LittleEndian), &bases)
}

fn fde_ranges<'a, Section>(section: &Section, bases: &BaseAddresses) -> Vec<Range<u64>>
where
    Section: UnwindSection<gimli::EndianSlice<'a, LittleEndian>>,
{
    let mut ranges = Vec::new();
    let mut entries = section.entries(bases);
    // An entry that cannot be parsed ends the scan: what follows is not trusted either.
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) =
            partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset))
        else {
            continue;
        };
        let start = fde.initial_address();
        ranges.push(start..start.saturating_add(fde.len()));
    }
    ranges
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;
    use std::sync::Arc;

    use object::{Object, ObjectSymbol};

    use super::*;

    fn gcc(directory: &Path, arguments: &[&str]) {
        let status = Command::new("gcc")
            .current_dir(directory)
            .args(arguments)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc {arguments:?}");
    }

    /// `covered` is compiled with CFI, `bare` without; both are linked into one program.
    #[test]
    fn code_compiled_without_unwind_tables_has_no_cfi() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path();
        std::fs::write(path.join("covered.c"), "int bare(int);\nint covered(int x) { return bare(x) + 1; }\nint main(void) { return covered(0); }\n").unwrap();
        std::fs::write(path.join("bare.c"), "int bare(int x) { return x * 3; }\n").unwrap();
        gcc(path, &["-O2", "-c", "covered.c"]);
        gcc(
            path,
            &[
                "-O2",
                "-fno-asynchronous-unwind-tables",
                "-fno-unwind-tables",
                "-c",
                "bare.c",
            ],
        );
        gcc(path, &["-o", "program", "covered.o", "bare.o"]);
        let data: Arc<[u8]> = std::fs::read(path.join("program")).unwrap().into();
        let file = object::File::parse(&*data).unwrap();
        let address_of = |name: &str| {
            file.symbols()
                .find(|symbol| symbol.name() == Ok(name))
                .map(|symbol| symbol.address())
                .unwrap_or_else(|| panic!("no symbol {name}"))
        };
        let sections = UnwindSections::parse("program", &data).unwrap();
        for name in ["covered", "main"] {
            assert!(sections.has_cfi_at(address_of(name)), "{name} has CFI");
        }
        assert!(!sections.has_cfi_at(address_of("bare")), "bare has none");
        assert!(!sections.has_cfi_at(0), "nor has address 0");
    }

    #[test]
    fn covers_finds_the_range_holding_an_address() {
        let ranges = [0x10..0x20, 0x30..0x40];
        let inside: Vec<u64> = (0..0x50).filter(|&a| covers(&ranges, a)).collect();
        let expected: Vec<u64> = (0x10..0x20).chain(0x30..0x40).collect();
        assert_eq!(inside, expected);
        assert!(!covers(&[], 0x10));
    }
}
