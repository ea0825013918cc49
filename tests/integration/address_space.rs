//! fixtures/address_space.c: a program that allocates most of what its address-space limit
//! (RLIMIT_AS, `ulimit -v`) allows. The kernel weighs every mapping against the limit,
//! reserved or not, so memsup's hook area keeps to a sixteenth of it: the program gets as
//! much as natively, and its allocations are recorded exactly. (Under a limit too small for
//! the smallest area the int3 engine records it: engines.rs.)

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::engine::suite_engine_is_hooks;
use crate::common::mpi_job::requested_from;
use crate::common::report::{processes, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::*;

/// A limit of 1 GiB: natively the fixture gets over 1,000 blocks of 1 MiB (untouched), and
/// under memsup 64 MiB fewer at most. Before the area kept to its share it took 538 MiB.
const LIMIT: &str = "--as=1073741824";
const BLOCKS: u64 = 900;

/// `program` under address-space limit `limit` (a prlimit option).
fn limited(limit: &str, program: &Path) -> Command {
    let mut command = clean_command("prlimit");
    command.arg(limit).arg(program);
    command
}

/// The fixture's allocations in `image`: every block, and work's three.
fn assert_blocks_recorded(image: &Value, blocks: u64) {
    assert_eq!(
        requested_from(image, "allocate_blocks"),
        (blocks, blocks << 20)
    );
    assert_eq!(requested_from(image, "work"), (3, 6000));
    assert_eq!(image["calls"]["free"], blocks + 3);
}

#[test]
fn under_an_address_space_limit_the_program_gets_as_much_as_natively() {
    if !require_tool("prlimit") {
        return;
    }
    let blocks = BLOCKS.to_string();
    for_each_variant("address_space", |_, fixture| {
        let mut native = limited(LIMIT, fixture);
        native.arg(&blocks);
        let native = run_command(native, None);
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            format!("address_space: {BLOCKS} blocks of 1 MiB\n")
        );
        // memsup itself under the limit too, as in a job script that set it.
        let directory = tempfile::tempdir().expect("a temporary directory");
        let profile = directory.path().join("run.msup");
        let mut supervised = limited(LIMIT, memsup_binary());
        supervised.arg("run").arg("-o").arg(&profile).arg("--");
        supervised.arg(fixture).arg(&blocks);
        let supervised = run_command(supervised, None);
        assert_same_behaviour(&supervised, &native);
        let report = report_json(&profile);
        let image = &processes(&report)[0];
        assert_blocks_recorded(image, BLOCKS);
        assert_eq!(warnings(image), Vec::<String>::new());
        let engine = if suite_engine_is_hooks() {
            "hooks"
        } else {
            "int3"
        };
        assert_eq!(image["engine"], engine);
    });
}
