//! Words that mean what they say, on fixtures/attach_hold.c: blocks still live when memsup
//! detaches are "live at detach", never leaks; a process that exits while attached leaks
//! what it never freed, and the report says the blocks from before the attach are unknown
//! (their frees sized by the heap census at the attach).

use serde_json::Value;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::AttachWindow;
use crate::common::interactive::send_signal;
use crate::common::report::{processes, report_json, report_output};
use crate::common::*;

const HOLDING: &str = "attach_hold: holding 4000 bytes in 2 blocks";

/// attach_hold started natively, told to hold its blocks, and ended (SIGUSR1 unless it
/// exits by itself): what it printed after its announcement, and its exit status.
fn native_run(args: &[&str]) -> (String, Option<i32>) {
    let program = start(args);
    send_signal(program.pid, libc::SIGUSR2);
    let ending = finish(program, args.is_empty());
    (ending, Some(0))
}

fn start(args: &[&str]) -> Running {
    let start = Start {
        args,
        ..Start::default()
    };
    start_announced(
        &fixture("attach_hold", Variant::Dynamic),
        "attach_hold",
        start,
    )
}

/// Reads the holding line, ends the program (`release`: SIGUSR1) and returns what it printed
/// from the holding line on; requires status 0 and no stderr.
fn finish(program: Running, release: bool) -> String {
    let holding = program.next_line("the holding line");
    if release {
        send_signal(program.pid, libc::SIGUSR1);
    }
    format!("{holding}\n{}", program.finish_cleanly())
}

/// The one image of an attach report.
fn only_image(report: &Value) -> &Value {
    let images = processes(report);
    assert_eq!(images.len(), 1, "images: {report}");
    &images[0]
}

/// The text report's row `label`, whole.
fn text_row(text: &str, label: &str) -> String {
    let prefix = format!("  {label:<20} ");
    let rows: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .collect();
    assert_eq!(rows.len(), 1, "one {label:?} row in:\n{text}");
    rows[0].to_string()
}

#[test]
fn blocks_held_at_a_detach_are_live_at_detach() {
    let (native_output, native_status) = native_run(&[]);
    let program = start(&[]);
    let window = AttachWindow::open(&[program.pid], &[]);
    send_signal(program.pid, libc::SIGUSR2);
    assert_eq!(program.next_line("the holding line"), HOLDING);
    let (_, directory) = window.end(true);
    send_signal(program.pid, libc::SIGUSR1);
    let ending = format!("{HOLDING}\n{}", program.finish_cleanly());
    assert_eq!((ending, Some(0)), (native_output, native_status));

    let profile = directory.path().join("attach.msup");
    let report = report_json(&profile);
    let image = only_image(&report);
    showing_on_failure(&format_args!("image: {image}"), || {
        assert_exit(image, "detached", None);
        assert_eq!(image["live_at"], "detach");
        assert_eq!(number(image, "/allocations"), 3);
        assert_eq!(number(image, "/bytes_allocated"), 6000);
        assert_eq!(number(image, "/frees"), 1);
        assert_eq!(number(image, "/unknown_frees"), 1);
        let sources = &image["unknown_free_sources"];
        // malloc(700): a 720-byte chunk, 712 usable bytes, in the census at the attach.
        let expected = serde_json::json!({
            "thread_exit": 0, "before_attach": 1, "before_attach_in_census": 1,
            "before_attach_bytes": 712, "before_fork": 0, "not_seen": 0
        });
        assert_eq!(
            sources, &expected,
            "the early block came from before the attach"
        );
        assert_eq!(number(image, "/live_bytes_at_exit"), 4000);
        assert_eq!(number(image, "/live_blocks_at_exit"), 2);
    });
    let text = report_output(&profile, &[]);
    assert_eq!(
        text_row(&text, "live at detach"),
        "  live at detach       3.91 KiB (4000 bytes) in 2 blocks"
    );
    assert!(
        !text.contains("leaked"),
        "no leak in a detached process:\n{text}"
    );
    assert_eq!(
        text_row(&text, "unknown frees"),
        "  unknown frees        1 of blocks from before the attach, 712 bytes by the heap \
         census at the attach"
    );
    let header = text.lines().find(|line| line.ends_with("  site"));
    assert_eq!(
        header,
        Some("      at peak  allocs    allocated  temporary               at detach  site"),
        "{text}"
    );
    // The full report's lists and their detail lines say it too.
    let full = report_output(&profile, &["--stacks", "full"]);
    assert!(
        !full.contains("leaked"),
        "no leak in a detached process:\n{full}"
    );
    let titles: Vec<&str> = full
        .lines()
        .filter(|line| line.starts_with("  call sites by "))
        .collect();
    assert!(
        titles.contains(&"  call sites by bytes live at detach"),
        "{titles:?}"
    );
    let html = report_output(&profile, &["--format", "html", "-o", "-"]);
    assert!(
        html.contains("6000 bytes) allocated, 3.91 KiB (4000 bytes) live at detach in 2 blocks"),
        "the HTML summary says live at detach"
    );
}

#[test]
fn blocks_left_by_an_exit_while_attached_are_leaks_of_unknown_completeness() {
    let (native_output, native_status) = native_run(&["exit"]);
    let program = start(&["exit"]);
    let window = AttachWindow::open(&[program.pid], &[]);
    send_signal(program.pid, libc::SIGUSR2);
    let ending = finish(program, false);
    assert_eq!((ending, Some(0)), (native_output, native_status));
    let (_, directory) = window.end(false);

    let profile = directory.path().join("attach.msup");
    let report = report_json(&profile);
    let image = only_image(&report);
    showing_on_failure(&format_args!("image: {image}"), || {
        assert_exit(image, "code", Some(0));
        assert_eq!(image["live_at"], "exit");
        assert_eq!(number(image, "/live_bytes_at_exit"), 4000);
        assert_eq!(number(image, "/live_blocks_at_exit"), 2);
    });
    let text = report_output(&profile, &[]);
    assert_eq!(
        text_row(&text, "leaked at exit"),
        "  leaked at exit       3.91 KiB (4000 bytes) in 2 blocks \
         (blocks allocated before the attach are not known)"
    );
}
