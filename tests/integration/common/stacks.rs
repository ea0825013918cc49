//! Call stacks of a profile, read with memsup's own library: the stack tree and the symbols of
//! each process image, every stack expanded into function names innermost first (an inlined
//! function is a frame of its own), and the chains the tests expect of them.

use std::collections::HashMap;
use std::fmt::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use memsup::trace::format::{Record, TRUNCATED_FRAME};
use memsup::trace::reader::read_profile;
use memsup::trace::stacks::{StackId, StackNode, StackTable};

use super::build::{fixture_with, variants, CodeGen, Variant};
use super::file_name;

/// What a truncated stack shows as its outermost frame.
pub const TRUNCATED: &str = "[truncated]";

/// One frame of an expanded stack.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The demangled name ("" when nothing names the address, `TRUNCATED` for the marker).
    pub function: String,
    /// The path of the module the address lies in ("" when unknown).
    pub module: String,
    pub address: u64,
    /// Inlined into the next frame (same address).
    pub inlined: bool,
}

impl Frame {
    fn module_name(&self) -> &str {
        self.module.rsplit('/').next().unwrap_or("")
    }
}

/// An allocation and its expanded stack.
#[derive(Clone, Debug)]
pub struct Allocation {
    pub pid: u32,
    pub tid: u32,
    pub function: &'static str,
    pub size: u64,
    /// Innermost first; a truncated stack ends in a `TRUNCATED` frame.
    pub frames: Vec<Frame>,
}

impl Allocation {
    pub fn is_truncated(&self) -> bool {
        self.frames.last().is_some_and(|f| f.function == TRUNCATED)
    }

    /// One line per frame, for failure messages.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{}({}) in pid {} thread {}:\n",
            self.function, self.size, self.pid, self.tid
        );
        for (index, frame) in self.frames.iter().enumerate() {
            let _ = writeln!(
                text,
                "  #{index:<2} {:#014x} {:40} {}{}",
                frame.address,
                frame.function,
                frame.module_name(),
                if frame.inlined { " (inlined)" } else { "" }
            );
        }
        text
    }
}

/// What a profile holds about one symbolised address.
struct Symbol {
    function: String,
    module: String,
    /// (name, inlined), innermost first.
    frames: Vec<(String, bool)>,
}

/// An allocation read before the symbols of its image (written when the image ends).
struct PendingAllocation {
    /// (pid, number of execs seen before it).
    image: (u32, u32),
    tid: u32,
    function: &'static str,
    size: u64,
    stack: StackId,
}

/// A module as the profile records it.
#[derive(Clone, Debug)]
pub struct Module {
    pub path: String,
    pub start: u64,
    pub end: u64,
}

/// Every allocation (Alloc and Realloc records) of a profile with its expanded stack, and the
/// modules recorded.
pub struct ProfileStacks {
    pub allocations: Vec<Allocation>,
    pub modules: Vec<Module>,
}

