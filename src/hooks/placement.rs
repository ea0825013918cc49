//! Laying out one code page for the allocator functions of one module: the hooks, then each
//! function's relocated prologue, each hook's continuation pointing at its prologue, and the
//! jump each entry gets. Pure: the caller maps the page and writes what this returns.

use super::code::{assemble, CpuSource};
use super::inject::page_align;
use super::layout::{Hook, Op};
use super::relocate::{jump_bytes, relocate_entry, EntryPatch, Relocation, MAX_RELOCATED_BYTES};
use super::stack_section::SegmentTable;
use super::trailer::{trailer_bytes, SavedEntry, Trailer};
use crate::breakpoints::probes::direct_jump_target;
use crate::unwind::tables::rule::{CfaRegister, Kind, ModuleTable, Rule};
use std::sync::Arc;

/// `jmp rel32`, and its length.
const JUMP_REL32: u8 = 0xe9;
const JUMP_BYTES: usize = 5;
const RET: u8 = 0xc3;
use crate::error::Result;

/// A function to hook.
#[derive(Debug, Clone)]
pub struct Target {
    pub address: u64,
    pub hook: Hook,
    /// The whole function, as its symbol's size gives it.
    pub code: Vec<u8>,
}

/// An entry to patch: write `jump` at `address + patch.offset`.
#[derive(Debug, Clone)]
pub struct Patch {
    /// Index into the targets.
    pub target: usize,
    pub patch: EntryPatch,
    pub jump: Vec<u8>,
}

/// The code page's bytes and what to do with them.
#[derive(Debug)]
pub struct PagePlan {
    pub bytes: Vec<u8>,
    pub patches: Vec<Patch>,
    /// Targets that keep an int3 probe, with the reason.
    pub refused: Vec<(usize, String)>,
    /// The page's unwind table: how the hooks' stack walker goes on from a hooked
    /// function's return into its hook to the function's caller.
    pub unwind: SegmentTable,
    /// Where the page's MPI hooks' calls return (`AssembledHooks::mpi_return_sites`).
    pub mpi_return_sites: Vec<u64>,
}

/// The unwind table of a page of hooks at `base`, `length` bytes long, whose calls return at
/// `return_sites` (address, CFA offset from rsp): each call's last byte (a walk looks up a
/// return address less one) has its rule, and every other byte of the page stops a walk.
pub fn page_unwind_table(base: u64, length: u64, return_sites: &[(u64, i64)]) -> SegmentTable {
    let mut rows: Vec<(u32, Rule)> = vec![(0, Rule::UNSUPPORTED)];
    let mut sites = return_sites.to_vec();
    sites.sort_unstable();
    for (address, cfa) in sites {
        let offset = (address - base) as u32;
        rows.retain(|&(start, _)| start < offset - 1);
        rows.push((offset - 1, Rule::cfa(Kind::Sp, CfaRegister::Rsp, cfa, None)));
        rows.push((offset, Rule::UNSUPPORTED));
    }
    let (starts, rules) = rows.into_iter().unzip();
    SegmentTable {
        start: base,
        end: base + length,
        bias: base,
        table: Arc::new(ModuleTable { starts, rules }),
        sigreturn: None,
    }
}

/// A function that is one `jmp rel32` to another (musl's `malloc` to its implementation,
/// `memalign` to `aligned_alloc`): its hook continues with an absolute jump to the same
/// destination, so calls through it are recorded under its own name, and a hook at the
/// destination sees them as inner calls (its caller is the hook page).
fn forwarder(target: &Target) -> Option<Relocation> {
    let destination = direct_jump_target(&target.code, target.address)?;
    if target.code.first() != Some(&JUMP_REL32) {
        return None;
    }
    let mut code = vec![0xff, 0x25, 0, 0, 0, 0];
    code.extend_from_slice(&destination.to_le_bytes());
    Some(Relocation {
        patch: EntryPatch {
            offset: 0,
            length: 5,
            original: target.code[..5].to_vec(),
        },
        code,
    })
}

