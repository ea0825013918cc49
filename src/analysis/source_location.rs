//! A frame as its source names it: what the sites people read are merged by. A loop the
//! compiler unrolled calls the allocator from several addresses of one line, and a rebuilt
//! program moves every address, but the (function, file, line) chain stays.

use super::frames::Frame;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLocation {
    /// `Frame::name`: an unknown function keeps its address.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The module's file name (its directory may differ between two builds).
    pub module: String,
    /// Without a line, the offset in the function, so that two calls in one function
    /// without DWARF stay apart; 0 with one.
    pub offset: u64,
}

impl SourceLocation {
    pub fn of(frame: &Frame) -> SourceLocation {
        SourceLocation {
            function: frame.name(),
            file: frame.file.clone(),
            line: frame.line,
            module: frame.module_file_name().to_string(),
            offset: if frame.line.is_some() {
                0
            } else {
                frame.offset
            },
        }
    }
}

/// The source chain of a stack, innermost first.
pub fn source_chain(frames: &[Frame]) -> Vec<SourceLocation> {
    frames.iter().map(SourceLocation::of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, line: Option<u32>, address: u64, offset: u64) -> Frame {
        Frame {
            function: function.to_string(),
            file: line.map(|_| "alloc_script.c".to_string()),
            line,
            module: format!("/build{address}/app"),
            address,
            offset,
            inlined: false,
        }
    }

    #[test]
    fn calls_from_one_line_are_one_location_and_without_lines_offsets_tell_them_apart() {
        let unrolled = [
            frame("make", Some(48), 0x1010, 0x10),
            frame("make", Some(48), 0x2020, 0x20),
        ];
        assert_eq!(
            SourceLocation::of(&unrolled[0]),
            SourceLocation::of(&unrolled[1])
        );
        let stripped = [
            frame("make", None, 0x1010, 0x10),
            frame("make", None, 0x1020, 0x20),
        ];
        assert_ne!(
            SourceLocation::of(&stripped[0]),
            SourceLocation::of(&stripped[1])
        );
        let unknown = SourceLocation::of(&frame("", None, 0x1010, 0));
        assert_eq!(unknown.function, "0x1010 (app)");
        assert_eq!(source_chain(&unrolled).len(), 2);
    }
}
