//! The hooks run in this process: each shape's record, field by field, the pass-through,
//! the full-ring policies and the CPU sources.

use super::clock::rdtsc;
use super::code::{assemble, CpuSource};
use super::code_record::sampled_head;
use super::layout::{self, Hook, HookShape, Op};
use super::ring::{Drainer, RawRecord};
use super::test_support::*;

const ARGUMENTS: [u64; 6] = [
    0x0101,
    0x0202_0000,
    0x0303_0000_0000,
    0x0404,
    0x0505_0505,
    0x0606_0000_0006,
];

fn records(harness: &Harness) -> Vec<RawRecord> {
    let mut drainer = Drainer::new(&harness.area);
    let mut out = Vec::new();
    drainer.finish(&harness.area, &mut out);
    assert_eq!((drainer.torn(), drainer.invalid()), (0, 0));
    out
}

fn six(arguments: [u64; 6]) -> u64 {
    let [a, b, c, d, e, f] = arguments;
    fake_six(a, b, c, d, e, f)
}

/// Calls the hook of `op` (continuing into `target`) once and returns what the caller
/// saw, the record, and the TSC before and after the call.
fn call_once(op: Op, target: u64, arguments: [u64; 6]) -> (Observed, RawRecord, u64, u64) {
    let config = AreaConfig::waiting(1, 64);
    let harness = Harness::new(CpuSource::Single, config, &[op], &[target]);
    let before = rdtsc();
    let observed = call_observed(harness.entry(op), arguments);
    let after = rdtsc();
    assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
    let records = records(&harness);
    assert_eq!(records.len(), 1);
    (observed, records[0], before, after)
}

fn assert_common(observed: &Observed, record: &RawRecord, op: Op, arguments: [u64; 6]) {
    assert_eq!(record.op, op);
    assert_eq!(record.cpu, 0);
    assert_eq!(record.arguments, arguments);
    assert_eq!(record.caller, observed.return_address);
    assert_eq!(record.stack_pointer, observed.stack_pointer);
    assert_eq!(record.thread, thread_pointer());
}

#[test]
fn after_shape_records_the_result_once_the_function_returned() {
    let (observed, record, before, after) =
        call_once(Op::Malloc, fake_six as *const () as u64, ARGUMENTS);
    assert_eq!(observed.result, six(ARGUMENTS));
    assert_common(&observed, &record, Op::Malloc, ARGUMENTS);
    // Its result proves the record followed the return; no entry TSC (MPI calls' only).
    assert_eq!(
        (record.result, record.out, record.entry_tsc),
        (six(ARGUMENTS), 0, 0)
    );
    assert!(before < record.tsc && record.tsc < after);
}

#[test]
fn before_shape_records_at_entry_and_passes_every_argument_on() {
    let (observed, record, before, after) =
        call_once(Op::Free, fake_six as *const () as u64, ARGUMENTS);
    assert_eq!(observed.result, six(ARGUMENTS));
    assert_common(&observed, &record, Op::Free, ARGUMENTS);
    assert_eq!((record.result, record.out, record.entry_tsc), (0, 0, 0));
    assert!(before < record.tsc && record.tsc < after);
}

#[test]
fn out_pointer_shape_reads_the_stored_pointer_only_on_success() {
    let target = fake_posix_memalign as *const () as u64;
    let mut stored = 0u64;
    let arguments = [&mut stored as *mut u64 as u64, 64, 100, 0, 0, 0];
    let (observed, record, _, _) = call_once(Op::PosixMemalign, target, arguments);
    assert_eq!(observed.result as u32, 0);
    assert!(stored >= FAKE_HEAP);
    assert_common(&observed, &record, Op::PosixMemalign, arguments);
    assert_eq!((record.result as u32, record.out), (0, stored));

    stored = 7;
    let arguments = [&mut stored as *mut u64 as u64, 3, 100, 0, 0, 0];
    let (observed, record, _, _) = call_once(Op::PosixMemalign, target, arguments);
    assert_eq!((observed.result as u32, stored), (libc::EINVAL as u32, 7));
    assert_eq!((record.result as u32, record.out), (libc::EINVAL as u32, 0));
}

