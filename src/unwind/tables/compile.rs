//! The compiler from a module's CFI to its `ModuleTable`: every row of every FDE of
//! `.eh_frame` (else `.debug_frame`, as framehop reads them) becomes the rule framehop
//! applies there (`classify`), and the addresses between FDEs get the rule framehop uses
//! where no FDE covers an address.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gimli::{
    BaseAddresses, CieOrFde, DebugFrame, EhFrame, EhFrameHdr, EndianSlice, LittleEndian,
    UnwindContext, UnwindSection, X86_64,
};

use super::classify::{classify, RowRules};
use super::rule::{Kind, ModuleTable, Rule};
use crate::error::{Error, Result};
use crate::unwind::modules::UnwindSections;

/// A compiled table and what it took.
#[derive(Debug, Clone, Default)]
pub struct CompiledTable {
    pub table: Arc<ModuleTable>,
    pub counts: CompileCounts,
}

/// What a compile found, for the profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileCounts {
    pub fdes: u64,
    pub cfi_rows: u64,
    pub table_rows: u64,
    /// Table rows per `Kind`, indexed by its number.
    pub rows_per_kind: [u64; 7],
    /// The CFI rows whose rule the walk cannot apply (`Kind::Unsupported`), as ELF virtual
    /// address ranges: to name their functions.
    pub unsupported: Vec<Range<u64>>,
    pub time: Duration,
}

impl CompileCounts {
    pub fn rows_of(&self, kind: Kind) -> u64 {
        self.rows_per_kind[kind as usize]
    }
}

type Bytes<'a> = EndianSlice<'a, LittleEndian>;

/// One FDE's address range and its rows' rules, in address order.
struct FdeRules {
    range: Range<u64>,
    rows: Vec<(u64, Rule)>,
    /// Where the rows end: before `range.end` when the CFI program failed there (framehop
    /// then finds no row: no FDE).
    rows_end: u64,
}

/// Compiles the CFI of one module file. Fails when the CFI cannot be read or an address
/// does not fit the table's 32 bits: such a module gets no table.
pub fn compile(sections: &UnwindSections) -> Result<CompiledTable> {
    let started = Instant::now();
    let mut counts = CompileCounts::default();
    let (fdes, before_first) = if let Some((range, bytes)) = &sections.eh_frame {
        let mut eh_frame = EhFrame::new(&bytes[..], LittleEndian);
        eh_frame.set_address_size(8);
        let mut bases = BaseAddresses::default().set_eh_frame(range.start);
        if let Some(text) = &sections.text {
            bases = bases.set_text(text.start);
        }
        if let Some(got) = &sections.got {
            bases = bases.set_got(got.start);
        }
        let before_first = match &sections.eh_frame_hdr {
            // framehop finds FDEs through the header's table, whose search gives the first
            // FDE for an address before it: not covered, no FDE. A header it cannot use
            // leaves the whole module to the frame-pointer fallback.
            Some((hdr_range, hdr_bytes)) => {
                let hdr_bases = bases.clone().set_eh_frame_hdr(hdr_range.start);
                let parsed = EhFrameHdr::new(&hdr_bytes[..], LittleEndian).parse(&hdr_bases, 8);
                if !parsed.is_ok_and(|hdr| hdr.table().is_some()) {
                    return Ok(frame_pointer_only(counts, started));
                }
                Rule::NO_FDE
            }
            // Without one, framehop's own FDE index has nothing before the first FDE, and
            // its error means the frame-pointer fallback.
            None => Rule::FRAME_POINTER,
        };
        (fde_rules(&eh_frame, &bases, &mut counts)?, before_first)
    } else if let Some(bytes) = &sections.debug_frame {
        let mut debug_frame = DebugFrame::new(&bytes[..], LittleEndian);
        debug_frame.set_address_size(8);
        let bases = BaseAddresses::default();
        let fdes = fde_rules(&debug_frame, &bases, &mut counts)?;
        (fdes, Rule::FRAME_POINTER)
    } else {
        // framehop has no unwind data for the module: every lookup falls back to frame
        // pointers.
        return Ok(frame_pointer_only(counts, started));
    };
    let mut points = change_points(fdes, before_first);
    if let Some(entry_code) = &sections.entry_code {
        end_at_entry_code(&mut points, entry_code);
    }
    let table = pack(&points)?;
    counts.table_rows = table.starts.len() as u64;
    for rule in &table.rules {
        counts.rows_per_kind[rule.kind() as usize] += 1;
    }
    counts.time = started.elapsed();
    Ok(CompiledTable {
        table: Arc::new(table),
        counts,
    })
}

