//! The walk memory (`code_walk`, `stacks::MEMORY_*`) against the specification: the hooks'
//! walker, called directly on synthetic stacks over a synthetic table, gives for every walk
//! exactly the frames and end of `unwind::tables::walk` of the same words, walk after walk
//! on one thread stack while return addresses, saved rbps, the entry's rbp and rsp, the
//! depth and the directory change between walks.

use std::sync::Arc;

use super::code::CpuSource;
use super::code_walk::{LEFT_BEHIND, LOCALS};
use super::layout::stacks::StackRef;
use super::layout::{self, Op};
use super::stack_section::{SegmentTable, StackSection};
use super::test_support::*;
use crate::trace::format::TRUNCATED_FRAME;
use crate::unwind::tables::rule::{CfaRegister, Kind, ModuleTable, Rule};
use crate::unwind::tables::walk::{TableModule, TableSet};
use crate::unwind::{StackSnapshot, MAX_DEPTH};

/// The synthetic module's rows, 0x100 bytes each from 0x1000: how each frame kind lays out
/// its frame (`Layout::build`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// CFA = rsp + 24, rbp saved at CFA - 16.
    SpSaved,
    /// CFA = rsp + 16, rbp passed on.
    SpPassed,
    /// The frame-pointer rule (rbp = 0 ends the walk).
    FramePointer,
    /// CFA = rbp + 16, rbp saved at CFA - 16 (no end at rbp = 0).
    GeneralRbp,
    /// CFA = rsp + 8, rbp passed on.
    GeneralSp,
    /// A PLT entry: CFA = rsp + 8, or rsp + 16 from `ip & 15 >= 11` on.
    Plt,
    /// No FDE: a frame-pointer walk (not the innermost frame).
    NoFde,
    /// CFA = rsp + 8, rbp saved at CFA - 24: below the frame, below the entry's rsp when
    /// the walk starts there (then unreadable: rbp stays).
    GeneralBelow,
    /// The outermost frame.
    End,
}

const SHAPES: [Shape; 9] = [
    Shape::SpSaved,
    Shape::SpPassed,
    Shape::FramePointer,
    Shape::GeneralRbp,
    Shape::GeneralSp,
    Shape::Plt,
    Shape::NoFde,
    Shape::GeneralBelow,
    Shape::End,
];
/// Shapes chosen inside a stack (all but `End`).
const INNER_SHAPES: u64 = 8;

impl Shape {
    fn row(self) -> u64 {
        0x1000 + 0x100 * SHAPES.iter().position(|&frame| frame == self).unwrap() as u64
    }

    fn needs_bp(self) -> bool {
        matches!(self, Shape::FramePointer | Shape::GeneralRbp | Shape::NoFde)
    }

    fn replaces_bp(self) -> bool {
        matches!(
            self,
            Shape::SpSaved
                | Shape::FramePointer
                | Shape::GeneralRbp
                | Shape::NoFde
                | Shape::GeneralBelow
        )
    }
}

/// The module's table, or (`other`) one whose rsp-based frames are 8 bytes larger: a
/// module replaced at the same address.
fn table_set(other: bool) -> (TableSet, SegmentTable) {
    let larger = if other { 8 } else { 0 };
    let rules = vec![
        Rule::cfa(Kind::Sp, CfaRegister::Rsp, 24 + larger, Some(-16)),
        Rule::cfa(Kind::Sp, CfaRegister::Rsp, 16 + larger, None),
        Rule::FRAME_POINTER,
        Rule::cfa(Kind::General, CfaRegister::Rbp, 16, Some(-16)),
        Rule::cfa(Kind::General, CfaRegister::Rsp, 8, None),
        Rule::plt(11),
        Rule::NO_FDE,
        Rule::cfa(Kind::General, CfaRegister::Rsp, 8, Some(-24)),
        Rule::END,
    ];
    let table = Arc::new(ModuleTable {
        starts: (0..rules.len() as u32)
            .map(|row| 0x1000 + 0x100 * row)
            .collect(),
        rules,
    });
    let module = TableModule {
        executable: 0x1000..0x2000,
        bias: 0,
        table,
        sigreturn: None,
    };
    let segment = SegmentTable::from(&module);
    (TableSet::new(vec![module]), segment)
}

/// xorshift64*: deterministic words for the stacks.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    /// A return address into `frame`'s row (the walker looks up the rule at ip - 1).
    fn return_into(&mut self, frame: Shape) -> u64 {
        frame.row() + 1 + self.below(0xf0)
    }

    /// A word no walk takes for an address of the module.
    fn junk(&mut self) -> u64 {
        self.next() | 1 << 40
    }
}

