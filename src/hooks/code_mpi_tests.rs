//! The MPI hooks' slots, run in this process: a call inside which its thread records
//! nothing is summed with no record; one inside which it records something, one memsup
//! claims while it lasts, one inside another, one inside a call recorded at both ends and
//! one of a thread whose slot another thread holds each write what the drain needs to send
//! them whole, in order.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use super::clock::rdtsc;
use super::code::CpuSource;
use super::layout::{header, mpi, Hook, Op};
use super::mpi_slots::{claim_pending, Flushing, Sum, SummedCalls};
use super::ring::{Drainer, RawRecord};
use super::test_support::*;

const FUNCTION: u32 = 5;
const RESULT: u64 = 0x5eed_0001;

thread_local! {
    /// What the stand-in MPI function does inside, on this test's thread.
    static INSIDE: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// An MPI function that runs `INSIDE` (at the outermost call only) and returns `RESULT`.
extern "C" fn fake_mpi() -> u64 {
    let depth = DEPTH.with(|depth| depth.replace(depth.get() + 1));
    if depth == 0 {
        INSIDE.with(|inside| {
            if let Some(inside) = inside.borrow().as_ref() {
                inside();
            }
        });
    }
    DEPTH.with(|depth| depth.set(depth.get() - 1));
    RESULT
}

/// Hooks the stand-in as MPI function `FUNCTION` and `fake_malloc` as malloc.
fn harness() -> Harness {
    let hooks = [
        Hook {
            op: Op::MpiEntry,
            function: FUNCTION,
        },
        Hook::from(Op::Malloc),
    ];
    let targets = [
        fake_mpi as *const () as u64,
        fake_malloc as *const () as u64,
    ];
    Harness::with_hooks(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &hooks,
        &targets,
    )
}

fn call(harness: &Harness, inside: Option<Box<dyn Fn()>>) -> Observed {
    INSIDE.with(|slot| *slot.borrow_mut() = inside);
    let observed = call_observed(harness.entry(Op::MpiEntry), [0; 6]);
    INSIDE.with(|slot| *slot.borrow_mut() = None);
    assert_eq!(observed.result, RESULT);
    assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
    observed
}

fn section(harness: &Harness) -> u64 {
    harness
        .area
        .u64_at(header::MPI_OFFSET)
        .load(Ordering::Relaxed)
}

/// This thread's slot field at `offset`.
fn slot_field(harness: &Harness, offset: u64) -> u64 {
    let slot = section(harness) + mpi::slot_of(thread_pointer()) * mpi::SLOT_BYTES;
    harness.area.u64_at(slot + offset).load(Ordering::Relaxed)
}

fn state(harness: &Harness) -> u32 {
    slot_field(harness, mpi::STATE) as u32
}

/// Every record, in the order the drain releases them (entries brought by return records
/// in their place).
fn released(harness: &Harness) -> Vec<RawRecord> {
    let mut drainer = Drainer::new(&harness.area);
    let mut out = Vec::new();
    drainer.finish(&harness.area, &mut out);
    assert_eq!(
        (drainer.torn(), drainer.invalid(), drainer.late()),
        (0, 0, 0)
    );
    out
}

fn sums(harness: &Harness) -> Vec<Sum> {
    let mut summed = SummedCalls::default();
    let mut out = Vec::new();
    summed.take(&harness.area, |_| true, &mut out);
    out
}

fn ops(records: &[RawRecord]) -> Vec<Op> {
    records.iter().map(|record| record.op).collect()
}

#[test]
fn calls_in_which_nothing_is_recorded_are_summed_in_the_slot_without_a_record() {
    let harness = harness();
    let before = rdtsc();
    for _ in 0..3 {
        call(&harness, None);
    }
    let spent = rdtsc() - before;
    assert_eq!(harness.head(0), 0, "no record");
    assert_eq!(slot_field(&harness, mpi::OWNER), thread_pointer());
    assert_eq!(state(&harness), mpi::IDLE);
    let sums = sums(&harness);
    assert_eq!(sums.len(), 1);
    let sum = sums[0];
    assert_eq!(
        (sum.thread, sum.function, sum.calls),
        (thread_pointer(), FUNCTION, 3)
    );
    assert!(0 < sum.ticks && sum.ticks < spent, "{sum:?}");
    assert!(released(&harness).is_empty());
}

#[test]
fn summed_calls_are_taken_once() {
    let harness = harness();
    let mut summed = SummedCalls::default();
    let mut out = Vec::new();
    call(&harness, None);
    summed.take(&harness.area, |_| true, &mut out);
    summed.take(&harness.area, |_| true, &mut out);
    call(&harness, None);
    call(&harness, None);
    summed.take(&harness.area, |thread| thread != thread_pointer(), &mut out);
    summed.take_thread(&harness.area, thread_pointer(), &mut out);
    let calls: Vec<u64> = out.iter().map(|sum| sum.calls).collect();
    assert_eq!(calls, [1, 2]);
}

/// A record of the thread inside the call (here its malloc) marks the call dirty: the
/// return record carries the entry, which the drain puts before the malloc.
#[test]
fn a_call_inside_which_something_is_recorded_brings_its_entry_in_its_return_record() {
    let harness = harness();
    let malloc = harness.malloc();
    let observed = call(&harness, Some(Box::new(move || assert_ne!(malloc(24), 0))));
    let records = released(&harness);
    assert_eq!(ops(&records), [Op::MpiEntry, Op::Malloc, Op::MpiReturn]);
    let (entry, inner, exit) = (records[0], records[1], records[2]);
    assert!(entry.tsc < inner.tsc && inner.tsc < exit.tsc);
    assert_eq!(exit.entry_tsc, entry.tsc);
    for record in [entry, exit] {
        assert_eq!(record.out, u64::from(FUNCTION));
        assert_eq!(record.thread, thread_pointer());
        assert_eq!(record.stack_pointer, observed.stack_pointer);
    }
    assert_eq!(exit.result, RESULT);
    assert_eq!(state(&harness), mpi::IDLE);
    assert!(sums(&harness).is_empty());
}

/// memsup claims a call pending since before its cutoff: it sends the entry itself, and
/// the return record comes alone.
#[test]
fn a_call_memsup_claims_while_it_lasts_writes_its_return_record_alone() {
    let harness = harness();
    let area = harness.area_address();
    let claimed = std::rc::Rc::new(RefCell::new(Vec::new()));
    let into = std::rc::Rc::clone(&claimed);
    let observed = call(
        &harness,
        Some(Box::new(move || {
            // SAFETY: the harness's area, alive for the call.
            let area = unsafe { super::ring::Area::new(area as *mut u8, layout_bytes()) };
            let mut entries = Vec::new();
            let mut flushing = Flushing::default();
            let cutoff = claim_pending(
                &area,
                u64::MAX,
                rdtsc(),
                1 << 40,
                &mut flushing,
                &mut entries,
            );
            assert_eq!(cutoff, u64::MAX);
            into.borrow_mut().extend(entries);
        })),
    );
    let claimed = claimed.borrow();
    assert_eq!(ops(&claimed), [Op::MpiEntry]);
    assert_eq!(claimed[0].stack_pointer, observed.stack_pointer);
    assert_eq!(claimed[0].out, u64::from(FUNCTION));
    let records = released(&harness);
    assert_eq!(ops(&records), [Op::MpiReturn]);
    assert_eq!(records[0].entry_tsc, 0);
    assert!(claimed[0].tsc < records[0].tsc);
    assert_eq!(state(&harness), mpi::IDLE);
    assert!(sums(&harness).is_empty());
}

fn layout_bytes() -> usize {
    super::layout::Shape::full(1, 64).bytes() as usize
}

/// A call inside another finds the slot busy: it records its entry and return, which
/// also makes the outer call bring its entry.
#[test]
fn a_call_inside_another_records_its_entry_and_return() {
    let harness = harness();
    let entry = harness.entry(Op::MpiEntry);
    call(
        &harness,
        Some(Box::new(move || {
            assert_eq!(call_observed(entry, [0; 6]).result, RESULT);
        })),
    );
    let records = released(&harness);
    let expected = [Op::MpiEntry, Op::MpiEntry, Op::MpiReturn, Op::MpiReturn];
    assert_eq!(ops(&records), expected);
    assert!(records.windows(2).all(|pair| pair[0].tsc < pair[1].tsc));
    assert_eq!(records[3].entry_tsc, records[0].tsc);
    assert!(records[1].stack_pointer < records[0].stack_pointer);
    assert_eq!(state(&harness), mpi::IDLE);
    assert!(sums(&harness).is_empty());
}

/// A thread whose slot another thread holds records every call, and leaves the slot alone.
#[test]
fn a_thread_whose_slot_another_holds_records_every_call() {
    let harness = harness();
    let slot = section(&harness) + mpi::slot_of(thread_pointer()) * mpi::SLOT_BYTES;
    let other = thread_pointer() ^ 0x1000;
    harness
        .area
        .u64_at(slot + mpi::OWNER)
        .store(other, Ordering::Relaxed);
    call(&harness, None);
    call(&harness, None);
    let records = released(&harness);
    let expected = [Op::MpiEntry, Op::MpiReturn, Op::MpiEntry, Op::MpiReturn];
    assert_eq!(ops(&records), expected);
    assert!(records.iter().all(|record| record.entry_tsc == 0));
    assert_eq!(slot_field(&harness, mpi::OWNER), other);
    assert_eq!(state(&harness), mpi::IDLE);
}

/// Another thread's record during a call is not the call's: the call is still summed.
#[test]
fn a_record_of_another_thread_during_a_call_leaves_it_summed() {
    let harness = std::sync::Arc::new(harness());
    let other = std::sync::Arc::clone(&harness);
    call(
        &harness,
        Some(Box::new(move || {
            let other = std::sync::Arc::clone(&other);
            let thread = std::thread::spawn(move || assert_ne!(other.malloc()(8), 0));
            thread.join().unwrap();
        })),
    );
    assert_eq!(ops(&released(&harness)), [Op::Malloc]);
    let sums = sums(&harness);
    assert_eq!(sums.len(), 1);
    assert_eq!((sums[0].function, sums[0].calls), (FUNCTION, 1));
}

/// A thread's records mark its own pending call only: with no call in its slot, or with no
/// slot taken in the area at all, a record leaves the slots as they are.
#[test]
fn a_record_marks_only_its_own_thread_s_pending_call() {
    let harness = harness();
    let taken = || {
        harness
            .area
            .u32_at(header::MPI_TAKEN)
            .load(Ordering::Relaxed)
    };
    assert_ne!(harness.malloc()(8), 0);
    assert_eq!(taken(), 0);
    call(&harness, None);
    assert_eq!(taken(), 1);
    assert_ne!(harness.malloc()(8), 0);
    assert_eq!(
        slot_field(&harness, mpi::DIRTY) as u32,
        0,
        "no call pending"
    );
    call(&harness, None);
    assert_eq!(ops(&released(&harness)), [Op::Malloc, Op::Malloc]);
    assert_eq!(sums(&harness)[0].calls, 2);
}

/// A call whose slot was emptied while it lasted (a fork child's fresh area) records its
/// return alone and leaves the slot as it found it.
#[test]
fn a_call_whose_slot_is_empty_at_its_return_records_its_return_alone() {
    let harness = harness();
    let area = harness.area_address();
    let slot = section(&harness) + mpi::slot_of(thread_pointer()) * mpi::SLOT_BYTES;
    call(
        &harness,
        Some(Box::new(move || {
            // SAFETY: the harness's area, alive for the call.
            let area = unsafe { super::ring::Area::new(area as *mut u8, layout_bytes()) };
            area.u32_at(slot + mpi::STATE)
                .store(mpi::IDLE, Ordering::Relaxed);
        })),
    );
    let records = released(&harness);
    assert_eq!(ops(&records), [Op::MpiReturn]);
    assert_eq!((records[0].entry_tsc, records[0].result), (0, RESULT));
    assert_eq!(state(&harness), mpi::IDLE);
    assert!(sums(&harness).is_empty());
}

/// A call of a function numbered past the counters is recorded at both ends and holds the
/// slot meanwhile, so that a call inside it is recorded too (and not summed as if outside).
#[test]
fn a_call_inside_a_call_recorded_at_both_ends_is_recorded_too() {
    let hooks = [
        Hook {
            op: Op::MpiEntry,
            function: FUNCTION,
        },
        Hook {
            op: Op::MpiEntry,
            function: mpi::FUNCTIONS as u32,
        },
    ];
    let target = fake_mpi as *const () as u64;
    let harness = Harness::with_hooks(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &hooks,
        &[target, target],
    );
    let (summed, recorded) = (harness.hooks.entries[0], harness.hooks.entries[1]);
    // Takes the slot.
    assert_eq!(call_observed(summed, [0; 6]).result, RESULT);
    INSIDE.with(|slot| {
        *slot.borrow_mut() = Some(Box::new(move || {
            assert_eq!(call_observed(summed, [0; 6]).result, RESULT);
        }))
    });
    assert_eq!(call_observed(recorded, [0; 6]).result, RESULT);
    INSIDE.with(|slot| *slot.borrow_mut() = None);
    let records = released(&harness);
    let expected = [Op::MpiEntry, Op::MpiEntry, Op::MpiReturn, Op::MpiReturn];
    assert_eq!(ops(&records), expected);
    let functions: Vec<u64> = records.iter().map(|record| record.out).collect();
    let outer = mpi::FUNCTIONS;
    let inner = u64::from(FUNCTION);
    assert_eq!(functions, [outer, inner, inner, outer]);
    assert_eq!(state(&harness), mpi::IDLE);
    assert_eq!(sums(&harness)[0].calls, 1, "the first call alone");
}

/// Function numbers past the slots' counters record every call.
#[test]
fn a_function_numbered_past_the_counters_records_every_call() {
    let hook = Hook {
        op: Op::MpiEntry,
        function: mpi::FUNCTIONS as u32,
    };
    let harness = Harness::with_hooks(
        CpuSource::Single,
        AreaConfig::waiting(1, 64),
        &[hook],
        &[fake_mpi as *const () as u64],
    );
    call(&harness, None);
    let records = released(&harness);
    assert_eq!(ops(&records), [Op::MpiEntry, Op::MpiReturn]);
    assert_eq!(state(&harness), mpi::IDLE, "the slot given back");
    assert!(sums(&harness).is_empty());
}
