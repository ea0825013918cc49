//! Probes: int3 breakpoints on function entries, how each first instruction is stepped over
//! without a single-step, and return trampolines.
pub mod emulate;
pub mod outofline;
pub mod probes;
pub mod returns;
pub mod table;
#[cfg(test)]
pub(crate) mod test_pages;
#[cfg(test)]
pub(crate) mod test_programs;
