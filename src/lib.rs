//! memsup: an external memory supervisor for Linux programs.
//!
//! It launches or attaches to programs with ptrace, plants int3 probes on allocator entry
//! points, records every heap and mapping event to a profile file, and reports on it. The
//! sources (`ptrace`, `sampler`) send `events`; `interpret` turns them into the records of
//! the profile (`trace`); `analysis` and `report` read it.
//! Nothing of memsup's own is loaded into the target beyond one scratch page of code.

pub mod analysis;
pub mod breakpoints;
pub mod census;
pub mod cli;
pub mod error;
pub mod events;
pub mod failure;
pub mod hooks;
pub mod interpret;
pub mod module;
pub mod platform;
pub mod proc;
pub mod ptrace;
pub mod record;
pub mod report;
pub mod sampler;
pub mod symbols;
pub mod trace;
pub mod unwind;
