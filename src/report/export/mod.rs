//! Files for other tools' viewers: pprof's protobuf profile and speedscope's JSON.
pub mod pprof;
mod pprof_tables;
#[cfg(test)]
mod pprof_tests;
pub mod profile_proto;
pub mod speedscope;
