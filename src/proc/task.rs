//! What the kernel says one thread is doing: the state letter of
//! /proc/PID/task/TID/stat and the kernel function of /proc/PID/task/TID/wchan.

/// A thread's kernel state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    /// `R` running, `S` sleeping, `D` in uninterruptible sleep, `T` stopped by job control,
    /// `t` stopped by a tracer, `Z` a zombie ...
    pub state: char,
    /// The kernel function the thread sleeps in; "" when it runs, or when the kernel hides it.
    pub wchan: String,
}

/// The state letter of a stat line; it follows the command name, which is in parentheses
/// and may contain anything, parentheses and spaces included.
pub fn parse_stat_state(stat: &str) -> Option<char> {
    let end = stat.rfind(')')?;
    stat[end + 1..].split_whitespace().next()?.chars().next()
}

/// wchan's text as a function name: the kernel writes `0` for none.
pub fn parse_wchan(text: &str) -> String {
    match text.trim() {
        "0" => String::new(),
        name => name.to_string(),
    }
}

/// Thread `tid` of process `pid` now; None when it is gone.
pub fn read_task_state(pid: i32, tid: i32) -> Option<TaskState> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let state = parse_stat_state(&stat)?;
    // Unreadable (kernel.kptr_restrict, another user): unknown, not an error.
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/wchan"))
        .map(|text| parse_wchan(&text))
        .unwrap_or_default();
    Some(TaskState { state, wchan })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(parse_stat_state("42 (a) b) S 1 42 42 0 -1"), Some('S'));
        assert_eq!(parse_stat_state("7 (x y) t 1 7"), Some('t'));
        assert_eq!(parse_stat_state("7 (x y)"), None);
        assert_eq!(parse_stat_state("no parenthesis"), None);
    }

    #[test]
    fn a_zero_wchan_is_no_function() {
        assert_eq!(parse_wchan("0"), "");
        assert_eq!(parse_wchan("pipe_read"), "pipe_read");
        assert_eq!(parse_wchan(""), "");
    }

    #[test]
    fn this_thread_reads_as_running() {
        let pid = std::process::id() as i32;
        // SAFETY: gettid has no side effects.
        let tid = unsafe { libc::gettid() };
        let task = read_task_state(pid, tid).expect("this thread's stat");
        // The thread reading its own stat is on a CPU.
        assert_eq!(task.state, 'R');
        assert_eq!(task.wchan, "");
        assert_eq!(read_task_state(pid, i32::MAX), None);
    }
}
