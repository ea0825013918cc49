//! glibc malloc's data layouts on x86-64, as `ptype /o` shows them in the 2.36 debug file
//! (Debian 12). The census reads these structures from outside; a libc of another version
//! may lay them out differently, so the version is checked before any is trusted.

/// The glibc versions whose layouts these are: 2.35 gave `heap_info` its `pagesize` field,
/// 2.34 the random tcache key; nothing the census reads moved up to 2.39.
pub const FIRST_KNOWN_VERSION: (u32, u32) = (2, 35);
pub const LAST_KNOWN_VERSION: (u32, u32) = (2, 39);

/// Chunk header: prev_size then size; user data follows it.
pub const CHUNK_HEADER: u64 = 16;
/// A chunk in use lends its next chunk's prev_size field: its usable bytes are its size
/// less one size field (less the whole header for an mmapped chunk).
pub const SIZE_FIELD: u64 = 8;
pub const MINIMUM_CHUNK: u64 = 0x20;
pub const PREV_INUSE: u64 = 1;
pub const IS_MMAPPED: u64 = 2;
pub const SIZE_FLAGS: u64 = 7;
pub const PAGE: u64 = 4096;

/// `struct malloc_state`.
pub mod arena {
    pub const FASTBINS: u64 = 16;
    pub const FASTBIN_COUNT: usize = 10;
    pub const TOP: u64 = 96;
    pub const BINS: u64 = 112;
    pub const BIN_POINTERS: usize = 254;
    pub const NEXT: u64 = 2160;
    pub const SYSTEM_MEM: u64 = 2184;
    pub const SIZE: u64 = 2200;
}

/// `struct malloc_par` (`mp_`).
pub mod parameters {
    pub const N_MMAPS: u64 = 60;
    pub const MMAPPED_MEM: u64 = 80;
    pub const SBRK_BASE: u64 = 96;
    pub const TCACHE_COUNT: u64 = 120;
    pub const SIZE: u64 = 136;
}

/// `heap_info`, at the start of each heap of a non-main arena; heaps are aligned to their
/// largest size.
pub mod heap {
    pub const ARENA: u64 = 0;
    pub const PREVIOUS: u64 = 8;
    pub const SIZE: u64 = 16;
    pub const MPROTECT_SIZE: u64 = 24;
    pub const PAGE_SIZE: u64 = 32;
    pub const HEADER: u64 = 48;
    pub const MAXIMUM: u64 = 64 << 20;
    /// Where the chunks of an arena's first heap start: after heap_info and malloc_state,
    /// aligned to 16.
    pub const FIRST_CHUNK: u64 = (HEADER + super::arena::SIZE + 15) & !15;
}

/// `tcache_perthread_struct`: `uint16_t counts[64]` then `tcache_entry *entries[64]`.
pub mod tcache {
    pub const BINS: usize = 64;
    pub const ENTRIES: u64 = 128;
    pub const SIZE: u64 = 640;
    /// Its chunk: the struct rounded up with the header.
    pub const CHUNK: u64 = 0x290;
}

/// glibc ≥ 2.32 stores free-list links "safe-linked": XORed with their own address >> 12.
pub fn reveal(position: u64, stored: u64) -> u64 {
    (position >> 12) ^ stored
}

/// The chunk size glibc uses for an entry of tcache bin or fastbin `index`.
pub fn bin_chunk_size(index: usize) -> u64 {
    MINIMUM_CHUNK + 16 * index as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_chunk_of_an_arena_s_first_heap_is_at_0x8d0() {
        assert_eq!(heap::FIRST_CHUNK, 0x8d0);
        assert_eq!(bin_chunk_size(0), 0x20);
        assert_eq!(bin_chunk_size(63), 0x410);
        assert_eq!(
            reveal(0x5555_5555_9000, 0x5555_5555_92a0 ^ 0x5_5555_5559),
            0x5555_5555_92a0
        );
    }
}
