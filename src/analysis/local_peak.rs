//! Local peaks of call sites. Sites are only known once the image's symbols are (the skip
//! list needs names, and names come at the end of the image), and a site may gather several
//! raw stacks, whose highest live bytes do not add up. So each image keeps the order of its
//! live-byte changes by raw stack, and replays it once the sites are known.

use crate::trace::stacks::StackId;

/// The live-byte changes of one image, in the order they happened.
#[derive(Debug, Default)]
pub(super) struct LiveChanges {
    changes: Vec<(StackId, i64)>,
}

impl LiveChanges {
    pub fn grew(&mut self, stack: StackId, size: u64) {
        self.changes.push((stack, size as i64));
    }

    pub fn shrank(&mut self, stack: StackId, size: u64) {
        self.changes.push((stack, -(size as i64)));
    }

    /// The highest live bytes of each of `site_count` sites, `site_of` mapping a raw stack
    /// to its site.
    pub fn local_peaks(&self, site_count: usize, site_of: impl Fn(StackId) -> usize) -> Vec<u64> {
        let mut live = vec![0i64; site_count];
        let mut peaks = vec![0u64; site_count];
        for &(stack, change) in &self.changes {
            let site = site_of(stack);
            live[site] += change;
            peaks[site] = peaks[site].max(live[site].max(0) as u64);
        }
        peaks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_of_one_site_peak_together() {
        let mut changes = LiveChanges::default();
        changes.grew(1, 100); // site 0: 100
        changes.grew(2, 50); // site 0: 150, the peak of stacks 1 and 2 together
        changes.shrank(1, 100); // 50
        changes.grew(1, 80); // 130
        changes.grew(3, 10); // site 1: 10
        let peaks = changes.local_peaks(2, |stack| usize::from(stack == 3));
        assert_eq!(peaks, vec![150, 10]);
        let separate = changes.local_peaks(4, |stack| stack as usize);
        assert_eq!(separate, vec![0, 100, 50, 10]);
    }
}
