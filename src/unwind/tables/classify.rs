//! One CFI row to the packed rule the recording's unwinder effectively applies there.
//!
//! framehop 0.16 (`x86_64/dwarf.rs`) first tries to translate a row into a cacheable rule
//! (`OffsetSp`, `OffsetSpAndRestoreBp`, `UseFramePointer`, `EndOfStack`); when that fails it
//! evaluates the row generically (with a CFA that must not move down and must move on), and
//! when the generic evaluation cannot find the CFA it falls back to the frame pointer. This
//! module takes the same decisions per row, ahead of time.

use gimli::{
    CfaRule, Encoding, Evaluation, EvaluationResult, Location, Reader, Register, RegisterRule,
    UnwindSection, Value, X86_64,
};

use super::rule::{CfaRegister, Kind, Rule};

/// The PLT's CFA expression: `breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus`
/// (CFA = rsp + 8, + 8 more once `ip & 15` reaches the threshold). The threshold literal
/// is at `PLT_THRESHOLD_AT`: lit11 in `.plt`, lit10 in some linkers' `.plt.sec`.
const PLT_EXPRESSION: [u8; 11] = [
    0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
];
const PLT_THRESHOLD_AT: usize = 6;
/// `DW_OP_lit0`: `lit N` is this plus N.
const LIT0: u8 = 0x30;

/// The rules of one row, as gimli gives them.
pub struct RowRules<'a, T: gimli::ReaderOffset> {
    pub cfa: &'a CfaRule<T>,
    pub rbp: Option<RegisterRule<T>>,
    pub return_address: Option<RegisterRule<T>>,
}

/// The rule framehop applies at a row, given the section the row's expressions live in.
pub fn classify<R: Reader, S: UnwindSection<R>>(
    section: &S,
    encoding: Encoding,
    row: &RowRules<'_, R::Offset>,
) -> Rule {
    match &row.return_address {
        None | Some(RegisterRule::Undefined) => return Rule::END,
        Some(RegisterRule::Offset(-8)) => {
            if let Some(rule) = cacheable(row) {
                return rule;
            }
        }
        Some(_) => {}
    }
    generic(section, encoding, row)
}

/// framehop's `translate_into_unwind_rule`, for a row whose return address is at CFA - 8.
fn cacheable<T: gimli::ReaderOffset>(row: &RowRules<'_, T>) -> Option<Rule> {
    let CfaRule::RegisterAndOffset { register, offset } = *row.cfa else {
        return None;
    };
    // None: rbp unchanged; Some(o): saved at CFA + o. Other rbp rules are not cacheable.
    let rbp_saved_at = match row.rbp {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(o)) => Some(o),
        Some(_) => return None,
    };
    match register {
        X86_64::RSP => {
            // framehop keeps the CFA offset in eighths (rounding towards zero) in a u16,
            // and the rbp slot as (offset + o) / 8 eighths above rsp in an i16.
            let cfa_eighths = u16::try_from(offset / 8).ok()?;
            let cfa_offset = i64::from(cfa_eighths) * 8;
            let rbp_offset = match rbp_saved_at {
                None => None,
                Some(o) => {
                    let slot = i16::try_from(offset.checked_add(o)? / 8).ok()?;
                    Some(i64::from(slot) * 8 - cfa_offset)
                }
            };
            Some(Rule::cfa(
                Kind::Sp,
                CfaRegister::Rsp,
                cfa_offset,
                rbp_offset,
            ))
        }
        X86_64::RBP if offset == 16 && rbp_saved_at == Some(-16) => Some(Rule::FRAME_POINTER),
        _ => None,
    }
}

