//! The walk over compiled tables, in Rust: the specification of the walker the hooks run
//! inside the target (`hooks::code_walk`), and what the differential tests compare with the
//! recording's unwinder (`unwind::Unwinder`). Same start (the caller of an allocator entry),
//! same rules, same ends: a stack it walks equals the int3 engine's.

use std::ops::Range;
use std::sync::Arc;

use super::rule::{CfaRegister, Kind, ModuleTable, Rule};
use crate::unwind::{Stack, StackSnapshot, MAX_DEPTH};

/// Offsets in the `ucontext` a signal handler returns over (see `unwind::signal_context`).
pub const UCONTEXT_RBP: u64 = 40 + 10 * 8;
pub const UCONTEXT_RSP: u64 = 40 + 15 * 8;
pub const UCONTEXT_RIP: u64 = 40 + 16 * 8;

/// One executable segment of a mapped module with its module's table.
#[derive(Debug, Clone)]
pub struct TableModule {
    /// Runtime addresses of the segment: where return addresses may point.
    pub executable: Range<u64>,
    /// Runtime address minus ELF virtual address.
    pub bias: u64,
    pub table: Arc<ModuleTable>,
    /// Runtime address of the segment's signal return trampoline, if it has one.
    pub sigreturn: Option<u64>,
}

/// The segments of one process image, sorted by start.
#[derive(Debug, Clone, Default)]
pub struct TableSet {
    segments: Vec<TableModule>,
}

/// Registers of the frame being unwound.
#[derive(Debug, Clone, Copy)]
struct Registers {
    ip: u64,
    sp: u64,
    bp: u64,
}

impl TableSet {
    pub fn new(mut segments: Vec<TableModule>) -> TableSet {
        segments.sort_by_key(|segment| segment.executable.start);
        TableSet { segments }
    }

    pub fn segments(&self) -> &[TableModule] {
        &self.segments
    }

    /// The segment holding `address`: a return address must lie in one.
    pub fn segment_of(&self, address: u64) -> Option<&TableModule> {
        let after = self
            .segments
            .partition_point(|segment| segment.executable.start <= address);
        let segment = self.segments.get(after.checked_sub(1)?)?;
        segment.executable.contains(&address).then_some(segment)
    }

    /// The rule for `lookup`, found in `segment` (the segment of the frame's address);
    /// an address outside every segment gets the frame-pointer walk.
    fn rule_at(&self, segment: Option<&TableModule>, lookup: u64) -> Rule {
        match segment {
            Some(segment) => segment.table.lookup(lookup.wrapping_sub(segment.bias)),
            None => Rule::FRAME_POINTER,
        }
    }

    /// Walks a copy of a stack taken at an allocator's entry (`snapshot.sp` points at the
    /// return address into the caller): the caller first, then its callers outwards.
    pub fn walk(&self, snapshot: &StackSnapshot) -> Stack {
        let read = |address: u64| snapshot.read_word(address);
        let mut stack = Stack::default();
        let Some(caller) = read(snapshot.sp) else {
            stack.truncated = true;
            return stack;
        };
        stack.frames.push(caller);
        let Some(mut segment) = self.segment_of(caller) else {
            stack.truncated = true;
            return stack;
        };
        let mut registers = Registers {
            ip: caller,
            sp: snapshot.sp + 8,
            bp: snapshot.bp,
        };
        let mut innermost = false;
        loop {
            if stack.frames.len() >= MAX_DEPTH {
                stack.truncated = true;
                return stack;
            }
            let lookup = if innermost {
                registers.ip
            } else {
                registers.ip - 1
            };
            let lookup_segment = if innermost {
                self.segment_of(lookup)
            } else {
                Some(segment)
            };
            let rule = self.rule_at(lookup_segment, lookup);
            let return_address = match step(rule, innermost, &mut registers, &read) {
                Step::End => return stack,
                Step::Stop => {
                    stack.truncated = true;
                    return stack;
                }
                Step::Return(address) => address,
            };
            let Some(next) = self.segment_of(return_address) else {
                stack.truncated = true;
                return stack;
            };
            segment = next;
            stack.frames.push(return_address);
            innermost = false;
            if segment.sigreturn == Some(return_address) {
                stack.signal_frames.push(stack.frames.len() - 1);
                let context = registers.sp;
                let word = |offset: u64| read(context.checked_add(offset)?);
                let (Some(ip), Some(sp), Some(bp)) =
                    (word(UCONTEXT_RIP), word(UCONTEXT_RSP), word(UCONTEXT_RBP))
                else {
                    stack.truncated = true;
                    return stack;
                };
                registers = Registers { ip, sp, bp };
                stack.frames.push(ip);
                innermost = true;
            }
        }
    }
}

/// What one frame's rule gives.
enum Step {
    /// The outermost frame (no return address, or a zero one).
    End,
    /// The rule cannot be applied here (a read outside the stack, a CFA that does not move).
    Stop,
    /// The caller's return address; the registers are the caller's.
    Return(u64),
}