impl ProfileStacks {
    /// Reads `profile`, which must be complete.
    pub fn read(profile: &Path) -> ProfileStacks {
        let profile = read_profile(profile)
            .unwrap_or_else(|error| panic!("reading {}: {error}", profile.display()));
        assert!(!profile.truncated, "the profile is truncated");
        // A process image is (pid, number of execs seen); its tree and symbols start empty.
        let mut generation: HashMap<u32, u32> = HashMap::new();
        let mut tables: HashMap<(u32, u32), StackTable> = HashMap::new();
        let mut symbols: HashMap<(u32, u32, u64), Symbol> = HashMap::new();
        let mut pending: Vec<PendingAllocation> = Vec::new();
        let mut modules = Vec::new();
        for record in &profile.records {
            let image = |pid: u32| (pid, generation.get(&pid).copied().unwrap_or(0));
            match record {
                Record::Exec { pid, .. } => *generation.entry(*pid).or_default() += 1,
                Record::Module {
                    path, start, end, ..
                } => modules.push(Module {
                    path: path.clone(),
                    start: *start,
                    end: *end,
                }),
                Record::StackNode {
                    pid,
                    id,
                    parent,
                    address,
                } => {
                    let added = tables.entry(image(*pid)).or_default().add(StackNode {
                        id: *id,
                        parent: *parent,
                        address: *address,
                    });
                    assert!(added, "stack node {id} of pid {pid} out of order");
                }
                Record::Symbol {
                    pid,
                    address,
                    function,
                    module,
                    frames,
                    ..
                } => {
                    let (pid, generation) = image(*pid);
                    symbols.insert(
                        (pid, generation, *address),
                        Symbol {
                            function: function.clone(),
                            module: module.clone(),
                            frames: frames
                                .iter()
                                .map(|frame| (frame.function.clone(), frame.inlined))
                                .collect(),
                        },
                    );
                }
                Record::Alloc {
                    pid,
                    tid,
                    function,
                    size,
                    stack,
                    ..
                }
                | Record::Realloc {
                    pid,
                    tid,
                    function,
                    size,
                    stack,
                    ..
                } => pending.push(PendingAllocation {
                    image: image(*pid),
                    tid: *tid,
                    function: function.name(),
                    size: *size,
                    stack: *stack,
                }),
                _ => {}
            }
        }
        let empty = StackTable::default();
        let allocations = pending
            .into_iter()
            .map(|pending| {
                let PendingAllocation {
                    image: (pid, generation),
                    tid,
                    function,
                    size,
                    stack,
                } = pending;
                let table = tables.get(&(pid, generation)).unwrap_or(&empty);
                let mut frames = Vec::new();
                for address in table.frames(stack) {
                    if address == TRUNCATED_FRAME {
                        frames.push(Frame {
                            function: TRUNCATED.to_string(),
                            module: String::new(),
                            address,
                            inlined: false,
                        });
                        continue;
                    }
                    let Some(symbol) = symbols.get(&(pid, generation, address)) else {
                        frames.push(Frame {
                            function: String::new(),
                            module: String::new(),
                            address,
                            inlined: false,
                        });
                        continue;
                    };
                    if symbol.frames.is_empty() {
                        frames.push(Frame {
                            function: symbol.function.clone(),
                            module: symbol.module.clone(),
                            address,
                            inlined: false,
                        });
                    }
                    for (name, inlined) in &symbol.frames {
                        frames.push(Frame {
                            function: name.clone(),
                            module: symbol.module.clone(),
                            address,
                            inlined: *inlined,
                        });
                    }
                }
                Allocation {
                    pid,
                    tid,
                    function,
                    size,
                    frames,
                }
            })
            .collect();
        ProfileStacks {
            allocations,
            modules,
        }
    }

    /// The one allocation of `size` bytes.
    pub fn with_size(&self, size: u64) -> &Allocation {
        let found: Vec<&Allocation> = self
            .allocations
            .iter()
            .filter(|allocation| allocation.size == size)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "expected one allocation of {size} bytes, found {}:\n{}",
            found.len(),
            found
                .iter()
                .map(|allocation| allocation.describe())
                .collect::<String>()
        );
        found[0]
    }
}

