//! Profiles from files: one streamed through the analysis, or many (one per rank, or a
//! directory of them) read and analysed in parallel, one profile per rayon task.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{analyze_records, Analysis, SampleOrder, Settings};
use crate::error::{Error, Result};
use crate::trace::reader::ProfileReader;

/// The file name ending of the profiles a directory given to `report` is read for.
pub const PROFILE_EXTENSION: &str = "msup";

/// Streams the records of the profile at `path` through the analysis: one block in memory
/// at a time, and what the reader found (truncation, damage) added at the end.
pub fn analyze_file(path: &Path, settings: &Settings) -> Result<Analysis> {
    require_input(path)?;
    let mut reader = ProfileReader::open(path)?;
    let header = reader.header().clone();
    let order = SampleOrder::of_version(reader.version());
    let records = reader.by_ref();
    let mut analysis = analyze_records(&header, records, order, path, settings);
    let status = reader.status();
    analysis.profile.truncated = status.truncated;
    analysis.profile.damage = status.damage.to_vec();
    Ok(analysis)
}

/// The analyses of `paths`, in their order, each read on a thread of rayon's pool; the first
/// failure in that order is the error.
pub fn analyze_files(paths: &[PathBuf], settings: &Settings) -> Result<Vec<Analysis>> {
    let results: Vec<Result<Analysis>> = paths
        .par_iter()
        .map(|path| analyze_file(path, settings))
        .collect();
    results.into_iter().collect()
}

/// The profiles `inputs` name: a file as given, a directory as every `*.msup` file in it
/// (not below), sorted by name. A directory without one is an error.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for input in inputs {
        if !input.is_dir() {
            paths.push(input.clone());
            continue;
        }
        let unreadable = |source| Error::InputNotReadable {
            path: input.clone(),
            source,
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(input).map_err(unreadable)? {
            let path = entry.map_err(unreadable)?.path();
            let is_profile = path.extension().is_some_and(|e| e == PROFILE_EXTENSION);
            if is_profile && path.is_file() {
                found.push(path);
            }
        }
        if found.is_empty() {
            let message = format!("the directory holds no *.{PROFILE_EXTENSION} profile");
            return Err(unreadable(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                message,
            )));
        }
        found.sort();
        paths.extend(found);
    }
    Ok(paths)
}

/// A missing profile is "cannot read", like any unreadable input.
pub fn require_input(profile: &Path) -> Result<()> {
    if profile.exists() {
        return Ok(());
    }
    Err(Error::InputNotReadable {
        path: profile.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_its_profiles_sorted_and_files_stay_as_given() {
        let directory = tempfile::tempdir().unwrap();
        for name in ["3.msup", "10.msup", "1.msup", "notes.txt"] {
            std::fs::write(directory.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(directory.path().join("sub.msup")).unwrap();
        let file = PathBuf::from("/elsewhere/x.msup");
        let paths = expand_inputs(&[file.clone(), directory.path().to_path_buf()]).unwrap();
        let names: Vec<String> = paths
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["x.msup", "1.msup", "10.msup", "3.msup"]);
        assert_eq!(paths[0], file);
    }

    #[test]
    fn a_directory_without_profiles_cannot_be_read() {
        let directory = tempfile::tempdir().unwrap();
        let error = expand_inputs(&[directory.path().to_path_buf()]).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit_code::NO_INPUT);
        assert!(
            error.to_string().ends_with("holds no *.msup profile"),
            "{error}"
        );
    }

    #[test]
    fn the_first_unreadable_profile_in_order_is_the_error() {
        let directory = tempfile::tempdir().unwrap();
        let missing = directory.path().join("missing.msup");
        let garbage = directory.path().join("garbage.msup");
        std::fs::write(&garbage, b"not a profile at all").unwrap();
        let error = analyze_files(&[missing.clone(), garbage.clone()], &Settings::default());
        let error = error.unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit_code::NO_INPUT);
        assert!(error.to_string().contains("missing.msup"), "{error}");
        let error = analyze_files(&[garbage], &Settings::default()).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit_code::BAD_PROFILE);
    }
}
