//! A snapshot's threads in the text report: one entry per distinct stack, with how many
//! threads share it, which, and what each was doing; innermost frame first, like gdb's `bt`.

use std::io::Write;

use super::sites::frame_line;
use crate::analysis::threads::activity_name;
use crate::analysis::{ProcessSnapshot, SnapshotThread};

pub(super) fn render_threads(
    snapshot: &ProcessSnapshot,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let threads: usize = snapshot
        .groups
        .iter()
        .map(|group| group.threads.len())
        .sum();
    writeln!(
        out,
        "\n  Threads: {threads} in {} distinct {}",
        snapshot.groups.len(),
        if snapshot.groups.len() == 1 {
            "stack"
        } else {
            "stacks"
        }
    )?;
    for group in &snapshot.groups {
        let count = group.threads.len();
        let noun = if count == 1 { "thread" } else { "threads" };
        writeln!(out, "    {count} {noun}:")?;
        for thread in &group.threads {
            writeln!(out, "       {}", thread_line(thread))?;
        }
        if group.stack.is_empty() {
            writeln!(out, "         (no stack recorded)")?;
        }
        for (depth, frame) in group.stack.iter().enumerate() {
            writeln!(out, "         #{depth:<2} {}", frame_line(frame))?;
        }
    }
    Ok(())
}

/// `thread 1235: in system call read (kernel state S, wchan pipe_read)`.
pub fn thread_line(thread: &SnapshotThread) -> String {
    let mut kernel = format!("kernel state {}", thread.kernel_state);
    if !thread.wchan.is_empty() {
        kernel.push_str(&format!(", wchan {}", thread.wchan));
    }
    format!(
        "thread {}: {} ({kernel})",
        thread.tid,
        activity_name(thread.activity)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::two_stack_snapshot;

    #[test]
    fn each_stack_is_shown_once_with_its_threads() {
        let snapshot = two_stack_snapshot();
        let mut out = Vec::new();
        render_threads(&snapshot, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\n  Threads: 3 in 2 distinct stacks\n\
             \x20   2 threads:\n\
             \x20      thread 5: in system call futex (kernel state S, wchan futex_wait_queue)\n\
             \x20      thread 6: in system call futex (kernel state S, wchan futex_wait_queue)\n\
             \x20        #0  wait_here at t.c:3 in t\n\
             \x20        #1  worker at t.c:9 in t\n\
             \x20   1 thread:\n\
             \x20      thread 4: running (kernel state S)\n\
             \x20        #0  spin at t.c:20 in t\n"
        );
    }
}