#[test]
fn disabled_hooks_pass_straight_through() {
    let ops = [Op::Malloc, Op::Free, Op::PosixMemalign];
    let targets = [fake_six as *const () as u64; 3];
    let harness = Harness::new(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &ops,
        &targets,
    );
    harness.area.set_enabled(false);
    for op in ops {
        let observed = call_observed(harness.entry(op), ARGUMENTS);
        assert_eq!(observed.result, six(ARGUMENTS));
        assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
    }
    assert_eq!(harness.head(0), 0);
    assert!(records(&harness).is_empty());
}

#[test]
fn every_operation_assembles_with_its_shape() {
    let hooks = assemble(
        0x7000_0000_0000,
        0x7100_0000_0000,
        CpuSource::Single,
        &Op::ALL.map(Hook::from),
    )
    .unwrap();
    assert_eq!(hooks.entries.len(), Op::ALL.len());
    let slots: Vec<u64> = (0..Op::ALL.len() as u64)
        .map(|i| 0x7000_0000_0000 + 8 * i)
        .collect();
    assert_eq!(hooks.continuation_slots, slots);
    // Hooks of one shape are the same code but for the op: the same size.
    let size = |index: usize| hooks.entries[index + 1] - hooks.entries[index];
    let shape_size = |shape: HookShape| {
        let index = Op::ALL[..Op::ALL.len() - 1]
            .iter()
            .position(|op| op.shape() == shape);
        size(index.unwrap())
    };
    for (index, op) in Op::ALL[..Op::ALL.len() - 1].iter().enumerate() {
        assert_eq!(size(index), shape_size(op.shape()), "{op:?}");
    }
    let last_entry = *hooks.entries.last().unwrap() - 0x7000_0000_0000;
    println!(
        "hook bytes: before {}, after {}, after with out pointer {}; record routine and after hook {}",
        shape_size(HookShape::Before),
        shape_size(HookShape::After),
        shape_size(HookShape::AfterWithOutPointer),
        hooks.bytes.len() as u64 - last_entry,
    );
}

/// `hook`, continuing into `target`.
fn one_hook(hook: Hook, target: u64) -> Harness {
    Harness::with_hooks(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &[hook],
        &[target],
    )
}

/// The MPI stand-in's hook; the caller holds `FAKE_MPI_USE`.
fn mpi_harness(function: u32) -> Harness {
    let hook = Hook {
        op: Op::MpiEntry,
        function,
    };
    one_hook(hook, memsup_test_fake_mpi as *const () as u64)
}

#[test]
fn mpi_shape_records_entry_before_the_call_and_return_after() {
    const FUNCTION: u32 = 0x00ab_cdef;
    let _fake = FAKE_MPI_USE.lock().unwrap();
    let harness = mpi_harness(FUNCTION);
    let before = rdtsc();
    let observed = call_observed(harness.entry(Op::MpiEntry), ARGUMENTS);
    let after = rdtsc();
    assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
    // The function ran with the ABI's alignment, its stack arguments copied under the hook.
    let callee_rsp = observed.result;
    assert_eq!(callee_rsp % 16, 8);
    let copied = 8 * super::code_mpi::MPI_STACK_WORDS as u64;
    assert_eq!(callee_rsp, observed.stack_pointer - copied - 8);
    let records = records(&harness);
    assert_eq!(records.len(), 2);
    let (entry, exit) = (records[0], records[1]);
    assert_common(&observed, &entry, Op::MpiEntry, ARGUMENTS);
    assert_common(&observed, &exit, Op::MpiReturn, [0; 6]);
    assert_eq!((entry.out, exit.out), (FUNCTION as u64, FUNCTION as u64));
    assert_eq!((entry.result, exit.result), (0, callee_rsp));
    assert_eq!(entry.stack, 0, "no walk for an MPI call");
    assert!(before < entry.tsc && entry.tsc < exit.tsc && exit.tsc < after);
}

/// An MPI function summed in its slot (`code_mpi`: no record) and one that records both
/// calls, with the records each writes.
const MPI_FUNCTIONS: [(u32, usize); 2] = [(7, 0), (layout::mpi::FUNCTIONS as u32, 2)];

