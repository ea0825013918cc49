//! memsup's side of the MPI section (`layout::mpi`). Each drain pass, before it reads the
//! rings, looks at the slots threads have taken: a call pending since before the pass's
//! cutoff is claimed (its entry is sent in its place in time, and its return will come as a
//! record); a call writing its return record with its entry in it holds the cutoff at that
//! entry, which the record then brings. Between passes the hooks sum the calls in which
//! nothing was recorded; `SummedCalls` reads what they added since it last looked.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::layout::{header, mpi, Op};
use super::ring::{Area, RawRecord};

impl Area {
    /// The MPI section's offset from the area's start, when the header gives one that fits.
    fn mpi_section(&self) -> Option<u64> {
        let offset = self.u64_at(header::MPI_OFFSET).load(Ordering::Acquire);
        let fits = offset
            .checked_add(mpi::SECTION_BYTES)
            .is_some_and(|end| end <= self.bytes() as u64);
        (offset != 0 && fits).then_some(offset)
    }

    /// The slots threads have taken, as (slot number, offset of the slot).
    fn owned_slots(&self) -> Vec<(u64, u64)> {
        let Some(section) = self.mpi_section() else {
            return Vec::new();
        };
        let mut owned = Vec::new();
        for word in 0..mpi::SLOTS / 64 {
            let mut bits = self
                .u64_at(header::MPI_OWNED + 8 * word)
                .load(Ordering::Acquire);
            while bits != 0 {
                let slot = 64 * word + u64::from(bits.trailing_zeros());
                owned.push((slot, section + slot * mpi::SLOT_BYTES));
                bits &= bits - 1;
            }
        }
        owned
    }
}

/// The entry record of a call kept in a slot.
pub fn entry_record(thread: u64, function: u64, stack_pointer: u64, tsc: u64) -> RawRecord {
    RawRecord {
        op: Op::MpiEntry,
        cpu: 0,
        lookups: 0,
        misses: 0,
        tsc,
        thread,
        caller: 0,
        stack_pointer,
        result: 0,
        arguments: [0; 6],
        out: function,
        entry_tsc: 0,
        stack: 0,
    }
}

/// The entry a return record brings: that of a call kept in its slot inside which
/// something was recorded (its entry TSC is then set; a return record has none otherwise).
pub fn carried_entry(record: &RawRecord) -> Option<RawRecord> {
    (record.op == Op::MpiReturn && record.entry_tsc != 0).then(|| {
        entry_record(
            record.thread,
            record.out,
            record.stack_pointer,
            record.entry_tsc,
        )
    })
}

/// Claims the calls pending since before `cutoff` (their entries go to `entries`) and
/// returns the cutoff, lowered to the entry of any call flushing its return record (unless
/// that began `abandon_ticks` before `now`: its thread died in the middle).
pub fn claim_pending(
    area: &Area,
    mut cutoff: u64,
    now: u64,
    abandon_ticks: u64,
    entries: &mut Vec<RawRecord>,
) -> u64 {
    for (_, slot) in area.owned_slots() {
        let state = area.u32_at(slot + mpi::STATE);
        let mut seen = state.load(Ordering::Acquire);
        let entry_tsc = area.u64_at(slot + mpi::ENTRY_TSC).load(Ordering::Relaxed);
        if seen == mpi::PENDING && entry_tsc < cutoff {
            let claim = state.compare_exchange(
                mpi::PENDING,
                mpi::CLAIMED,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            match claim {
                Ok(_) => {
                    area.u64_at(header::MPI_ACTIVE)
                        .fetch_sub(1, Ordering::AcqRel);
                    let field = |offset: u64| area.u64_at(slot + offset).load(Ordering::Relaxed);
                    let function = area.u32_at(slot + mpi::FUNCTION).load(Ordering::Relaxed);
                    entries.push(entry_record(
                        field(mpi::OWNER),
                        u64::from(function),
                        field(mpi::STACK_POINTER),
                        entry_tsc,
                    ));
                    continue;
                }
                Err(now_seen) => seen = now_seen,
            }
        }
        if seen == mpi::FLUSHING && now.saturating_sub(entry_tsc) < abandon_ticks {
            cutoff = cutoff.min(entry_tsc);
        }
    }
    cutoff
}

/// Calls summed in the hook, since they were last taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sum {
    /// The slot owner's thread pointer.
    pub thread: u64,
    pub function: u32,
    pub calls: u64,
    pub ticks: u64,
}

/// What the hooks have summed, as taken so far, per slot and function.
#[derive(Debug, Default)]
pub struct SummedCalls {
    taken: HashMap<(u64, u32), (u64, u64)>,
}

impl SummedCalls {
    /// Appends to `out` what the slots whose owner passes `ready` summed since last taken.
    pub fn take(&mut self, area: &Area, mut ready: impl FnMut(u64) -> bool, out: &mut Vec<Sum>) {
        let Some(section) = area.mpi_section() else {
            return;
        };
        for (number, slot) in area.owned_slots() {
            let thread = area.u64_at(slot + mpi::OWNER).load(Ordering::Acquire);
            if ready(thread) {
                self.take_slot(area, section, number, slot, thread, out);
            }
        }
    }

    /// As `take`, for the slot of `thread` alone.
    pub fn take_thread(&mut self, area: &Area, thread: u64, out: &mut Vec<Sum>) {
        self.take(area, |owner| owner == thread, out);
    }

    fn take_slot(
        &mut self,
        area: &Area,
        section: u64,
        number: u64,
        slot: u64,
        thread: u64,
        out: &mut Vec<Sum>,
    ) {
        for word in 0..mpi::FUNCTIONS / 64 {
            let mut bits = area
                .u64_at(slot + mpi::TOUCHED + 8 * word)
                .load(Ordering::Acquire);
            while bits != 0 {
                let function = 64 * word + u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                let at = section + mpi::counters_of(number, function);
                let calls = area.u64_at(at).load(Ordering::Acquire);
                let ticks = area.u64_at(at + 8).load(Ordering::Acquire);
                let taken = self.taken.entry((number, function as u32)).or_default();
                if calls > taken.0 {
                    out.push(Sum {
                        thread,
                        function: function as u32,
                        calls: calls - taken.0,
                        ticks: ticks.saturating_sub(taken.1),
                    });
                    *taken = (calls, ticks.max(taken.1));
                }
            }
        }
    }
}

/// Per thread pointer, the MPI calls the drain has let into the stream and not yet closed:
/// a thread's summed calls are sent only while it has none open, so that none reads as a
/// call inside another.
#[derive(Debug, Default)]
pub struct OpenCalls {
    open: crate::events::heap::IntegerMap<u64, u32>,
    /// The latest time sent in this image: what sums sent at the end of a pass carry.
    pub latest_ns: u64,
}

impl OpenCalls {
    /// An entry of `thread` goes into the stream; true when it had no call open.
    pub fn enter(&mut self, thread: u64) -> bool {
        let open = self.open.entry(thread).or_default();
        *open += 1;
        *open == 1
    }

    /// A return of `thread` goes into the stream.
    pub fn leave(&mut self, thread: u64) {
        if let Some(open) = self.open.get_mut(&thread) {
            *open = open.saturating_sub(1);
        }
    }

    pub fn is_open(&self, thread: u64) -> bool {
        self.open.get(&thread).is_some_and(|&open| open > 0)
    }
}

#[cfg(test)]
#[path = "mpi_slots_tests.rs"]
mod tests;
