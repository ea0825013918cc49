//! A program that sees files of its own at the paths where memsup sees others (a container,
//! a mount namespace of its own, a bind mount) is recorded as any other: memsup reads its
//! files through /proc/PID/root, and keeps them apart from memsup's files at the same paths.
//! Each program runs in `unshare --mount` (root only), natively and under memsup, with the
//! same script.
//!
//! - alloc_script, every variant, from a tmpfs mounted over an empty directory: memsup's
//!   path holds nothing.
//! - fixtures/dlopen_main.c loading ./dlopen_arena.so from a directory where, in the
//!   program's namespace only, dlopen_arena_moved.so (the same allocator after a function
//!   of its own, at other offsets) is mounted over it. Before, memsup placed the probes at
//!   its own file's offsets, inside the other function: the program computed wrong results
//!   under the hook engine and crashed under int3; later it probed nothing in the library.
//! - alloc_script's static build run at a path, then its dynamic build at the same path in a
//!   namespace of its own, in one recording: one path, two files, each process recorded
//!   (probed, unwound, symbolised) with its own.
//! - fixtures/dlopen_wait.c in a namespace of its own where dlopen_arena_moved.so is mounted
//!   over dlopen_arena.so, attached to from outside: the library's calls are recorded.
//! - fixtures/dlopen_wait.c, which loads dlopen_arena.so and waits, with dlopen_arena_moved.so
//!   mounted over that path since, in its namespace and in memsup's: neither is the mapped
//!   file. memsup probes such a module only where the code in memory is the file's: here
//!   nowhere, and it says so. Probes at the other file's offsets would land in other code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::alloc_script::{alloc_script_expectation, ALLOC_SCRIPT_STDOUT};
use crate::common::attach_window::AttachWindow;
use crate::common::build::fixtures_source_dir;
use crate::common::interactive::run_until_ready;
use crate::common::mpi_job::requested_from;
use crate::common::report::{describe_images, processes, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::tools::require_directory;
use crate::common::*;
use crate::dlopen;

const DLOPEN_STDOUT: &str =
    "dlopen_main: arena used 1120 bytes, 1 block live\ndlopen_main: done, leaking 2222 bytes\n";

/// Whether this test can make mount namespaces and has the tools it runs.
fn can_mount() -> bool {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("a mount namespace of the program's own needs root");
        return false;
    }
    require_tool("gcc") && require_tool("unshare") && require_tool("mount")
}

/// `command` (`env`, or memsup running it) then `script` run by sh in a mount namespace of
/// its own.
fn in_own_namespace(mut command: Command, script: &str) -> Command {
    command.args(["unshare", "--mount", "--propagation", "private", "sh", "-c"]);
    command.arg(script);
    command
}

/// `script` natively and under `memsup run OPTIONS`: the native run's output, and the
/// report, once the two behaved the same. memsup counts its reads of module files.
fn record_script(directory: &Path, options: &[&str], script: &str) -> (Output, Value) {
    record_script_reads(directory, options, script).0
}

/// `record_script`, and how often memsup read each file (`memsup: module reads: N PATH`).
fn record_script_reads(
    directory: &Path,
    options: &[&str],
    script: &str,
) -> ((Output, Value), Vec<String>) {
    let native = run_command(in_own_namespace(clean_command("env"), script), None);
    let profile = directory.join("run.msup");
    let mut supervised = clean_command(memsup_binary());
    supervised.env("MEMSUP_DEBUG_MODULE_READS", "1");
    supervised
        .args(["run", "-f", "-o"])
        .arg(&profile)
        .args(options);
    supervised.args(["--", "env"]);
    let supervised = run_command(in_own_namespace(supervised, script), None);
    assert_same_behaviour(&supervised, &native);
    let reads = (String::from_utf8_lossy(&supervised.stderr).lines())
        .filter(|line| line.starts_with("memsup: module reads: "))
        .map(str::to_string)
        .collect();
    ((native, report_json(&profile)), reads)
}

/// The images of the program `name`, which sh ran.
fn images_of<'a>(report: &'a Value, name: &str) -> Vec<&'a Value> {
    processes(report)
        .iter()
        .filter(|image| image["exe"].as_str().and_then(|e| e.rsplit('/').next()) == Some(name))
        .collect()
}

/// The default engine and int3.
const ENGINES: [&[&str]; 2] = [&[], &["--engine", "int3"]];

