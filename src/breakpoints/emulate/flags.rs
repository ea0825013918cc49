//! RFLAGS' arithmetic bits as add, sub and the logic instructions leave them.

use super::operands::Width;

pub(super) const CARRY: u64 = 1 << 0;
pub(super) const PARITY: u64 = 1 << 2;
pub(super) const AUXILIARY: u64 = 1 << 4;
pub(super) const ZERO: u64 = 1 << 6;
pub(super) const SIGN: u64 = 1 << 7;
pub(super) const OVERFLOW: u64 = 1 << 11;

/// The bits emulated instructions change; every other RFLAGS bit is preserved.
pub(super) const ARITHMETIC: u64 = CARRY | PARITY | AUXILIARY | ZERO | SIGN | OVERFLOW;

/// Replaces the arithmetic bits of `eflags` with `arithmetic_flags`.
pub(super) fn merge(eflags: u64, arithmetic_flags: u64) -> u64 {
    (eflags & !ARITHMETIC) | (arithmetic_flags & ARITHMETIC)
}

/// ZF, SF and PF of a result (PF looks at the low byte only, set when its bit count is even).
fn result_flags(result: u64, width: Width) -> u64 {
    let mut flags = 0;
    if result & width.mask() == 0 {
        flags |= ZERO;
    }
    if result & width.sign_bit() != 0 {
        flags |= SIGN;
    }
    if (result as u8).count_ones() % 2 == 0 {
        flags |= PARITY;
    }
    flags
}

/// AF: a carry or borrow out of bit 3, visible as a difference in bit 4.
fn auxiliary(left: u64, right: u64, result: u64) -> u64 {
    if (left ^ right ^ result) & 0x10 != 0 {
        AUXILIARY
    } else {
        0
    }
}

/// `left + right` in `width` bits: the result and its arithmetic flags.
pub(super) fn add(left: u64, right: u64, width: Width) -> (u64, u64) {
    let (left, right) = (left & width.mask(), right & width.mask());
    let wide = u128::from(left) + u128::from(right);
    let result = wide as u64 & width.mask();
    let mut flags = result_flags(result, width) | auxiliary(left, right, result);
    if wide > u128::from(width.mask()) {
        flags |= CARRY;
    }
    // Signed overflow: both operands have the same sign and the result has the other one.
    if (left ^ result) & (right ^ result) & width.sign_bit() != 0 {
        flags |= OVERFLOW;
    }
    (result, flags)
}

/// `left - right` in `width` bits (sub and cmp): the result and its arithmetic flags.
pub(super) fn subtract(left: u64, right: u64, width: Width) -> (u64, u64) {
    let (left, right) = (left & width.mask(), right & width.mask());
    let result = left.wrapping_sub(right) & width.mask();
    let mut flags = result_flags(result, width) | auxiliary(left, right, result);
    if right > left {
        flags |= CARRY;
    }
    // Signed overflow: the operands differ in sign and the result's sign differs from left's.
    if (left ^ right) & (left ^ result) & width.sign_bit() != 0 {
        flags |= OVERFLOW;
    }
    (result, flags)
}

/// and/or/xor/test: CF and OF cleared, ZF SF PF from the result. AF is architecturally
/// undefined; the Intel CPU this was checked on clears it, and the native tests compare with
/// whatever CPU they run on.
pub(super) fn logic(result: u64, width: Width) -> (u64, u64) {
    let result = result & width.mask();
    (result, result_flags(result, width))
}
