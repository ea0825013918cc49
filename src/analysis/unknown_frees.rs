//! Where the frees of blocks memsup never saw allocated come from. Frees carry no stack in a
//! profile, so they are told apart by their thread and the image's start:
//! - glibc frees a thread's cache when the thread exits (`tcache_thread_shutdown`): the
//!   cache's cached chunks, already counted as freed, and the cache itself, which glibc
//!   allocates inside malloc where no probe sees it. These are the unknown frees a thread
//!   makes after its last allocation, right before its exit.
//! - A forked child frees blocks its parent allocated before the fork.
//! - A process memsup attached to frees blocks from before the attach; those the heap
//!   census at the attach found in use are known by address, so their bytes are known too.
//! - Otherwise the block was allocated where memsup did not see it (a module loaded before
//!   the probes, an allocator call memsup could not probe).

use super::ProcessAnalysis;
use crate::events::heap::{IntegerMap, Outcome};
use crate::trace::census_format::LiveBlocks;
use crate::trace::format::StartCause;

/// The unknown frees of an image by where they come from; they add up to `unknown_frees`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnknownFrees {
    /// glibc's thread cache, freed at thread exit.
    pub thread_exit: u64,
    /// Blocks of the process memsup attached to, allocated before the attach.
    pub before_attach: u64,
    /// Of those, the blocks the heap census at the attach found in use, and their usable
    /// bytes.
    pub before_attach_in_census: u64,
    pub before_attach_bytes: u64,
    /// Blocks the parent allocated before the fork.
    pub before_fork: u64,
    /// Blocks memsup did not see allocated.
    pub not_seen: u64,
}

/// Follows each thread's unknown frees since its last allocation.
#[derive(Debug, Default)]
pub(super) struct UnknownFreeTracker {
    /// Per thread, the unknown frees since its last allocation.
    pending: IntegerMap<u32, u64>,
    thread_exit: u64,
    /// Unknown frees followed by an allocation of their thread, or by no thread exit.
    other: u64,
    /// The blocks the census at the attach found in use and not freed yet: usable bytes by
    /// address.
    census: IntegerMap<u64, u64>,
    /// Frees of those: how many, and their bytes.
    census_freed: (u64, u64),
}

impl UnknownFreeTracker {
    /// The census at the attach found `blocks` in use.
    pub fn census_blocks(&mut self, blocks: &LiveBlocks) {
        self.census.extend(blocks.iter());
    }

    /// Counts what allocator call `outcome` of thread `tid` did.
    pub fn heap(&mut self, tid: u32, outcome: &Outcome) {
        if let Some(block) = &outcome.created {
            // Handed out again (its free was missed): no longer the census's block.
            self.census.remove(&block.address);
        }
        let census_bytes = outcome
            .unknown_free
            .and_then(|address| self.census.remove(&address));
        if let Some(bytes) = census_bytes {
            // From before the attach, whatever the thread does next.
            self.census_freed.0 += 1;
            self.census_freed.1 += bytes;
        } else if outcome.unknown_free.is_some() {
            *self.pending.entry(tid).or_default() += 1;
        } else if outcome.created.is_some() || outcome.failed {
            self.other += self.pending.remove(&tid).unwrap_or(0);
        }
    }

    /// Thread `tid` exited: its unknown frees since its last allocation were its cache's.
    pub fn thread_exit(&mut self, tid: u32) {
        self.thread_exit += self.pending.remove(&tid).unwrap_or(0);
    }

    /// The image ended: the rest come from its start.
    pub fn finish(self, image: &ProcessAnalysis) -> UnknownFrees {
        let other = self.other + self.pending.values().sum::<u64>();
        let mut frees = UnknownFrees {
            thread_exit: self.thread_exit,
            ..UnknownFrees::default()
        };
        match image.cause {
            StartCause::Fork | StartCause::Vfork => frees.before_fork = other,
            _ if image.joined_running => frees.before_attach = other,
            _ => frees.not_seen = other,
        }
        let (count, bytes) = self.census_freed;
        frees.before_attach += count;
        frees.before_attach_in_census = count;
        frees.before_attach_bytes = bytes;
        frees
    }
}

impl UnknownFrees {
    /// "40 at thread exit (...)", or "41: 40 at thread exit (...), 1 of blocks from before
    /// the attach"; None without any.
    pub fn explained(&self) -> Option<String> {
        self.explained_with(&|bytes| format!("{bytes} bytes"))
    }

