//! Test programs for the symboliser, compiled at test time with gcc/g++, and the binutils
//! commands the tests compare against.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An inlined function calls malloc inside a noinline function. The markers name the lines
/// the tests expect.
pub const INLINED_MALLOC_C: &str = r#"#include <stdlib.h>

char *volatile last_buffer;

static inline __attribute__((always_inline)) char *make_buffer(size_t size)
{
    char *buffer = malloc(size); /* CALL_MALLOC */
    if (buffer != NULL)
        buffer[0] = 'x';
    return buffer;
}

__attribute__((noinline)) size_t fill_buffer(size_t size)
{
    char *buffer = make_buffer(size); /* CALL_INLINED */
    last_buffer = buffer;
    return size * 2;
}

int main(int argc, char **argv)
{
    (void)argv;
    size_t result = fill_buffer((size_t)argc * 16);
    free(last_buffer);
    return (int)(result & 1);
}
"#;

/// A function template in a namespace, instantiated with a class of that namespace.
pub const TEMPLATE_CPP: &str = r#"#include <cstddef>

namespace storage {
struct Cell {
    double value;
};

template <typename T>
__attribute__((noipa)) T *make_array(std::size_t count)
{
    return new T[count];
}
} // namespace storage

int main(int argc, char **argv)
{
    (void)argv;
    storage::Cell *cells = storage::make_array<storage::Cell>(static_cast<std::size_t>(argc));
    int result = cells != nullptr ? 0 : 1;
    delete[] cells;
    return result;
}
"#;

/// Runs `program` in `directory` and returns its stdout; panics with its stderr on failure.
pub fn run(directory: &Path, program: &str, arguments: &[&str]) -> String {
    let output = Command::new(program)
        .args(arguments)
        .current_dir(directory)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {arguments:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// Writes `source` to `directory/source_name` and compiles it to `directory/name` with
/// `-O2 -g` and a build-id. Returns (program, source) paths.
pub fn compile(
    directory: &Path,
    compiler: &str,
    source_name: &str,
    source: &str,
    name: &str,
) -> (PathBuf, PathBuf) {
    let source_path = directory.join(source_name);
    std::fs::write(&source_path, source).unwrap();
    let program = directory.join(name);
    run(
        directory,
        compiler,
        &[
            "-O2",
            "-g",
            "-Wl,--build-id",
            source_path.to_str().unwrap(),
            "-o",
            program.to_str().unwrap(),
        ],
    );
    (program, source_path)
}

/// 1-based (line, column) of `needle` on the line of `source` that holds `marker`.
pub fn marked_position(source: &str, marker: &str, needle: &str) -> (u32, u32) {
    let (index, text) = source
        .lines()
        .enumerate()
        .find(|(_, text)| text.contains(marker))
        .unwrap_or_else(|| panic!("no line marked {marker}"));
    let column = text.find(needle).expect("needle on the marked line") + 1;
    ((index + 1) as u32, column as u32)
}

/// The address of the instruction after the first `call <callee@plt>` in `function`, from
/// `objdump -d`: the return address that call pushes.
pub fn return_address_after_call(program: &Path, function: &str, callee: &str) -> u64 {
    let disassembly = run(
        program.parent().unwrap(),
        "objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            &format!("--disassemble={function}"),
            program.to_str().unwrap(),
        ],
    );
    // Instruction lines look like `    1149:\tcall   1030 <malloc@plt>`.
    let addresses_and_text: Vec<(u64, &str)> = disassembly
        .lines()
        .filter_map(|line| {
            let (address, text) = line.trim_start().split_once(":\t")?;
            Some((u64::from_str_radix(address, 16).ok()?, text))
        })
        .collect();
    let target = format!("<{callee}@plt>");
    let call_index = addresses_and_text
        .iter()
        .position(|(_, text)| text.starts_with("call") && text.contains(&target))
        .unwrap_or_else(|| panic!("no call to {callee} in {function}:\n{disassembly}"));
    addresses_and_text[call_index + 1].0
}

/// The mangled name and address of the defined symbol whose name contains `part` (`nm`).
pub fn symbol_containing(program: &Path, part: &str) -> (String, u64) {
    let listing = run(
        program.parent().unwrap(),
        "nm",
        &["--defined-only", program.to_str().unwrap()],
    );
    listing
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            let _kind = fields.next()?;
            Some((fields.next()?.to_string(), address))
        })
        .find(|(name, _)| name.contains(part))
        .unwrap_or_else(|| panic!("no symbol containing {part}"))
}

/// What binutils' c++filt prints for `mangled`.
pub fn cxxfilt(mangled: &str) -> String {
    run(Path::new("/"), "c++filt", &[mangled])
        .trim_end()
        .to_string()
}
