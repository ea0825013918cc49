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

/// Slots seen flushing, with the entry they flush and the pass's `now` when first seen so.
#[derive(Debug, Default)]
pub struct Flushing(HashMap<u64, (u64, u64)>);

/// Claims the calls pending since before `cutoff` (their entries go to `entries`) and
/// returns the cutoff, lowered to the entry of any call flushing its return record, unless
/// it has been seen flushing for `abandon_ticks` (its thread died in the middle).
pub fn claim_pending(
    area: &Area,
    mut cutoff: u64,
    now: u64,
    abandon_ticks: u64,
    flushing: &mut Flushing,
    entries: &mut Vec<RawRecord>,
) -> u64 {
    let mut still = HashMap::new();
    for (_, slot) in area.owned_slots() {
        // The state and the owner's sequence of calls, as one word.
        let word = area.u64_at(slot + mpi::STATE);
        let seen = word.load(Ordering::Acquire);
        let field = |offset: u64| area.u64_at(slot + offset).load(Ordering::Acquire);
        let mut state = seen as u32;
        if state == mpi::PENDING {
            // Read before the claim, which succeeds only if the owner has not moved on.
            let entry = entry_record(
                field(mpi::OWNER),
                u64::from(area.u32_at(slot + mpi::FUNCTION).load(Ordering::Acquire)),
                field(mpi::STACK_POINTER),
                field(mpi::ENTRY_TSC),
            );
            if entry.tsc < cutoff {
                let claimed = (seen & !0xffff_ffff) | u64::from(mpi::CLAIMED);
                match word.compare_exchange(seen, claimed, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        entries.push(entry);
                        continue;
                    }
                    Err(now_seen) => state = now_seen as u32,
                }
            }
        }
        if state == mpi::FLUSHING {
            let entry_tsc = field(mpi::ENTRY_TSC);
            let since = match flushing.0.get(&slot) {
                Some(&(entry, since)) if entry == entry_tsc => since,
                _ => now,
            };
            still.insert(slot, (entry_tsc, since));
            if now.saturating_sub(since) < abandon_ticks {
                cutoff = cutoff.min(entry_tsc);
            }
        }
    }
    flushing.0 = still;
    cutoff
}

/// Waits, yielding, up to `limit` for the slots flushing their return records to finish:
/// a pass that releases everything published (a thread stopped at an int3 probe) then has
/// their entries in place instead of holding back what came after them.
pub fn wait_for_flushes(area: &Area, limit: std::time::Duration) {
    let start = std::time::Instant::now();
    let flushing = |slot: &(u64, u64)| {
        area.u32_at(slot.1 + mpi::STATE).load(Ordering::Acquire) == mpi::FLUSHING
    };
    let mut slots = area.owned_slots();
    while !slots.is_empty() && start.elapsed() < limit {
        slots.retain(flushing);
        if !slots.is_empty() {
            std::thread::yield_now();
        }
    }
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

#[cfg(test)]
#[path = "mpi_slots_tests.rs"]
mod tests;
