//! Block sequence numbers checked as they come: each block is used once, and what is missing,
//! repeated or out of order becomes one line of damage.
//!
//! A gap is not called missing at once: a block may come a little late (written out of order
//! by a damaged copy). A gap still open after `REORDER_WINDOW` later blocks, or at the end of
//! the file, is reported missing; a block that fills an open gap is used and reported out of
//! order; one seen before is reported repeated and skipped. Memory stays bounded: at most
//! `MAX_OPEN_GAPS` gaps are watched, and `MAX_CLOSED_GAPS` remembered after being reported.
//! Past that, only the span of the gaps forgotten is kept: a block behind the others inside
//! it may be repeated or late, and is skipped with a line that says so.

/// Later blocks after which a gap is reported missing.
const REORDER_WINDOW: u32 = 8;
const MAX_OPEN_GAPS: usize = 64;
const MAX_CLOSED_GAPS: usize = 1024;

/// Block numbers `start..end` not seen.
#[derive(Debug, Clone, Copy)]
struct Gap {
    start: u64,
    end: u64,
    /// Blocks used since the gap opened.
    age: u32,
}

#[derive(Debug, Default)]
pub struct SequenceCheck {
    /// One past the highest block number used; wider than a block number so that a block
    /// numbered `u64::MAX` leaves no number after it to be used again.
    next: u128,
    open: Vec<Gap>,
    /// Gaps already reported missing.
    closed: Vec<(u64, u64)>,
    /// The lowest start and highest end of the gaps reported missing but not remembered.
    forgotten: Option<(u64, u64)>,
}

impl SequenceCheck {
    /// Whether to use block `sequence`, and the damage lines it brings out.
    pub fn accept(&mut self, sequence: u64) -> (bool, Vec<String>) {
        let mut lines = Vec::new();
        if u128::from(sequence) >= self.next {
            if u128::from(sequence) > self.next {
                self.open.push(Gap {
                    // Below `sequence`, so within a block number.
                    start: self.next as u64,
                    end: sequence,
                    age: 0,
                });
            }
            self.next = u128::from(sequence) + 1;
            self.age_gaps(&mut lines);
            return (true, lines);
        }
        if let Some(index) = self
            .open
            .iter()
            .position(|gap| gap.start <= sequence && sequence < gap.end)
        {
            let gap = self.open.remove(index);
            // The later part first, so that the earlier one ends up before it.
            for part in [(sequence + 1, gap.end), (gap.start, sequence)] {
                if part.0 < part.1 {
                    self.open.insert(
                        index,
                        Gap {
                            start: part.0,
                            end: part.1,
                            age: gap.age,
                        },
                    );
                }
            }
            lines.push(format!("damaged: block {sequence} out of order"));
            return (true, lines);
        }
        if let Some(closed) = self
            .closed
            .iter()
            .position(|&(start, end)| start <= sequence && sequence < end)
        {
            let (start, end) = self.closed.remove(closed);
            self.closed.extend(
                [(start, sequence), (sequence + 1, end)]
                    .into_iter()
                    .filter(|part| part.0 < part.1),
            );
            lines.push(format!(
                "damaged: block {sequence} out of order, after it was reported missing"
            ));
            return (true, lines);
        }
        if self
            .forgotten
            .is_some_and(|(start, end)| start <= sequence && sequence < end)
        {
            lines.push(format!(
                "damaged: block {sequence} repeated, or late from a gap past the \
                 {MAX_CLOSED_GAPS} remembered; skipped"
            ));
            return (false, lines);
        }
        lines.push(format!("damaged: block {sequence} repeated"));
        (false, lines)
    }

    /// At the end of the file every open gap is missing.
    pub fn finish(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while !self.open.is_empty() {
            let gap = self.open.remove(0);
            self.close(gap, &mut lines);
        }
        lines
    }

    fn age_gaps(&mut self, lines: &mut Vec<String>) {
        for gap in &mut self.open {
            gap.age += 1;
        }
        while let Some(&gap) = self.open.first() {
            if gap.age <= REORDER_WINDOW && self.open.len() <= MAX_OPEN_GAPS {
                break;
            }
            self.open.remove(0);
            self.close(gap, lines);
        }
    }

