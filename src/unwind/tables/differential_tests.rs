//! The differential test: on thousands of stacks copied at malloc's entry in real programs
//! (python3, gcc's cc1, a C++ fixture), the walk over compiled tables must give exactly the
//! stack the recording's unwinder gives: same frames, same truncation, same signal frames.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use super::differential_capture::{capture_mallocs, Run};
use super::differential_programs::{CXX_FIXTURE, C_INPUT, PYTHON_WORKLOAD};
use super::rule::{CfaRegister, Kind, ModuleTable, Rule};
use super::set::{table_set, MappedFile, ProcessTables, TableCache};
use super::walk::{TableModule, TableSet};
use crate::module::loaded::LoadedModule;
use crate::module::ModuleStore;
use crate::unwind::{Stack, StackSnapshot, Unwinder};

/// Both walkers for one set of mapped modules.
struct Walkers {
    unwinder: Unwinder,
    tables: ProcessTables,
    /// The negative control: the tables with every rsp-based CFA 8 bytes too high.
    corrupted: TableSet,
}

#[derive(Default)]
struct Comparison {
    store: Arc<ModuleStore>,
    compiled: TableCache,
    walkers: HashMap<Vec<(String, u64, u64)>, Walkers>,
    stacks: u64,
    frames: u64,
    truncated: u64,
    /// Truncated stacks without a signal frame: a signal interrupting code without CFI at
    /// a prologue or epilogue may honestly end its stack early, a plain call chain not.
    truncated_without_signal: u64,
    with_signal_frames: u64,
    /// Stacks of threads other than the main one (their walks end at clone3).
    other_threads: u64,
    deepest: usize,
    /// How often each rule kind moved a walk on (or ended it), by `Kind` number.
    kinds_used: [u64; 7],
    mismatches: Vec<String>,
    control_mismatches: u64,
}

/// `table` with 8 more bytes on every rsp-based CFA.
fn corrupt(table: &ModuleTable) -> ModuleTable {
    let rules = table
        .rules
        .iter()
        .map(|&rule| match rule.kind() {
            Kind::Sp => Rule::cfa(
                Kind::Sp,
                CfaRegister::Rsp,
                rule.cfa_offset() + 8,
                rule.rbp_offset().map(|offset| offset - 8),
            ),
            _ => rule,
        })
        .collect();
    ModuleTable {
        starts: table.starts.clone(),
        rules,
    }
}

impl Comparison {
    fn walkers(&mut self, modules: &[LoadedModule]) -> &Walkers {
        let key: Vec<(String, u64, u64)> = modules
            .iter()
            .map(|module| (module.path.clone(), module.start, module.end))
            .collect();
        let (store, compiled) = (&self.store, &mut self.compiled);
        self.walkers.entry(key).or_insert_with(|| {
            let mut unwinder = Unwinder::with_module_store(Arc::clone(store));
            let mut mapped = Vec::new();
            for module in modules {
                let Ok(file) = store.get(&module.path) else {
                    continue;
                };
                let Ok(elf) = file.elf() else {
                    continue; // not ELF
                };
                let bias = module.load_bias(elf);
                unwinder
                    .add_module(&module.path, module.inode, module.start, module.end, bias)
                    .unwrap();
                mapped.push(MappedFile {
                    path: module.path.clone(),
                    inode: module.inode,
                    bias,
                });
            }
            let tables = table_set(store, compiled, &mapped);
            for outcome in &tables.modules {
                assert!(outcome.compiled.is_ok(), "{outcome:?}");
            }
            let corrupted = TableSet::new(
                tables
                    .set
                    .segments()
                    .iter()
                    .map(|segment| TableModule {
                        table: Arc::new(corrupt(&segment.table)),
                        ..segment.clone()
                    })
                    .collect(),
            );
            Walkers {
                unwinder,
                tables,
                corrupted,
            }
        })
    }

    fn compare(&mut self, snapshot: &StackSnapshot, modules: &[LoadedModule]) {
        let walkers = self.walkers(modules);
        let expected = walkers.unwinder.unwind(snapshot, &mut |_| None);
        let found = walkers.tables.set.walk(snapshot);
        let same = expected.frames == found.frames
            && expected.truncated == found.truncated
            && expected.signal_frames == found.signal_frames;
        let description = (!same).then(|| describe(walkers, &expected, &found));
        let control = walkers.corrupted.walk(snapshot);
        let mut kinds_used = [0u64; 7];
        for (index, &frame) in found.frames.iter().enumerate() {
            // Return addresses are looked up one below; an interrupted instruction exactly.
            let interrupted = index > 0 && found.signal_frames.contains(&(index - 1));
            let lookup = if interrupted { frame } else { frame - 1 };
            if let Some(segment) = walkers.tables.set.segment_of(frame) {
                let kind = segment
                    .table
                    .lookup(lookup.wrapping_sub(segment.bias))
                    .kind();
                kinds_used[kind as usize] += 1;
            }
        }
        for (total, used) in self.kinds_used.iter_mut().zip(kinds_used) {
            *total += used;
        }
        self.control_mismatches += u64::from(control.frames != expected.frames);
        self.stacks += 1;
        self.frames += expected.frames.len() as u64;
        self.truncated += u64::from(expected.truncated);
        self.truncated_without_signal +=
            u64::from(expected.truncated && expected.signal_frames.is_empty());
        self.with_signal_frames += u64::from(!expected.signal_frames.is_empty());
        self.deepest = self.deepest.max(expected.frames.len());
        self.mismatches.extend(description);
    }

