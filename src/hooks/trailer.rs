//! What a hook code page says about itself, at its end, so that a later memsup can undo it
//! when the memsup that placed it died (SIGKILL, OOM) or left it mapped at detach: the
//! page's range, its ring area, and every entry it patched with the bytes that were there.
//! The page is written, trailer included, before any entry is patched.
//!
//! Layout, ending at the page's end: entries (32 bytes each: address u64, length u8, the
//! original bytes), then a 40-byte footer: count, base, length, area, `PAGE_MAGIC`.

/// `MEMSUPCP`, little-endian: the last 8 bytes of a hook code page.
pub const PAGE_MAGIC: u64 = u64::from_le_bytes(*b"MEMSUPCP");
const FOOTER_BYTES: usize = 40;
const ENTRY_BYTES: usize = 32;
/// Original bytes an entry can keep (a patch is at most a 5-byte jump over whole
/// instructions, so 19 bytes).
const MAX_ORIGINAL_BYTES: usize = ENTRY_BYTES - 9;

/// A patched entry and the bytes that were there before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedEntry {
    pub address: u64,
    pub original: Vec<u8>,
}

/// A hook code page's own description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trailer {
    pub base: u64,
    pub length: u64,
    /// The ring area its hooks write to.
    pub area: u64,
    pub entries: Vec<SavedEntry>,
}

/// Bytes a trailer of `count` entries takes.
pub fn trailer_bytes(count: usize) -> usize {
    FOOTER_BYTES + count * ENTRY_BYTES
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

impl Trailer {
    /// The trailer's bytes, to be written so that they end where the page ends.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(trailer_bytes(self.entries.len()));
        for entry in &self.entries {
            assert!(
                entry.original.len() <= MAX_ORIGINAL_BYTES,
                "a patch of {} bytes",
                entry.original.len()
            );
            let mut slot = [0u8; ENTRY_BYTES];
            slot[..8].copy_from_slice(&entry.address.to_le_bytes());
            slot[8] = entry.original.len() as u8;
            slot[9..9 + entry.original.len()].copy_from_slice(&entry.original);
            bytes.extend_from_slice(&slot);
        }
        for word in [
            self.entries.len() as u64,
            self.base,
            self.length,
            self.area,
            PAGE_MAGIC,
        ] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// The trailer of a hook page that ends at `end`, from `tail`, the bytes just before
    /// `end` (any length); None when they hold no consistent trailer.
    pub fn decode(tail: &[u8], end: u64) -> Option<Trailer> {
        let footer = tail.len().checked_sub(FOOTER_BYTES)?;
        if u64_at(tail, footer + 32) != PAGE_MAGIC {
            return None;
        }
        let count = u64_at(tail, footer);
        let base = u64_at(tail, footer + 8);
        let length = u64_at(tail, footer + 16);
        let area = u64_at(tail, footer + 24);
        let fits = count <= (tail.len() / ENTRY_BYTES) as u64
            && trailer_bytes(count as usize) as u64 <= length.min(tail.len() as u64);
        if base.checked_add(length) != Some(end) || !fits {
            return None;
        }
        let count = count as usize;
        let first = footer - count * ENTRY_BYTES;
        let entries = tail[first..footer]
            .chunks_exact(ENTRY_BYTES)
            .map(|slot| {
                let length = (slot[8] as usize).min(MAX_ORIGINAL_BYTES);
                SavedEntry {
                    address: u64_at(slot, 0),
                    original: slot[9..9 + length].to_vec(),
                }
            })
            .collect();
        Some(Trailer {
            base,
            length,
            area,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailer() -> Trailer {
        Trailer {
            base: 0x7f00_0000_0000,
            length: 0x2000,
            area: 0x7f00_1000_0000,
            entries: vec![
                SavedEntry {
                    address: 0x7f00_2000_0010,
                    original: vec![0x41, 0x55, 0x41, 0x54, 0x55],
                },
                SavedEntry {
                    address: 0x7f00_2000_0400,
                    original: (1..=19).collect(),
                },
            ],
        }
    }

    #[test]
    fn a_trailer_read_back_from_the_end_of_its_page_is_the_one_written() {
        let written = trailer();
        let mut page = vec![0xccu8; written.length as usize];
        let bytes = written.encode();
        assert_eq!(bytes.len(), trailer_bytes(2));
        let at = page.len() - bytes.len();
        page[at..].copy_from_slice(&bytes);
        let end = written.base + written.length;
        assert_eq!(Trailer::decode(&page, end), Some(written.clone()));
        // The last 4 KiB alone are enough.
        assert_eq!(Trailer::decode(&page[4096..], end), Some(written));
    }

    #[test]
    fn bytes_that_are_no_trailer_or_a_trailer_of_another_end_are_refused() {
        let written = trailer();
        let end = written.base + written.length;
        assert_eq!(Trailer::decode(&[0xcc; 4096], end), None);
        assert_eq!(Trailer::decode(&[0; 16], end), None);
        let bytes = written.encode();
        // The same trailer seen at another page's end (a page moved or merged).
        assert_eq!(Trailer::decode(&bytes, end + 4096), None);
        // A count larger than what precedes the footer.
        let mut inflated = bytes.clone();
        inflated[64..72].copy_from_slice(&1000u64.to_le_bytes());
        assert_eq!(Trailer::decode(&inflated, end), None);
    }
}
