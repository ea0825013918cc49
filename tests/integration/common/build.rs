//! Fixtures are C and C++ sources in `fixtures/`, compiled at test time into
//! `$CARGO_TARGET_TMPDIR/fixtures/NAME-{dynamic,static,musl}` (or `NAME.so` for a shared
//! object a fixture dlopens).
//!
//! Each variant is built at most once per test run, even when tests run in parallel: a
//! per-output lock serialises threads, and the compiler writes to a unique temporary file that
//! is renamed into place, so concurrent test processes (cargo nextest) never see a half-written
//! binary. A fixture is rebuilt when its source or `fixture_output.h` is newer than the binary.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use super::tools::{find_tool, require_tool};

/// How a fixture is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// glibc, dynamically linked (`cc`).
    Dynamic,
    /// glibc, `-static`.
    Static,
    /// musl, `musl-gcc -static`.
    Musl,
}

impl Variant {
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Dynamic => "dynamic",
            Variant::Static => "static",
            Variant::Musl => "musl",
        }
    }
}

const COMMON_FLAGS: [&str; 4] = ["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"];

pub fn fixtures_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn fixtures_output_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures")
}

fn source_of(name: &str) -> PathBuf {
    let directory = fixtures_source_dir();
    let c_source = directory.join(format!("{name}.c"));
    if c_source.exists() {
        return c_source;
    }
    let cxx_source = directory.join(format!("{name}.cpp"));
    assert!(
        cxx_source.exists(),
        "no fixture source {name}.c or {name}.cpp"
    );
    cxx_source
}

fn is_cxx(name: &str) -> bool {
    source_of(name)
        .extension()
        .is_some_and(|extension| extension == "cpp")
}

/// The variants of fixture `name` this machine can build: dynamic and static glibc (C and
/// C++), and musl for C when musl-gcc is installed. Empty (the test is skipped, with a note)
/// when the compiler is missing outside CI; with CI=true a missing compiler fails the test.
pub fn variants(name: &str) -> Vec<Variant> {
    let compiler = if is_cxx(name) { "g++" } else { "gcc" };
    if !require_tool(compiler) {
        return Vec::new();
    }
    let mut available = vec![Variant::Dynamic, Variant::Static];
    if !is_cxx(name) && require_tool("musl-gcc") {
        available.push(Variant::Musl);
    }
    available
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
}

fn is_fresh(output: &Path, inputs: &[PathBuf]) -> bool {
    let Some(built) = modified(output) else {
        return false;
    };
    inputs
        .iter()
        .all(|input| modified(input).is_some_and(|changed| changed <= built))
}

/// What to build from a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Artifact {
    Executable(Variant),
    /// A glibc shared object (`-shared -fPIC`), for a program to dlopen.
    SharedObject,
}

fn compile(name: &str, kind: Artifact, output: &Path) {
    let variant = match kind {
        Artifact::Executable(variant) => variant,
        Artifact::SharedObject => Variant::Dynamic,
    };
    let source = source_of(name);
    let compiler = match (variant, is_cxx(name)) {
        (Variant::Musl, false) => "musl-gcc",
        (Variant::Musl, true) => panic!("{name}: musl-gcc has no C++ library"),
        (_, true) => "g++",
        (_, false) => "gcc",
    };
    assert!(find_tool(compiler).is_some(), "{compiler} is not installed");
    static SEQUENCE: AtomicUsize = AtomicUsize::new(0);
    let temporary = output.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let mut command = Command::new(compiler);
    command.args(COMMON_FLAGS);
    if variant != Variant::Dynamic {
        command.arg("-static");
    }
    if kind == Artifact::SharedObject {
        command.args(["-shared", "-fPIC"]);
    }
    command.arg(&source).arg("-o").arg(&temporary);
    let result = command
        .output()
        .unwrap_or_else(|error| panic!("running {compiler}: {error}"));
    assert!(
        result.status.success(),
        "building fixture {name} ({}) failed: {:?}\n{}",
        variant.suffix(),
        command,
        String::from_utf8_lossy(&result.stderr)
    );
    fs::rename(&temporary, output)
        .unwrap_or_else(|error| panic!("renaming {}: {error}", temporary.display()));
}

/// The path of fixture `name` built as `variant`, building it first if needed.
pub fn fixture(name: &str, variant: Variant) -> PathBuf {
    build(name, Artifact::Executable(variant))
}

/// The path of fixture `name` built as a shared object `NAME.so` (glibc), building it first if
/// needed.
pub fn shared_object(name: &str) -> PathBuf {
    build(name, Artifact::SharedObject)
}

fn build(name: &str, kind: Artifact) -> PathBuf {
    type Locks = Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let directory = fixtures_output_dir();
    fs::create_dir_all(&directory).expect("creating the fixtures output directory");
    let file_name = match kind {
        Artifact::Executable(variant) => format!("{name}-{}", variant.suffix()),
        Artifact::SharedObject => format!("{name}.so"),
    };
    let output = directory.join(file_name);
    let lock = {
        let mut locks = LOCKS.get_or_init(Default::default).lock().unwrap();
        locks.entry(output.clone()).or_default().clone()
    };
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let inputs = [
        source_of(name),
        fixtures_source_dir().join("fixture_output.h"),
    ];
    if !is_fresh(&output, &inputs) {
        compile(name, kind, &output);
    }
    output
}
