//! /proc/PID/status, /proc/PID/task, /proc/PID/cmdline.

/// The fields of /proc/PID/status memsup needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub tgid: i32,
    pub ppid: i32,
    /// 0 when not traced.
    pub tracer_pid: i32,
}

/// Parses the text of /proc/PID/status; missing or malformed fields stay at their defaults.
pub fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        // The kernel writes "Key:\tvalue"; a name may itself contain spaces.
        let value = value.trim_start_matches(['\t', ' ']);
        let number = || value.trim().parse().unwrap_or(0);
        match key {
            "Name" => status.name = value.to_string(),
            "Tgid" => status.tgid = number(),
            "PPid" => status.ppid = number(),
            "TracerPid" => status.tracer_pid = number(),
            _ => {}
        }
    }
    status
}

pub fn read_status(pid: i32) -> std::io::Result<Status> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_status(&text))
}

/// Thread ids in /proc/PID/task, sorted.
pub fn read_tasks(pid: i32) -> std::io::Result<Vec<i32>> {
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        {
            tasks.push(tid);
        }
    }
    tasks.sort_unstable();
    Ok(tasks)
}

/// /proc/PID/cmdline split at NULs (lossy UTF-8). Empty for zombies and kernel threads.
pub fn read_cmdline(pid: i32) -> std::io::Result<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline"))?;
    Ok(split_cmdline(&bytes))
}

/// Splits at NULs, dropping the empty piece after the final NUL.
fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    let mut pieces: Vec<String> = bytes
        .split(|&byte| byte == 0)
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect();
    if pieces.last().is_some_and(|piece| piece.is_empty()) {
        pieces.pop();
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_needed_fields() {
        let text = "Name:\tmy worker: 2\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
                    Ngid:\t0\nPid:\t4243\nPPid:\t1\nTracerPid:\t777\nUid:\t1000\t1000\n";
        assert_eq!(
            parse_status(text),
            Status {
                name: "my worker: 2".to_string(),
                tgid: 4242,
                ppid: 1,
                tracer_pid: 777,
            }
        );
        assert_eq!(parse_status("garbage\nTgid:\tx\n"), Status::default());
    }

    #[test]
    fn splits_command_lines() {
        assert_eq!(split_cmdline(b"ls\0-l\0\0x\0"), vec!["ls", "-l", "", "x"]);
        assert_eq!(split_cmdline(b"rewritten title"), vec!["rewritten title"]);
        assert!(split_cmdline(b"").is_empty());
        assert_eq!(split_cmdline(b"a\xff\0"), vec!["a\u{fffd}"]);
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id() as i32;
        let status = read_status(pid).unwrap();
        assert_eq!(status.tgid, pid);
        assert!(status.ppid > 0);
        assert!(read_tasks(pid).unwrap().contains(&pid));
        let arguments = read_cmdline(pid).unwrap();
        let executable = std::env::current_exe().unwrap();
        let file_name = executable.file_name().unwrap().to_string_lossy();
        assert!(arguments[0].contains(file_name.as_ref()));
    }
}
