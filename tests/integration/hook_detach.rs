//! fixtures/hook_detach.c: a detach under the hook engine that meets a thread inside a hooked
//! call (the call waits there until the detach has put its entry back) lets the thread run out
//! of the hook code, then unmaps every page memsup placed: the program's code and mappings
//! are as before the attach, and it ends as a native run does.

use crate::common::announced::{start_announced, Start};
use crate::common::attach_cycle::maps;
use crate::common::attach_window::AttachWindow;
use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, is_hook_engine_mapping,
};
use crate::common::report::processes;
use crate::common::*;

/// What the fixture prints after its pid line for two lines of input.
const TWO_CALLS: &str = "hook_detach: ready\nhook_detach: inside\nhook_detach: out\n\
hook_detach: inside\nhook_detach: out\nhook_detach: 2 calls, every block returned\n";

#[test]
fn a_detach_lets_a_thread_leave_the_hook_code_then_removes_it() {
    for_each_variant("hook_detach", |_, fixture| {
        let native = run_native(fixture, &[], Some(b"plain\nplain\n"));
        assert_eq!(native.status.code(), Some(0));
        let native_stdout = String::from_utf8_lossy(&native.stdout);
        assert_eq!(
            native_stdout.split_once('\n').map(|(_, rest)| rest),
            Some(TWO_CALLS)
        );

        let start = Start {
            piped_stdin: true,
            ..Start::default()
        };
        let mut program = start_announced(fixture, "hook_detach", start);
        let code_before = executable_mappings(program.pid);
        let window = AttachWindow::open(&[program.pid], &["--engine", "hooks"]);
        let profile = window.profile();
        // The call waits inside the hook until the detach has put mi_malloc's entry back.
        program.write_stdin(b"hooked\n");
        assert_eq!(program.next_line("the held call"), "hook_detach: inside");
        let (output, report) = window.close();
        assert_eq!(program.next_line("the call's end"), "hook_detach: out");
        let (_, memsup_lines) = split_stderr(&output.stderr);
        assert_eq!(
            memsup_lines,
            [format!("memsup: profile written to {}", profile.display())],
            "memsup's lines: no hook page left behind"
        );
        let left: Vec<String> = maps(program.pid)
            .lines()
            .filter(|line| is_hook_engine_mapping(line))
            .map(str::to_string)
            .collect();
        assert_eq!(
            left,
            Vec::<String>::new(),
            "memsup's mappings after the detach"
        );
        assert_code_unchanged(program.pid, &code_before);

        let image = &processes(&report)[0];
        // mi_malloc was hooked: the fixture waited for its entry to become a jump.
        assert_eq!(image["engine"], "hooks", "{image}");
        assert_eq!(image["warnings"], serde_json::json!([]), "{image}");

        program.write_stdin(b"plain\n");
        let (_, output) = program.finish();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.split_once('\n').map(|(_, rest)| rest),
            Some(TWO_CALLS)
        );
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    });
}
