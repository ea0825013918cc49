//! The tracer's handlers on a fake tracee: probes planted in slice memory, a thread's calls
//! and returns played as register states, and what the tracer sent read back.

mod capture;
mod hot_path;
mod lifecycle;
mod mpi_calls;
mod return_events;

use std::sync::Arc;

use crossbeam_channel::Receiver;
use libc::user_regs_struct;

use crate::breakpoints::table::{ProbeKind, StepOverPolicy};
use crate::events::{
    monotonic_ns, CopiesInFlight, CopyWindows, Event, EventBatch, EventKind, EventSink, RawStack,
    Residency,
};
use crate::ptrace::capture::StackMode;
use crate::ptrace::fake_tracee::FakeTracee;
use crate::ptrace::inject::ScratchPage;
use crate::ptrace::memory::RemoteMemoryMut;
use crate::ptrace::state::{Process, Thread};
use crate::ptrace::tracee::Tracee;
use crate::ptrace::tracer::{Mode, Tracer};
use crate::trace::format::SnapshotReason;

const PID: i32 = 100;
const CODE: u64 = 0x40_0000;
const SCRATCH: u64 = 0x50_0000;
/// The scratch page's trampoline (see `ScratchPage`'s layout).
const TRAMPOLINE: u64 = SCRATCH + 16;
const STACK: u64 = 0x7ff0_0000;
const STACK_LENGTH: usize = 0x1_0000;

const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
const PUSH_R12: [u8; 2] = [0x41, 0x54];

/// Residency sampling is not under test here: requests go nowhere, snapshots find nothing.
struct NoResidency;

impl Residency for NoResidency {
    fn request(&self, _pid: i32, _reason: SnapshotReason) {}

    fn request_all(&self, _reason: SnapshotReason) {}

    fn before_snapshots(&self, _flush: crate::hooks::drain::Flusher) {}

    fn snapshot_now(&self, _pid: i32, _reason: SnapshotReason) -> Option<EventKind> {
        None
    }

    fn exec_begins(&self, _pid: i32) {}

    fn program_is(&self, _pid: i32, _exe: &str) {}

    fn forked(&self, _parent: i32, _child: i32) {}
}

/// A sink whose events the test reads back with `sent` or `sent_events`.
fn sink() -> (EventSink, Receiver<EventBatch>) {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let copies = Arc::new(CopiesInFlight::default());
    let windows = Arc::new(CopyWindows::default());
    let sink = EventSink::new(sender, monotonic_ns(), copies, windows, Arc::default());
    (sink, receiver)
}

/// What the tracer sent so far, in order, with the time each was stamped.
fn sent_events(receiver: &Receiver<EventBatch>) -> Vec<Event> {
    receiver.try_iter().flatten().collect()
}

/// What the tracer sent so far, in order: (pid, tid, what happened).
fn sent(receiver: &Receiver<EventBatch>) -> Vec<(u32, u32, EventKind)> {
    sent_events(receiver)
        .into_iter()
        .map(|event| (event.pid, event.tid, event.kind))
        .collect()
}

/// A tracer supervising process `PID` (one thread) with a scratch page mapped, over `fake`.
fn tracer<'a>(sink: &'a EventSink, fake: &FakeTracee) -> Tracer<'a> {
    fake.map(CODE, 0x1000);
    fake.map(SCRATCH, 0x1000);
    fake.map(STACK, STACK_LENGTH);
    let mut tracee = fake.clone();
    let memory = tracee.open_memory(PID);
    let mut tracer = Tracer::with_tracee(
        Mode::Run,
        PID,
        sink,
        &NoResidency,
        Arc::default(),
        Box::new(tracee),
    );
    tracer.set_stack_mode(StackMode::Caller);
    let mut process = Process::new(PID, true, StepOverPolicy::Auto, memory);
    process.scratch = Some(ScratchPage::at(SCRATCH));
    tracer.processes.start(process);
    tracer.threads.start(PID, Thread::new(PID));
    tracer
}

/// Plants a probe at `address` over `code` (the function's first instruction).
fn plant(tracer: &mut Tracer, address: u64, code: &[u8], kind: ProbeKind) {
    let process = tracer.processes.get_mut(&PID).expect("the process");
    process
        .memory
        .write_code(address, code)
        .expect("code memory");
    let scratch = process.scratch.as_mut();
    let breakpoints = &mut process.breakpoints;
    let planted = breakpoints.insert(&mut process.memory, scratch, address, kind, "libc.so.6");
    assert_eq!(planted.ok(), Some(true));
}

/// Thread `tid` just hit the int3 at `function`, called from `caller` with `rsp` and `args`.
fn enter(fake: &FakeTracee, tid: i32, function: u64, caller: u64, rsp: u64, args: [u64; 3]) {
    fake.write(rsp, &caller.to_le_bytes());
    arrive(fake, tid, function, rsp, args);
}

/// Thread `tid` just hit the int3 at `function` with whatever return address `rsp` holds
/// (a tail call: the caller's own return address).
fn arrive(fake: &FakeTracee, tid: i32, function: u64, rsp: u64, args: [u64; 3]) {
    let registers = user_regs_struct {
        rip: function + 1,
        rsp,
        rdi: args[0],
        rsi: args[1],
        rdx: args[2],
        r12: 0x1212,
        ..zeroed_registers()
    };
    fake.set_thread_registers(tid, registers);
}

/// Thread `tid` returns `result` from the call whose return address is at `rsp`: it lands
/// wherever that address leads (the trampoline's int3 when hijacked).
fn leave(fake: &FakeTracee, tid: i32, rsp: u64, result: u64) {
    let registers = user_regs_struct {
        rip: fake.word(rsp) + 1,
        rsp: rsp + 8,
        rax: result,
        ..zeroed_registers()
    };
    fake.set_thread_registers(tid, registers);
}

fn zeroed_registers() -> user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; all zeros is a valid value.
    unsafe { std::mem::zeroed() }
}
