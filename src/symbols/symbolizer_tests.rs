use std::path::{Path, PathBuf};

use super::*;
use crate::symbols::debug_files::DebugFileLocator;
use crate::symbols::test_programs::*;

/// The C program with an inlined malloc call, compiled into a fresh directory.
struct InlinedMalloc {
    directory: tempfile::TempDir,
    program: PathBuf,
    source: PathBuf,
    /// Where `call malloc@plt` returns to in `fill_buffer`.
    return_address: u64,
}

impl InlinedMalloc {
    fn build() -> InlinedMalloc {
        let directory = tempfile::tempdir().unwrap();
        let (program, source) =
            compile(directory.path(), "gcc", "prog.c", INLINED_MALLOC_C, "prog");
        let return_address = return_address_after_call(&program, "fill_buffer", "malloc");
        InlinedMalloc {
            directory,
            program,
            source,
            return_address,
        }
    }

    fn path(&self) -> &str {
        self.program.to_str().unwrap()
    }

    fn directory(&self) -> &Path {
        self.directory.path()
    }

    /// Moves the DWARF into `prog.debug` next to the program, as distributions do:
    /// `--strip-debug` keeps `.symtab`, `--strip-all` removes it too.
    fn split_debug_file(&self, keep_symbol_table: bool) -> PathBuf {
        run(
            self.directory(),
            "objcopy",
            &["--only-keep-debug", "prog", "prog.debug"],
        );
        let strip_option = if keep_symbol_table {
            "--strip-debug"
        } else {
            "--strip-all"
        };
        run(self.directory(), "strip", &[strip_option, "prog"]);
        self.directory().join("prog.debug")
    }

    /// The frames DWARF must give for the malloc call: the inlined function at the call to
    /// malloc, then the noinline function at the call of the inlined one.
    fn expected_frames(&self) -> Vec<SymbolFrame> {
        let (malloc_line, malloc_column) =
            marked_position(INLINED_MALLOC_C, "CALL_MALLOC", "malloc(");
        let (inlined_line, inlined_column) =
            marked_position(INLINED_MALLOC_C, "CALL_INLINED", "make_buffer(");
        let file = Some(self.source.to_str().unwrap().to_string());
        vec![
            SymbolFrame {
                function: "make_buffer".to_string(),
                raw_name: "make_buffer".to_string(),
                file: file.clone(),
                line: Some(malloc_line),
                column: Some(malloc_column),
                inlined: true,
            },
            SymbolFrame {
                function: "fill_buffer".to_string(),
                raw_name: "fill_buffer".to_string(),
                file,
                line: Some(inlined_line),
                column: Some(inlined_column),
                inlined: false,
            },
        ]
    }

    /// The frame the symbol table alone gives: the real function, no position.
    fn symbol_table_frame(&self) -> SymbolFrame {
        SymbolFrame {
            function: "fill_buffer".to_string(),
            raw_name: "fill_buffer".to_string(),
            file: None,
            line: None,
            column: None,
            inlined: false,
        }
    }
}

/// A debug root nobody else uses, so that `/usr/lib/debug` never takes part.
fn empty_debug_root() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn dwarf_in_the_file_gives_inlined_frames_with_lines() {
    let fixture = InlinedMalloc::build();
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
    assert_eq!(frames, fixture.expected_frames());
    assert_eq!(symbolizer.debug_file(fixture.path()), None);
    assert!(symbolizer.module_errors().is_empty());
}

#[test]
fn a_return_address_is_looked_up_at_the_call() {
    let fixture = InlinedMalloc::build();
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    // The same address taken as an instruction address is the line after the call.
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, false);
    let (malloc_line, _) = marked_position(INLINED_MALLOC_C, "CALL_MALLOC", "malloc(");
    assert_eq!(frames[0].function, "make_buffer");
    assert_eq!(frames[0].line, Some(malloc_line + 1));
    let same = symbolizer.symbolize(fixture.path(), fixture.return_address - 1, false);
    assert_eq!(same, fixture.expected_frames());
}

