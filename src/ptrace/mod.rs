//! The ptrace engine: launch, attach, the event loop, detach. One thread owns every ptrace call.
pub mod memory;
