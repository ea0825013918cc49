//! Where a report goes: stdout, or a file. `-o FILE` names the file (`-o -` is stdout);
//! formats that are files (HTML, Perfetto traces ...) go to a file named after the profile
//! in the current directory, so that a page is never poured onto a terminal. The file is
//! created as profiles are (`trace::output_file`): never through a symbolic link, an
//! existing file only with `--force`, mode 0600.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result, TraceError};
use crate::trace::output_file::{open_output, OutputRequest};

/// The name of the report file when `-o` is not given and the format is a file.
const SEVERAL_PROFILES_STEM: &str = "memsup.report";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    /// `named`: the user gave the path (else memsup chose it and says so).
    File {
        path: PathBuf,
        force: bool,
        named: bool,
    },
}

impl Destination {
    /// `-o` (`-` for stdout); without it, stdout, or for a format whose reports are files
    /// (`suffix`: `html`, `perfetto.json`) STEM.SUFFIX, STEM being the one profile's file
    /// name less `.msup` (a directory's name), or `memsup.report` for several.
    pub fn new(
        output: Option<PathBuf>,
        force: bool,
        suffix: Option<&str>,
        profiles: &[PathBuf],
    ) -> Destination {
        match (output, suffix) {
            (Some(path), _) if path.as_os_str() == "-" => Destination::Stdout,
            (Some(path), _) => Destination::File {
                path,
                force,
                named: true,
            },
            (None, None) => Destination::Stdout,
            (None, Some(suffix)) => Destination::File {
                path: default_name(profiles, suffix),
                force,
                named: false,
            },
        }
    }

    /// The writer to render into.
    pub fn open(&self) -> Result<Box<dyn Write>> {
        match self {
            Destination::Stdout => Ok(Box::new(std::io::stdout().lock())),
            Destination::File { path, force, .. } => {
                // Said here because the profile's message names `-f`, `--format` in `report`.
                let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
                if is_file && !force {
                    return Err(Error::ReportNotWritable {
                        path: path.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            "the file exists; --force overwrites it",
                        ),
                    });
                }
                let request = OutputRequest::Explicit {
                    path: path.clone(),
                    force: *force,
                };
                let output = open_output(&request).map_err(|error| not_writable(path, error))?;
                Ok(Box::new(std::io::BufWriter::new(output.file)))
            }
        }
    }

    /// Names the file memsup chose, once the report is in it.
    pub fn announce(&self) {
        if let Destination::File {
            path, named: false, ..
        } = self
        {
            eprintln!("memsup: report written to {}", path.display());
        }
    }
}

/// STEM.SUFFIX in the current directory.
fn default_name(profiles: &[PathBuf], suffix: &str) -> PathBuf {
    let stem = match profiles {
        [profile] => stem_of(profile),
        _ => SEVERAL_PROFILES_STEM.to_string(),
    };
    PathBuf::from(format!("{stem}.{suffix}"))
}

/// `runs/job.msup` gives `job`, `runs/` gives `runs`, `job.bin` gives `job.bin`.
fn stem_of(profile: &Path) -> String {
    let Some(name) = profile.file_name() else {
        return SEVERAL_PROFILES_STEM.to_string();
    };
    let name = name.to_string_lossy();
    let extension = format!(".{}", crate::analysis::load::PROFILE_EXTENSION);
    name.strip_suffix(&extension).unwrap_or(&name).to_string()
}

fn not_writable(path: &Path, error: TraceError) -> Error {
    let source = match error {
        TraceError::Io { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    };
    Error::ReportNotWritable {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, named: bool) -> Destination {
        Destination::File {
            path: path.into(),
            force: false,
            named,
        }
    }

    #[test]
    fn file_formats_are_named_after_the_profile_and_dash_is_stdout() {
        let one = [PathBuf::from("runs/job.msup")];
        assert_eq!(
            Destination::new(None, false, Some("html"), &one),
            file("job.html", false)
        );
        assert_eq!(
            Destination::new(
                None,
                false,
                Some("perfetto.json"),
                &[PathBuf::from("runs/")]
            ),
            file("runs.perfetto.json", false)
        );
        let two = [PathBuf::from("a.msup"), PathBuf::from("b.msup")];
        assert_eq!(
            Destination::new(None, false, Some("html"), &two),
            file("memsup.report.html", false)
        );
        assert_eq!(
            Destination::new(None, false, None, &one),
            Destination::Stdout
        );
        assert_eq!(
            Destination::new(Some("-".into()), false, Some("html"), &one),
            Destination::Stdout
        );
        assert_eq!(
            Destination::new(Some("r.txt".into()), false, None, &one),
            file("r.txt", true)
        );
    }

    #[test]
    fn an_existing_file_is_refused_without_force_and_kept() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("job.html");
        std::fs::write(&path, "older\n").unwrap();
        let refused = Destination::new(Some(path.clone()), false, None, &[]).open();
        let error = refused.err().expect("an existing file without --force");
        assert_eq!(
            error.exit_code(),
            crate::error::exit_code::OUTPUT_NOT_WRITABLE
        );
        assert_eq!(
            error.to_string(),
            format!(
                "cannot write the report {}: the file exists; --force overwrites it",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "older\n");
        let mut forced = Destination::new(Some(path.clone()), true, None, &[])
            .open()
            .unwrap();
        forced.write_all(b"newer\n").unwrap();
        drop(forced);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "newer\n");
    }
}
