//! fixtures/hook_detach.c: a detach under the hook engine that meets a thread inside a hooked
//! call (the call waits there until the detach has put its entry back) lets the thread run out
//! of the hook code, then unmaps every page memsup placed: the program's code and mappings
//! are as before the attach, and it ends as a native run does. A thread blocked inside a
//! hooked call keeps the pages mapped, switched off; it returns through them later, and the
//! next attach removes them. A process that ends as it leaves them takes them along; one
//! forked meanwhile has its copies removed too.

use std::path::Path;

use serde_json::Value;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::{attached_line, AttachWindow};
use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, hook_mappings, CodeSnapshot,
};
use crate::common::report::processes;
use crate::common::*;

/// What the fixture prints after its pid line for two lines of input.
const TWO_CALLS: &str = "hook_detach: ready\nhook_detach: inside\nhook_detach: out\n\
hook_detach: inside\nhook_detach: out\nhook_detach: 2 calls, every block returned\n";

/// Everything after the first line.
fn after_pid(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    text.split_once('\n')
        .map_or(String::new(), |(_, rest)| rest.to_string())
}

/// The fixture started natively, with its code as it was before any attach.
fn start(fixture: &Path) -> (Running, CodeSnapshot) {
    let native = run_native(fixture, &[], Some(b"plain\nplain\n"));
    assert_eq!(native.status.code(), Some(0));
    assert_eq!(after_pid(&native.stdout), TWO_CALLS);
    let start = Start {
        piped_stdin: true,
        ..Start::default()
    };
    let program = start_announced(fixture, "hook_detach", start);
    let code = executable_mappings(program.pid);
    (program, code)
}

