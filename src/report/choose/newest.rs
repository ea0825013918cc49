//! `memsup report` without a PROFILE: the newest profile in the current directory.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::analysis::load::PROFILE_EXTENSION;
use crate::error::{Error, Result};

/// The profiles named on the command line; when none is, the newest `*.msup` file of the
/// current directory, named on stderr so that the user knows which one was read.
pub fn profiles_or_newest(profiles: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    if !profiles.is_empty() {
        return Ok(profiles);
    }
    let newest = newest_profile(Path::new("."))?;
    eprintln!(
        "memsup: reading {}, the newest profile in the current directory",
        newest.display()
    );
    Ok(vec![newest])
}

/// The `*.msup` regular file of `directory` modified last (of two with one time, the one
/// whose name sorts last), as `directory` joined with its name, `./` left out.
pub fn newest_profile(directory: &Path) -> Result<PathBuf> {
    let unreadable = |source| Error::InputNotReadable {
        path: directory.to_path_buf(),
        source,
    };
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(directory).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = PathBuf::from(entry.file_name());
        if path
            .extension()
            .map_or(true, |extension| extension != PROFILE_EXTENSION)
        {
            continue;
        }
        // Through a link, as a named profile is read; a dangling link or a directory is none.
        let Ok(metadata) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if !metadata.is_file() {
            continue;
        }
        let modified = metadata.modified().map_err(unreadable)?;
        if newest
            .as_ref()
            .map_or(true, |best| (modified, &path) > (best.0, &best.1))
        {
            newest = Some((modified, path));
        }
    }
    match newest {
        Some((_, name)) if directory == Path::new(".") => Ok(name),
        Some((_, name)) => Ok(directory.join(name)),
        None => Err(Error::NoProfileHere {
            directory: directory.to_path_buf(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write_at(path: &Path, seconds: u64) {
        std::fs::write(path, b"x").unwrap();
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(time).unwrap();
    }

    #[test]
    fn the_profile_modified_last_is_chosen_whatever_its_name() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path();
        write_at(&path.join("b.msup"), 2_000_000_000);
        write_at(&path.join("a.msup"), 2_000_000_100);
        write_at(&path.join("c.msup.html"), 2_000_000_200);
        write_at(&path.join("z.txt"), 2_000_000_300);
        std::fs::create_dir(path.join("d.msup")).unwrap();
        assert_eq!(newest_profile(path).unwrap(), path.join("a.msup"));
    }

    #[test]
    fn a_directory_without_a_profile_is_an_error_of_its_own() {
        let directory = tempfile::tempdir().unwrap();
        write_at(&directory.path().join("notes.txt"), 2_000_000_000);
        let error = newest_profile(directory.path()).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit_code::NO_PROFILE_HERE);
        assert_eq!(error.to_string().lines().count(), 1);
    }
}
