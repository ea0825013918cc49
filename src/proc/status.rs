//! /proc/PID/status, /proc/PID/task, /proc/PID/cmdline.

/// The fields of /proc/PID/status memsup needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub tgid: i32,
    pub ppid: i32,
    /// 0 when not traced.
    pub tracer_pid: i32,
    /// 0 none, 1 strict, 2 filters (`Seccomp`).
    pub seccomp_mode: u32,
    /// How many filters judge the thread's calls (`Seccomp_filters`, Linux 5.9 and later).
    pub seccomp_filters: Option<u32>,
    /// The effective capabilities, one bit per capability (`CapEff`).
    pub effective_capabilities: u64,
    /// The address space's size in bytes (`VmSize`; 0 for a kernel thread or a zombie).
    pub vm_size: u64,
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
            "Seccomp" => status.seccomp_mode = value.trim().parse().unwrap_or(0),
            "Seccomp_filters" => status.seccomp_filters = value.trim().parse().ok(),
            "VmSize" => {
                let kilobytes = value.trim().trim_end_matches("kB").trim();
                status.vm_size = kilobytes.parse::<u64>().unwrap_or(0) * 1024;
            }
            "CapEff" => {
                status.effective_capabilities = u64::from_str_radix(value.trim(), 16).unwrap_or(0)
            }
            _ => {}
        }
    }
    status
}

/// The memory counters of /proc/PID/status, in bytes. The kernel reads them from per-mm
/// counters without walking page tables, so they are cheap, but approximate (per-CPU
/// batching; see DESIGN.md "Residency sampling").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusMemory {
    /// VmRSS
    pub rss: u64,
    /// VmHWM: the kernel's own high-water mark of VmRSS.
    pub hwm: u64,
    /// RssAnon, RssFile, RssShmem: the parts of VmRSS.
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    /// VmSwap
    pub swap: u64,
    /// State R: the main thread runs or waits for a CPU (and may be writing memory).
    pub running: bool,
}

/// Parses the memory lines of /proc/PID/status without allocating. `None` when there is no
/// VmRSS line: a zombie or a kernel thread has no memory to report.
pub fn parse_status_memory(text: &[u8]) -> Option<StatusMemory> {
    use super::smaps::{kilobytes, split_field};
    let mut memory = StatusMemory::default();
    let mut seen_rss = false;
    for line in text.split(|&byte| byte == b'\n') {
        let Some((key, value)) = split_field(line) else {
            continue;
        };
        if key == b"State" {
            memory.running = value.trim_ascii_start().first() == Some(&b'R');
            continue;
        }
        let field = match key {
            b"VmRSS" => {
                seen_rss = true;
                &mut memory.rss
            }
            b"VmHWM" => &mut memory.hwm,
            b"RssAnon" => &mut memory.anon,
            b"RssFile" => &mut memory.file,
            b"RssShmem" => &mut memory.shmem,
            b"VmSwap" => &mut memory.swap,
            _ => continue,
        };
        *field = kilobytes(value).unwrap_or(0);
    }
    seen_rss.then_some(memory)
}

pub fn read_status(pid: i32) -> std::io::Result<Status> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_status(&text))
}

/// The kernel's PF_KTHREAD task flag (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Whether `pid` is a kernel thread: PF_KTHREAD in the flags of /proc/PID/stat.
pub fn is_kernel_thread(pid: i32) -> std::io::Result<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    Ok(stat_flags(&text).is_some_and(|flags| flags & PF_KTHREAD != 0))
}

/// Field 9 (flags) of a /proc/PID/stat line; the name in field 2 may hold spaces and
/// parentheses, so fields are counted after its last ')'.
fn stat_flags(text: &str) -> Option<u64> {
    let after_name = &text[text.rfind(')')? + 1..];
    after_name.split_whitespace().nth(6)?.parse().ok()
}

/// Thread ids in /proc/PID/task, sorted.
/// Nanoseconds thread group leader `pid` has run on a CPU (the first field of
/// /proc/PID/schedstat); None when the kernel does not keep it or the process is gone.
pub fn read_cpu_ns(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

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
                    Ngid:\t0\nPid:\t4243\nPPid:\t1\nTracerPid:\t777\nUid:\t1000\t1000\n\
                    VmSize:\t    8592 kB\nCapEff:\t0000000000004000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t3\n";
        assert_eq!(
            parse_status(text),
            Status {
                name: "my worker: 2".to_string(),
                tgid: 4242,
                ppid: 1,
                tracer_pid: 777,
                seccomp_mode: 2,
                seccomp_filters: Some(3),
                effective_capabilities: 1 << 14,
                vm_size: 8592 * 1024,
            }
        );
        assert_eq!(parse_status("garbage\nTgid:\tx\n"), Status::default());
    }

    #[test]
    fn parses_the_memory_lines() {
        let text = b"Name:\tcat\nState:\tR (running)\nTgid:\t12\nVmPeak:\t    8592 kB\nVmHWM:\t    1932 kB\n\
                     VmRSS:\t    1900 kB\nRssAnon:\t     148 kB\nRssFile:\t    1752 kB\n\
                     RssShmem:\t       0 kB\nVmData:\t     292 kB\nVmSwap:\t      12 kB\n\
                     HugetlbPages:\t       0 kB\n";
        assert_eq!(
            parse_status_memory(text),
            Some(StatusMemory {
                rss: 1900 << 10,
                hwm: 1932 << 10,
                anon: 148 << 10,
                file: 1752 << 10,
                shmem: 0,
                swap: 12 << 10,
                running: true,
            })
        );
        let sleeping = b"State:\tS (sleeping)\nVmRSS:\t     4 kB\n";
        assert!(!parse_status_memory(sleeping).unwrap().running);
        // A zombie's status has no Vm lines.
        assert_eq!(parse_status_memory(b"Name:\tz\nState:\tZ (zombie)\n"), None);
    }

    #[test]
    fn splits_command_lines() {
        assert_eq!(split_cmdline(b"ls\0-l\0\0x\0"), vec!["ls", "-l", "", "x"]);
        assert_eq!(split_cmdline(b"rewritten title"), vec!["rewritten title"]);
        assert!(split_cmdline(b"").is_empty());
        assert_eq!(split_cmdline(b"a\xff\0"), vec!["a\u{fffd}"]);
    }

    #[test]
    fn reads_the_flags_field_of_stat() {
        let kthreadd = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        assert_eq!(stat_flags(kthreadd), Some(2_129_984));
        let odd_name = "77 (a) b (c) R 1 77 77 0 -1 4194304 10 0 0 0";
        assert_eq!(stat_flags(odd_name), Some(4_194_304));
        assert!(!is_kernel_thread(std::process::id() as i32).unwrap());
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
        let text = std::fs::read(format!("/proc/{pid}/status")).unwrap();
        let memory = parse_status_memory(&text).unwrap();
        assert!(memory.rss > 0 && memory.hwm >= memory.rss);
        // The parts add up to VmRSS: the kernel prints them from the same counters.
        assert_eq!(memory.anon + memory.file + memory.shmem, memory.rss);
    }
}
