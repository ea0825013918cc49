//! /proc/PID/environ: the environment the process's current image was started with. The
//! kernel reads it from the image's own stack, so it is the exec's environment (later
//! `setenv` calls are not seen) and a new exec replaces it.

use std::io::Read;

/// The most of /proc/PID/environ read. An environment larger than this loses its last
/// variables; the MPI launchers put theirs among many, so the limit is generous.
pub const ENVIRON_READ_LIMIT: u64 = 1 << 20;

/// The raw `NAME=value\0...` bytes of a process's environment, at most `ENVIRON_READ_LIMIT`.
pub fn read_environ(pid: i32) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(format!("/proc/{pid}/environ"))?;
    let mut bytes = Vec::new();
    file.take(ENVIRON_READ_LIMIT).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The value of variable `name` in `environ` (`NAME=value` entries separated by NULs), as
/// `getenv` would give it: the first entry of that name. `None` when absent or not UTF-8.
pub fn variable<'a>(environ: &'a [u8], name: &str) -> Option<&'a str> {
    environ
        .split(|&byte| byte == 0)
        .find_map(|entry| {
            let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            Some(value)
        })
        .and_then(|value| std::str::from_utf8(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVIRON: &[u8] =
        b"PATH=/usr/bin\0PMI_RANK=3\0PMI_SIZE=4\0EMPTY=\0PMI_RANK=9\0PMI_RANKS=7\0BAD=\xff\0LAST=x";

    #[test]
    fn finds_the_first_entry_of_a_name_and_no_longer_one() {
        assert_eq!(variable(ENVIRON, "PMI_RANK"), Some("3"));
        assert_eq!(variable(ENVIRON, "PMI_SIZE"), Some("4"));
        assert_eq!(variable(ENVIRON, "PMI_RANKS"), Some("7"));
        assert_eq!(variable(ENVIRON, "PMI"), None);
    }

    #[test]
    fn an_empty_value_is_a_value_and_bad_bytes_are_none() {
        assert_eq!(variable(ENVIRON, "EMPTY"), Some(""));
        assert_eq!(variable(ENVIRON, "BAD"), None);
        assert_eq!(variable(ENVIRON, "MISSING"), None);
    }

    #[test]
    fn the_last_entry_needs_no_terminator_and_an_empty_environment_has_nothing() {
        assert_eq!(variable(ENVIRON, "LAST"), Some("x"));
        assert_eq!(variable(b"", "PATH"), None);
        assert_eq!(variable(b"\0\0", "PATH"), None);
    }

    #[test]
    fn reads_its_own_environment() {
        let environ = read_environ(std::process::id() as i32).unwrap();
        let path = std::env::var("PATH").unwrap();
        assert_eq!(variable(&environ, "PATH"), Some(path.as_str()));
    }
}