#[test]
fn a_program_whose_files_are_only_in_its_own_mount_namespace_is_recorded() {
    if !can_mount() {
        return;
    }
    for_each_variant("alloc_script", |variant, fixture| {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let hidden = directory.path().join("hidden");
        std::fs::create_dir(&hidden).expect("a directory to mount over");
        let script = format!(
            "mount -t tmpfs tmpfs {hidden} && cp {fixture} {hidden}/alloc_script && exec {hidden}/alloc_script",
            hidden = hidden.display(),
            fixture = fixture.display()
        );
        for options in ENGINES {
            let (native, report) = record_script(directory.path(), options, &script);
            assert_eq!(String::from_utf8_lossy(&native.stdout), ALLOC_SCRIPT_STDOUT);
            let images = images_of(&report, "alloc_script");
            assert_eq!(
                images.len(),
                1,
                "{variant:?} {options:?}: {}",
                describe_images(&report)
            );
            let image = images[0];
            let program = hidden.join("alloc_script");
            let (expected, sites) = alloc_script_expectation(variant, &program);
            assert_heap(image, &expected);
            assert_sites(image, &sites);
            assert_eq!(
                warnings(image),
                Vec::<String>::new(),
                "{variant:?} {options:?}"
            );
        }
    });
}

/// dlopen_arena.so copied into a temporary directory, dlopen_arena_moved.so to mount over
/// it, and the program that loads it.
struct MovedLibrary {
    directory: tempfile::TempDir,
    library: PathBuf,
    moved: PathBuf,
    fixture: PathBuf,
}

impl MovedLibrary {
    fn for_program(program: &str) -> MovedLibrary {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let library = directory.path().join("dlopen_arena.so");
        std::fs::copy(shared_object("dlopen_arena"), &library).expect("copying the library");
        MovedLibrary {
            directory,
            library,
            moved: shared_object("dlopen_arena_moved"),
            fixture: fixture(program, Variant::Dynamic),
        }
    }
}

/// The program `fixture` loading the library at `path`, over which `moved` is mounted in
/// the program's namespace.
fn moved_library_script(fixture: &Path, moved: &Path, path: &Path) -> String {
    format!(
        "mount --bind {moved} {path} && exec {fixture} {path}",
        moved = moved.display(),
        path = path.display(),
        fixture = fixture.display()
    )
}

#[test]
fn a_library_the_program_sees_through_its_own_mount_namespace_is_recorded_from_its_file() {
    if !can_mount() {
        return;
    }
    // A short directory: dlopen_main.c's numbers hold below 128 bytes of working directory.
    let setup = MovedLibrary::for_program("dlopen_main");
    let (directory, library) = (setup.directory.path(), &setup.library);
    let (moved, fixture) = (&setup.moved, &setup.fixture);
    let script = moved_library_script(fixture, moved, library);
    for options in ENGINES {
        let ((native, report), reads) = record_script_reads(directory, options, &script);
        assert_eq!(String::from_utf8_lossy(&native.stdout), DLOPEN_STDOUT);
        // Read once, through the program's root; memsup's other file there, never.
        let library_reads: Vec<&String> = reads
            .iter()
            .filter(|line| line.ends_with(&format!(" {}", library.display())))
            .collect();
        assert_eq!(
            library_reads,
            [&format!("memsup: module reads: 1 {}", library.display())],
            "{options:?}"
        );
        let images = images_of(&report, &file_name(fixture));
        assert_eq!(images.len(), 1, "{options:?}: {}", describe_images(&report));
        assert_heap(images[0], &dlopen::expected_heap());
        assert_sites(images[0], &dlopen::expected_sites());
        assert_eq!(warnings(images[0]), Vec::<String>::new(), "{options:?}");
    }
}

