//! The ptrace engine: launch, attach, the event loop, detach. One thread owns every ptrace call.
pub mod attach;
mod attach_census;
mod bpf;
pub mod capture;
pub mod detach;
mod exit_snapshot;
#[cfg(test)]
mod fake_tracee;
pub mod hits;
pub mod hook_stacks;
pub mod hooks;
pub mod inject;
mod inside;
pub mod launch;
mod leave_hooks;
mod leftovers;
pub mod lifecycle;
pub mod memory;
mod memory_lock;
pub mod modules;
pub mod mpi;
mod mpi_hooks;
mod padding;
mod patch_clearance;
pub mod regs;
mod rendezvous;
pub mod roles;
pub mod seccomp;
mod seccomp_judge;
pub mod signals;
pub mod snapshot;
mod start_snapshot;
pub mod state;
pub mod stop;
mod stub;
mod supervised;
mod thread_stack;
pub mod tracee;
pub mod tracer;
mod wake_watch;

#[cfg(test)]
mod tests;
