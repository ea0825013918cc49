//! Pure parsing of /proc files (and memsup's own resource usage); no ptrace here.
pub mod auxv;
pub mod environ;
pub mod hugetlb;
pub mod limits;
pub mod maps;
pub mod own_usage;
pub mod pagemap;
pub mod smaps;
pub mod status;
pub mod task;