    fn close(&mut self, gap: Gap, lines: &mut Vec<String>) {
        lines.push(match gap.end - gap.start {
            1 => format!("damaged: block {} missing", gap.start),
            _ => format!("damaged: blocks {} to {} missing", gap.start, gap.end - 1),
        });
        if self.closed.len() < MAX_CLOSED_GAPS {
            self.closed.push((gap.start, gap.end));
            return;
        }
        self.forgotten = Some(match self.forgotten {
            Some((start, end)) => (start.min(gap.start), end.max(gap.end)),
            None => (gap.start, gap.end),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sequences: &[u64]) -> (Vec<bool>, Vec<String>) {
        let mut check = SequenceCheck::default();
        let mut used = Vec::new();
        let mut lines = Vec::new();
        for &sequence in sequences {
            let (usable, found) = check.accept(sequence);
            used.push(usable);
            lines.extend(found);
        }
        lines.extend(check.finish());
        (used, lines)
    }

    #[test]
    fn blocks_in_order_are_quiet() {
        assert_eq!(run(&[0, 1, 2, 3]), (vec![true; 4], Vec::new()));
    }

    #[test]
    fn a_dropped_block_is_missing() {
        let (used, lines) = run(&[0, 1, 3, 4]);
        assert_eq!(used, [true; 4]);
        assert_eq!(lines, ["damaged: block 2 missing"]);
    }

    #[test]
    fn a_repeated_block_is_skipped() {
        let (used, lines) = run(&[0, 1, 1, 2]);
        assert_eq!(used, [true, true, false, true]);
        assert_eq!(lines, ["damaged: block 1 repeated"]);
    }

    #[test]
    fn a_swapped_pair_is_out_of_order_once() {
        let (used, lines) = run(&[0, 2, 1, 3]);
        assert_eq!(used, [true; 4]);
        assert_eq!(lines, ["damaged: block 1 out of order"]);
    }

    #[test]
    fn a_gap_is_reported_after_the_window_and_a_late_block_still_used() {
        let sequences: Vec<u64> = [0].into_iter().chain(3..13).chain([1]).collect();
        let (used, lines) = run(&sequences);
        assert!(used.iter().all(|&usable| usable));
        assert_eq!(
            lines,
            [
                "damaged: blocks 1 to 2 missing",
                "damaged: block 1 out of order, after it was reported missing",
            ]
        );
    }

    #[test]
    fn a_huge_jump_costs_one_gap() {
        let (used, lines) = run(&[0, u64::MAX - 1, 1]);
        assert_eq!(used, [true, true, true]);
        assert_eq!(
            lines,
            [
                "damaged: block 1 out of order",
                format!("damaged: blocks 2 to {} missing", u64::MAX - 2).as_str()
            ]
        );
    }

    #[test]
    fn the_last_block_number_is_used_once() {
        let (used, lines) = run(&[0, u64::MAX, u64::MAX, u64::MAX]);
        assert_eq!(used, [true, true, false, false]);
        let repeated = format!("damaged: block {} repeated", u64::MAX);
        let missing = format!("damaged: blocks 1 to {} missing", u64::MAX - 1);
        assert_eq!(lines, [repeated.as_str(), &repeated, &missing]);
    }

    #[test]
    fn a_block_filling_the_middle_of_a_gap_leaves_both_parts_in_order() {
        let (used, lines) = run(&[0, 5, 2]);
        assert_eq!(used, [true; 3]);
        assert_eq!(
            lines,
            [
                "damaged: block 2 out of order",
                "damaged: block 1 missing",
                "damaged: blocks 3 to 4 missing",
            ]
        );
    }

    /// Every other block of 0..=2200 dropped: 1,100 gaps, the last 8 still open at the end;
    /// the first 1,024 reported are remembered (1, 3 ... 2047), the rest (2049 ... 2183) not.
    #[test]
    fn past_the_remembered_gaps_a_block_behind_is_not_called_only_repeated() {
        let mut sequences: Vec<u64> = (0..=2200).step_by(2).collect();
        sequences.extend([1, 100, 2101, 2100, 2199]);
        let (used, lines) = run(&sequences);
        let late = &used[used.len() - 5..];
        assert_eq!(late, [true, false, false, false, true]);
        assert!(used[..used.len() - 5].iter().all(|&usable| usable));
        let mut expected: Vec<String> = (1..2184)
            .step_by(2)
            .map(|block| format!("damaged: block {block} missing"))
            .collect();
        expected.extend([
            "damaged: block 1 out of order, after it was reported missing".to_string(),
            "damaged: block 100 repeated".to_string(),
        ]);
        for block in [2101, 2100] {
            expected.push(format!(
                "damaged: block {block} repeated, or late from a gap past the 1024 \
                 remembered; skipped"
            ));
        }
        expected.push("damaged: block 2199 out of order".to_string());
        expected.extend(
            (2185..2199)
                .step_by(2)
                .map(|block| format!("damaged: block {block} missing")),
        );
        assert_eq!(lines, expected);
    }
}
