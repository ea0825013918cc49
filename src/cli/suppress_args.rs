//! The leak suppression options of `memsup report`.

use std::path::PathBuf;

/// Which leaks `memsup report` leaves out.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SuppressArgs {
    /// Leave out of the leaks the blocks of call sites that FILE's rules match, in
    /// LeakSanitizer's format: `leak:PATTERN` lines (`#` comments), PATTERN matching a
    /// function, a module file name or a source file name anywhere in the site's stack
    /// (`*` any run of characters, `^` and `$` anchors, else anywhere in the name).
    #[arg(long, value_name = "FILE")]
    pub suppressions: Option<PathBuf>,
    /// Keep the one-time allocations of the C and C++ runtimes among the leaks
    /// (libstdc++'s emergency exception pool, the dynamic loader's blocks, stdio buffers).
    #[arg(long = "no-default-suppressions")]
    pub no_default_suppressions: bool,
}