/// Attaches with hooks, sends `line` (the fixture waits until mi_malloc is hooked, then
/// calls it, which announces it is inside) and detaches while the call is inside the hook.
/// Returns memsup's own lines after the one saying it attached, the program's image and
/// the report.
fn detach_inside_a_call(program: &mut Running, line: &[u8]) -> (Vec<String>, Value, Value) {
    let window = AttachWindow::open(&[program.pid], &["--engine", "hooks"]);
    program.write_stdin(line);
    assert_eq!(program.next_line("the held call"), "hook_detach: inside");
    let (output, report) = window.close();
    let (_, mut memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(
        memsup_lines.first(),
        Some(&attached_line(&[program.pid], "Ctrl-C detaches"))
    );
    memsup_lines.remove(0);
    let image = processes(&report)[0].clone();
    // mi_malloc was hooked: the fixture waited for its entry to become a jump.
    assert_eq!(image["engine"], "hooks", "{image}");
    (memsup_lines, image, report)
}

/// memsup said only where it wrote the profile: no warning.
fn assert_profile_line_only(memsup_lines: &[String]) {
    assert_eq!(memsup_lines.len(), 1, "{memsup_lines:?}");
    assert!(
        memsup_lines[0].starts_with("memsup: profile written to "),
        "{memsup_lines:?}"
    );
}

/// The rest of the program's run: its output and exit status are a native run's.
fn finish(program: Running) {
    let (_, output) = program.finish();
    assert_eq!(after_pid(&output.stdout), TWO_CALLS);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn a_detach_lets_a_thread_leave_the_hook_code_then_removes_it() {
    for_each_variant("hook_detach", |_, fixture| {
        let (mut program, code_before) = start(fixture);
        // The call waits inside the hook until the detach has put mi_malloc's entry back.
        let (memsup_lines, image, _) = detach_inside_a_call(&mut program, b"hooked\n");
        assert_eq!(program.next_line("the call's end"), "hook_detach: out");
        assert_profile_line_only(&memsup_lines);
        assert_eq!(image["warnings"], serde_json::json!([]), "{image}");
        assert_eq!(hook_mappings(program.pid), Vec::<String>::new());
        assert_code_unchanged(program.pid, &code_before);
        program.write_stdin(b"plain\n");
        finish(program);
    });
}

/// A process that ends while the detach runs it out of the hook code takes the code with it:
/// no warning that it stayed mapped.
#[test]
fn a_process_ending_while_it_leaves_the_hook_code_takes_the_code_with_it() {
    for_each_variant("hook_detach", |_, fixture| {
        let (mut program, _) = start(fixture);
        // The call waits inside the hook until the entry is back, then ends the process.
        let (memsup_lines, image, _) = detach_inside_a_call(&mut program, b"exit\n");
        assert_profile_line_only(&memsup_lines);
        assert_eq!(image["warnings"], serde_json::json!([]), "{image}");
        let (_, output) = program.finish();
        assert_eq!(
            after_pid(&output.stdout),
            "hook_detach: ready\nhook_detach: inside\nhook_detach: leaving\n"
        );
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    });
}

#[test]
fn pages_a_blocked_thread_is_in_stay_switched_off_and_the_next_attach_removes_them() {
    let fixture = fixture("hook_detach", Variant::Dynamic);
    let (mut program, code_before) = start(&fixture);
    // The call reads a line inside the hook: no turn of the detach gets it out.
    let (memsup_lines, image, _) = detach_inside_a_call(&mut program, b"stuck\n");
    assert_eq!(memsup_lines[0], HOOK_PAGES_LEFT, "{memsup_lines:?}");
    let warning = HOOK_PAGES_LEFT.trim_start_matches("memsup: warning: ");
    assert_eq!(image["warnings"], serde_json::json!([warning]), "{image}");
    let left = hook_mappings(program.pid);
    assert!(!left.is_empty(), "the pages the thread is in stay mapped");
    assert_code_unchanged(program.pid, &code_before);
    // The call returns through the switched-off hook.
    program.write_stdin(b"go\n");
    assert_eq!(program.next_line("the call's end"), "hook_detach: out");

    let (memsup_lines, image, _) = detach_inside_a_call(&mut program, b"hooked\n");
    assert_eq!(program.next_line("the call's end"), "hook_detach: out");
    assert_profile_line_only(&memsup_lines);
    let warnings = image["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{image}");
    let note = warnings[0].as_str().unwrap_or_default();
    assert!(note.starts_with(EARLIER_MEMSUP_REMOVED), "{note}");
    assert_eq!(hook_mappings(program.pid), Vec::<String>::new());
    assert_code_unchanged(program.pid, &code_before);
    finish(program);
}

/// A process forked while the detach runs its parent out of the hook code has copies of the
/// pages and the ring area: its own detach removes them, without a warning.
#[test]
fn a_process_forked_while_the_threads_leave_the_hook_code_loses_its_copies_too() {
    for_each_variant("hook_detach", |_, fixture| {
        let (mut program, code_before) = start(fixture);
        // The call waits inside the hook until the entry is back and a thread has forked.
        let (memsup_lines, image, report) = detach_inside_a_call(&mut program, b"fork\n");
        let forked = program.next_line("the fork");
        let child: u32 = forked
            .strip_prefix("hook_detach: forked ")
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the fork line: {forked:?}"));
        assert_eq!(program.next_line("the call's end"), "hook_detach: out");
        assert_profile_line_only(&memsup_lines);
        assert_eq!(image["warnings"], serde_json::json!([]), "{image}");
        let child_image = processes(&report)
            .iter()
            .find(|image| image["pid"] == child)
            .unwrap_or_else(|| panic!("no image of the child {child}: {report:#}"));
        // Born during the detach: it ran nothing under memsup, hooks or warnings.
        assert_eq!(child_image["cause"], "fork", "{child_image}");
        assert_eq!(child_image["engine"], "int3", "{child_image}");
        assert_eq!(
            child_image["warnings"],
            serde_json::json!([]),
            "{child_image}"
        );
        assert_eq!(hook_mappings(program.pid), Vec::<String>::new());
        assert_eq!(hook_mappings(child), Vec::<String>::new(), "the child's");
        assert_code_unchanged(program.pid, &code_before);
        let (_, output) = program.finish();
        assert_eq!(
            after_pid(&output.stdout),
            format!(
                "hook_detach: ready\nhook_detach: inside\nhook_detach: forked {child}\n\
                 hook_detach: out\nhook_detach: child exited 0\n\
                 hook_detach: 1 calls, every block returned\n"
            )
        );
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    });
}
