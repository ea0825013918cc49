//! A call site's stack in one line, from the allocator's caller up to the first frame of the
//! program's own code: `make_buffer alloc_script.c:48 <- main :83`. The frames above it
//! (`__libc_start_main`, `_start`) are the same for every site and say nothing.

use crate::analysis::Frame;
use crate::platform::libraries::file_name;

/// The most frames a chain shows; one longer by two or more keeps its innermost frames and
/// its last (`main`, most often).
const MAX_FRAMES: usize = 5;

/// `stack` (innermost first) cut where the program's own code ends (`shown_frames`), each frame as
/// `function file:line`, the file left out when it is the previous frame's, the module
/// added in parentheses when it is not the previous frame's (the executable's, first).
pub(super) fn compact_chain(stack: &[Frame], executable: &str) -> String {
    if stack.is_empty() {
        return "(no stack recorded)".to_string();
    }
    let executable_name = file_name(executable);
    let shown = &stack[..shown_frames(stack, executable_name)];
    let mut parts = Vec::new();
    let mut previous_file = None;
    let mut previous_module = executable_name;
    for (position, frame) in shown.iter().enumerate() {
        let last = position + 1 == shown.len();
        // Leaving out a single frame would save nothing.
        if shown.len() > MAX_FRAMES + 1 && position >= MAX_FRAMES - 1 && !last {
            if position == MAX_FRAMES - 1 {
                parts.push(format!("… {} frames", shown.len() - MAX_FRAMES));
            }
            continue;
        }
        parts.push(frame_text(frame, previous_file, previous_module));
        previous_file = frame.file.as_deref();
        previous_module = frame.module_file_name();
    }
    parts.join(" <- ")
}

/// How many innermost frames the chain shows: up to the first frame of the program's own code
/// and its callers in the program, short of the C library's start-up (`is_startup`, in the
/// program itself when it is static); the whole stack when no frame is the program's.
fn shown_frames(stack: &[Frame], executable_name: &str) -> usize {
    let own = |frame: &Frame| {
        !executable_name.is_empty()
            && frame.module_file_name() == executable_name
            && !is_startup(&frame.function)
    };
    let Some(first) = stack.iter().position(own) else {
        return stack.len();
    };
    let run = stack[first..].iter().take_while(|frame| own(frame)).count();
    first + run
}

/// The C library's start-up that calls main: glibc's `__libc_start_call_main` and
/// `__libc_start_main`, musl's `libc_start_main_stage2` and `_start_c`, and `_start`.
fn is_startup(function: &str) -> bool {
    function.starts_with("__libc_start")
        || function.starts_with("libc_start_main")
        || function == "_start_c"
        || function == "_start"
}

fn frame_text(frame: &Frame, previous_file: Option<&str>, previous_module: &str) -> String {
    let mut text = frame.name();
    match (&frame.file, frame.line) {
        (Some(file), line) => {
            let line = line.map(|line| format!(":{line}")).unwrap_or_default();
            if Some(file.as_str()) == previous_file {
                text.push_str(&format!(" {line}"));
            } else {
                text.push_str(&format!(" {}{line}", file_name(file)));
            }
        }
        (None, _) if !frame.function.is_empty() && !frame.module.is_empty() => {
            text.push_str(&format!("+{:#x}", frame.offset));
        }
        (None, _) => {}
    }
    // A nameless frame already names its module.
    let module = frame.module_file_name();
    if !frame.function.is_empty() && !module.is_empty() && module != previous_module {
        text.push_str(&format!(" ({})", short_module(module)));
    }
    text
}

/// `libpython3.11.so.1.0` → `libpython3.11`.
fn short_module(module: &str) -> &str {
    match module.find(".so") {
        Some(end) if end > 0 => &module[..end],
        _ => module,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: Option<&str>, line: u32, module: &str) -> Frame {
        Frame {
            function: function.to_string(),
            file: file.map(str::to_string),
            line: file.map(|_| line),
            module: module.to_string(),
            address: 0x4010,
            offset: 0x25,
            inlined: false,
        }
    }

    #[test]
    fn cut_at_the_program_with_files_and_modules_said_once() {
        let app = "/work/target/alloc_script";
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let stack = [
            frame("make_buffer", Some("/src/alloc_script.c"), 48, app),
            frame("main", Some("/src/alloc_script.c"), 83, app),
            frame(
                "__libc_start_call_main",
                Some("libc_start_call_main.h"),
                58,
                libc,
            ),
            frame("_start", None, 0, app),
        ];
        assert_eq!(
            compact_chain(&stack, app),
            "make_buffer alloc_script.c:48 <- main :83"
        );
        let musl_static = [
            frame("make_buffer", Some("/src/alloc_script.c"), 48, app),
            frame("main", Some("/src/alloc_script.c"), 83, app),
            frame("libc_start_main_stage2", None, 0, app),
            frame("_start_c", None, 0, app),
        ];
        assert_eq!(
            compact_chain(&musl_static, app),
            "make_buffer alloc_script.c:48 <- main :83"
        );
        let in_library = [
            frame(
                "new_keys_object",
                Some("Objects/dictobject.c"),
                632,
                "/usr/lib/libpython3.11.so.1.0",
            ),
            frame("helper", None, 0, "/usr/lib/libpython3.11.so.1.0"),
            frame("main", Some("/src/app.c"), 9, app),
            frame("_start", None, 0, app),
        ];
        assert_eq!(
            compact_chain(&in_library, app),
            "new_keys_object dictobject.c:632 (libpython3.11) <- helper+0x25 <- main app.c:9 (alloc_script)"
        );
        assert_eq!(compact_chain(&[], app), "(no stack recorded)");
    }

    #[test]
    fn a_long_chain_keeps_its_first_frames_and_the_program_frame() {
        let library = "/usr/lib/libdeep.so";
        let mut stack: Vec<Frame> = (0..8)
            .map(|level| frame(&format!("f{level}"), Some("deep.c"), level, library))
            .collect();
        stack.push(frame("main", Some("main.c"), 5, "/bin/app"));
        assert_eq!(
            compact_chain(&stack, "/bin/app"),
            "f0 deep.c:0 (libdeep) <- f1 :1 <- f2 :2 <- f3 :3 <- … 4 frames <- main main.c:5 (app)"
        );
        // One frame more than the most is shown rather than said.
        stack.drain(5..8);
        assert_eq!(
            compact_chain(&stack, "/bin/app"),
            "f0 deep.c:0 (libdeep) <- f1 :1 <- f2 :2 <- f3 :3 <- f4 :4 <- main main.c:5 (app)"
        );
    }
}
