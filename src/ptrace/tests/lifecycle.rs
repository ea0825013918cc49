//! Threads and processes coming and going while calls are pending.

use super::*;
use crate::ptrace::fake_tracee::Resume;
use crate::ptrace::stop::Event as Stop;
use crate::ptrace::stop::Stop as Reported;
use crate::trace::format::{AllocFunction, ExitKind, StartCause};

const MALLOC: u64 = CODE + 0x100;
const CALLER: u64 = CODE + 0x800;
const FRAME: u64 = STACK + 0x8000;
const CHILD: i32 = 200;
/// Beyond any pid_max: no /proc entry can answer for it.
const NEW_THREAD: i32 = 5_000_000;
const PID_U32: u32 = PID as u32;
const CHILD_U32: u32 = CHILD as u32;
const NEW_THREAD_U32: u32 = NEW_THREAD as u32;

/// A tracer whose thread `PID` is inside a malloc(24) called from `CALLER`.
fn inside_malloc<'a>(sink: &'a EventSink, fake: &FakeTracee) -> Tracer<'a> {
    let mut tracer = tracer(sink, fake);
    plant(
        &mut tracer,
        MALLOC,
        &ENDBR64,
        ProbeKind::Alloc(AllocFunction::Malloc),
    );
    enter(fake, PID, MALLOC, CALLER, FRAME, [24, 0, 0]);
    tracer.on_trap(PID).unwrap();
    fake.take_resumes();
    tracer
}

#[test]
fn a_fork_child_inherits_the_pending_calls_and_returns_through_them() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = inside_malloc(&sink, &fake);
    fake.set_event_message(PID, CHILD as u64);
    tracer.on_new_child(PID, Stop::Fork).unwrap();
    assert_eq!(
        fake.take_resumes(),
        [Resume::Continue {
            tid: PID,
            signal: 0
        }]
    );
    let started = EventKind::ProcessStart {
        parent_pid: Some(PID as u32),
        cause: StartCause::Fork,
    };
    let scratch = EventKind::ScratchPage { address: SCRATCH };
    assert_eq!(
        sent(&receiver),
        [
            (CHILD_U32, CHILD_U32, started),
            (CHILD_U32, CHILD_U32, scratch)
        ]
    );
    let copied: Vec<(u64, u64, Option<RawStack>)> = tracer.threads[&CHILD]
        .shadow
        .entries()
        .iter()
        .map(|entry| (entry.slot, entry.original_return, entry.stack.clone()))
        .collect();
    assert_eq!(copied, [(FRAME, CALLER, Some(RawStack::Caller(CALLER)))]);

    // The child's copy of the stack holds the trampoline too: its malloc returns through it.
    leave(&fake, CHILD, FRAME, 0x5555_2000);
    tracer.on_trap(CHILD).unwrap();
    let alloc = EventKind::Alloc {
        function: AllocFunction::Malloc,
        address: 0x5555_2000,
        size: 24,
        stack: RawStack::Caller(CALLER),
    };
    assert_eq!(sent(&receiver), [(CHILD_U32, CHILD_U32, alloc)]);
    assert_eq!(fake.thread_registers(CHILD).rip, CALLER);
    assert_eq!(tracer.threads[&PID].shadow.entries().len(), 1);
}

#[test]
fn a_new_thread_starts_with_no_pending_calls_and_its_stack_from_the_clone_call() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = inside_malloc(&sink, &fake);
    let clone = user_regs_struct {
        orig_rax: libc::SYS_clone as u64,
        rsi: 0x7e00_0000,
        ..zeroed_registers()
    };
    fake.set_thread_registers(PID, clone);
    fake.set_event_message(PID, NEW_THREAD as u64);
    tracer.on_new_child(PID, Stop::Clone).unwrap();
    let stack = EventKind::ThreadStack {
        address: 0x7e00_0000,
    };
    assert_eq!(
        sent(&receiver),
        [
            (PID_U32, NEW_THREAD_U32, EventKind::ThreadStart),
            (PID_U32, NEW_THREAD_U32, stack)
        ]
    );
    assert_eq!(tracer.threads[&NEW_THREAD].pid, PID);
    assert!(tracer.threads[&NEW_THREAD].shadow.entries().is_empty());
}

