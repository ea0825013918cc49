//! Unwind tables compiled from a module's CFI ahead of time, compact enough for the hook
//! engine's walker to read inside the target (the "stack deltas" of eBPF profilers): per
//! address range one packed rule (`rule`), the walk they drive (`walk`), the compiler that
//! builds them from `.eh_frame` or `.debug_frame` (`compile`, row by row in `classify`),
//! and the tables of a whole process image (`set`).

mod classify;
pub mod compile;
pub mod rule;
pub mod set;
pub mod walk;

#[cfg(test)]
mod compile_tests;
#[cfg(test)]
mod differential_capture;
#[cfg(test)]
mod differential_programs;
#[cfg(test)]
mod differential_tests;