    fn summary(&self, program: &str, run: &Run) -> String {
        format!(
            "{program}: {} malloc calls, {} stacks compared, {} frames, {} truncated ({} without \
             a signal frame), {} with \
             signal frames, {} of other threads, deepest {}, {} mismatches; rules used (NoFde, FramePointer, Sp, \
             General, Plt, End, Unsupported) {:?}; negative control: {} mismatches",
            run.malloc_calls,
            self.stacks,
            self.frames,
            self.truncated,
            self.truncated_without_signal,
            self.with_signal_frames,
            self.other_threads,
            self.deepest,
            self.mismatches.len(),
            self.kinds_used,
            self.control_mismatches
        )
    }
}

/// Both stacks, frame by frame, as module + offset with the table's rule there.
fn describe(walkers: &Walkers, expected: &Stack, found: &Stack) -> String {
    let mut text = format!(
        "unwinder truncated {} signal frames {:?}; tables truncated {} signal frames {:?}\n",
        expected.truncated, expected.signal_frames, found.truncated, found.signal_frames
    );
    let length = expected.frames.len().max(found.frames.len());
    for index in 0..length {
        let show = |frames: &[u64]| -> String {
            let Some(&frame) = frames.get(index) else {
                return "-".to_string();
            };
            let Some((path, bias)) = walkers.unwinder.module_at(frame) else {
                return format!("{frame:#x}");
            };
            let name = Path::new(path).file_name().unwrap_or_default();
            let segment = walkers.tables.set.segment_of(frame);
            let rule = segment.map(|s| s.table.lookup(frame.wrapping_sub(s.bias) - 1));
            format!(
                "{}+{:#x} {:?}",
                name.to_string_lossy(),
                frame - bias,
                rule.map(|rule| rule.kind())
            )
        };
        let _ = writeln!(
            text,
            "  {index:3} {:40} {}",
            show(&expected.frames),
            show(&found.frames)
        );
    }
    text
}

fn check(program: &str, command: Command, every: u64, minimum_stacks: u64) -> Comparison {
    let mut comparison = Comparison::default();
    let store = Arc::clone(&comparison.store);
    let run = capture_mallocs(command, &store, every, &mut |snapshot, modules, thread| {
        comparison.other_threads += u64::from(thread);
        comparison.compare(snapshot, modules)
    });
    let summary = comparison.summary(program, &run);
    eprintln!("{summary}");
    assert_eq!(run.exit_status, Some(0), "{summary}");
    assert!(
        comparison.mismatches.is_empty(),
        "{summary}\n{}",
        comparison.mismatches[..comparison.mismatches.len().min(5)].join("\n")
    );
    assert!(comparison.stacks >= minimum_stacks, "{summary}");
    // Nearly every stack reaches its outermost frame: the comparison is not of stubs.
    assert!(
        comparison.truncated_without_signal * 100 <= comparison.stacks,
        "{summary}"
    );
    // The comparison does catch wrong tables.
    assert!(
        comparison.control_mismatches * 2 > comparison.stacks,
        "{summary}"
    );
    comparison
}

#[test]
fn python_stacks_equal_the_unwinders() {
    let mut command = Command::new("/usr/bin/python3");
    command.args(["-S", "-c", PYTHON_WORKLOAD]);
    check("python3", command, 3, 2000);
}

#[test]
fn cc1_stacks_equal_the_unwinders() {
    let directory = tempfile::tempdir().unwrap();
    let source = directory.path().join("input.c");
    std::fs::write(&source, C_INPUT).unwrap();
    let cc1 = Command::new("gcc")
        .arg("-print-prog-name=cc1")
        .output()
        .unwrap();
    let cc1 = String::from_utf8(cc1.stdout).unwrap().trim().to_string();
    let mut command = Command::new(cc1);
    command
        .args(["-quiet", "-O2", "-o"])
        .arg(directory.path().join("input.s"))
        .arg(&source);
    check("cc1", command, 40, 2000);
}

/// Builds the C++ fixture with `flags` and compares its stacks.
fn check_cxx_fixture(program_name: &str, flags: &[&str]) -> Comparison {
    let directory = tempfile::tempdir().unwrap();
    let source = directory.path().join("fixture.cc");
    std::fs::write(&source, CXX_FIXTURE).unwrap();
    let program = directory.path().join("fixture");
    let status = Command::new("g++")
        .args(["-O2", "-pthread", "-o"])
        .arg(&program)
        .arg(&source)
        .args(flags)
        .status()
        .unwrap();
    assert!(status.success());
    let comparison = check(program_name, Command::new(&program), 1, 2000);
    // Signal handlers allocated, on raise() and on timer signals; 3 threads allocated.
    assert!(comparison.with_signal_frames > 100);
    assert!(comparison.other_threads > 1000);
    comparison
}

#[test]
fn cxx_fixture_stacks_equal_the_unwinders() {
    check_cxx_fixture("C++ fixture", &[]);
}

/// The fixture's own code without CFI: walked by its frame pointers where no FDE covers
/// an address, and at an interrupted instruction by the return address at rsp.
#[test]
fn cxx_fixture_without_cfi_stacks_equal_the_unwinders() {
    let comparison = check_cxx_fixture(
        "C++ fixture without CFI",
        &[
            "-fno-omit-frame-pointer",
            "-fno-exceptions",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    );
    assert!(comparison.kinds_used[Kind::NoFde as usize] > 10_000);
}