/// A thread stack of words at a fixed address, registered with the walker.
struct Layout {
    words: Vec<u64>,
    base: u64,
    /// Each frame built: its sp, and the address of the saved rbp its step wrote (0: none).
    frames: Vec<(u64, u64)>,
}

const STACK_WORDS: usize = 1 << 14;

impl Layout {
    fn word(&mut self, address: u64) -> &mut u64 {
        &mut self.words[((address - self.base) / 8) as usize]
    }

    fn top(&self) -> u64 {
        self.base + 8 * STACK_WORDS as u64
    }

    /// Fills the stack with junk and lays out `depth` frames (the last one ending the walk
    /// by its rule, a zero return address or rbp = 0) from `entry`; returns the entry's rbp.
    fn build(&mut self, words: &mut Words, entry: u64, depth: usize) -> u64 {
        for index in 0..STACK_WORDS {
            self.words[index] = words.junk();
        }
        self.frames.clear();
        let mut frame = SHAPES[words.below(INNER_SHAPES - 1) as usize];
        let mut sp = entry + 8;
        let entry_bp = if frame.needs_bp() {
            sp + 8 * words.below(3)
        } else {
            words.junk()
        };
        let mut bp = entry_bp;
        let mut ip = words.return_into(frame);
        let mut forced = None;
        let mut chained = false;
        *self.word(entry) = ip;
        for index in 0..depth {
            let last = index + 1 == depth;
            if last && words.below(3) == 0 {
                // The rule ends it.
                *self.word(sp - 8) = words.return_into(Shape::End);
                self.frames.push((sp, 0));
                return entry_bp;
            }
            let mut next = forced
                .take()
                .unwrap_or_else(|| SHAPES[words.below(INNER_SHAPES) as usize]);
            while (next.needs_bp() && !frame.replaces_bp() && !chained)
                || (next == Shape::GeneralBelow && frame != Shape::SpPassed)
            {
                next = SHAPES[words.below(INNER_SHAPES) as usize];
            }
            let next_ip = if last { 0 } else { words.return_into(next) };
            let (next_sp, bp_slot) = match frame {
                Shape::SpSaved => (sp + 24, sp + 8),
                Shape::SpPassed => (sp + 16, 0),
                Shape::GeneralSp => (sp + 8, 0),
                Shape::Plt => (if ip & 15 >= 11 { sp + 16 } else { sp + 8 }, 0),
                Shape::FramePointer | Shape::GeneralRbp | Shape::NoFde => (bp + 16, bp),
                Shape::GeneralBelow => (sp + 8, sp - 16),
                Shape::End => unreachable!("an end frame is never chosen inside"),
            };
            *self.word(next_sp - 8) = next_ip;
            self.frames.push((sp, bp_slot));
            if bp_slot != 0 {
                // Now and then an rbp passed on by the next frame to the one after it.
                let chain = next == Shape::SpPassed && !last && words.below(3) == 0;
                bp = if chain {
                    forced = Some(Shape::FramePointer);
                    next_sp + 16 + 8 * words.below(3)
                } else if next.needs_bp() {
                    next_sp + 8 * words.below(3)
                } else if words.below(8) == 0 && !last {
                    0
                } else {
                    words.junk()
                };
                // A frame-pointer frame whose own rbp is 0 ends there.
                if last && matches!(frame, Shape::FramePointer) && words.below(2) == 0 {
                    bp = 0;
                }
                *self.word(bp_slot) = bp;
            }
            chained = forced.is_some();
            if chained && next != Shape::SpPassed {
                forced = None;
                chained = false;
            }
            sp = next_sp;
            ip = next_ip;
            frame = next;
        }
        entry_bp
    }

    fn snapshot(&self, entry: u64, bp: u64) -> StackSnapshot {
        let skip = ((entry - self.base) / 8) as usize;
        StackSnapshot {
            ip: 0,
            at_function_entry: true,
            sp: entry,
            bp,
            stack: self.words[skip..]
                .iter()
                .flat_map(|word| word.to_le_bytes())
                .collect(),
        }
    }
}