/// framehop's generic evaluation of a row.
fn generic<R: Reader, S: UnwindSection<R>>(
    section: &S,
    encoding: Encoding,
    row: &RowRules<'_, R::Offset>,
) -> Rule {
    let cfa = match row.cfa {
        CfaRule::RegisterAndOffset { register, offset } => match *register {
            X86_64::RSP => Cfa::Register(CfaRegister::Rsp, *offset),
            X86_64::RBP => Cfa::Register(CfaRegister::Rbp, *offset),
            // framehop reads the return address column as the ip: a CFA it computes, but
            // one the packed form has no register for.
            X86_64::RA => return Rule::UNSUPPORTED,
            // Any other register is unknown to framehop: no CFA, the frame-pointer fallback.
            _ => return Rule::FRAME_POINTER,
        },
        CfaRule::Expression(expression) => {
            let Ok(expression) = expression.get(section) else {
                return Rule::FRAME_POINTER;
            };
            match plt_threshold(&expression.0) {
                Some(threshold) => Cfa::Plt(threshold),
                None if evaluates(expression.0, encoding) => return Rule::UNSUPPORTED,
                None => return Rule::FRAME_POINTER,
            }
        }
    };
    if row.return_address != Some(RegisterRule::Offset(-8)) {
        return Rule::UNSUPPORTED;
    }
    // Where the generic evaluation finds the caller's rbp; what it cannot find or read
    // leaves rbp as it was.
    let rbp_offset = match &row.rbp {
        Some(RegisterRule::Offset(o)) => Some(*o),
        None
        | Some(RegisterRule::Undefined)
        | Some(RegisterRule::SameValue)
        | Some(RegisterRule::Architectural) => None,
        Some(RegisterRule::Register(register)) => match *register {
            X86_64::RSP | X86_64::RA => return Rule::UNSUPPORTED,
            _ => None,
        },
        Some(RegisterRule::Expression(expression))
        | Some(RegisterRule::ValExpression(expression)) => match expression.get(section) {
            Ok(expression) if evaluates(expression.0.clone(), encoding) => {
                return Rule::UNSUPPORTED
            }
            _ => None,
        },
        Some(_) => return Rule::UNSUPPORTED,
    };
    match cfa {
        Cfa::Register(register, offset) => Rule::cfa(Kind::General, register, offset, rbp_offset),
        Cfa::Plt(threshold) if rbp_offset.is_none() => Rule::plt(threshold),
        Cfa::Plt(_) => Rule::UNSUPPORTED,
    }
}

enum Cfa {
    Register(CfaRegister, i64),
    Plt(i64),
}

/// The threshold of the PLT expression, if `bytes` is it.
fn plt_threshold<R: Reader>(bytes: &R) -> Option<i64> {
    let bytes = bytes.to_slice().ok()?;
    if bytes.len() != PLT_EXPRESSION.len() {
        return None;
    }
    let threshold = *bytes.get(PLT_THRESHOLD_AT)?;
    let same_elsewhere = bytes
        .iter()
        .zip(PLT_EXPRESSION)
        .enumerate()
        .all(|(at, (&byte, expected))| at == PLT_THRESHOLD_AT || byte == expected);
    (same_elsewhere && (threshold == LIT0 + 10 || threshold == LIT0 + 11))
        .then(|| i64::from(threshold - LIT0))
}

/// Whether framehop's expression evaluation (`dwarf::eval_expr`) gives an address: it
/// supplies rsp, rbp and the ip, and gives up on memory reads and other registers.
/// Whether it gives up does not depend on the register values.
fn evaluates<R: Reader>(bytecode: R, encoding: Encoding) -> bool {
    let mut evaluation = Evaluation::new(bytecode, encoding);
    let mut result = evaluation.evaluate();
    loop {
        match result {
            Ok(EvaluationResult::Complete) => break,
            Ok(EvaluationResult::RequiresRegister { register, .. }) if known_register(register) => {
                result = evaluation.resume_with_register(Value::Generic(0x7fff_0000));
            }
            _ => return false,
        }
    }
    matches!(
        evaluation.as_result().last().map(|piece| &piece.location),
        Some(Location::Address { .. })
    )
}

fn known_register(register: Register) -> bool {
    matches!(register, X86_64::RSP | X86_64::RBP | X86_64::RA)
}
