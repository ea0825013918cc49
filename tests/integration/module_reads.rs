//! Each module file is read from disk once per recording: fixtures/fork_exec.c makes three
//! process images that all map libc and the dynamic linker, and probes, unwinders and the
//! symboliser all use them; memsup counts its reads when MEMSUP_DEBUG_MODULE_READS is set.

use std::collections::BTreeMap;

use crate::common::run::{
    assert_same_behaviour, memsup_run_command, run_command, run_native, split_stderr,
};
use crate::common::*;

const READS_PREFIX: &str = "memsup: module reads: ";

#[test]
fn every_module_file_is_read_once_across_three_images() {
    let fixture = fixture("fork_exec", Variant::Dynamic);
    let child = crate::common::fixture("exit3", Variant::Dynamic);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("run.msup");
    let mut command = memsup_run_command(&profile, &fixture);
    command.arg(&child).env("MEMSUP_DEBUG_MODULE_READS", "1");
    let output = run_command(command, None);
    let child_path = child.to_string_lossy().into_owned();
    let native = run_native(&fixture, &[child_path.as_str()], None);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n\
         fork_exec: child exited with status 3\n"
    );
    assert_same_behaviour(&output, &native);
    let (_, memsup_lines) = split_stderr(&output.stderr);
    let mut reads: BTreeMap<String, u64> = BTreeMap::new();
    for line in memsup_lines
        .iter()
        .filter_map(|l| l.strip_prefix(READS_PREFIX))
    {
        let (count, path) = line.split_once(' ').expect("COUNT PATH");
        let name = path.rsplit('/').next().unwrap().to_string();
        reads.insert(name, count.parse().unwrap());
    }
    let expected: BTreeMap<String, u64> = [
        file_name(&fixture),
        file_name(&child),
        "libc.so.6".to_string(),
        "ld-linux-x86-64.so.2".to_string(),
    ]
    .into_iter()
    .map(|name| (name, 1))
    .collect();
    assert_eq!(reads, expected, "{memsup_lines:#?}");
}