/// Calls the walker at `walk` as the record routine does (rdi the entry's rsp, rbp as at
/// entry), on a
/// stack of the test's own whose top is `top` (16-byte aligned), so that what it leaves
/// there can be read after it returns. Returns its `StackRef` and its rule lookups.
fn call_walker(walk: u64, entry: u64, bp: u64, top: u64) -> (u64, u32) {
    let stack: u64;
    let costs: u64;
    // SAFETY: the walker reads only the area and the checked stack bounds, and restores
    // the callee-saved registers it uses; rsp is restored from r12, which it preserves,
    // and its frame fits the stack given.
    unsafe {
        std::arch::asm!(
            "mov r12, rsp",
            "mov rsp, {top}",
            "push rbp",
            "mov rbp, {bp}",
            "call {walk}",
            "pop rbp",
            "mov rsp, r12",
            walk = in(reg) walk,
            bp = in(reg) bp,
            top = in(reg) top,
            inout("rdi") entry => _,
            out("rax") stack,
            out("rdx") costs,
            out("r12") _,
            clobber_abi("C"),
        );
    }
    (stack, (costs >> 32) as u32)
}

/// Words of a stack the walker runs on: its frame takes a few hundred bytes.
const WALKER_STACK_WORDS: usize = 1024;

/// The 16-byte aligned top of `stack`.
fn top_of(stack: &[u64]) -> u64 {
    (stack.as_ptr() as u64 + 8 * stack.len() as u64) & !15
}

struct Bench {
    harness: Harness,
    section: StackSection,
    segment: SegmentTable,
    set: TableSet,
    layout: Layout,
    /// The stack the walker itself runs on.
    walker_stack: Vec<u64>,
    walks: u64,
    remembered: u64,
}

impl Bench {
    /// Publishes the module's table, or the other one, as a new directory.
    fn publish(&mut self, other: bool) {
        let (set, segment) = table_set(other);
        self.section
            .publish(&self.harness.area, vec![segment.clone()]);
        self.set = set;
        self.segment = segment;
    }

    fn new() -> Bench {
        let target = table_set as *const () as u64;
        let harness = Harness::new(
            CpuSource::Single,
            AreaConfig::waiting(1, 1024),
            &[Op::Malloc],
            &[target],
        );
        let mut section = StackSection::new(
            &harness.area,
            harness.area_address(),
            &layout::Shape::full(1, 1024),
            true,
        );
        let (set, segment) = table_set(false);
        section.publish(&harness.area, vec![segment.clone()]);
        let words = vec![0u64; STACK_WORDS];
        let base = words.as_ptr() as u64;
        let layout = Layout {
            words,
            base,
            frames: Vec::new(),
        };
        section.set_thread(&harness.area, 1, Some((base, layout.top())));
        Bench {
            harness,
            section,
            segment,
            set,
            layout,
            walker_stack: vec![0; WALKER_STACK_WORDS],
            walks: 0,
            remembered: 0,
        }
    }

    /// Walks from `entry` with `bp` in the hooks and in the specification: the same frames
    /// and end. Returns the walk's rule lookups and its frames.
    fn check(&mut self, entry: u64, bp: u64, what: &str) -> (u32, usize) {
        let (stack, lookups) = call_walker(
            self.harness.hooks.walk_routine,
            entry,
            bp,
            top_of(&self.walker_stack),
        );
        let walked = self
            .section
            .frames(&self.harness.area, StackRef(stack))
            .unwrap_or_else(|| panic!("{what}: no stack walked"));
        let expected = self.set.walk(&self.layout.snapshot(entry, bp));
        let mut frames = expected.frames;
        if expected.truncated {
            frames.push(TRUNCATED_FRAME);
        }
        assert_eq!(walked, frames, "{what}: entry {entry:#x}, rbp {bp:#x}");
        self.walks += 1;
        let stepped = frames.len() - usize::from(expected.truncated);
        if (lookups as usize) < stepped {
            self.remembered += 1;
        }
        (lookups, frames.len())
    }
}

