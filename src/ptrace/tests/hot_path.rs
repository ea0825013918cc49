//! A probe's int3 and the return trampoline: what is written, resumed and recorded.

use super::*;
use crate::ptrace::fake_tracee::Resume;
use crate::trace::format::{AllocFunction, MapCall};

const MALLOC: u64 = CODE + 0x100;
const CALLOC: u64 = CODE + 0x200;
const REALLOC: u64 = CODE + 0x300;
const MMAP: u64 = CODE + 0x400;
const MMAP64: u64 = CODE + 0x480;
const CALLER: u64 = CODE + 0x800;
const FRAME: u64 = STACK + 0x8000;
const CONTINUED: [Resume; 1] = [Resume::Continue {
    tid: PID,
    signal: 0,
}];

const PID_U32: u32 = PID as u32;

#[test]
fn malloc_returns_through_the_trampoline_with_the_entry_s_size_stamped_at_the_return() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(
        &mut tracer,
        MALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Malloc),
    );
    assert_eq!(fake.bytes(MALLOC, 1), [0xcc]);

    enter(&fake, PID, MALLOC, CALLER, FRAME, [24, 0, 0]);
    tracer.on_trap(PID).unwrap();
    assert_eq!(fake.word(FRAME), TRAMPOLINE);
    let registers = fake.thread_registers(PID);
    assert_eq!((registers.rip, registers.rsp), (MALLOC + 4, FRAME));
    assert_eq!(fake.take_resumes(), CONTINUED);
    assert!(sent(&receiver).is_empty());

    leave(&fake, PID, FRAME, 0x5555_0010);
    let before_return = monotonic_ns();
    tracer.on_trap(PID).unwrap();
    let after_return = monotonic_ns();
    let alloc = EventKind::Alloc {
        function: AllocFunction::Malloc,
        address: 0x5555_0010,
        size: 24,
        stack: RawStack::Caller(CALLER),
    };
    let events = sent_events(&receiver);
    let [event] = &events[..] else {
        panic!("not one event: {events:?}");
    };
    assert_eq!(
        (event.pid, event.tid, &event.kind),
        (PID_U32, PID_U32, &alloc)
    );
    // Stamped when sent: at the return, not at the entry.
    assert!((before_return..=after_return).contains(&event.time_ns));
    let registers = fake.thread_registers(PID);
    assert_eq!((registers.rip, registers.rsp), (CALLER, FRAME + 8));
    assert_eq!(fake.take_resumes(), CONTINUED);
    let counters = tracer.processes[&PID].counters;
    assert_eq!(
        (counters.entry_hits, counters.return_hits, counters.emulated),
        (1, 1, 1)
    );
}

#[test]
fn an_emulated_push_and_the_trampoline_are_written_together_at_rsp() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(
        &mut tracer,
        CALLOC,
        &PUSH_R12,
        ProbeKind::Alloc(AllocFunction::Calloc),
    );

    enter(&fake, PID, CALLOC, CALLER, FRAME, [3, 8, 0]);
    tracer.on_trap(PID).unwrap();
    let registers = fake.thread_registers(PID);
    assert_eq!((registers.rip, registers.rsp), (CALLOC + 2, FRAME - 8));
    let mut expected = 0x1212u64.to_le_bytes().to_vec();
    expected.extend(TRAMPOLINE.to_le_bytes());
    assert_eq!(fake.bytes(FRAME - 8, 16), expected);

    leave(&fake, PID, FRAME, 0x5555_0020);
    tracer.on_trap(PID).unwrap();
    let calloc = EventKind::Alloc {
        function: AllocFunction::Calloc,
        address: 0x5555_0020,
        size: 24,
        stack: RawStack::Caller(CALLER),
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, calloc)]);
    assert_eq!(fake.thread_registers(PID).rip, CALLER);
}

#[test]
fn malloc_inside_realloc_is_counted_as_nested_and_recorded_once() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(
        &mut tracer,
        REALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Realloc),
    );
    plant(
        &mut tracer,
        MALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Malloc),
    );

    enter(&fake, PID, REALLOC, CALLER, FRAME, [0x6000_0000, 100, 0]);
    tracer.on_trap(PID).unwrap();
    let inner = FRAME - 0x40;
    enter(&fake, PID, MALLOC, REALLOC + 0x10, inner, [100, 0, 0]);
    tracer.on_trap(PID).unwrap();
    // The inner call keeps its own return address: it returns without a stop.
    assert_eq!(fake.word(inner), REALLOC + 0x10);
    assert_eq!(tracer.threads[&PID].shadow.entries().len(), 1);

    leave(&fake, PID, FRAME, 0x6000_1000);
    tracer.on_trap(PID).unwrap();
    let realloc = EventKind::Realloc {
        function: AllocFunction::Realloc,
        old_address: 0x6000_0000,
        new_address: 0x6000_1000,
        size: 100,
        stack: RawStack::Caller(CALLER),
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, realloc)]);
    let counters = tracer.processes[&PID].counters;
    assert_eq!((counters.entry_hits, counters.nested_calls), (2, 1));
    assert_eq!(counters.return_hits, 1);
}