#[test]
fn one_path_mapped_to_two_files_by_two_processes_gives_each_its_own() {
    if !can_mount() {
        return;
    }
    let directory = tempfile::tempdir().expect("a temporary directory");
    let shared = directory.path().join("shared");
    std::fs::create_dir(&shared).expect("a directory to mount over");
    let program = shared.join("alloc_script");
    let outside = fixture("alloc_script", Variant::Static);
    let inside = fixture("alloc_script", Variant::Dynamic);
    std::fs::copy(&outside, &program).expect("copying the program");
    // The static build at memsup's path runs first; then, at the same path in a namespace of
    // its own, the dynamic one.
    let script = format!(
        "{program} && unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs {shared} && cp {inside} {program} && exec {program}'",
        program = program.display(),
        shared = shared.display(),
        inside = inside.display()
    );
    for options in ENGINES {
        let (native, report) = record_script(directory.path(), options, &script);
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            ALLOC_SCRIPT_STDOUT.repeat(2)
        );
        let images = images_of(&report, "alloc_script");
        assert_eq!(images.len(), 2, "{options:?}: {}", describe_images(&report));
        for (image, variant) in images.into_iter().zip([Variant::Static, Variant::Dynamic]) {
            let (expected, sites) = alloc_script_expectation(variant, &program);
            assert_heap(image, &expected);
            assert_sites(image, &sites);
            assert_eq!(warnings(image), Vec::<String>::new(), "{options:?}");
        }
    }
}

#[test]
fn a_library_mounted_over_since_it_was_loaded_is_not_patched_at_the_other_file_s_offsets() {
    if !can_mount() || !require_tool("nsenter") {
        return;
    }
    let setup = MovedLibrary::for_program("dlopen_wait");
    let library = &setup.library;
    let (moved, fixture) = (&setup.moved, &setup.fixture);
    let command = || {
        let mut command = clean_command("unshare");
        command.args(["--mount", "--propagation", "private"]);
        command.arg(fixture).arg(library);
        command
    };
    // In the program's namespace, once it has loaded the library.
    let mount_over_in = |pid: u32| {
        let mut nsenter = clean_command("nsenter");
        nsenter.args(["--mount", "--target", &pid.to_string(), "mount", "--bind"]);
        nsenter.arg(moved).arg(library);
        let mounted = run_command(nsenter, None);
        assert!(mounted.status.success(), "nsenter mount: {mounted:?}");
    };
    let native = run_until_ready(command(), |child| mount_over_in(child.id()));
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "ready\ndlopen_wait: arena used 96 bytes\n"
    );
    // memsup in a namespace of its own with the same file mounted over the path.
    let script = format!(
        "mount --bind {} {} && exec \"$0\" \"$@\"",
        moved.display(),
        library.display()
    );
    let wrapper = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
    ];
    for options in ENGINES {
        let mut window = None;
        let attached = run_until_ready(command(), |child| {
            mount_over_in(child.id());
            window = Some(AttachWindow::open_wrapped(&wrapper, &[child.id()], options));
        });
        assert_same_behaviour(&attached, &native);
        let (_, profile_directory) = window.expect("attached").end(false);
        let report = report_json(&profile_directory.path().join("attach.msup"));
        let image = &processes(&report)[0];
        assert_eq!(requested_from(image, "use_plugin"), (0, 0), "{options:?}");
        assert_eq!(
            warnings(image),
            [format!(
                "{}: 2 of its 2 probe sites hold other code than the file at that path, which is not the file the program mapped (replaced or mounted over since): they are not probed",
                library.display()
            )],
            "{options:?}"
        );
    }
}

#[test]
fn an_attach_from_outside_records_a_program_in_its_own_mount_namespace_from_its_files() {
    if !can_mount() {
        return;
    }
    let setup = MovedLibrary::for_program("dlopen_wait");
    let library = &setup.library;
    let (moved, fixture) = (&setup.moved, &setup.fixture);
    let script = moved_library_script(fixture, moved, library);
    let command = || {
        let mut command = clean_command("unshare");
        command.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
        command
    };
    let native = run_until_ready(command(), |_| {});
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "ready\ndlopen_wait: arena used 96 bytes\n"
    );
    for options in ENGINES {
        let mut window = None;
        let attached = run_until_ready(command(), |child| {
            window = Some(AttachWindow::open(&[child.id()], options));
        });
        assert_same_behaviour(&attached, &native);
        let (_, profile_directory) = window.expect("attached").end(false);
        let report = report_json(&profile_directory.path().join("attach.msup"));
        let image = &processes(&report)[0];
        assert_eq!(requested_from(image, "use_plugin"), (1, 96), "{options:?}");
        assert_eq!(warnings(image), Vec::<String>::new(), "{options:?}");
    }
}