#[test]
fn walks_that_take_frames_from_the_memory_equal_the_specification() {
    let mut bench = Bench::new();
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    let mut unchanged_repeats = 0;
    for trial in 0..300 {
        let depth = match trial % 10 {
            0 => MAX_DEPTH - 2 + words.below(4) as usize,
            _ => 1 + words.below(40) as usize,
        };
        let entry = bench.layout.base + 8 * (64 + words.below(64));
        let bp = bench.layout.build(&mut words, entry, depth);
        let (first, _) = bench.check(entry, bp, &format!("trial {trial}, first"));
        for round in 0..12 {
            let what = format!("trial {trial}, round {round}");
            let frames = bench.layout.frames.clone();
            let (sp, bp_slot) = frames[words.below(frames.len() as u64) as usize];
            let mut entry_bp = bp;
            let mut from = entry;
            match words.below(8) {
                // The same words: all from the memory when the last walk was remembered.
                0 => {
                    let (lookups, _) = bench.check(entry, bp, &what);
                    if first == 0 || round > 0 {
                        unchanged_repeats += u32::from(lookups == 0);
                    }
                    continue;
                }
                // Another return address into the same row: same sp above it.
                1 => {
                    let slot = sp - 8;
                    let old = *bench.layout.word(slot);
                    if (0x1000..0x1800).contains(&old) {
                        *bench.layout.word(slot) = (old & !0xff) + 1 + words.below(0xf0);
                    }
                }
                // A saved rbp changed: used by the rest of the walk or not.
                2 if bp_slot != 0 => *bench.layout.word(bp_slot) = words.junk(),
                3 if bp_slot != 0 => *bench.layout.word(bp_slot) ^= 8,
                // Any word of the frames.
                4 => {
                    let slot = entry + 8 * words.below((sp + 8 - entry) / 8);
                    *bench.layout.word(slot) = words.junk();
                }
                // The entry's rbp, and a walk starting at a later frame.
                5 => entry_bp = words.junk(),
                6 => from = sp - 8,
                // A module replaced at the same address: the memory is not used.
                _ => {
                    bench.publish(true);
                    bench.check(from, entry_bp, &format!("{what}, other table"));
                    bench.publish(false);
                }
            }
            bench.check(from, entry_bp, &what);
        }
    }
    // The memory was used, and a repeat of a remembered walk looked nothing up.
    // (4,847 walks, 1,178 of them taking frames from the memory, 187 repeats, when written.)
    assert!(
        bench.remembered > 1000,
        "{} of {}",
        bench.remembered,
        bench.walks
    );
    assert!(unchanged_repeats > 150, "{unchanged_repeats}");
}

/// A walk whose saved rbp lay below its entry's rsp kept rbp as it was: from a lower entry
/// the same frame reads that rbp and goes elsewhere, so that walk must not be remembered.
#[test]
fn a_walk_that_could_not_read_a_saved_rbp_is_not_remembered() {
    let mut bench = Bench::new();
    let base = bench.layout.base + 8 * 64;
    let (low_chain, high_chain) = (base + 40, base + 64);
    let layout = [
        // From the lower entry: a frame passing rbp on, its word below the next frame's
        // saved rbp slot.
        (base, Shape::SpPassed.row() + 1),
        (base + 8, high_chain),
        (base + 16, Shape::GeneralBelow.row() + 1),
        (base + 24, Shape::FramePointer.row() + 1),
        (low_chain, 0),
        (low_chain + 8, Shape::End.row() + 1),
        (high_chain, 0),
        (high_chain + 8, Shape::End.row() + 2),
    ];
    for (address, value) in layout {
        *bench.layout.word(address) = value;
    }
    // From base + 16 the saved rbp at base + 8 is below the stack: rbp stays low_chain.
    let (_, frames) = bench.check(base + 16, low_chain, "from the upper entry");
    assert_eq!(frames, 3);
    // From base it is read: high_chain, another end. Nothing came from the memory: a new
    // stack looks up all four rules, then all but the outermost again into the store.
    let (lookups, frames) = bench.check(base, low_chain, "from the lower entry");
    assert_eq!((lookups, frames), (4 + 3, 4));
}

/// The walker leaves no zero in its locals: a frame-pointer guess through stack a hook
/// used (musl's `raise`, reading its signal set's unwritten words) reads a non-canonical
/// word there, never a zero return address that would end the stack cleanly.
#[test]
fn the_walker_leaves_its_locals_non_canonical() {
    let mut bench = Bench::new();
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    let entry = bench.layout.base + 8 * 64;
    let bp = bench.layout.build(&mut words, entry, 6);
    // The walker's stack, zeroed: any local it leaves as it was, or writes 0 to, shows.
    let own = vec![0u64; WALKER_STACK_WORDS];
    let own_base = own.as_ptr() as u64;
    let top = top_of(&own);
    let (stack, _) = call_walker(bench.harness.hooks.walk_routine, entry, bp, top);
    assert_ne!(stack, 0, "a stack walked");
    // Below the pushed rbp, the return address and the six registers the walker saves.
    let locals_top = top - 8 * 8;
    let locals: Vec<u64> = (1..=LOCALS as u64 / 8)
        .map(|index| own[((locals_top - 8 * index - own_base) / 8) as usize])
        .collect();
    assert_eq!(locals, vec![LEFT_BEHIND; LOCALS as usize / 8]);
    // Above them the saved registers, rbp second from the top: the frame is where the
    // arithmetic above puts it.
    assert_eq!(own[((top - 8 * 4 - own_base) / 8) as usize], bp);
}
