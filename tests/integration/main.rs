//! Integration tests: fixtures from `fixtures/` are compiled at test time (dynamic, static,
//! musl), run natively and under memsup, and the JSON reports are checked against exact
//! numbers worked out independently (see the comment at the top of each fixture).

mod common;

mod aligned;
mod alloc_script;
mod attach;
mod attach_input;
mod attach_safety;
mod bad_input;
mod chaos;
mod code_patch;
mod component_reports;
mod components;
mod cxx_exceptions;
mod dispositions;
mod dlopen;
mod engine_allocators;
mod engine_mappings;
mod engines;
mod engines_processes;
mod engines_stress;
mod exit_and_signal;
mod fork_exec;
mod hook_chaos;
mod html_report;
mod ifunc;
mod job_report;
mod leader_exit;
mod longjmp_signal;
mod mappings;
mod module_reads;
mod mpi_both_ways;
mod mpi_jobs;
mod mpi_ucx_patching;
mod output_file;
mod output_template;
mod peak_snapshots;
mod portable_profile;
mod profile_format;
mod progress;
mod realloc_chain;
mod residency;
mod scratch_page;
mod signals;
mod site_metrics;
mod snapshot;
mod stack_tree;
mod stacks;
mod stdin_lines;
mod step_over;
mod threads;
mod time_order;
mod vfork_exec;
