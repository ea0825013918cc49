//! What a probe needs to know of the function it stops: whether its return is worth a
//! trampoline, and whether it merely forwards to another probed function. The names probed
//! are `platform::allocators::ALLOCATOR_SYMBOLS`.

use crate::trace::format::AllocFunction;

/// Whether the function hands back a pointer worth a return trampoline. Free does not.
pub fn needs_return(function: AllocFunction) -> bool {
    function != AllocFunction::Free
}

/// The destination of a direct `jmp` at `address` (`code` = its bytes), if that is what it is.
/// musl's `malloc`, `free` and `realloc` are such one-instruction forwarders to the real
/// allocator functions, which are probed themselves: the forwarder needs no probe.
pub fn direct_jump_target(code: &[u8], address: u64) -> Option<u64> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
    let instruction = Decoder::with_ip(64, code, address, DecoderOptions::NONE).decode();
    let is_direct_jump = instruction.mnemonic() == Mnemonic::Jmp
        && matches!(instruction.op0_kind(), OpKind::NearBranch64);
    is_direct_jump.then(|| instruction.near_branch_target())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_forwarder_is_recognised() {
        // jmp rel32 +0x100 at 0x1000: five bytes, target 0x1105.
        assert_eq!(
            direct_jump_target(&[0xe9, 0x00, 0x01, 0x00, 0x00], 0x1000),
            Some(0x1105)
        );
        // push %r12 is not a jump.
        assert_eq!(direct_jump_target(&[0x41, 0x54], 0x1000), None);
    }
}