    /// As `explained`, with the bytes of the blocks the census knew written by `bytes`.
    pub fn explained_with(&self, bytes: &dyn Fn(u64) -> String) -> Option<String> {
        let before_attach = match self.before_attach_in_census {
            0 => "of blocks from before the attach".to_string(),
            count if count == self.before_attach => format!(
                "of blocks from before the attach, {} by the heap census at the attach",
                bytes(self.before_attach_bytes)
            ),
            count => format!(
                "of blocks from before the attach ({count} in the heap census at the attach: {})",
                bytes(self.before_attach_bytes)
            ),
        };
        let parts: Vec<String> = [
            (
                self.thread_exit,
                "at thread exit (glibc's thread cache, allocated inside malloc)",
            ),
            (self.before_attach, before_attach.as_str()),
            (
                self.before_fork,
                "of blocks the parent allocated before the fork",
            ),
            (
                self.not_seen,
                "of blocks not seen allocated (e.g. allocated by a module loaded before probes)",
            ),
        ]
        .iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, source)| format!("{count} {source}"))
        .collect();
        match parts.len() {
            0 => None,
            1 => parts.into_iter().next(),
            _ => Some(format!("{}: {}", self.total(), parts.join(", "))),
        }
    }

    pub fn total(&self) -> u64 {
        self.thread_exit + self.before_attach + self.before_fork + self.not_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(unknown_free: bool, created: bool) -> Outcome {
        let mut outcome = Outcome::default();
        if unknown_free {
            outcome.unknown_free = Some(0x100);
        }
        if created {
            outcome.created = Some(crate::events::heap::Block {
                address: 0x200,
                size: 8,
                stack: crate::trace::stacks::EMPTY_STACK,
                time_ns: 0,
                sequence: 0,
            });
        }
        outcome
    }

    #[test]
    fn frees_after_a_threads_last_allocation_before_its_exit_are_its_cache() {
        let mut tracker = UnknownFreeTracker::default();
        tracker.heap(2, &outcome(true, false));
        tracker.heap(2, &outcome(false, true));
        tracker.heap(2, &outcome(true, false));
        tracker.heap(2, &outcome(true, false));
        tracker.heap(3, &outcome(true, false));
        tracker.heap(2, &outcome(false, false));
        tracker.thread_exit(2);
        let image = ProcessAnalysis::new(1, None, StartCause::Launch, 0);
        let frees = tracker.finish(&image);
        let expected = UnknownFrees {
            thread_exit: 2,
            not_seen: 2,
            ..UnknownFrees::default()
        };
        assert_eq!(frees, expected);
        assert_eq!(
            frees.explained().unwrap(),
            "4: 2 at thread exit (glibc's thread cache, allocated inside malloc), 2 of blocks \
             not seen allocated (e.g. allocated by a module loaded before probes)"
        );
    }

    #[test]
    fn the_rest_come_from_the_images_start() {
        let finish = |cause| {
            let mut tracker = UnknownFreeTracker::default();
            tracker.heap(1, &outcome(true, false));
            tracker.finish(&ProcessAnalysis::new(1, None, cause, 0))
        };
        assert_eq!(finish(StartCause::Attach).before_attach, 1);
        assert_eq!(finish(StartCause::Fork).before_fork, 1);
        assert_eq!(finish(StartCause::Vfork).before_fork, 1);
        assert_eq!(
            finish(StartCause::Attach).explained().unwrap(),
            "1 of blocks from before the attach"
        );
        assert_eq!(UnknownFrees::default().explained(), None);
    }

    #[test]
    fn frees_of_blocks_the_census_found_are_known_by_size_once() {
        let free_of = |address| Outcome {
            unknown_free: Some(address),
            ..Outcome::default()
        };
        let mut tracker = UnknownFreeTracker::default();
        tracker.census_blocks(&LiveBlocks::new(vec![(0x100, 24), (0x300, 200_688)]));
        // A census block freed by a thread that then exits is still from before the attach.
        tracker.heap(2, &free_of(0x300));
        tracker.thread_exit(2);
        tracker.heap(1, &free_of(0x100));
        // Freed again (the address came back from an allocation memsup missed): no longer
        // the census's.
        tracker.heap(1, &free_of(0x100));
        tracker.heap(1, &free_of(0x500));
        // Handed out again by an allocation memsup saw, then freed as unknown (a missed
        // free in between): not the census's block any more.
        tracker.census_blocks(&LiveBlocks::new(vec![(0x200, 40)]));
        tracker.heap(1, &outcome(false, true));
        tracker.heap(1, &free_of(0x200));
        let image = ProcessAnalysis::new(1, None, StartCause::Attach, 0);
        let frees = tracker.finish(&image);
        let expected = UnknownFrees {
            before_attach: 5,
            before_attach_in_census: 2,
            before_attach_bytes: 200_712,
            ..UnknownFrees::default()
        };
        assert_eq!(frees, expected);
        assert_eq!(
            frees.explained().unwrap(),
            "5 of blocks from before the attach (2 in the heap census at the attach: 200712 \
             bytes)"
        );
        let all_known = UnknownFrees {
            before_attach: 2,
            ..frees
        };
        assert_eq!(
            all_known.explained().unwrap(),
            "2 of blocks from before the attach, 200712 bytes by the heap census at the attach"
        );
    }
}
