//! A snapshot's threads on the HTML page: as in the text report, one entry per distinct
//! stack with how many threads share it and what each was doing, innermost frame first.

use std::fmt::Write;

use super::escape;
use crate::analysis::ProcessAnalysis;
use crate::report::text::{frame_line, human_duration, thread_line};

/// The section of image `index`, empty when the image is not a snapshot's.
pub fn html_section(image: &ProcessAnalysis, index: usize) -> String {
    let Some(snapshot) = &image.snapshot else {
        return String::new();
    };
    let threads: usize = snapshot
        .groups
        .iter()
        .map(|group| group.threads.len())
        .sum();
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<section class=\"threads\" id=\"threads-{index}\" data-pid=\"{}\">\n\
         <h2>Threads: {} {}, stopped for {}</h2>\n\
         <p>{threads} {} in {} distinct {}</p>",
        image.pid,
        image.pid,
        escape(&image.exe),
        human_duration(snapshot.stopped_ns),
        if threads == 1 { "thread" } else { "threads" },
        snapshot.groups.len(),
        if snapshot.groups.len() == 1 {
            "stack"
        } else {
            "stacks"
        }
    );
    for group in &snapshot.groups {
        let count = group.threads.len();
        let noun = if count == 1 { "thread" } else { "threads" };
        let _ = writeln!(
            html,
            "<details class=\"thread-group\" open>\n<summary>{count} {noun}</summary>\n<ul>"
        );
        for thread in &group.threads {
            let _ = writeln!(html, "<li>{}</li>", escape(&thread_line(thread)));
        }
        html.push_str("</ul>\n");
        if group.stack.is_empty() {
            html.push_str("<p>(no stack recorded)</p>\n");
        } else {
            html.push_str("<ol class=\"stack\" start=\"0\">\n");
            for frame in &group.stack {
                let _ = writeln!(html, "<li>{}</li>", escape(&frame_line(frame)));
            }
            html.push_str("</ol>\n");
        }
        html.push_str("</details>\n");
    }
    html.push_str("</section>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::two_stack_snapshot;
    use crate::trace::format::StartCause;

    #[test]
    fn each_stack_is_one_group_with_its_threads_and_frames_escaped() {
        let mut image = ProcessAnalysis::new(7, None, StartCause::Attach, 0);
        image.exe = "/bin/t<1>".to_string();
        assert_eq!(html_section(&image, 3), "");
        image.snapshot = Some(two_stack_snapshot());
        assert_eq!(
            html_section(&image, 3),
            "<section class=\"threads\" id=\"threads-3\" data-pid=\"7\">\n\
             <h2>Threads: 7 /bin/t&lt;1&gt;, stopped for 1.50 ms</h2>\n\
             <p>3 threads in 2 distinct stacks</p>\n\
             <details class=\"thread-group\" open>\n<summary>2 threads</summary>\n<ul>\n\
             <li>thread 5: in system call futex (kernel state S, wchan futex_wait_queue)</li>\n\
             <li>thread 6: in system call futex (kernel state S, wchan futex_wait_queue)</li>\n\
             </ul>\n<ol class=\"stack\" start=\"0\">\n\
             <li>wait_here at t.c:3 in t</li>\n<li>worker at t.c:9 in t</li>\n</ol>\n\
             </details>\n\
             <details class=\"thread-group\" open>\n<summary>1 thread</summary>\n<ul>\n\
             <li>thread 4: running (kernel state S)</li>\n</ul>\n\
             <ol class=\"stack\" start=\"0\">\n<li>spin at t.c:20 in t</li>\n</ol>\n\
             </details>\n</section>\n"
        );
    }
}
