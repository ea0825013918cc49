//! Pure parsing of /proc files; no ptrace here.
pub mod auxv;
pub mod environ;
pub mod maps;
pub mod smaps;
pub mod status;
pub mod task;
