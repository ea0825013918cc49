//! Test support: small C programs compiled statically at test time.

use std::path::PathBuf;
use std::process::Command;

/// Builds `source` statically with `compiler` into a temporary directory. When the compiler
/// is missing or fails: None with a message, or a failure under `CI=true`, where every tool
/// must be installed.
pub fn build_static(compiler: &str, source: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let directory = tempfile::tempdir().expect("temporary directory");
    let source_path = directory.path().join("program.c");
    let program = directory.path().join("program");
    std::fs::write(&source_path, source).expect("write C source");
    let status = Command::new(compiler)
        .args(["-static", "-O0", "-w", "-o"])
        .arg(&program)
        .arg(&source_path)
        .status();
    match status {
        Ok(status) if status.success() => Some((directory, program)),
        other => {
            let missing = format!("{compiler} -static failed or is missing ({other:?})");
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{missing}, and CI=true requires it");
            }
            eprintln!("skipped: {missing}");
            None
        }
    }
}