/// One step of an expected chain, innermost first.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// One frame with exactly this name.
    Function(&'static str),
    /// One or more frames inside a library whose file name starts with the prefix: in a
    /// dynamic program, frames of that module with any name (or none: a library without a
    /// symbol table); in a static one, named frames of the executable itself, which the
    /// library is linked into. They end at the first frame of the next `Function` step.
    Library(&'static str),
    /// Exactly one frame of such a library, named one of these names when it is named at
    /// all (libc.so.6 names its local functions only through its separate debug file).
    LibraryFunction(&'static str, &'static [&'static str]),
    /// The mark of a walk that stopped early.
    Truncated,
}

/// The C library's file name prefix (glibc: libc.so.6).
pub const LIBC: &str = "libc.so";

/// The frames that follow `main` in every glibc program: __libc_start_call_main,
/// __libc_start_main (the versioned alias of __libc_start_main_impl) and the executable's
/// `_start`, whose CFI ends the stack.
pub const GLIBC_START: [Step; 3] = [
    Step::LibraryFunction(LIBC, &["__libc_start_call_main"]),
    Step::LibraryFunction(LIBC, &["__libc_start_main_impl", "__libc_start_main"]),
    Step::Function("_start"),
];

/// Asserts that the stack of `allocation` is exactly `expected`: every frame is matched, in
/// order, and nothing follows (a truncated stack must end in `Step::Truncated`). `executable`
/// is the program's path: a static program's libraries are in it.
pub fn assert_chain(
    allocation: &Allocation,
    expected: &[Step],
    variant: Variant,
    executable: &Path,
) {
    if let Err(problem) = match_chain(&allocation.frames, expected, variant, executable) {
        panic!(
            "{problem}\nexpected {expected:?}\nrecorded {}",
            allocation.describe()
        );
    }
}

fn match_chain(
    frames: &[Frame],
    expected: &[Step],
    variant: Variant,
    executable: &Path,
) -> Result<(), String> {
    let executable = executable.to_string_lossy();
    let in_library = |frame: &Frame, prefix: &str| match variant {
        Variant::Dynamic => frame.module_name().starts_with(prefix),
        Variant::Static | Variant::Musl => frame.module == executable && !frame.function.is_empty(),
    };
    let mut at = 0;
    for (index, step) in expected.iter().enumerate() {
        let frame = frames
            .get(at)
            .ok_or_else(|| format!("the stack ends before step {index} ({step:?})"))?;
        match *step {
            Step::Function(name) => {
                if frame.function != name {
                    return Err(format!("frame #{at} should be {name}"));
                }
                at += 1;
            }
            Step::Library(prefix) => {
                let next_function = expected[index + 1..].iter().find_map(|step| match step {
                    Step::Function(name) => Some(*name),
                    _ => None,
                });
                let start = at;
                while let Some(frame) = frames.get(at) {
                    if Some(frame.function.as_str()) == next_function
                        || frame.function == TRUNCATED
                        || !in_library(frame, prefix)
                    {
                        break;
                    }
                    at += 1;
                }
                if at == start {
                    return Err(format!("frame #{start} should be in {prefix}"));
                }
            }
            Step::LibraryFunction(prefix, names) => {
                let named_as_expected = names.contains(&frame.function.as_str())
                    || (frame.function.is_empty() && variant == Variant::Dynamic);
                if !in_library(frame, prefix) || !named_as_expected {
                    return Err(format!("frame #{at} should be {names:?} in {prefix}"));
                }
                at += 1;
            }
            Step::Truncated => {
                if frame.function != TRUNCATED {
                    return Err(format!("frame #{at} should mark the stack truncated"));
                }
                at += 1;
            }
        }
    }
    if at != frames.len() {
        return Err(format!(
            "frames from #{at} on are not expected (the stack should end there)"
        ));
    }
    Ok(())
}

/// Runs `check` for every build of fixture `name`: each of `link` this machine can build,
/// with each of `codegens`. Fails once at the end, listing every build that failed.
pub fn for_each_build(
    name: &str,
    link: &[Variant],
    codegens: &[CodeGen],
    check: impl Fn(Variant, CodeGen, &Path),
) {
    let mut failures = Vec::new();
    for variant in variants(name)
        .into_iter()
        .filter(|variant| link.contains(variant))
    {
        for &codegen in codegens {
            let path = fixture_with(name, variant, codegen);
            let outcome = catch_unwind(AssertUnwindSafe(|| check(variant, codegen, &path)));
            if let Err(panic) = outcome {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                    .unwrap_or_else(|| "(no message)".to_string());
                failures.push(format!("--- {}:\n{message}", file_name(&path)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
