//! fixtures/non_dumpable.c: a program that makes itself non-dumpable, recorded by an
//! unprivileged memsup (user nobody). From then on the kernel refuses such a memsup
//! process_vm_readv and the program's /proc files: memsup reads the memory through the
//! mem file it opened before, records every allocator call exactly, and says once what it
//! could not read.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::common::mpi_job::requested_from;
use crate::common::report::{processes, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::*;

/// `program` run as user nobody.
fn as_nobody(program: &Path) -> Command {
    let mut command = clean_command("setpriv");
    command
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(program);
    command
}

/// Whether user nobody may run `program` (every directory above it searchable).
fn nobody_can_run(program: &Path) -> bool {
    let mut check = as_nobody(Path::new("test"));
    check.arg("-x").arg(program);
    check.status().is_ok_and(|status| status.success())
}

#[test]
fn a_program_that_makes_itself_non_dumpable_is_recorded_exactly_and_says_what_is_missing() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("running memsup as user nobody needs root");
        return;
    }
    if !require_tool("setpriv") {
        return;
    }
    if !nobody_can_run(memsup_binary()) {
        record_skip("user nobody cannot reach memsup's binary");
        return;
    }
    for_each_variant("non_dumpable", |_, fixture| {
        if !nobody_can_run(fixture) {
            record_skip("user nobody cannot reach the fixtures");
            return;
        }
        let native = run_command(as_nobody(fixture), None);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let writable = std::fs::Permissions::from_mode(0o777);
        std::fs::set_permissions(directory.path(), writable).expect("a directory for nobody");
        let profile = directory.path().join("run.msup");
        let mut supervised = as_nobody(memsup_binary());
        supervised
            .arg("run")
            .arg("-o")
            .arg(&profile)
            .arg("--")
            .arg(fixture);
        let supervised = run_command(supervised, None);
        assert_same_behaviour(&supervised, &native);
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            "non_dumpable: dumpable 0\n"
        );
        let report = report_json(&profile);
        let image = &processes(&report)[0];
        assert_eq!(requested_from(image, "work"), (3, 6000), "{image:#}");
        let work_frees: u64 = image["sites"]
            .as_array()
            .expect("sites")
            .iter()
            .filter(|site| site["stack"][0]["function"] == "work")
            .map(|site| site["freed_blocks"].as_u64().expect("a count"))
            .sum();
        assert_eq!(work_frees, 3);
        let pid = &image["pid"];
        assert_eq!(
            warnings(image),
            [format!(
                "/proc/{pid}/smaps could not be read (Permission denied (os error 13)): the program made itself non-dumpable (prctl PR_SET_DUMPABLE, or a change of user or group), and memsup, without CAP_SYS_PTRACE, reads none of its /proc files from then on: its residency stops at the last reading before that, and libraries it loads after are not probed"
            )]
        );
    });
}