#[test]
fn a_thread_gone_inside_malloc_leaves_an_abandoned_call() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = inside_malloc(&sink, &fake);
    let worker = PID + 1;
    let mut thread = Thread::new(PID);
    thread.shadow = tracer.threads[&PID].shadow.fork_copy();
    tracer.threads.start(worker, thread);
    tracer.on_thread_gone(worker, ExitKind::Code(0)).unwrap();
    let abandoned = EventKind::AbandonedCall {
        function: AllocFunction::Malloc,
    };
    let worker_u32 = worker as u32;
    assert_eq!(
        sent(&receiver),
        [
            (PID_U32, worker_u32, abandoned),
            (PID_U32, worker_u32, EventKind::ThreadExit)
        ]
    );
    assert!(!tracer.threads.contains_key(&worker));
    assert!(tracer.processes.contains_key(&PID));
}

/// The stop of `tid` at its exit (PTRACE_EVENT_EXIT).
fn exit_stop(tid: i32) -> Reported {
    Reported::Event {
        tid,
        event: Stop::Exit,
        signal: libc::SIGTRAP,
    }
}

#[test]
fn a_thread_killed_before_its_creator_reported_it_goes_on_to_end() {
    let (sink, _receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    // Its first stop is its exit: the process was killed before the thread ran, and its
    // creator will never report the clone. Held, it would keep the process from ending.
    tracer.handle(exit_stop(NEW_THREAD)).unwrap();
    let going_on = |tid| Resume::Continue { tid, signal: 0 };
    assert_eq!(fake.take_resumes(), [going_on(NEW_THREAD)]);
    assert!(tracer.early_threads.is_empty());
    // Its first stop proper is held for the creator's event...
    let held = NEW_THREAD + 1;
    let first = Reported::Event {
        tid: held,
        event: Stop::Stop,
        signal: libc::SIGTRAP,
    };
    tracer.handle(first).unwrap();
    assert_eq!(fake.take_resumes(), []);
    assert!(tracer.early_threads.contains(&held));
    // ...and let go when a kill wakes it to exit.
    tracer.handle(exit_stop(held)).unwrap();
    assert_eq!(fake.take_resumes(), [going_on(held)]);
    assert!(tracer.early_threads.is_empty());
}

#[test]
fn a_fork_child_reaped_before_its_parent_reported_it_ends_when_the_report_comes() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    // Killed on its own before its parent's fork event: its exit stop goes on, and it is
    // reaped, all before the event.
    tracer.handle(exit_stop(NEW_THREAD)).unwrap();
    let end = Reported::Killed {
        tid: NEW_THREAD,
        signal: libc::SIGKILL,
    };
    tracer.handle(end).unwrap();
    fake.take_resumes();
    assert!(sent(&receiver).is_empty());
    // The event registers it, and its end is handled next.
    fake.set_event_message(PID, NEW_THREAD as u64);
    tracer.on_new_child(PID, Stop::Fork).unwrap();
    assert!(tracer.ended_early.is_empty());
    let replayed = tracer.deferred.pop_front().expect("its end, replayed");
    assert_eq!(replayed, end);
    tracer.handle(replayed).unwrap();
    assert!(!tracer.processes.contains_key(&NEW_THREAD));
    let kinds: Vec<EventKind> = sent(&receiver)
        .into_iter()
        .filter(|(pid, _, _)| *pid == NEW_THREAD_U32)
        .map(|(_, _, kind)| kind)
        .collect();
    assert!(
        matches!(
            kinds.first(),
            Some(EventKind::ProcessStart {
                cause: StartCause::Fork,
                ..
            })
        ),
        "{kinds:?}"
    );
    assert!(
        matches!(
            kinds.last(),
            Some(EventKind::ProcessExit {
                status: ExitKind::Signal(9),
                ..
            })
        ),
        "{kinds:?}"
    );
}