fn frame_pointer_only(mut counts: CompileCounts, started: Instant) -> CompiledTable {
    let table = ModuleTable {
        starts: vec![0],
        rules: vec![Rule::FRAME_POINTER],
    };
    counts.table_rows = 1;
    counts.rows_per_kind[Kind::FramePointer as usize] = 1;
    counts.time = started.elapsed();
    CompiledTable {
        table: Arc::new(table),
        counts,
    }
}

/// Every FDE of `section` with its rows' rules, sorted by start address.
fn fde_rules<'a, S: UnwindSection<Bytes<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    counts: &mut CompileCounts,
) -> Result<Vec<FdeRules>> {
    let unreadable = |error: gimli::Error| Error::Internal(format!("unwind table: CFI: {error}"));
    let mut fdes = Vec::new();
    let mut context = UnwindContext::new();
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next().map_err(unreadable)? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let fde = partial.parse(S::cie_from_offset).map_err(unreadable)?;
        counts.fdes += 1;
        let start = fde.initial_address();
        let range = start..start.saturating_add(fde.len());
        let encoding = fde.cie().encoding();
        let mut rows = Vec::new();
        let mut rows_end = range.start;
        if let Ok(mut table) = fde.rows(section, bases, &mut context) {
            // A row the CFI program cannot produce ends the FDE's rows where it failed.
            while let Ok(Some(row)) = table.next_row() {
                counts.cfi_rows += 1;
                let rules = RowRules {
                    cfa: row.cfa(),
                    rbp: row.register(X86_64::RBP),
                    return_address: row.register(X86_64::RA),
                };
                let rule = classify(section, encoding, &rules);
                if rule == Rule::UNSUPPORTED {
                    counts
                        .unsupported
                        .push(row.start_address()..row.end_address());
                }
                rows.push((row.start_address(), rule));
                rows_end = row.end_address();
            }
        }
        fdes.push(FdeRules {
            range,
            rows,
            rows_end,
        });
    }
    fdes.sort_by_key(|fde| fde.range.start);
    Ok(fdes)
}

/// The rule from each address on, sorted by address: FDE `i` rules from its start to its
/// end or to the next FDE's start, whichever comes first (the FDE framehop picks for an
/// address is the last one starting at or below it); no FDE elsewhere.
fn change_points(fdes: Vec<FdeRules>, before_first: Rule) -> Vec<(u64, Rule)> {
    let mut points = vec![(0, before_first)];
    for (index, fde) in fdes.iter().enumerate() {
        let next_start = fdes
            .get(index + 1)
            .map_or(u64::MAX, |next| next.range.start);
        if next_start == fde.range.start {
            continue; // an FDE starting at the same address shadows this one
        }
        let end = fde.range.end.min(next_start);
        points.extend(fde.rows.iter().filter(|(start, _)| *start < end).copied());
        if fde.rows_end < end {
            points.push((fde.rows_end.max(fde.range.start), Rule::NO_FDE));
        }
        if end < next_start {
            points.push((end, Rule::NO_FDE));
        }
    }
    points
}

/// Makes the lookup address `ra - 1` give `End` exactly when `ra` lies in `entry_code`:
/// memsup ends a walk at a return address into the code the process started at.
fn end_at_entry_code(points: &mut Vec<(u64, Rule)>, entry_code: &Range<u64>) {
    if entry_code.is_empty() || entry_code.start == 0 {
        return;
    }
    let (start, end) = (entry_code.start - 1, entry_code.end - 1);
    let rule_at = |address: u64| {
        let after = points.partition_point(|(at, _)| *at <= address);
        points[after - 1].1
    };
    let after_end = rule_at(end);
    points.retain(|(at, _)| *at < start || *at > end);
    let index = points.partition_point(|(at, _)| *at < start);
    points.splice(index..index, [(start, Rule::END), (end, after_end)]);
}

/// Merges equal neighbours and packs the starts into 32 bits.
fn pack(points: &[(u64, Rule)]) -> Result<ModuleTable> {
    let mut table = ModuleTable::default();
    for &(start, rule) in points {
        // Addresses before the first row are NoFde already.
        if table.rules.last().copied().unwrap_or(Rule::NO_FDE) == rule {
            continue;
        }
        let start = u32::try_from(start).map_err(|_| {
            Error::Internal(format!(
                "unwind table: code at {start:#x} lies above 4 GiB, beyond the table's 32-bit addresses"
            ))
        })?;
        // A later row at the same address (an empty FDE or row) replaces the earlier.
        if table.starts.last() == Some(&start) {
            table.rules.pop();
            table.starts.pop();
            if table.rules.last().copied().unwrap_or(Rule::NO_FDE) == rule {
                continue;
            }
        }
        table.starts.push(start);
        table.rules.push(rule);
    }
    Ok(table)
}