/// The function finds the caller's stack arguments above its return address: the
/// `MPI_STACK_WORDS` the hook copies (and not one more: the next word is the hook's).
#[test]
fn mpi_shape_passes_the_arguments_on_the_stack() {
    let _fake = FAKE_MPI_USE.lock().unwrap();
    for (function, recorded) in MPI_FUNCTIONS {
        let harness = mpi_harness(function);
        let stack: [u64; 12] = std::array::from_fn(|word| 0x1111_0000_0000 * (word as u64 + 1));
        let callee_rsp = call_with_stack_arguments(harness.entry(Op::MpiEntry), stack);
        assert_eq!(callee_rsp % 16, 8);
        let copied = super::code_mpi::MPI_STACK_WORDS as usize;
        let seen = fake_mpi_stack();
        assert_eq!(seen[1..=copied], stack[..copied]);
        assert_ne!(seen[copied + 1], stack[copied]);
        assert_eq!(records(&harness).len(), recorded);
    }
}

/// The six register arguments reach the function and its result reaches the caller.
#[test]
fn mpi_shape_passes_the_register_arguments_and_the_result() {
    for (function, recorded) in MPI_FUNCTIONS {
        let hook = Hook {
            op: Op::MpiEntry,
            function,
        };
        let harness = one_hook(hook, fake_six as *const () as u64);
        let observed = call_observed(harness.entry(Op::MpiEntry), ARGUMENTS);
        assert_eq!(observed.result, six(ARGUMENTS));
        assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
        let records = records(&harness);
        assert_eq!(records.len(), recorded);
        if let Some(exit) = records.get(1) {
            assert_eq!(exit.result, six(ARGUMENTS));
        }
    }
}

/// What `memsup_test_fake_mpi` saw last: its return address, then twelve words above it.
fn fake_mpi_stack() -> [u64; 13] {
    FAKE_MPI_STACK
        .each_ref()
        .map(|word| word.load(std::sync::atomic::Ordering::Relaxed))
}

/// Each hook that calls its function tells where the call returns and the CFA there: the
/// caller's frame (the hook's entry rsp + 8), found from rsp after the return.
#[test]
fn return_sites_give_the_caller_s_frame() {
    let _fake = FAKE_MPI_USE.lock().unwrap();
    for hook in [
        Hook::from(Op::Malloc),
        Hook::from(Op::Munmap),
        Hook {
            op: Op::MpiEntry,
            function: 3,
        },
    ] {
        let harness = one_hook(hook, memsup_test_fake_mpi as *const () as u64);
        let observed = call_observed(harness.entry(hook.op), ARGUMENTS);
        let return_address = fake_mpi_stack()[0];
        let rsp_after_return = observed.result + 8;
        let sites = &harness.hooks.return_sites;
        // An MPI hook calls its function from two places: with the call kept in the
        // thread's slot, and with it recorded.
        let calls = if hook.op == Op::MpiEntry { 2 } else { 1 };
        assert_eq!(sites.len(), calls, "{hook:?}");
        assert_eq!(sites[0].0, return_address, "{hook:?}");
        for site in sites {
            assert_eq!(
                rsp_after_return + site.1 as u64,
                observed.stack_pointer + 8,
                "{hook:?}"
            );
        }
    }
}

#[test]
fn drop_policy_counts_every_record_that_found_its_ring_full() {
    let config = AreaConfig {
        policy: layout::POLICY_DROP,
        ..AreaConfig::waiting(1, 64)
    };
    let harness = Harness::new(
        CpuSource::Single,
        config,
        &[Op::Malloc],
        &[fake_triple as *const () as u64],
    );
    let malloc = harness.malloc();
    for size in 0..1000 {
        assert_eq!(malloc(size), 3 * size + 1);
    }
    assert_eq!(
        (harness.area.dropped(), harness.area.full_waits()),
        (936, 0)
    );
    assert_eq!(harness.head(0), 64);
    let records = records(&harness);
    assert_eq!(records.len(), 64);
    assert!(records
        .iter()
        .enumerate()
        .all(|(i, r)| r.arguments[0] == i as u64));
}

