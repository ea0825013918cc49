//! What an allocator call that returned becomes, whichever source saw it: the same rules for
//! a return trampoline's stop and for a hook's record, so both engines report alike.

use super::{EventKind, RawStack};
use crate::trace::format::{AllocFunction, MapCall};

/// The system call's result of libc's mapping wrapper `call` that returned `result`: the
/// wrappers return -1 and set errno; the records hold the system call's result.
pub fn mapping_result(call: MapCall, args: &[u64; 6], result: u64) -> i64 {
    let failed = result as i64 == -1;
    match call {
        MapCall::Brk if result == 0 => args[0] as i64,
        _ if failed => -(libc::ENOMEM as i64),
        _ => result as i64,
    }
}

/// The event of `function` called with `args` that returned `result`. `stored` is what
/// posix_memalign wrote through its first argument (read only when it returned 0). None for
/// free, which is recorded at its entry.
pub fn returned_call(
    function: AllocFunction,
    args: &[u64; 6],
    result: u64,
    stored: impl FnOnce() -> Option<u64>,
    stack: RawStack,
) -> Option<EventKind> {
    let alloc = |function, address, size, stack| EventKind::Alloc {
        function,
        address,
        size,
        stack,
    };
    Some(match function {
        AllocFunction::Malloc | AllocFunction::Valloc | AllocFunction::Pvalloc => {
            alloc(function, result, args[0], stack)
        }
        AllocFunction::Calloc => alloc(function, result, args[0].saturating_mul(args[1]), stack),
        AllocFunction::AlignedAlloc | AllocFunction::Memalign => {
            alloc(function, result, args[1], stack)
        }
        AllocFunction::PosixMemalign => {
            let address = if result == 0 { stored()? } else { 0 };
            alloc(function, address, args[2], stack)
        }
        AllocFunction::Realloc | AllocFunction::Reallocarray => EventKind::Realloc {
            function,
            old_address: args[0],
            new_address: result,
            size: if function == AllocFunction::Realloc {
                args[1]
            } else {
                args[1].saturating_mul(args[2])
            },
            stack,
        },
        AllocFunction::Free => return None,
    })
}