/// Applies `rule` to the frame in `registers`. `innermost`: the frame's ip is an interrupted
/// instruction (after a signal), not a return address.
fn step(
    rule: Rule,
    innermost: bool,
    registers: &mut Registers,
    read: &dyn Fn(u64) -> Option<u64>,
) -> Step {
    let Registers { ip, sp, bp } = *registers;
    let frame_pointer = |end_at_zero: bool| -> Option<(u64, u64)> {
        if end_at_zero && bp == 0 {
            return None;
        }
        let cfa = bp.checked_add(16)?;
        (cfa > sp).then_some(())?;
        Some((cfa, read(bp)?))
    };
    let (cfa, new_bp, checked) = match rule.kind() {
        Kind::End => return Step::End,
        Kind::Unsupported => return Step::Stop,
        Kind::NoFde if innermost => (sp + 8, bp, false),
        Kind::NoFde => match frame_pointer(false) {
            Some((cfa, new_bp)) => (cfa, new_bp, false),
            None => return Step::Stop,
        },
        Kind::FramePointer if bp == 0 => return Step::End,
        Kind::FramePointer => match frame_pointer(true) {
            Some((cfa, new_bp)) => (cfa, new_bp, false),
            None => return Step::Stop,
        },
        Kind::Sp => {
            let Some(cfa) = sp.checked_add(rule.cfa_offset() as u64) else {
                return Step::Stop;
            };
            let new_bp = match rule.rbp_offset() {
                None => bp,
                Some(offset) => {
                    let at = cfa.wrapping_add(offset as u64);
                    match read(at) {
                        Some(value) => value,
                        // At the innermost frame an epilogue may name a slot already popped.
                        None if innermost && at < sp => bp,
                        None => return Step::Stop,
                    }
                }
            };
            (cfa, new_bp, false)
        }
        Kind::General => {
            let base = match rule.cfa_register() {
                CfaRegister::Rsp => sp,
                CfaRegister::Rbp => bp,
            };
            let cfa = base.wrapping_add(rule.cfa_offset() as u64);
            let new_bp = rule
                .rbp_offset()
                .and_then(|offset| read(cfa.wrapping_add(offset as u64)))
                .unwrap_or(bp);
            (cfa, new_bp, true)
        }
        Kind::Plt => {
            let past = (ip & 15) as i64 >= rule.cfa_offset();
            (sp + 8 + if past { 8 } else { 0 }, bp, true)
        }
    };
    let Some(return_address) = cfa.checked_sub(8).and_then(read) else {
        return Step::Stop;
    };
    if checked && !innermost && cfa < sp {
        return Step::Stop;
    }
    if return_address == 0 {
        return Step::End;
    }
    if cfa == sp && return_address == ip {
        return Step::Stop;
    }
    *registers = Registers {
        ip: return_address,
        sp: cfa,
        bp: new_bp,
    };
    Step::Return(return_address)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(sp: u64, bp: u64, words: &[u64]) -> StackSnapshot {
        StackSnapshot {
            ip: 0,
            at_function_entry: true,
            sp,
            bp,
            stack: words.iter().flat_map(|word| word.to_le_bytes()).collect(),
        }
    }

    /// One module at 0x1000..0x2000 (bias 0): `[0x1000, 0x1100)` pushes rbp and 8 bytes
    /// more (CFA = rsp + 24, rbp at CFA - 16), `[0x1100, 0x1200)` is `_start` (END),
    /// `[0x1200, 0x1300)` frame-pointer code, the rest no FDE.
    fn set() -> TableSet {
        let table = ModuleTable {
            starts: vec![0x1000, 0x1100, 0x1200, 0x1300],
            rules: vec![
                Rule::cfa(Kind::Sp, CfaRegister::Rsp, 24, Some(-16)),
                Rule::END,
                Rule::FRAME_POINTER,
                Rule::NO_FDE,
            ],
        };
        TableSet::new(vec![TableModule {
            executable: 0x1000..0x2000,
            bias: 0,
            table: Arc::new(table),
            sigreturn: None,
        }])
    }

    #[test]
    fn walks_rsp_frames_to_the_end() {
        // At entry: [ra into 0x1010 code][pad][saved rbp][ra into _start]
        let stack = set().walk(&snapshot(0x8000, 7, &[0x1011, 0, 0xabc, 0x1105]));
        assert_eq!(stack.frames, vec![0x1011, 0x1105]);
        assert!(!stack.truncated);
    }

    #[test]
    fn follows_frame_pointers_and_stops_outside_every_module() {
        // rbp = 0x8010 -> [0x8010] = 0 (saved rbp), [0x8018] = ra outside every module.
        let stack = set().walk(&snapshot(0x8000, 0x8010, &[0x1210, 0, 0, 0x9999]));
        assert_eq!(stack.frames, vec![0x1210]);
        assert!(stack.truncated);
        // rbp = 0 ends a frame-pointer walk without truncation.
        let stack = set().walk(&snapshot(0x8000, 0, &[0x1210, 0, 0, 0x9999]));
        assert_eq!((stack.frames, stack.truncated), (vec![0x1210], false));
    }

    #[test]
    fn a_read_past_the_stack_truncates() {
        let stack = set().walk(&snapshot(0x8000, 7, &[0x1011, 0]));
        assert_eq!((stack.frames, stack.truncated), (vec![0x1011], true));
    }
}
