//! Symbolised frames: each return address of a stack expanded into the functions inlined at
//! it, from the `Symbol` records of its process image.

use std::collections::HashMap;

use crate::symbols::demangle::demangle;
use crate::trace::format::SourceFrame as SymbolFrame;
use crate::trace::format::TRUNCATED_FRAME;

/// The name reports give the outermost frame of a stack whose walk stopped early.
pub const TRUNCATED_NAME: &str = "[truncated]";

/// One function of a stack: a real one, or one inlined into the frame after it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Frame {
    /// Demangled; "" when unknown; `[truncated]` for the marker of a walk that stopped early.
    pub function: String,
    /// Source position from DWARF: of the call in this function.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Path of the module; "" when unknown.
    pub module: String,
    /// The runtime return address the frame was expanded from (shared by its inlined frames).
    pub address: u64,
    /// `address` minus the start of the ELF symbol containing it (what a report shows when
    /// DWARF gives no file:line); 0 when unknown.
    pub offset: u64,
    /// Inlined into the next (outer) frame of the stack.
    pub inlined: bool,
}

impl Frame {
    /// The function, or `0xADDRESS (module file name)` when it is unknown: the name flame
    /// graphs and reports show.
    pub fn name(&self) -> String {
        if !self.function.is_empty() {
            return self.function.clone();
        }
        match self.module_file_name() {
            "" => format!("{:#x}", self.address),
            module => format!("{:#x} ({module})", self.address),
        }
    }

    /// The last component of the module path.
    pub fn module_file_name(&self) -> &str {
        crate::platform::libraries::file_name(&self.module)
    }
}

/// What a `Symbol` record says about one address.
#[derive(Debug, Clone)]
pub(super) struct AddressSymbol {
    /// The ELF symbol containing the address, as the file spells it ("" when none).
    pub function: String,
    pub offset: u64,
    pub module: String,
    /// Innermost inlined function first; empty without DWARF.
    pub frames: Vec<SymbolFrame>,
}

/// The symbols of one process image, by runtime address.
pub(super) type ImageSymbols = HashMap<u64, AddressSymbol>;

/// The frames of one return address, innermost inlined function first: the DWARF chain when
/// there is one, else the ELF symbol, else a nameless frame.
pub(super) fn address_frames(address: u64, symbols: &ImageSymbols) -> Vec<Frame> {
    let frame = |function: String, module: &str, offset| Frame {
        function,
        file: None,
        line: None,
        module: module.to_string(),
        address,
        offset,
        inlined: false,
    };
    if address == TRUNCATED_FRAME {
        return vec![frame(TRUNCATED_NAME.to_string(), "", 0)];
    }
    let Some(symbol) = symbols.get(&address) else {
        return vec![frame(String::new(), "", 0)];
    };
    if symbol.frames.is_empty() {
        return vec![frame(
            demangle(&symbol.function),
            &symbol.module,
            symbol.offset,
        )];
    }
    symbol
        .frames
        .iter()
        .map(|inline| Frame {
            function: inline.function.clone(),
            file: inline.file.clone(),
            line: inline.line,
            module: symbol.module.clone(),
            address,
            offset: symbol.offset,
            inlined: inline.inlined,
        })
        .collect()
}
