//! One row's unwind rule, packed into 32 bits so that the hook's walker can read it with a
//! load and a few shifts. Each kind reproduces what the recording's unwinder (framehop, with
//! memsup's checks around it) does at such a row, so both engines give the same stacks.
//!
//! | bits | field |
//! |---|---|
//! | 0..3 | kind |
//! | 3 | the CFA's register: 0 rsp, 1 rbp (`General`) |
//! | 4 | rbp is saved at CFA + `rbp_offset` (else unchanged) |
//! | 5..14 | `rbp_offset / 8`, signed |
//! | 14..32 | `cfa_offset`, signed bytes (`Plt`: the threshold of its expression) |

/// How the caller's registers are found at a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// No FDE covers the address: at the innermost frame return at once (sp + 8), else walk
    /// the frame pointer without treating rbp = 0 as the end (framehop's rule for code
    /// between FDEs). Zeroed memory reads as this kind.
    NoFde = 0,
    /// CFA = rbp + 16, rbp saved at CFA - 16: the frame-pointer walk; rbp = 0 ends the
    /// stack. Also every row the unwinder cannot evaluate (it falls back to frame pointers).
    FramePointer = 1,
    /// CFA = rsp + `cfa_offset` (a non-negative multiple of 8), rbp unchanged or saved.
    Sp = 2,
    /// CFA = register + `cfa_offset` in any other form: the CFA must not move down (except
    /// at the innermost frame) and must move on; an rbp that cannot be read stays as it was.
    General = 3,
    /// A PLT entry: CFA = rsp + 8, + 8 more when `(ip & 15) >= cfa_offset`.
    Plt = 4,
    /// The return address is undefined: the outermost frame (also a module's entry code).
    End = 5,
    /// A rule the packed form cannot hold (an offset out of range): the walk stops there,
    /// truncated.
    Unsupported = 6,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::NoFde,
        Kind::FramePointer,
        Kind::Sp,
        Kind::General,
        Kind::Plt,
        Kind::End,
        Kind::Unsupported,
    ];
}

/// The register a `General` CFA is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfaRegister {
    Rsp,
    Rbp,
}

pub const KIND_MASK: u32 = 0b111;
pub const RBP_REGISTER_BIT: u32 = 1 << 3;
pub const RBP_SAVED_BIT: u32 = 1 << 4;
pub const RBP_OFFSET_SHIFT: u32 = 5;
pub const RBP_OFFSET_BITS: u32 = 9;
pub const CFA_OFFSET_SHIFT: u32 = 14;
pub const CFA_OFFSET_BITS: u32 = 18;

/// A packed rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rule(pub u32);

impl Rule {
    pub const NO_FDE: Rule = Rule(Kind::NoFde as u32);
    pub const FRAME_POINTER: Rule = Rule(Kind::FramePointer as u32);
    pub const END: Rule = Rule(Kind::End as u32);
    pub const UNSUPPORTED: Rule = Rule(Kind::Unsupported as u32);

    /// A rule computing the CFA from `register` + `cfa_offset`, with rbp saved at
    /// CFA + `rbp_offset` when given. `Unsupported` when an offset does not fit.
    pub fn cfa(
        kind: Kind,
        register: CfaRegister,
        cfa_offset: i64,
        rbp_offset: Option<i64>,
    ) -> Rule {
        let Some(cfa_field) = signed_field(cfa_offset, CFA_OFFSET_BITS) else {
            return Rule::UNSUPPORTED;
        };
        let mut bits = kind as u32 | cfa_field << CFA_OFFSET_SHIFT;
        if register == CfaRegister::Rbp {
            bits |= RBP_REGISTER_BIT;
        }
        if let Some(offset) = rbp_offset {
            let field = (offset % 8 == 0)
                .then(|| signed_field(offset / 8, RBP_OFFSET_BITS))
                .flatten();
            let Some(field) = field else {
                return Rule::UNSUPPORTED;
            };
            bits |= RBP_SAVED_BIT | field << RBP_OFFSET_SHIFT;
        }
        Rule(bits)
    }

    /// A PLT entry whose expression compares `ip & 15` with `threshold`.
    pub fn plt(threshold: i64) -> Rule {
        Rule::cfa(Kind::Plt, CfaRegister::Rsp, threshold, None)
    }

    pub fn kind(self) -> Kind {
        Kind::ALL
            .get((self.0 & KIND_MASK) as usize)
            .copied()
            .unwrap_or(Kind::Unsupported)
    }

