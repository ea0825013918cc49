//! The stack copied at an entry (`--stacks full`), kept with the pending call.

use super::*;
use crate::ptrace::capture::INITIAL_WINDOW;
use crate::trace::format::{AllocFunction, MapCall};

const REALLOC: u64 = CODE + 0x300;
const MMAP: u64 = CODE + 0x400;
const CALLER: u64 = CODE + 0x800;
const FRAME: u64 = STACK + 0x8000;

#[test]
fn an_entry_copies_the_stack_up_to_the_window_and_names_the_hijacked_returns() {
    let (sink, _receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    tracer.set_stack_mode(StackMode::Full);
    plant(
        &mut tracer,
        REALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Realloc),
    );
    plant(&mut tracer, MMAP, &ENDBR64, ProbeKind::Map(MapCall::Mmap));

    enter(&fake, PID, REALLOC, CALLER, FRAME, [0, 4096, 0]);
    tracer.on_trap(PID).unwrap();
    // realloc calls mmap: the copy at mmap's entry holds realloc's hijacked slot.
    let inner = FRAME - 0x40;
    enter(&fake, PID, MMAP, REALLOC + 0x10, inner, [0, 8192, 3]);
    tracer.on_trap(PID).unwrap();

    let pending = tracer.threads[&PID].shadow.entries();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[1].original_return, REALLOC + 0x10);
    let Some(RawStack::Copy(capture)) = &pending[1].stack else {
        panic!("no stack copy: {:?}", pending[1].stack);
    };
    let snapshot = &capture.snapshot;
    assert_eq!((snapshot.ip, snapshot.sp), (MMAP, inner));
    assert!(snapshot.at_function_entry);
    // 0x8040 bytes from rsp to the end of the stack; the first window is 32 KiB.
    assert_eq!(snapshot.stack.len(), INITIAL_WINDOW as usize);
    assert!(capture.window_limited);
    assert_eq!(snapshot.read_word(inner), Some(REALLOC + 0x10));
    assert_eq!(snapshot.read_word(FRAME), Some(TRAMPOLINE));
    assert_eq!(capture.substitute, Some(TRAMPOLINE));
    assert_eq!(capture.substituted, [CALLER]);
    assert_eq!(tracer.processes[&PID].counters.stack_copies, 2);
}
