//! Which functions memsup probes, by symbol name. Every defined symbol with one of these names
//! in any module (libc.so, a static executable, musl, jemalloc, tcmalloc, mimalloc) is probed;
//! names at one address share one breakpoint, recorded under the first kind listed.

use crate::trace::format::{AllocFunction, MapCall};

pub const ALLOCATOR_SYMBOLS: &[(AllocFunction, &[&str])] = &[
    (
        AllocFunction::Malloc,
        &[
            "malloc",
            "__libc_malloc",
            "__malloc",
            "je_malloc",
            "tc_malloc",
            "mi_malloc",
        ],
    ),
    (
        AllocFunction::Calloc,
        &[
            "calloc",
            "__libc_calloc",
            "je_calloc",
            "tc_calloc",
            "mi_calloc",
        ],
    ),
    (
        AllocFunction::Realloc,
        &[
            "realloc",
            "__libc_realloc",
            "je_realloc",
            "tc_realloc",
            "mi_realloc",
        ],
    ),
    (
        AllocFunction::Reallocarray,
        &["reallocarray", "__libc_reallocarray", "mi_reallocarray"],
    ),
    (
        AllocFunction::Free,
        &[
            "free",
            "__libc_free",
            "cfree",
            "je_free",
            "tc_free",
            "mi_free",
        ],
    ),
    (
        AllocFunction::PosixMemalign,
        &[
            "posix_memalign",
            "__posix_memalign",
            "je_posix_memalign",
            "tc_posix_memalign",
            "mi_posix_memalign",
        ],
    ),
    (
        AllocFunction::AlignedAlloc,
        &["aligned_alloc", "je_aligned_alloc", "mi_aligned_alloc"],
    ),
    (
        AllocFunction::Memalign,
        &[
            "memalign",
            "__libc_memalign",
            "je_memalign",
            "tc_memalign",
            "mi_memalign",
        ],
    ),
    (
        AllocFunction::Valloc,
        &[
            "valloc",
            "__libc_valloc",
            "je_valloc",
            "tc_valloc",
            "mi_valloc",
        ],
    ),
    (
        AllocFunction::Pvalloc,
        &["pvalloc", "__libc_pvalloc", "tc_pvalloc"],
    ),
];

/// libc's mapping wrappers, probed in attach mode (run mode sees the system calls themselves).
pub const MAPPING_SYMBOLS: &[(MapCall, &[&str])] = &[
    (MapCall::Mmap, &["mmap", "mmap64", "__mmap"]),
    (MapCall::Munmap, &["munmap", "__munmap"]),
    (MapCall::Mremap, &["mremap", "__mremap"]),
    (MapCall::Brk, &["brk", "__brk"]),
    (MapCall::Shmat, &["shmat"]),
    (MapCall::Shmdt, &["shmdt"]),
];

/// The dynamic linker calls this after every change to the list of loaded objects.
pub const RENDEZVOUS_SYMBOL: &str = "_dl_debug_state";

/// Modules whose allocator-named symbols are not the program's allocator (the dynamic
/// linker's private minimal malloc).
pub fn is_dynamic_linker(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("ld-linux") || name.starts_with("ld64.so") || name.starts_with("ld-musl")
}

/// Whether the function hands back a pointer worth a return trampoline. Free does not.
pub fn needs_return(function: AllocFunction) -> bool {
    function != AllocFunction::Free
}

/// The destination of a direct `jmp` at `address` (`code` = its bytes), if that is what it is.
/// musl's `malloc`, `free` and `realloc` are such one-instruction forwarders to the real
/// allocator functions, which are probed themselves: the forwarder needs no probe.
pub fn direct_jump_target(code: &[u8], address: u64) -> Option<u64> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
    let instruction = Decoder::with_ip(64, code, address, DecoderOptions::NONE).decode();
    let is_direct_jump = instruction.mnemonic() == Mnemonic::Jmp
        && matches!(instruction.op0_kind(), OpKind::NearBranch64);
    is_direct_jump.then(|| instruction.near_branch_target())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_forwarder_is_recognised() {
        // jmp rel32 +0x100 at 0x1000: five bytes, target 0x1105.
        assert_eq!(
            direct_jump_target(&[0xe9, 0x00, 0x01, 0x00, 0x00], 0x1000),
            Some(0x1105)
        );
        // push %r12 is not a jump.
        assert_eq!(direct_jump_target(&[0x41, 0x54], 0x1000), None);
    }
}