#[test]
fn debuglink_next_to_the_file_restores_the_frames() {
    for keep_symbol_table in [true, false] {
        let fixture = InlinedMalloc::build();
        let debug_file = fixture.split_debug_file(keep_symbol_table);
        run(
            fixture.directory(),
            "objcopy",
            &["--add-gnu-debuglink=prog.debug", "prog"],
        );
        // No build-id match under this root: the debuglink must be what finds it.
        let root = empty_debug_root();
        let mut symbolizer = Symbolizer::new(root.path());
        let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
        assert_eq!(
            frames,
            fixture.expected_frames(),
            "symtab kept: {keep_symbol_table}"
        );
        assert_eq!(
            symbolizer.debug_file(fixture.path()),
            Some(debug_file.as_path())
        );
    }
}

#[test]
fn debuglink_looks_in_dot_debug_and_under_the_root() {
    let fixture = InlinedMalloc::build();
    let debug_file = fixture.split_debug_file(false);
    run(
        fixture.directory(),
        "objcopy",
        &["--add-gnu-debuglink=prog.debug", "prog"],
    );
    let root = empty_debug_root();
    let real_directory = std::fs::canonicalize(fixture.directory()).unwrap();
    let under_root = root
        .path()
        .join(real_directory.strip_prefix("/").unwrap())
        .join("prog.debug");
    let in_dot_debug = fixture.directory().join(".debug").join("prog.debug");
    let mut previous = debug_file;
    for place in [in_dot_debug, under_root] {
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        std::fs::rename(&previous, &place).unwrap();
        let mut symbolizer = Symbolizer::new(root.path());
        let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
        assert_eq!(frames, fixture.expected_frames(), "debug file at {place:?}");
        assert_eq!(symbolizer.debug_file(fixture.path()), Some(place.as_path()));
        previous = place;
    }
}

#[test]
fn debuglink_with_a_wrong_crc_is_not_used() {
    let fixture = InlinedMalloc::build();
    let debug_file = fixture.split_debug_file(true);
    run(
        fixture.directory(),
        "objcopy",
        &["--add-gnu-debuglink=prog.debug", "prog"],
    );
    // Another build's debug file under the same name: one byte differs.
    let mut contents = std::fs::read(&debug_file).unwrap();
    *contents.last_mut().unwrap() ^= 0xff;
    std::fs::write(&debug_file, contents).unwrap();
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
    assert_eq!(frames, vec![fixture.symbol_table_frame()]);
    assert_eq!(symbolizer.debug_file(fixture.path()), None);
}

#[test]
fn build_id_under_the_root_restores_the_frames() {
    for keep_symbol_table in [true, false] {
        let fixture = InlinedMalloc::build();
        let debug_file = fixture.split_debug_file(keep_symbol_table);
        let root = empty_debug_root();
        let build_id = ElfFile::open(fixture.path()).unwrap().build_id().unwrap();
        let place = DebugFileLocator::new(root.path())
            .build_id_path(&build_id)
            .unwrap();
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        std::fs::rename(&debug_file, &place).unwrap();
        let mut symbolizer = Symbolizer::new(root.path());
        let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
        assert_eq!(
            frames,
            fixture.expected_frames(),
            "symtab kept: {keep_symbol_table}"
        );
        assert_eq!(symbolizer.debug_file(fixture.path()), Some(place.as_path()));
    }
}

#[test]
fn compressed_debug_sections_are_inflated() {
    let fixture = InlinedMalloc::build();
    fixture.split_debug_file(false);
    // As Debian's debug packages ship them (SHF_COMPRESSED, zlib).
    let arguments = ["--compress-debug-sections=zlib", "prog.debug"];
    run(fixture.directory(), "objcopy", &arguments);
    run(
        fixture.directory(),
        "objcopy",
        &["--add-gnu-debuglink=prog.debug", "prog"],
    );
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
    assert_eq!(frames, fixture.expected_frames());
}

