//! External tools the tests need, and what to do when one is missing.

use std::env;
use std::path::PathBuf;

/// The Debian package that provides `tool`.
fn debian_package(tool: &str) -> &'static str {
    match tool {
        "gcc" => "gcc (or build-essential)",
        "g++" => "g++",
        "gfortran" => "gfortran",
        "musl-gcc" => "musl-tools",
        "strace" => "strace",
        "gdb" => "gdb",
        "strip" => "binutils",
        "setpriv" => "util-linux",
        "script" => "bsdutils",
        "chromium" => "chromium",
        _ => "the package that provides it",
    }
}

/// Finds `tool` in PATH.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|directory| directory.join(tool))
        .find(|candidate| candidate.is_file())
}

/// True when `tool` is installed. When it is not: with `CI=true` the test fails, naming the
/// Debian package to install; otherwise the test prints a note and should return early.
pub fn require_tool(tool: &str) -> bool {
    if find_tool(tool).is_some() {
        return true;
    }
    let package = debian_package(tool);
    if env::var("CI").as_deref() == Ok("true") {
        panic!("{tool} is required but not installed: apt-get install {package}");
    }
    eprintln!("note: skipping: {tool} is not installed (Debian package {package})");
    false
}
