//! A program that sees files of its own at the paths where memsup sees others (a container,
//! a chroot, a bind mount in a mount namespace of its own) behaves as without memsup. fixtures/dlopen_main.c loads
//! ./dlopen_arena.so from a directory where, in the program's mount namespace only,
//! dlopen_arena_moved.so (the same allocator after a function of its own, at other offsets)
//! is mounted over it. The file at memsup's path is not the one the program mapped (its
//! device and inode), so memsup probes only where the code in memory is that file's: here
//! nowhere, and it says so. Before, it placed the probes at that file's offsets, inside the
//! other function: the program computed wrong results under the hook engine and crashed
//! under int3.

use std::process::Command;

use crate::common::mpi_job::requested_from;
use crate::common::report::{process_image, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::*;

#[test]
fn a_library_the_program_sees_through_its_own_mount_namespace_is_not_patched_as_memsup_s() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("a mount namespace of the program's own needs root");
        return;
    }
    if !require_tool("gcc") || !require_tool("unshare") || !require_tool("mount") {
        return;
    }
    let original = shared_object("dlopen_arena");
    let moved = shared_object("dlopen_arena_moved");
    let fixture = fixture("dlopen_main", Variant::Dynamic);
    // A short directory: dlopen_main.c's numbers hold below 128 bytes of working directory.
    let directory = tempfile::tempdir().expect("a temporary directory");
    let library = directory.path().join("dlopen_arena.so");
    std::fs::copy(&original, &library).expect("copying the library");
    let script = format!(
        "mount --bind {} {} && exec {} {}",
        moved.display(),
        library.display(),
        fixture.display(),
        library.display()
    );
    let in_own_namespace = |mut command: Command| {
        command.args(["unshare", "--mount", "--propagation", "private", "sh", "-c"]);
        command.arg(&script);
        command
    };
    let native = run_command(in_own_namespace(clean_command("env")), None);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "dlopen_main: arena used 1120 bytes, 1 block live\ndlopen_main: done, leaking 2222 bytes\n"
    );
    let profile = directory.path().join("run.msup");
    let mut supervised = clean_command(memsup_binary());
    supervised
        .arg("run")
        .arg("-o")
        .arg(&profile)
        .args(["--", "env"]);
    let supervised = run_command(in_own_namespace(supervised), None);
    assert_same_behaviour(&supervised, &native);
    let report = report_json(&profile);
    let image = process_image(&report, &file_name(&fixture), "launch");
    // libc's calls as in dlopen.rs; none of the library's.
    assert_eq!(requested_from(image, "use_arena"), (0, 0));
    assert_eq!(image["calls"]["malloc"], 8);
    assert_eq!(
        warnings(image),
        [format!(
            "{}: 2 of its 2 probe sites hold other code than the file at that path, which is not the file the program mapped (another root or mount namespace, or a file replaced since): they are not probed",
            library.display()
        )]
    );
}
