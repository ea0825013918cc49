//! Fixtures are C, C++ and Fortran sources in `fixtures/`, compiled at test time into
//! `$CARGO_TARGET_TMPDIR/fixtures/NAME-{dynamic,static,musl}` (or `NAME.so` for a shared
//! object a fixture dlopens). The heap tests use `-O1 -fno-omit-frame-pointer`; the stack
//! tests also build at `-O2` with and without frame pointers (`NAME-o2-fp-dynamic`,
//! `NAME-o2-nofp-static`, `NAME-o2-fp.so`, ...).
//!
//! Each variant is built at most once per test run, even when tests run in parallel: a
//! per-output lock serialises threads, and the compiler writes to a unique temporary file that
//! is renamed into place, so concurrent test processes (cargo nextest) never see a half-written
//! binary. A fixture is rebuilt when its source or a shared header is newer than the binary.

use std::collections::HashMap;
use std::fs;
use std::os::fd::AsRawFd;
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

/// How a fixture's code is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeGen {
    /// `-O1 -fno-omit-frame-pointer`: what the heap tests use.
    Default,
    /// `-O2 -fno-omit-frame-pointer`.
    O2FramePointers,
    /// `-O2 -fomit-frame-pointer`.
    O2NoFramePointers,
}

impl CodeGen {
    /// The part of the output name that tells the builds apart ("" for the default).
    pub fn suffix(self) -> &'static str {
        match self {
            CodeGen::Default => "",
            CodeGen::O2FramePointers => "-o2-fp",
            CodeGen::O2NoFramePointers => "-o2-nofp",
        }
    }

    fn flags(self) -> [&'static str; 2] {
        match self {
            CodeGen::Default => ["-O1", "-fno-omit-frame-pointer"],
            CodeGen::O2FramePointers => ["-O2", "-fno-omit-frame-pointer"],
            CodeGen::O2NoFramePointers => ["-O2", "-fomit-frame-pointer"],
        }
    }
}

const COMMON_FLAGS: [&str; 2] = ["-g", "-pthread"];

/// The language of a fixture source, from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Language {
    C,
    Cxx,
    /// Built with `-fno-inline` (gfortran 12 has no noinline attribute, and the fixtures'
    /// call chains must stay calls); module files go to a temporary directory.
    Fortran,
}

impl Language {
    fn compiler(self) -> &'static str {
        match self {
            Language::C => "gcc",
            Language::Cxx => "g++",
            Language::Fortran => "gfortran",
        }
    }
}

pub fn fixtures_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn fixtures_output_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures")
}

/// Source file extensions, in the order they are looked for.
const EXTENSIONS: [(&str, Language); 3] = [
    ("c", Language::C),
    ("cpp", Language::Cxx),
    ("f90", Language::Fortran),
];

fn source_and_language(name: &str) -> (PathBuf, Language) {
    let directory = fixtures_source_dir();
    EXTENSIONS
        .iter()
        .map(|(extension, language)| (directory.join(format!("{name}.{extension}")), *language))
        .find(|(source, _)| source.exists())
        .unwrap_or_else(|| panic!("no fixture source {name}.c, {name}.cpp or {name}.f90"))
}

fn source_of(name: &str) -> PathBuf {
    source_and_language(name).0
}

fn language_of(name: &str) -> Language {
    source_and_language(name).1
}

