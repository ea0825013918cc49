//! fixtures/address_space.c under resource limits that batch systems and job scripts set
//! (`ulimit -v`, `ulimit -f`). The program behaves as natively and its allocations are
//! recorded exactly:
//! - under an address-space limit (RLIMIT_AS), which the kernel weighs every mapping
//!   against, reserved or not, memsup's hook area keeps to a sixteenth of it, and the
//!   program gets as much as natively (under a limit too small for the smallest area the
//!   int3 engine records it: engines.rs);
//! - under a file-size limit (RLIMIT_FSIZE) the hook area's memfd is sized by memsup, not
//!   by the program, which would get SIGXFSZ; the area keeps to memsup's own limit.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::engine::{least_area_mib, suite_engine, suite_engine_is_hooks};
use crate::common::mpi_job::requested_from;
use crate::common::report::{process_image, processes, report_json, warnings};
use crate::common::run::{
    assert_same_behaviour, clean_command, memsup_binary, run_command, split_stderr,
};
use crate::common::*;

/// A limit of 1 GiB: natively the fixture gets over 1,000 blocks of 1 MiB (untouched), and
/// under memsup 64 MiB fewer at most. Before the area kept to its share it took 538 MiB.
const ADDRESS_SPACE: &str = "--as=1073741824";
const BLOCKS: u64 = 900;

/// `program` under `limit` (a prlimit option).
fn limited(limit: &str, program: &Path) -> Command {
    let mut command = clean_command("prlimit");
    command.arg(limit).arg(program);
    command
}

/// The fixture run natively under `limit` with `blocks`.
fn native_run(limit: &str, fixture: &Path, blocks: u64) -> Output {
    let mut native = limited(limit, fixture);
    native.arg(blocks.to_string());
    let native = run_command(native, None);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        format!("address_space: {blocks} blocks of 1 MiB\n")
    );
    native
}

/// `memsup run OPTIONS -o PROFILE -- PROGRAM`, memsup started by `memsup` (under a limit
/// or not), the profile in `directory`: memsup's output and the profile's path.
fn run_recording(
    mut memsup: Command,
    options: &[&str],
    program: &[&OsStr],
    directory: &Path,
) -> (Output, PathBuf) {
    let profile = directory.join("run.msup");
    memsup.arg("run").args(options).arg("-o").arg(&profile);
    memsup.arg("--").args(program);
    (run_command(memsup, None), profile)
}

/// memsup under `limit` (as in a job script that set it) recording the fixture with
/// `blocks`; it behaves as `native`. The report's JSON.
fn record_under(limit: &str, fixture: &Path, blocks: u64, native: &Output) -> Value {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let blocks = blocks.to_string();
    let program = [fixture.as_os_str(), blocks.as_ref()];
    let memsup = limited(limit, memsup_binary());
    let (supervised, profile) = run_recording(memsup, &[], &program, directory.path());
    assert_same_behaviour(&supervised, native);
    report_json(&profile)
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
    for_each_variant("address_space", |_, fixture| {
        let native = native_run(ADDRESS_SPACE, fixture, BLOCKS);
        let report = record_under(ADDRESS_SPACE, fixture, BLOCKS, &native);
        let image = &processes(&report)[0];
        assert_blocks_recorded(image, BLOCKS);
        assert_eq!(warnings(image), Vec::<String>::new());
        assert_eq!(image["engine"], suite_engine());
    });
}

#[test]
fn a_program_under_a_small_file_size_limit_is_not_sent_sigxfsz() {
    if !require_tool("prlimit") {
        return;
    }
    // 1 MiB: far below the hook area's size. The limit is the program's alone (prlimit runs
    // under memsup and execs it); before memsup sized the area itself, the program's own
    // ftruncate of it failed and sent it SIGXFSZ, which killed it.
    let limit = "--fsize=1048576";
    for_each_variant("address_space", |_, fixture| {
        let native = native_run(limit, fixture, 10);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let program = [
            "prlimit".as_ref(),
            limit.as_ref(),
            fixture.as_os_str(),
            "10".as_ref(),
        ];
        let memsup = clean_command(memsup_binary());
        let (supervised, profile) = run_recording(memsup, &[], &program, directory.path());
        assert_same_behaviour(&supervised, &native);
        let report = report_json(&profile);
        let image = process_image(&report, &file_name(fixture), "launch");
        assert_blocks_recorded(image, 10);
        assert_eq!(warnings(image), Vec::<String>::new());
        assert_eq!(image["engine"], suite_engine());
    });
}

#[test]
fn under_its_own_file_size_limit_memsup_keeps_the_hook_area_within_it() {
    if !require_tool("prlimit") {
        return;
    }
    // 48 MiB: the area shrinks to fit. 16 MiB: less than the smallest area, which memsup
    // does not try to make (it would get SIGXFSZ itself); the int3 engine records instead.
    for_each_variant("address_space", |_, fixture| {
        let fits = "--fsize=50331648";
        let native = native_run(fits, fixture, 10);
        let report = record_under(fits, fixture, 10, &native);
        let image = &processes(&report)[0];
        assert_blocks_recorded(image, 10);
        assert_eq!(warnings(image), Vec::<String>::new());
        assert_eq!(image["engine"], suite_engine());

        let too_small = "--fsize=16777216";
        let native = native_run(too_small, fixture, 10);
        let report = record_under(too_small, fixture, 10, &native);
        let image = &processes(&report)[0];
        assert_blocks_recorded(image, 10);
        assert_eq!(image["engine"], "int3");
        let expected = match suite_engine_is_hooks() {
            true => vec![format!(
                "placing hooks failed: memsup's own file size limit (RLIMIT_FSIZE) is 16 MiB, and the hook area, a file in memory, needs {} MiB: its allocator calls stop it at int3 breakpoints instead, a stop each",
                least_area_mib()
            )],
            false => Vec::new(),
        };
        assert_eq!(warnings(image), expected);
    });
}

#[test]
fn a_profile_that_outgrows_memsup_s_file_size_limit_ends_memsup_with_an_error_not_the_program() {
    if !require_tool("prlimit") {
        return;
    }
    // 1 KiB: the profile's header (a few hundred bytes, written before memsup launches
    // anything) fits, the profile of 10 blocks (over 1.5 KiB) does not.
    let limit = "--fsize=1024";
    for_each_variant("address_space", |_, fixture| {
        let native = native_run(limit, fixture, 10);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let program = [fixture.as_os_str(), "10".as_ref()];
        let memsup = limited(limit, memsup_binary());
        let options = ["-q", "--engine", "int3"];
        let (supervised, profile) = run_recording(memsup, &options, &program, directory.path());
        // The program ran to its end as natively; memsup, whose writes failed (EFBIG, not
        // SIGXFSZ, which would have killed it and the program with it), says so and exits
        // with its output error.
        let (program_stderr, memsup_lines) = split_stderr(&supervised.stderr);
        assert_eq!(supervised.stdout, native.stdout);
        assert_eq!(program_stderr.as_bytes(), native.stderr);
        assert_eq!(
            memsup_lines,
            [format!(
                "memsup: error: {}: File too large (os error 27)",
                profile.display()
            )]
        );
        assert_eq!(supervised.status.code(), Some(66));
        assert_eq!(
            std::fs::metadata(&profile).expect("the profile").len(),
            1024
        );
    });
}