    pub fn cfa_register(self) -> CfaRegister {
        if self.0 & RBP_REGISTER_BIT != 0 {
            CfaRegister::Rbp
        } else {
            CfaRegister::Rsp
        }
    }

    pub fn cfa_offset(self) -> i64 {
        i64::from((self.0 as i32) >> CFA_OFFSET_SHIFT)
    }

    /// Where rbp was saved, relative to the CFA; None when it is unchanged.
    pub fn rbp_offset(self) -> Option<i64> {
        if self.0 & RBP_SAVED_BIT == 0 {
            return None;
        }
        let shifted = (self.0 << (32 - RBP_OFFSET_SHIFT - RBP_OFFSET_BITS)) as i32;
        Some(i64::from(shifted >> (32 - RBP_OFFSET_BITS)) * 8)
    }
}

/// `value` as a two's-complement field of `bits` bits, if it fits.
fn signed_field(value: i64, bits: u32) -> Option<u32> {
    let limit = 1i64 << (bits - 1);
    (-limit..limit)
        .contains(&value)
        .then(|| (value as u32) & ((1u32 << bits) - 1))
}

/// One module's rules: row `i` covers the ELF virtual addresses `[starts[i], starts[i + 1])`;
/// addresses before the first row and from the last row on are `NoFde` unless a row says
/// otherwise (the last row is `NoFde` after the last FDE).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleTable {
    pub starts: Vec<u32>,
    pub rules: Vec<Rule>,
}

impl ModuleTable {
    /// The rule at ELF virtual address `address`.
    pub fn lookup(&self, address: u64) -> Rule {
        let Ok(address) = u32::try_from(address) else {
            return Rule::NO_FDE;
        };
        let after = self.starts.partition_point(|&start| start <= address);
        match after.checked_sub(1) {
            Some(row) => self.rules[row],
            None => Rule::NO_FDE,
        }
    }

    /// Bytes the table takes where the hook reads it: 4 per start and 4 per rule.
    pub fn bytes(&self) -> u64 {
        8 * self.starts.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks_every_field() {
        let rule = Rule::cfa(Kind::Sp, CfaRegister::Rsp, 56, Some(-16));
        assert_eq!(rule.kind(), Kind::Sp);
        assert_eq!(rule.cfa_register(), CfaRegister::Rsp);
        assert_eq!(rule.cfa_offset(), 56);
        assert_eq!(rule.rbp_offset(), Some(-16));
        let rule = Rule::cfa(Kind::General, CfaRegister::Rbp, -131_072, None);
        assert_eq!(rule.kind(), Kind::General);
        assert_eq!(rule.cfa_register(), CfaRegister::Rbp);
        assert_eq!(rule.cfa_offset(), -131_072);
        assert_eq!(rule.rbp_offset(), None);
        let rule = Rule::cfa(Kind::Sp, CfaRegister::Rsp, 131_064, Some(-2048));
        assert_eq!(
            (rule.cfa_offset(), rule.rbp_offset()),
            (131_064, Some(-2048))
        );
        assert_eq!(Rule::plt(11).cfa_offset(), 11);
        assert_eq!(Rule::plt(11).kind(), Kind::Plt);
    }

    #[test]
    fn what_does_not_fit_is_unsupported() {
        assert_eq!(
            Rule::cfa(Kind::Sp, CfaRegister::Rsp, 131_072, None),
            Rule::UNSUPPORTED
        );
        assert_eq!(
            Rule::cfa(Kind::Sp, CfaRegister::Rsp, 8, Some(2048)),
            Rule::UNSUPPORTED
        );
        assert_eq!(
            Rule::cfa(Kind::Sp, CfaRegister::Rsp, 8, Some(-12)),
            Rule::UNSUPPORTED
        );
        assert_eq!(Rule(0).kind(), Kind::NoFde);
        assert_eq!(Rule(7).kind(), Kind::Unsupported);
    }

    #[test]
    fn looks_up_the_row_holding_an_address() {
        let table = ModuleTable {
            starts: vec![0x1000, 0x1010, 0x1040],
            rules: vec![Rule::END, Rule::FRAME_POINTER, Rule::NO_FDE],
        };
        assert_eq!(table.lookup(0xfff), Rule::NO_FDE);
        assert_eq!(table.lookup(0x1000), Rule::END);
        assert_eq!(table.lookup(0x100f), Rule::END);
        assert_eq!(table.lookup(0x1010), Rule::FRAME_POINTER);
        assert_eq!(table.lookup(0x1040), Rule::NO_FDE);
        assert_eq!(table.lookup(1 << 40), Rule::NO_FDE);
    }
}
