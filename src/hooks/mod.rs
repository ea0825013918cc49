//! The hook engine: allocator entries patched with a `jmp` to code memsup injects, which
//! records each call into rings shared with memsup and runs the relocated prologue, so the
//! program takes no ptrace stop per allocation. A second event source beside the tracer.

pub mod budget;
pub mod clock;
pub mod code;
pub mod code_mpi;
mod code_record;
mod code_walk;
pub mod drain;
pub mod inject;
pub mod layout;
mod mpi_fold;
pub mod mpi_slots;
pub mod placement;
pub mod relocate;
pub mod ring;
pub mod stack_section;
mod switch;
pub mod trailer;

#[cfg(test)]
mod code_map_tests;
#[cfg(test)]
mod code_mpi_tests;
#[cfg(test)]
mod code_tests;
#[cfg(test)]
mod code_walk_memory_tests;
#[cfg(test)]
mod code_walk_tests;
#[cfg(test)]
mod ring_tests;
#[cfg(test)]
mod test_support;