/// A function that is a lone `ret` followed by padding (glibc's `_dl_debug_state`): the
/// jump goes over the `ret` and the padding after it, which never runs, and the hook
/// continues to a `ret` of its own.
fn lone_return(target: &Target) -> Option<Relocation> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    if target.hook.op != Op::Rendezvous || target.code.first() != Some(&RET) {
        return None;
    }
    let mut decoder = Decoder::with_ip(
        64,
        &target.code[1..],
        target.address + 1,
        DecoderOptions::NONE,
    );
    let mut covered = 1;
    while covered < JUMP_BYTES {
        let instruction = decoder.decode();
        let padding = matches!(instruction.mnemonic(), Mnemonic::Nop | Mnemonic::Int3);
        if instruction.is_invalid() || !padding {
            return None;
        }
        covered += instruction.len();
    }
    Some(Relocation {
        patch: EntryPatch {
            offset: 0,
            length: JUMP_BYTES,
            original: target.code[..JUMP_BYTES].to_vec(),
        },
        code: vec![RET],
    })
}

/// Bytes a page for `hooks` takes, to map it before it is planned: the hooks, each
/// relocated prologue, and the trailer that ends it.
pub fn page_bytes(hooks: &[Hook], cpu: CpuSource) -> Result<u64> {
    let count = hooks.len();
    let hooks = assemble(0x1000_0000, 0x2000_0000, cpu, hooks)?.bytes.len();
    let hooks = hooks.next_multiple_of(16);
    Ok(page_align(
        (hooks + count * (MAX_RELOCATED_BYTES + 16) + trailer_bytes(count)) as u64,
    ))
}

/// The page at `base` for `targets` (`page_bytes` of their operations long), its hooks
/// writing to the area at `area`; it ends with its trailer.
pub fn plan(base: u64, area: u64, cpu: CpuSource, targets: &[Target]) -> Result<PagePlan> {
    let kinds: Vec<Hook> = targets.iter().map(|t| t.hook).collect();
    let hooks = assemble(base, area, cpu, &kinds)?;
    let mut bytes = hooks.bytes;
    bytes.resize(bytes.len().next_multiple_of(16), 0xcc);
    let mut patches = Vec::new();
    let mut refused = Vec::new();
    for (index, target) in targets.iter().enumerate() {
        let at = base + bytes.len() as u64;
        let relocated = match forwarder(target).or_else(|| lone_return(target)) {
            Some(relocation) => Ok(relocation),
            None => relocate_entry(&target.code, target.address, at),
        };
        let relocation = match relocated {
            Ok(relocation) => relocation,
            Err(refusal) => {
                refused.push((index, refusal.to_string()));
                continue;
            }
        };
        let from = target.address + relocation.patch.offset;
        let Some(jump) = jump_bytes(from, hooks.entries[index], relocation.patch.length) else {
            refused.push((index, "the hook page is out of rel32 reach".to_string()));
            continue;
        };
        let slot = (hooks.continuation_slots[index] - base) as usize;
        bytes[slot..slot + 8].copy_from_slice(&at.to_le_bytes());
        bytes.extend_from_slice(&relocation.code);
        bytes.resize(bytes.len().next_multiple_of(16), 0xcc);
        patches.push(Patch {
            target: index,
            patch: relocation.patch,
            jump,
        });
    }
    let length = page_bytes(&kinds, cpu)?;
    let trailer = Trailer {
        base,
        length,
        area,
        entries: patches
            .iter()
            .map(|patch| SavedEntry {
                address: targets[patch.target].address + patch.patch.offset,
                original: patch.patch.original.clone(),
            })
            .collect(),
    }
    .encode();
    let code_end = length as usize - trailer.len();
    assert!(
        bytes.len() <= code_end,
        "page_bytes leaves room for the trailer"
    );
    bytes.resize(code_end, 0xcc);
    bytes.extend_from_slice(&trailer);
    let unwind = page_unwind_table(base, length, &hooks.return_sites);
    Ok(PagePlan {
        bytes,
        patches,
        refused,
        unwind,
        mpi_return_sites: hooks.mpi_return_sites,
    })
}