#[test]
fn waiting_producer_gives_up_on_a_stale_heartbeat_and_disables_the_hooks() {
    let clock = super::clock::TscClock::new();
    let stale = clock.ticks(std::time::Duration::from_millis(20));
    let config = AreaConfig {
        stale_ticks: stale,
        ..AreaConfig::waiting(1, 64)
    };
    let harness = Harness::new(
        CpuSource::Single,
        config,
        &[Op::Free],
        &[fake_free as *const () as u64],
    );
    let free = harness.free();
    for pointer in 0..64 {
        free(pointer);
    }
    harness.area.heartbeat(rdtsc());
    let start = rdtsc();
    free(64);
    let waited = rdtsc() - start;
    assert!(
        waited >= stale && waited < 50 * stale,
        "waited {waited} ticks, stale {stale}"
    );
    assert!(!harness.area.enabled());
    assert_eq!((harness.area.dropped(), harness.area.full_waits()), (1, 1));
    for pointer in 65..100 {
        free(pointer);
    }
    assert_eq!((harness.head(0), harness.area.dropped()), (64, 1));
}

#[test]
fn waiting_producer_gives_up_after_the_wait_limit_and_stays_enabled() {
    let clock = super::clock::TscClock::new();
    let limit = clock.ticks(std::time::Duration::from_millis(20));
    let config = AreaConfig {
        wait_limit_ticks: limit,
        ..AreaConfig::waiting(1, 64)
    };
    let harness = Harness::new(
        CpuSource::Single,
        config,
        &[Op::Free],
        &[fake_free as *const () as u64],
    );
    let free = harness.free();
    for pointer in 0..64 {
        free(pointer);
    }
    for round in 1..=2 {
        let start = rdtsc();
        free(64);
        let waited = rdtsc() - start;
        assert!(
            waited >= limit && waited < 50 * limit,
            "waited {waited}, limit {limit}"
        );
        assert_eq!(
            (harness.area.dropped(), harness.area.full_waits()),
            (round, round)
        );
    }
    assert!(harness.area.enabled());
}

/// A producer on a full ring with a sleep bound far beyond the test: it sleeps once, and
/// only a wake from the drain (or from switching the hooks off) can bring it back soon.
fn sleeping_producer() -> (std::sync::Arc<Harness>, std::thread::JoinHandle<()>) {
    let (harness, mut producers) = sleeping_producers(1);
    (harness, producers.remove(0))
}

/// `count` producers asleep on one full ring, each with its own pointer from 64 up.
fn sleeping_producers(count: u64) -> (std::sync::Arc<Harness>, Vec<std::thread::JoinHandle<()>>) {
    let harness = std::sync::Arc::new(Harness::new(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &[Op::Free],
        &[fake_free as *const () as u64],
    ));
    harness
        .area
        .set_sleep_bound(std::time::Duration::from_secs(60));
    let free = harness.free();
    for pointer in 0..64 {
        free(pointer);
    }
    let producers = (0..count)
        .map(|index| std::thread::spawn(move || free(64 + index)))
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while harness.area.full_sleeps() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "the producers never slept"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    (harness, producers)
}

/// Joins the producer, which a wake must bring back well within its sleep bound.
fn join_woken(producer: std::thread::JoinHandle<()>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !producer.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the producer was not woken"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    producer.join().unwrap();
}

#[test]
fn a_producer_sleeping_on_a_full_ring_is_woken_by_the_drain() {
    let (harness, producer) = sleeping_producer();
    let mut drainer = Drainer::new(&harness.area);
    let mut out = Vec::new();
    drainer.drain_published(&harness.area, rdtsc(), &mut out);
    join_woken(producer);
    drainer.finish(&harness.area, &mut out);
    let frees: Vec<u64> = out.iter().map(|record| record.arguments[0]).collect();
    assert_eq!(frees, (0..65).collect::<Vec<u64>>());
    assert_eq!(
        (
            harness.area.full_waits(),
            harness.area.full_sleeps(),
            harness.area.dropped()
        ),
        (1, 1, 0)
    );
}