/// alloc_script stripped of its DWARF, with its debug file only in the program's mount
/// namespace: next to it (found by its `.gnu_debuglink`), or under /usr/lib/debug/.build-id
/// with no debuglink (found by its build-id). memsup looks for it beneath the program's root
/// as the program sees it, and names the line of make_record's malloc; memsup's own root
/// holds neither the program nor the debug file.
#[test]
fn a_debug_file_only_in_the_program_s_own_mount_namespace_names_its_lines() {
    if !can_mount() || !require_tool("objcopy") {
        return;
    }
    // libc6-dbg makes it; the build-id way mounts over it, so it must exist.
    let debug_root = Path::new("/usr/lib/debug");
    let by_build_id_too = require_directory("/usr/lib/debug", "libc6-dbg");
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let directory = tempfile::tempdir().expect("a temporary directory");
    let staging = directory.path().join("staging");
    let bare_directory = staging.join("bare");
    std::fs::create_dir_all(&bare_directory).expect("a staging directory");
    let debug = staging.join("alloc_script.debug");
    let linked = staging.join("alloc_script");
    let bare = bare_directory.join("alloc_script");
    let os = std::ffi::OsStr::new;
    objcopy(&[
        os("--only-keep-debug"),
        fixture.as_os_str(),
        debug.as_os_str(),
    ]);
    let debuglink = format!("--add-gnu-debuglink={}", debug.display());
    let (fixture_os, linked_os) = (fixture.as_os_str(), linked.as_os_str());
    objcopy(&[os("--strip-debug"), os(&debuglink), fixture_os, linked_os]);
    objcopy(&[os("--strip-debug"), fixture_os, bare.as_os_str()]);
    let hidden = directory.path().join("hidden");
    std::fs::create_dir(&hidden).expect("a directory to mount over");
    let (hidden, debug_text) = (hidden.display(), debug.display());
    let by_debuglink = format!(
        "mount -t tmpfs tmpfs {hidden} && cp {linked} {debug_text} {hidden}/ && exec {hidden}/alloc_script",
        linked = linked.display(),
    );
    let build_id_path = build_id_path(&fixture);
    let by_build_id = format!(
        "mount -t tmpfs tmpfs {hidden} && mount -t tmpfs tmpfs {root} && mkdir -p {parent} && cp {debug_text} {build_id_path} && cp {bare} {hidden}/ && exec {hidden}/alloc_script",
        root = debug_root.display(),
        parent = Path::new(&build_id_path).parent().unwrap().display(),
        bare = bare.display(),
    );
    let mut scripts = vec![("debuglink", by_debuglink)];
    if by_build_id_too {
        scripts.push(("build-id", by_build_id));
    }
    for (way, script) in scripts {
        for options in ENGINES {
            let (native, report) = record_script(directory.path(), options, &script);
            assert_eq!(String::from_utf8_lossy(&native.stdout), ALLOC_SCRIPT_STDOUT);
            let images = images_of(&report, "alloc_script");
            assert_eq!(images.len(), 1, "{way} {options:?}");
            let sites = images[0]["sites"].as_array().expect("sites");
            let frame = &sites[0]["stack"][0];
            assert_eq!(
                frame["function"], "make_record",
                "{way} {options:?}: {frame}"
            );
            let source = fixtures_source_dir().join("alloc_script.c");
            assert_eq!(frame["file"], source.to_str().unwrap(), "{way} {options:?}");
            // fixtures/alloc_script.c: `char *record = malloc(size);`.
            assert_eq!(frame["line"], 55, "{way} {options:?}: {frame}");
            assert_eq!(
                warnings(images[0]),
                Vec::<String>::new(),
                "{way} {options:?}"
            );
        }
    }
}

/// Runs objcopy with `arguments`.
fn objcopy(arguments: &[&std::ffi::OsStr]) {
    let mut command = clean_command("objcopy");
    command.args(arguments);
    let output = run_command(command, None);
    assert!(output.status.success(), "objcopy {output:?}");
}

/// /usr/lib/debug/.build-id/xx/yyyy.debug for the build-id of the ELF file `path`.
fn build_id_path(path: &Path) -> String {
    use object::Object;
    let bytes = std::fs::read(path).expect("the program");
    let file = object::File::parse(&*bytes).expect("an ELF file");
    let id = file.build_id().ok().flatten().expect("a build-id");
    let hex: Vec<String> = id.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        hex[0],
        hex[1..].concat()
    )
}
