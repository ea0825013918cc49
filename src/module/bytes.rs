//! Parts of a module file's bytes that share the one copy read from disk.

use std::ops::{Deref, Range};
use std::sync::Arc;

/// A range of a file's bytes. Cloning shares the bytes.
#[derive(Debug, Clone)]
pub struct FileBytes {
    bytes: Arc<[u8]>,
    range: Range<usize>,
}

impl FileBytes {
    /// All of `bytes`.
    pub fn whole(bytes: Arc<[u8]>) -> FileBytes {
        let range = 0..bytes.len();
        FileBytes { bytes, range }
    }

    /// `part` as a range of `bytes`, when it is a slice of them; otherwise (data a parser
    /// made, such as an inflated section) a copy of it.
    pub fn within(bytes: &Arc<[u8]>, part: &[u8]) -> FileBytes {
        match offset_in(bytes, part) {
            Some(start) => FileBytes {
                bytes: Arc::clone(bytes),
                range: start..start + part.len(),
            },
            None => FileBytes::whole(Arc::from(part)),
        }
    }
}

impl Default for FileBytes {
    fn default() -> FileBytes {
        FileBytes::whole(Arc::from(&[][..]))
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[self.range.clone()]
    }
}

/// Where `part` starts in `whole`, if it lies entirely inside it.
pub fn offset_in(whole: &[u8], part: &[u8]) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (start.checked_add(part.len())? <= whole.len()).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_of_the_file_share_its_bytes_and_others_are_copied() {
        let bytes: Arc<[u8]> = Arc::from(&b"0123456789"[..]);
        let inside = FileBytes::within(&bytes, &bytes[3..7]);
        assert_eq!(&*inside, b"3456");
        assert_eq!(Arc::strong_count(&bytes), 2);
        let elsewhere = FileBytes::within(&bytes, b"3456");
        assert_eq!(&*elsewhere, b"3456");
        assert_eq!(Arc::strong_count(&bytes), 2);
        assert_eq!(offset_in(&bytes, &bytes[10..]), Some(10));
        assert_eq!(offset_in(&bytes[2..], &bytes[..4]), None);
    }
}