/// The variants of fixture `name` this machine can build: dynamic and static glibc (C, C++
/// and Fortran), and musl for C when musl-gcc is installed. Empty (the test is skipped, with
/// a note) when the compiler is missing outside CI; with CI=true a missing compiler fails the
/// test.
pub fn variants(name: &str) -> Vec<Variant> {
    let language = language_of(name);
    if !require_tool(language.compiler()) {
        return Vec::new();
    }
    let mut available = vec![Variant::Dynamic, Variant::Static];
    if language == Language::C && require_tool("musl-gcc") {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Artifact {
    Executable(Variant),
    /// A glibc shared object (`-shared -fPIC`), for a program to dlopen.
    SharedObject,
}

fn compile(name: &str, kind: Artifact, codegen: CodeGen, output: &Path) {
    let variant = match kind {
        Artifact::Executable(variant) => variant,
        Artifact::SharedObject => Variant::Dynamic,
    };
    let (source, language) = source_and_language(name);
    let compiler = match (variant, language) {
        (Variant::Musl, Language::C) => "musl-gcc",
        (Variant::Musl, _) => panic!("{name}: musl-gcc builds C only"),
        (_, language) => language.compiler(),
    };
    assert!(find_tool(compiler).is_some(), "{compiler} is not installed");
    let temporary = temporary_beside(output);
    let mut command = Command::new(compiler);
    command.args(codegen.flags()).args(COMMON_FLAGS);
    if variant != Variant::Dynamic {
        command.arg("-static");
    }
    if kind == Artifact::SharedObject {
        command.args(["-shared", "-fPIC"]);
    }
    let modules = temporary.with_extension("modules");
    if language == Language::Fortran {
        fs::create_dir_all(&modules).expect("creating a Fortran module directory");
        command.arg("-fno-inline").arg("-J").arg(&modules);
    }
    command.arg(&source).arg("-o").arg(&temporary);
    let result = command
        .output()
        .unwrap_or_else(|error| panic!("running {compiler}: {error}"));
    if language == Language::Fortran {
        fs::remove_dir_all(&modules).ok();
    }
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
    build(name, Artifact::Executable(variant), CodeGen::Default)
}

/// The path of fixture `name` built as `variant` with `codegen`, building it first if needed.
pub fn fixture_with(name: &str, variant: Variant, codegen: CodeGen) -> PathBuf {
    build(name, Artifact::Executable(variant), codegen)
}

/// The path of fixture `name` built as a shared object `NAME.so` (glibc), building it first if
/// needed.
pub fn shared_object(name: &str) -> PathBuf {
    build(name, Artifact::SharedObject, CodeGen::Default)
}

/// `shared_object` with `codegen` (`NAME-o2-fp.so`, ...).
pub fn shared_object_with(name: &str, codegen: CodeGen) -> PathBuf {
    build(name, Artifact::SharedObject, codegen)
}

/// Holds an exclusive `flock` on `OUTPUT.lock` until dropped. Test processes running at the
/// same time (two `cargo test`, nextest) would otherwise both find a fixture stale and both
/// build it, and the second rename would replace a binary the first may already be running:
/// its mapping turns "(deleted)", and memsup can neither probe nor name it (an attach test saw
/// its allocations under a nameless site).
fn lock_across_processes(output: &Path) -> fs::File {
    let path = output.with_extension("lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|error| panic!("opening {}: {error}", path.display()));
    // SAFETY: flock on a descriptor we own has no memory effects.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(
        locked,
        0,
        "flock {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    file
}

fn build(name: &str, kind: Artifact, codegen: CodeGen) -> PathBuf {
    let suffix = codegen.suffix();
    let file_name = match kind {
        Artifact::Executable(variant) => format!("{name}{suffix}-{}", variant.suffix()),
        Artifact::SharedObject => format!("{name}{suffix}.so"),
    };
    build_output(&file_name, &[source_of(name)], |output| {
        compile(name, kind, codegen, output)
    })
}

/// Builds `file_name` in the fixtures output directory with `compile` (which must write the
/// file it is given), unless it is newer than `sources` and the shared headers; one build at
/// a time per output, across threads and processes.
pub fn build_output(file_name: &str, sources: &[PathBuf], compile: impl FnOnce(&Path)) -> PathBuf {
    type Locks = Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let directory = fixtures_output_dir();
    fs::create_dir_all(&directory).expect("creating the fixtures output directory");
    let output = directory.join(file_name);
    let lock = {
        let mut locks = LOCKS.get_or_init(Default::default).lock().unwrap();
        locks.entry(output.clone()).or_default().clone()
    };
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _other_processes = lock_across_processes(&output);
    let mut inputs = sources.to_vec();
    for header in ["fixture_output.h", "fixture_maps.h", "fixture_work.h"] {
        inputs.push(fixtures_source_dir().join(header));
    }
    if !is_fresh(&output, &inputs) {
        compile(&output);
    }
    output
}

/// A path beside `output` that no other build uses, for the compiler to write before it is
/// renamed into place.
pub fn temporary_beside(output: &Path) -> PathBuf {
    static SEQUENCE: AtomicUsize = AtomicUsize::new(0);
    output.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ))
}

/// While one process builds a fixture, another waits: `flock -n` on the same lock fails.
#[test]
fn a_fixture_build_excludes_other_processes() {
    if !require_tool("flock") {
        return;
    }
    let directory = tempfile::tempdir().expect("a temporary directory");
    let output = directory.path().join("fixture-dynamic");
    let try_lock = || {
        Command::new("flock")
            .args(["-n", "-E", "75"])
            .arg(output.with_extension("lock"))
            .arg("true")
            .status()
            .expect("running flock")
            .code()
    };
    let held = lock_across_processes(&output);
    assert_eq!(
        try_lock(),
        Some(75),
        "flock -n while the build lock is held"
    );
    drop(held);
    assert_eq!(try_lock(), Some(0), "flock -n once it is released");
}
