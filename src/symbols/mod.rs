//! ELF files of the tracee's modules: symbols, load bias, function+offset lookup; and the
//! symboliser that names call sites with DWARF (inlined frames, file:line), separate debug
//! files and demangling. The files themselves are read by `module::ModuleStore`.
pub mod debug_files;
pub mod demangle;
pub mod dwarf;
pub mod elf;
pub mod functions;
pub mod symbolizer;
#[cfg(test)]
mod test_programs;

pub use symbolizer::{SymbolFrame, Symbolizer};
