//! MPI entry points: a thread's outermost call recorded at entry and return, an MPI call
//! inside it not at all, and the rank read from MPI_Comm_rank(MPI_COMM_WORLD).

use super::*;
use crate::platform::mpi::MPICH_COMM_WORLD;
use crate::trace::format::{MpiRank, ProcessRole};

const COMM_RANK: u64 = CODE + 0x100;
const BARRIER: u64 = CODE + 0x200;
const CALLER: u64 = CODE + 0x800;
const FRAME: u64 = STACK + 0x8000;
const RANK_OUT: u64 = STACK + 0x100;
const PID_U32: u32 = PID as u32;

fn call(function: u32, entry: bool) -> (u32, u32, EventKind) {
    let call = EventKind::MpiCall {
        function,
        entry,
        stack_pointer: 0,
    };
    (PID_U32, PID_U32, call)
}

#[test]
fn the_outermost_mpi_call_is_recorded_and_comm_rank_of_the_world_names_the_rank() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    let comm_rank = tracer.mpi_names.number("MPI_Comm_rank");
    let barrier = tracer.mpi_names.number("MPI_Barrier");
    plant(&mut tracer, COMM_RANK, &PUSH_R12, ProbeKind::Mpi(comm_rank));
    plant(&mut tracer, BARRIER, &PUSH_R12, ProbeKind::Mpi(barrier));
    let process = tracer.processes.get_mut(&PID).expect("the process");
    process.mpi.world_handles.push(MPICH_COMM_WORLD);

    for round in 0..2 {
        enter(
            &fake,
            PID,
            COMM_RANK,
            CALLER,
            FRAME,
            [MPICH_COMM_WORLD, RANK_OUT, 0],
        );
        tracer.on_trap(PID).unwrap();
        assert_eq!(fake.word(FRAME), TRAMPOLINE);
        // An MPI function called inside: no record, no hijacked return.
        enter(&fake, PID, BARRIER, CODE + 0x120, FRAME - 0x100, [0; 3]);
        tracer.on_trap(PID).unwrap();
        assert_eq!(fake.word(FRAME - 0x100), CODE + 0x120);
        fake.write(RANK_OUT, &1u32.to_le_bytes());
        leave(&fake, PID, FRAME, 0);
        tracer.on_trap(PID).unwrap();
        assert_eq!(fake.thread_registers(PID).rip, CALLER);

        let mut expected = Vec::new();
        if round == 0 {
            let name = "MPI_Comm_rank".to_string();
            let function = comm_rank;
            expected.push((PID_U32, PID_U32, EventKind::MpiFunction { function, name }));
        }
        expected.extend([call(comm_rank, true), call(comm_rank, false)]);
        if round == 0 {
            let role = ProcessRole::Rank(MpiRank {
                rank: 1,
                world_size: None,
                job: String::new(),
                source: "MPI_Comm_rank".into(),
            });
            expected.push((PID_U32, PID_U32, EventKind::ProcessRole(role)));
        }
        assert_eq!(sent(&receiver), expected, "round {round}");
    }
}

#[test]
fn comm_rank_of_another_communicator_names_no_rank() {
    let (sink, receiver) = sink();
    let fake = FakeTracee::default();
    let mut tracer = tracer(&sink, &fake);
    let comm_rank = tracer.mpi_names.number("MPI_Comm_rank");
    plant(&mut tracer, COMM_RANK, &PUSH_R12, ProbeKind::Mpi(comm_rank));
    let process = tracer.processes.get_mut(&PID).expect("the process");
    process.mpi.world_handles.push(MPICH_COMM_WORLD);

    enter(
        &fake,
        PID,
        COMM_RANK,
        CALLER,
        FRAME,
        [MPICH_COMM_WORLD + 1, RANK_OUT, 0],
    );
    tracer.on_trap(PID).unwrap();
    fake.write(RANK_OUT, &1u32.to_le_bytes());
    leave(&fake, PID, FRAME, 0);
    tracer.on_trap(PID).unwrap();
    let events = sent(&receiver);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(!events
        .iter()
        .any(|(_, _, kind)| matches!(kind, EventKind::ProcessRole(_))));
}
