//! ELF files of the tracee's modules: symbols, load bias, function+offset lookup.
pub mod elf;