#[test]
fn producers_sleeping_on_one_ring_are_all_woken_as_the_drain_makes_room() {
    let (harness, producers) = sleeping_producers(3);
    let mut drainer = Drainer::new(&harness.area);
    let mut out = Vec::new();
    drainer.drain_published(&harness.area, rdtsc(), &mut out);
    for producer in producers {
        join_woken(producer);
    }
    drainer.finish(&harness.area, &mut out);
    let mut frees: Vec<u64> = out.iter().map(|record| record.arguments[0]).collect();
    frees.sort_unstable();
    assert_eq!(frees, (0..67).collect::<Vec<u64>>());
    assert_eq!((harness.area.full_sleeps(), harness.area.dropped()), (3, 0));
}

#[test]
fn switching_the_hooks_off_wakes_a_sleeping_producer_which_passes_through() {
    let (harness, producer) = sleeping_producer();
    harness.area.set_enabled(false);
    join_woken(producer);
    assert_eq!(
        (
            harness.area.full_sleeps(),
            harness.area.dropped(),
            harness.head(0)
        ),
        (1, 1, 64)
    );
}

/// Calls the malloc hook until a call starts and ends on one CPU; returns that CPU and
/// the record's ring number.
fn ring_of_a_call(cpu: CpuSource) -> (u32, u32) {
    let config = AreaConfig::waiting(4, 64);
    let target = fake_triple as *const () as u64;
    let harness = Harness::new(cpu, config, &[Op::Malloc], &[target]);
    let malloc = harness.malloc();
    for attempt in 0..64 {
        // SAFETY: sched_getcpu has no preconditions.
        let before = unsafe { libc::sched_getcpu() };
        assert_eq!(malloc(attempt), 3 * attempt + 1);
        let after = unsafe { libc::sched_getcpu() };
        let records = records_after(&harness);
        if before == after {
            return (before as u32, records.last().unwrap().cpu);
        }
    }
    panic!("the thread migrated during every call");
}

fn records_after(harness: &Harness) -> Vec<RawRecord> {
    let mut drainer = Drainer::new(&harness.area);
    let mut out = Vec::new();
    drainer.finish(&harness.area, &mut out);
    out
}

#[test]
fn rseq_source_picks_the_ring_of_the_current_cpu() {
    let (cpu, ring) = ring_of_a_call(super::ring_tests::rseq_source());
    assert_eq!(ring, cpu & 3);
}

#[test]
fn rdpid_source_picks_the_ring_of_the_current_cpu() {
    let features = std::arch::x86_64::__cpuid_count(7, 0);
    if features.ecx & (1 << 22) == 0 {
        eprintln!("SKIPPED rdpid_source_picks_the_ring_of_the_current_cpu: this CPU has no rdpid");
        return;
    }
    let (cpu, ring) = ring_of_a_call(CpuSource::Rdpid);
    assert_eq!(ring, cpu & 3);
}

/// With the default mask, the records timed are those whose ring's head `sampled_head`
/// picks: about one in 256, spread over a malloc-free loop's mallocs and frees alike.
#[test]
fn about_one_record_in_256_is_timed_mallocs_and_frees_alike() {
    const PAIRS: u64 = 2000;
    let config = AreaConfig::waiting(1, 4096);
    let targets = [
        fake_malloc as *const () as u64,
        fake_free as *const () as u64,
    ];
    let harness = Harness::new(CpuSource::Single, config, &[Op::Malloc, Op::Free], &targets);
    let (malloc, free) = (harness.malloc(), harness.free());
    for size in 0..PAIRS {
        free(malloc(size));
    }
    let (timed, ticks) = harness.area.timed();
    let sampled = |heads: &mut dyn Iterator<Item = u64>| {
        heads
            .filter(|&head| sampled_head(head, layout::SAMPLE_BITS))
            .count() as u64
    };
    // Mallocs take the even heads, frees the odd ones.
    let mallocs = sampled(&mut (0..2 * PAIRS).step_by(2));
    let frees = sampled(&mut (1..2 * PAIRS).step_by(2));
    assert_eq!(timed, mallocs + frees);
    assert!(mallocs > 0 && frees > 0, "{mallocs} mallocs, {frees} frees");
    assert!(
        (10..=22).contains(&timed),
        "{timed} of {} records",
        2 * PAIRS
    );
    assert!(ticks > 0);
    assert_eq!(records(&harness).len() as u64, 2 * PAIRS);
}
