//! A profile held by one memsup is refused to another (exit 78 in main), and `-o DIR/` makes
//! DIR.

use std::os::unix::fs::PermissionsExt;

use crate::error::TraceError;
use crate::trace::output_file::{open_output, OutputRequest};
use crate::trace::output_lock::ProfileInUse;

fn busy_message(path: &std::path::Path) -> String {
    format!(
        "{}: another memsup is writing it now; give each memsup a file of its own \
         (%r, %p or %h in -o, or -o DIR/)",
        path.display()
    )
}

fn is_busy(error: &TraceError) -> bool {
    matches!(error, TraceError::Io { source, .. } if ProfileInUse::is(source))
}

#[test]
fn a_profile_being_written_is_refused_to_a_second_writer_with_or_without_force() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("0.msup");
    let first = open_output(&OutputRequest::Explicit {
        path: path.clone(),
        force: false,
    })
    .unwrap();
    for force in [false, true] {
        let request = OutputRequest::Explicit {
            path: path.clone(),
            force,
        };
        let error = open_output(&request).unwrap_err();
        assert!(is_busy(&error), "force: {force}: {error:?}");
        assert_eq!(error.to_string(), busy_message(&path), "force: {force}");
    }
    drop(first);
    // Written and closed: an old profile, refused without --force and overwritten with it.
    let error = open_output(&OutputRequest::Explicit {
        path: path.clone(),
        force: false,
    })
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: the file exists; -f/--force overwrites it",
            path.display()
        )
    );
    let forced = open_output(&OutputRequest::Explicit {
        path: path.clone(),
        force: true,
    })
    .unwrap();
    // Held under --force too.
    let error = open_output(&OutputRequest::Explicit {
        path: path.clone(),
        force: true,
    })
    .unwrap_err();
    assert!(is_busy(&error), "{error:?}");
    drop(forced);
}

#[test]
fn a_directory_request_makes_the_directory_and_takes_the_next_free_name() {
    let parent = tempfile::tempdir().unwrap();
    let directory = parent.path().join("job");
    let request = OutputRequest::InDirectory {
        directory: directory.clone(),
        name: "memsup.app.3".into(),
    };
    assert_eq!(request.first_path(), directory.join("memsup.app.3.msup"));
    let first = open_output(&request).unwrap();
    let second = open_output(&request).unwrap();
    assert_eq!(first.path, directory.join("memsup.app.3.msup"));
    assert_eq!(second.path, directory.join("memsup.app.3.1.msup"));
    let mode = std::fs::metadata(&directory).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
    for path in [&first.path, &second.path] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

#[test]
fn a_directory_that_cannot_be_made_is_one_error() {
    let parent = tempfile::tempdir().unwrap();
    let file = parent.path().join("plain");
    std::fs::write(&file, "").unwrap();
    let request = OutputRequest::InDirectory {
        directory: file.clone(),
        name: "memsup.app.3".into(),
    };
    let error = open_output(&request).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}: File exists (os error 17)", file.display())
    );
}