/// The installed C library, through its `libc6-dbg` file under `/usr/lib/debug` (its
/// sections compressed, inflated in parallel). Without the package: reported as skipped, or
/// a failure under `CI=true`, where every tool must be installed.
#[test]
fn installed_libc_debug_file_names_malloc_with_its_source() {
    let libc_path = "/lib/x86_64-linux-gnu/libc.so.6";
    let libc = ElfFile::open(libc_path).unwrap();
    let build_id = libc.build_id().unwrap();
    let locator = DebugFileLocator::default();
    if !locator.build_id_path(&build_id).unwrap().exists() {
        let missing = "libc6-dbg is not installed";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{missing}, and CI=true requires it");
        }
        eprintln!("skipped: {missing}");
        return;
    }
    let malloc = &libc.find_functions(&["malloc"])[0];
    let mut symbolizer = Symbolizer::default();
    let frames = symbolizer.symbolize(libc_path, malloc.address, false);
    // binutils' addr2line follows the build-id too: `__GI___libc_malloc` (glibc's internal
    // alias is the DW_AT_linkage_name), `./malloc/./malloc/malloc.c:3281` on Debian 12.
    let address = format!("{:#x}", malloc.address);
    let oracle = run(
        Path::new("/"),
        "addr2line",
        &["-f", "-e", libc_path, &address],
    );
    let (function, position) = oracle.split_once('\n').unwrap();
    let line: u32 = position
        .trim_end()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].function, function);
    assert_eq!(frames[0].line, Some(line));
    assert!(frames[0]
        .file
        .as_deref()
        .unwrap()
        .ends_with("malloc/malloc.c"));
    assert_eq!(
        symbolizer.debug_file(libc_path),
        Some(locator.build_id_path(&build_id).unwrap().as_path())
    );
    assert!(symbolizer.module_errors().is_empty());
}

#[test]
fn without_debug_files_the_symbol_table_names_the_function() {
    let fixture = InlinedMalloc::build();
    fixture.split_debug_file(true);
    std::fs::remove_file(fixture.directory().join("prog.debug")).unwrap();
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
    assert_eq!(frames, vec![fixture.symbol_table_frame()]);
}

#[test]
fn without_debug_files_or_symbols_nothing_is_known() {
    let fixture = InlinedMalloc::build();
    fixture.split_debug_file(false);
    std::fs::remove_file(fixture.directory().join("prog.debug")).unwrap();
    let root = empty_debug_root();
    let mut symbolizer = Symbolizer::new(root.path());
    let frames = symbolizer.symbolize(fixture.path(), fixture.return_address, true);
    assert_eq!(frames, Vec::new());
    assert!(symbolizer.module_errors().is_empty());
}

#[test]
fn unreadable_files_give_no_frames_and_an_error() {
    let mut symbolizer = Symbolizer::default();
    assert_eq!(
        symbolizer.symbolize("/nonexistent/prog", 0x1000, true),
        Vec::new()
    );
    let errors = symbolizer.module_errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, "/nonexistent/prog");
}

#[test]
fn cpp_template_names_match_cxxfilt() {
    let directory = tempfile::tempdir().unwrap();
    let (program, _) = compile(directory.path(), "g++", "prog.cpp", TEMPLATE_CPP, "prog");
    let (mangled, address) = symbol_containing(&program, "make_array");
    let expected = cxxfilt(&mangled);
    assert!(
        expected.contains("storage::make_array<storage::Cell>"),
        "{expected}"
    );
    let root = empty_debug_root();
    let path = program.to_str().unwrap();
    let frames = Symbolizer::new(root.path()).symbolize(path, address, false);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].raw_name, mangled);
    assert_eq!(frames[0].function, expected);
    assert!(frames[0].line.is_some());
    // The symbol table alone gives the same name.
    run(directory.path(), "strip", &["--strip-debug", "prog"]);
    let frames = Symbolizer::new(root.path()).symbolize(path, address, false);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].function, expected);
    assert_eq!(frames[0].line, None);
}
