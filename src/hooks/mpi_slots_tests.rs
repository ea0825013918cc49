//! The drain against MPI slots written by hand: which pending calls it claims, how a call
//! flushing its return record holds it back, and the entries it releases in their place.

use std::sync::atomic::Ordering;

use super::*;
use crate::hooks::code::CpuSource;
use crate::hooks::layout::{self, record, ring};
use crate::hooks::ring::Drainer;
use crate::hooks::test_support::{AreaConfig, Harness};

const CAPACITY: u64 = 8;
const FUNCTION: u64 = 4;

fn harness() -> Harness {
    Harness::with_hooks(
        CpuSource::Single,
        AreaConfig::waiting(1, CAPACITY),
        &[],
        &[],
    )
}

fn section(area: &Area) -> u64 {
    area.mpi_section().expect("an MPI section")
}

/// Slot `number`, taken by `owner`, in `state` with a call of `FUNCTION` entered at
/// `entry_tsc` with rsp `owner + 8`.
fn take_slot(area: &Area, number: u64, owner: u64, state: u32, entry_tsc: u64) {
    let slot = section(area) + number * mpi::SLOT_BYTES;
    area.u64_at(slot + mpi::OWNER)
        .store(owner, Ordering::Relaxed);
    area.u32_at(slot + mpi::STATE)
        .store(state, Ordering::Relaxed);
    area.u32_at(slot + mpi::FUNCTION)
        .store(FUNCTION as u32, Ordering::Relaxed);
    area.u64_at(slot + mpi::ENTRY_TSC)
        .store(entry_tsc, Ordering::Relaxed);
    area.u64_at(slot + mpi::STACK_POINTER)
        .store(owner + 8, Ordering::Relaxed);
    area.u64_at(header::MPI_OWNED + 8 * (number / 64))
        .fetch_or(1 << (number % 64), Ordering::Relaxed);
}

fn set_state(area: &Area, number: u64, state: u32) {
    let slot = section(area) + number * mpi::SLOT_BYTES;
    area.u32_at(slot + mpi::STATE)
        .store(state, Ordering::Relaxed);
}

/// Publishes record `index` of ring 0.
fn publish(area: &Area, index: u64, op: Op, tsc: u64, thread: u64, entry_tsc: u64) {
    let at = layout::ring_offset(0, CAPACITY) + layout::record_offset(index, CAPACITY);
    let field = |offset: u64, value: u64| area.u64_at(at + offset).store(value, Ordering::Relaxed);
    field(record::OP, op as u64);
    field(record::TSC, tsc);
    field(record::THREAD, thread);
    field(record::STACK_POINTER, thread + 8);
    field(record::OUT, FUNCTION);
    field(record::ENTRY_TSC, entry_tsc);
    field(record::SEQ, index + 1);
    area.u64_at(layout::ring_offset(0, CAPACITY) + ring::HEAD)
        .fetch_max(index + 1, Ordering::Relaxed);
}

fn released(records: &[RawRecord]) -> Vec<(Op, u64)> {
    records
        .iter()
        .map(|record| (record.op, record.tsc))
        .collect()
}

fn drainer(area: &Area) -> Drainer {
    let mut drainer = Drainer::new(area);
    drainer.set_grace_ticks(0);
    drainer
}

#[test]
fn a_call_pending_since_before_the_cutoff_is_claimed_and_a_younger_one_is_not() {
    let harness = harness();
    let area = &harness.area;
    take_slot(area, 3, 0x7000, mpi::PENDING, 50);
    take_slot(area, 200, 0x9000, mpi::PENDING, 5_000);
    let mut drainer = drainer(area);
    let mut out = Vec::new();
    drainer.drain(area, 1_000, &mut out);
    drainer.drain(area, 2_000, &mut out);
    assert_eq!(released(&out), [(Op::MpiEntry, 50)]);
    let entry = out[0];
    assert_eq!(
        (entry.thread, entry.out, entry.stack_pointer),
        (0x7000, FUNCTION, 0x7008)
    );
    let state = |number: u64| {
        area.u32_at(section(area) + number * mpi::SLOT_BYTES + mpi::STATE)
            .load(Ordering::Relaxed)
    };
    assert_eq!((state(3), state(200)), (mpi::CLAIMED, mpi::PENDING));
    // The end of the image claims every call still pending.
    drainer.finish(area, &mut out);
    assert_eq!(released(&out), [(Op::MpiEntry, 50), (Op::MpiEntry, 5_000)]);
}

/// A call writing its return record with its entry holds back what came after its entry;
/// the record then brings the entry, released in its place.
#[test]
fn a_call_flushing_its_return_record_holds_the_drain_at_its_entry() {
    let harness = harness();
    let area = &harness.area;
    take_slot(area, 9, 0x7000, mpi::FLUSHING, 150);
    publish(area, 0, Op::Malloc, 100, 0x5000, 0);
    publish(area, 1, Op::Malloc, 200, 0x5000, 0);
    let mut drainer = drainer(area);
    let mut out = Vec::new();
    drainer.drain(area, 1_000, &mut out);
    drainer.drain(area, 2_000, &mut out);
    assert_eq!(released(&out), [(Op::Malloc, 100)]);
    publish(area, 2, Op::MpiReturn, 300, 0x7000, 150);
    set_state(area, 9, mpi::IDLE);
    drainer.drain(area, 3_000, &mut out);
    let expected = [
        (Op::Malloc, 100),
        (Op::MpiEntry, 150),
        (Op::Malloc, 200),
        (Op::MpiReturn, 300),
    ];
    assert_eq!(released(&out), expected);
    assert_eq!((out[1].thread, out[1].stack_pointer), (0x7000, 0x7008));
    assert_eq!(drainer.late(), 0);
}

/// A slot left flushing for as long as a claimed ring slot may stay unpublished, counted
/// from when the drain first saw it so, was left by a thread that died: it holds nothing
/// back any more.
#[test]
fn an_abandoned_flushing_slot_stops_holding_the_drain() {
    let harness = harness();
    let area = &harness.area;
    take_slot(area, 9, 0x7000, mpi::FLUSHING, 150);
    publish(area, 0, Op::Malloc, 200, 0x5000, 0);
    let mut drainer = drainer(area);
    drainer.set_abandon_ticks(1_500);
    let mut out = Vec::new();
    // First seen flushing at 1,000: held at 2,000 (1,000 later), not at 3,000.
    drainer.drain(area, 1_000, &mut out);
    drainer.drain(area, 2_000, &mut out);
    assert!(out.is_empty());
    drainer.drain(area, 3_000, &mut out);
    assert_eq!(released(&out), [(Op::Malloc, 200)]);
}

/// Slots are read only where the header says an MPI section fits.
#[test]
fn a_section_outside_the_area_is_not_read() {
    let harness = harness();
    let area = &harness.area;
    take_slot(area, 3, 0x7000, mpi::PENDING, 50);
    let bytes = area.bytes() as u64;
    for offset in [bytes, bytes - mpi::SECTION_BYTES + 8, u64::MAX - 4] {
        area.u64_at(header::MPI_OFFSET)
            .store(offset, Ordering::Relaxed);
        let mut entries = Vec::new();
        let mut flushing = Flushing::default();
        let cutoff = claim_pending(area, u64::MAX, 0, 0, &mut flushing, &mut entries);
        assert_eq!(cutoff, u64::MAX);
        assert!(entries.is_empty());
        let mut sums = Vec::new();
        SummedCalls::default().take(area, |_| true, &mut sums);
        assert!(sums.is_empty());
    }
}
