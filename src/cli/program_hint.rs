//! `memsup ./app`: a program where a verb belongs is most likely meant to be run, so the
//! usage error says how.

use std::ffi::OsString;
use std::path::Path;

/// The one-line error for a command line whose first word (after memsup's own options) is
/// no verb but a program: an existing file, a path, or a command found on PATH. None when
/// the word looks like a mistyped verb, left to clap's message.
pub fn run_suggestion(arguments: &[OsString], verbs: &[&str]) -> Option<String> {
    let position = arguments
        .iter()
        .position(|word| !word.to_string_lossy().starts_with('-'))?;
    let program = arguments[position].to_string_lossy();
    if verbs.contains(&program.as_ref()) || !looks_like_a_program(&program) {
        return None;
    }
    let command: Vec<String> = arguments[position..]
        .iter()
        .map(|word| word.to_string_lossy().into_owned())
        .collect();
    Some(format!(
        "'{program}' is not a memsup command; to record it: memsup run -- {}",
        command.join(" ")
    ))
}

fn looks_like_a_program(word: &str) -> bool {
    word.contains('/') || Path::new(word).is_file() || on_path(word)
}

/// An executable regular file named `word` in a directory of PATH.
fn on_path(word: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|directory| {
        std::fs::metadata(directory.join(word))
            .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERBS: [&str; 3] = ["run", "report", "help"];

    fn words(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_path_or_a_command_on_path_is_suggested_to_run() {
        assert_eq!(
            run_suggestion(&words(&["./app", "--size", "3"]), &VERBS).as_deref(),
            Some("'./app' is not a memsup command; to record it: memsup run -- ./app --size 3")
        );
        assert_eq!(
            run_suggestion(&words(&["sh"]), &VERBS).as_deref(),
            Some("'sh' is not a memsup command; to record it: memsup run -- sh")
        );
    }

    #[test]
    fn a_mistyped_verb_is_left_to_clap() {
        assert_eq!(run_suggestion(&words(&["reprot", "p.msup"]), &VERBS), None);
        assert_eq!(run_suggestion(&words(&["report", "p.msup"]), &VERBS), None);
        assert_eq!(run_suggestion(&words(&["--verbose"]), &VERBS), None);
    }
}
