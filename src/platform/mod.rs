//! Knowledge of the platform's libraries in one place: which module files are the C library,
//! the dynamic linker, a language runtime or MPI, and the allocator functions under each of
//! their names. Probes, the component classifier, the skip defaults and the HTML colouring
//! read it from here.
pub mod allocators;
pub mod libraries;
pub mod mpi;
pub mod mpi_roles;
pub mod system_calls;
