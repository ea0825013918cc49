//! External tools the tests need, and what to do when one is missing.

use std::env;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

/// The Debian package that provides `tool`.
fn debian_package(tool: &str) -> &'static str {
    match tool {
        "gcc" | "cc" => "gcc (or build-essential)",
        "g++" => "g++",
        "gfortran" => "gfortran",
        "musl-gcc" => "musl-tools",
        "strace" => "strace",
        "gdb" => "gdb",
        "go" => "golang-go",
        "strip" | "objcopy" => "binutils",
        "setpriv" | "flock" => "util-linux",
        "script" => "bsdutils",
        "chromium" => "chromium",
        "ms_print" => "valgrind",
        "heaptrack_print" => "heaptrack",
        "mpicc.openmpi" | "mpirun.openmpi" => "openmpi-bin libopenmpi-dev",
        "mpicc.mpich" | "mpirun.mpich" => "mpich libmpich-dev",
        _ => "the package that provides it",
    }
}

/// Tools the tests pretend are missing: `MEMSUP_TEST_HIDE_TOOLS=musl-gcc,chromium` checks
/// how a machine without them runs the suite (scripts/test's skip accounting).
fn hidden(tool: &str) -> bool {
    env::var("MEMSUP_TEST_HIDE_TOOLS")
        .is_ok_and(|hidden| hidden.split(',').any(|name| name.trim() == tool))
}

/// Finds `tool` in PATH.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    if hidden(tool) {
        return None;
    }
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|directory| directory.join(tool))
        .find(|candidate| candidate.is_file())
}

/// True when `tool` is installed. When it is not: with `CI=true` the test fails, naming the
/// Debian package to install; otherwise the skip is recorded (`record_skip`) and the test
/// should leave out what needs the tool.
pub fn require_tool(tool: &str) -> bool {
    if find_tool(tool).is_some() {
        return true;
    }
    let package = debian_package(tool);
    let missing = if hidden(tool) {
        format!("{tool} is hidden by MEMSUP_TEST_HIDE_TOOLS")
    } else {
        format!("{tool} is not installed (Debian package {package})")
    };
    if env::var("CI").as_deref() == Ok("true") {
        panic!("{missing}, and CI=true requires it: apt-get install {package}");
    }
    record_skip(&missing);
    false
}

/// True when the file `path`, from the Debian package `package`, is installed; when it is
/// not, the same as a missing tool (`require_tool`): a failure with `CI=true`, else a skip.
pub fn require_file(path: &str, package: &str) -> bool {
    require_installed(std::path::Path::new(path).is_file(), path, package)
}

/// `require_file` for a directory the package makes.
pub fn require_directory(path: &str, package: &str) -> bool {
    require_installed(std::path::Path::new(path).is_dir(), path, package)
}

/// True when `path` is `there` (and not hidden); otherwise a failure with `CI=true`, else
/// a skip.
fn require_installed(there: bool, path: &str, package: &str) -> bool {
    if there && !hidden(path) {
        return true;
    }
    let missing = format!("{path} is not installed (Debian package {package})");
    if env::var("CI").as_deref() == Ok("true") {
        panic!("{missing}, and CI=true requires it: apt-get install {package}");
    }
    record_skip(&missing);
    false
}

/// Records that the running test left something out, and why: a note in the test's output,
/// and a `TEST<TAB>REASON` line in the file `MEMSUP_TEST_SKIPS` names, so that scripts/test
/// counts the test as skipped, not passed. The test is named by its thread, which the test
/// harness names after it.
pub fn record_skip(reason: &str) {
    eprintln!("note: skipping: {reason}");
    let Some(path) = env::var_os("MEMSUP_TEST_SKIPS") else {
        return;
    };
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("(unnamed test thread)");
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|error| panic!("opening MEMSUP_TEST_SKIPS {path:?}: {error}"));
    // One write of one short line: concurrent tests append whole lines.
    file.write_all(format!("{test}\t{reason}\n").as_bytes())
        .unwrap_or_else(|error| panic!("writing MEMSUP_TEST_SKIPS {path:?}: {error}"));
}
