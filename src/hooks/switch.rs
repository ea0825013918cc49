//! Hooks switch themselves off when the heartbeat looks stale, taking memsup for dead. memsup
//! may be only stopped or starved of CPU for a second (a loaded machine, a paused VM): the
//! heartbeat thread, running again, switches them back on and counts it, so that the
//! recording goes on and the profile says what it missed. Never hooks memsup switched off
//! for good: it marks those (`header::OFF_BY_MEMSUP`) before it clears `ENABLED`, with the
//! heartbeat held (`Drain::switch_off`), whichever image the area serves (a fork child may
//! share its parent's).

use std::sync::atomic::{AtomicU64, Ordering};

use super::ring::Area;

#[derive(Debug, Default)]
pub struct Switch {
    back_on: AtomicU64,
}

impl Switch {
    /// Switches hooks that switched themselves off back on; true when it did.
    pub fn back_on(&self, area: &Area) -> bool {
        if area.enabled() || area.off_by_memsup() {
            return false;
        }
        area.set_enabled(true);
        self.back_on.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Heartbeats that found the hooks switched off by themselves (several switch-offs
    /// between two heartbeats count once), and one more when they are so now.
    pub fn times_off(&self, area: &Area) -> u64 {
        let off_now = !area.enabled() && !area.off_by_memsup();
        self.back_on.load(Ordering::Relaxed) + u64::from(off_now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::layout::{self, header};

    /// An area of one ring of 4 records in `buffer`, which must outlive it.
    fn area_in(buffer: &mut [u64]) -> Area {
        // SAFETY: the caller keeps the buffer while the area is used.
        let area = unsafe { Area::new(buffer.as_mut_ptr().cast(), buffer.len() * 8) };
        area.initialise(&layout::Shape::full(1, 4), layout::POLICY_WAIT, 0, 0);
        area
    }

    #[test]
    fn hooks_that_switched_themselves_off_are_switched_back_on_and_counted() {
        let mut buffer = vec![0u64; layout::rings_end(1, 4) as usize / 8];
        let area = area_in(&mut buffer);
        let switch = Switch::default();
        assert!(!switch.back_on(&area), "on already");
        assert_eq!(switch.times_off(&area), 0);
        // A hook found the heartbeat stale.
        area.set_enabled(false);
        assert_eq!(switch.times_off(&area), 1, "off now");
        assert!(switch.back_on(&area));
        assert!(area.enabled());
        assert_eq!(switch.times_off(&area), 1);
        area.set_enabled(false);
        assert!(switch.back_on(&area));
        area.set_enabled(false);
        assert_eq!(switch.times_off(&area), 3, "twice back on, off again now");
    }

    #[test]
    fn hooks_memsup_switched_off_stay_off_and_are_not_counted() {
        let mut buffer = vec![0u64; layout::rings_end(1, 4) as usize / 8];
        let area = area_in(&mut buffer);
        let switch = Switch::default();
        area.set_enabled(false);
        assert!(switch.back_on(&area));
        // What a detach writes through the target's memory: the mark, then the switch.
        area.u32_at(header::OFF_BY_MEMSUP)
            .store(1, Ordering::Relaxed);
        area.set_enabled(false);
        assert!(!switch.back_on(&area));
        assert!(!area.enabled());
        assert_eq!(
            switch.times_off(&area),
            1,
            "only the time they did themselves"
        );
        // A new memsup's area starts unmarked.
        area.initialise(&layout::Shape::full(1, 4), layout::POLICY_WAIT, 0, 0);
        assert!(!area.off_by_memsup());
    }
}