#[test]
fn a_call_abandoned_by_longjmp_is_dropped_when_a_call_starts_above_it() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(
        &mut tracer,
        MALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Malloc),
    );

    let deeper = FRAME - 0x1000;
    enter(&fake, PID, MALLOC, CALLER, deeper, [16, 0, 0]);
    tracer.on_trap(PID).unwrap();
    // A signal handler longjmps out of that malloc; the program calls malloc again higher up.
    enter(&fake, PID, MALLOC, CALLER + 8, FRAME, [32, 0, 0]);
    tracer.on_trap(PID).unwrap();
    let abandoned = EventKind::AbandonedCall {
        function: AllocFunction::Malloc,
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, abandoned)]);
    let slots: Vec<u64> = tracer.threads[&PID]
        .shadow
        .entries()
        .iter()
        .map(|entry| entry.slot)
        .collect();
    assert_eq!(slots, [FRAME]);

    leave(&fake, PID, FRAME, 0x5555_0030);
    tracer.on_trap(PID).unwrap();
    let alloc = EventKind::Alloc {
        function: AllocFunction::Malloc,
        address: 0x5555_0030,
        size: 32,
        stack: RawStack::Caller(CALLER + 8),
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, alloc)]);
    assert_eq!(fake.thread_registers(PID).rip, CALLER + 8);
}

#[test]
fn a_tail_call_that_already_returns_to_the_trampoline_is_not_pushed_again() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(&mut tracer, MMAP64, &ENDBR64, ProbeKind::Map(MapCall::Mmap));
    plant(&mut tracer, MMAP, &ENDBR64, ProbeKind::Map(MapCall::Mmap));

    enter(&fake, PID, MMAP64, CALLER, FRAME, [0, 4096, 3]);
    tracer.on_trap(PID).unwrap();
    // mmap64 jumps to mmap: same stack pointer, the hijacked return address in place.
    arrive(&fake, PID, MMAP, FRAME, [0, 4096, 3]);
    tracer.on_trap(PID).unwrap();
    assert_eq!(fake.word(FRAME), TRAMPOLINE);
    let pending = tracer.threads[&PID].shadow.entries();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].original_return, CALLER);

    leave(&fake, PID, FRAME, 0x7f00_0000);
    tracer.on_trap(PID).unwrap();
    let mapping = EventKind::Mapping {
        call: MapCall::Mmap,
        args: [0, 4096, 3, 0, 0, 0],
        result: 0x7f00_0000,
        stack: RawStack::Caller(CALLER),
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, mapping)]);
    assert_eq!(fake.thread_registers(PID).rip, CALLER);
    assert_eq!(tracer.threads[&PID].shadow.entries().len(), 0);
}

#[test]
fn a_trap_at_no_probe_is_the_program_s_own_and_passed_on() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    enter(&fake, PID, CODE + 0x900, CALLER, FRAME, [0, 0, 0]);
    tracer.on_trap(PID).unwrap();
    let passed_on = Resume::Continue {
        tid: PID,
        signal: libc::SIGTRAP,
    };
    assert_eq!(fake.take_resumes(), [passed_on]);
    assert!(sent(&receiver).is_empty());
}

#[test]
fn signals_held_back_are_sent_again_once_the_thread_runs() {
    let (sink, _receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    plant(
        &mut tracer,
        MALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Malloc),
    );
    let held = [libc::SIGUSR2, libc::SIGCHLD];
    tracer.threads.get_mut(&PID).unwrap().pending_signals = held.to_vec();
    enter(&fake, PID, MALLOC, CALLER, FRAME, [24, 0, 0]);
    tracer.on_trap(PID).unwrap();
    let expected = [
        Resume::Continue {
            tid: PID,
            signal: 0,
        },
        Resume::Signalled {
            tid: PID,
            signal: libc::SIGUSR2,
        },
        Resume::Signalled {
            tid: PID,
            signal: libc::SIGCHLD,
        },
    ];
    assert_eq!(fake.take_resumes(), expected);
    assert!(tracer.threads[&PID].pending_signals.is_empty());
}

#[test]
fn a_trap_of_a_thread_memsup_does_not_know_is_an_error_naming_it() {
    let (sink, _receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    enter(&fake, 4242, MALLOC, CALLER, FRAME, [0, 0, 0]);
    let error = tracer.on_trap(4242).unwrap_err();
    assert_eq!(error.to_string(), "thread 4242 is not supervised");
}

#[test]
fn a_mapping_system_call_is_recorded_with_its_entry_arguments_and_its_result() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    let entry = user_regs_struct {
        orig_rax: libc::SYS_mmap as u64,
        rdi: 0,
        rsi: 8192,
        rdx: 3,
        r10: 0x22,
        r8: u64::MAX,
        rip: CALLER,
        rsp: FRAME,
        ..zeroed_registers()
    };
    fake.set_thread_registers(PID, entry);
    tracer.on_seccomp(PID).unwrap();
    let to_exit = Resume::ToSyscall {
        tid: PID,
        signal: 0,
    };
    assert_eq!(fake.take_resumes(), [to_exit]);
    assert!(tracer.threads[&PID].pending_syscall.is_some());

    fake.set_thread_registers(
        PID,
        user_regs_struct {
            rax: 0x7f00_1000,
            ..entry
        },
    );
    tracer.on_syscall_exit(PID).unwrap();
    // The walk of a system call starts at the instruction after `syscall`.
    let mapping = EventKind::Mapping {
        call: MapCall::Mmap,
        args: [0, 8192, 3, 0x22, u64::MAX, 0],
        result: 0x7f00_1000,
        stack: RawStack::Caller(CALLER),
    };
    assert_eq!(sent(&receiver), [(PID_U32, PID_U32, mapping)]);
    assert!(tracer.threads[&PID].pending_syscall.is_none());
    assert_eq!(fake.take_resumes(), CONTINUED);
    assert_eq!(tracer.processes[&PID].counters.syscall_stops, 2);
}
