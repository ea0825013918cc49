//! How large an image's hook area may be. The kernel weighs every mapping against the
//! program's address-space limit (RLIMIT_AS), reserved or not, so under such a limit the
//! area's sparse table and store regions shrink until the whole area takes at most a
//! sixteenth of it; the program keeps the rest, as it would natively. memsup sizes the
//! area's memfd itself, so the area must also fit within memsup's own file-size limit
//! (RLIMIT_FSIZE). A stack that no longer fits in the store is recorded by its caller and
//! counted as lost.

use super::layout::Shape;

/// The area takes at most this share (1/n) of a limited address space.
pub const SHARE_OF_LIMIT: u64 = 16;
/// The smallest table and store regions, each, worth hooking with.
pub const LEAST_REGION_BYTES: u64 = 2 << 20;

const PAGE: u64 = 4096;

/// The limits an area keeps to (None: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// The program's soft RLIMIT_AS.
    pub address_space: Option<u64>,
    /// memsup's own soft RLIMIT_FSIZE.
    pub file_size: Option<u64>,
}

/// The shape of an area of `full`'s rings within `limits`, or why no hook area fits.
pub fn shape_within(full: Shape, limits: Limits) -> Result<Shape, String> {
    let share = limits.address_space.map(|limit| limit / SHARE_OF_LIMIT);
    let budget = match (share, limits.file_size) {
        (None, None) => return Ok(full),
        (share, file_size) => share.unwrap_or(u64::MAX).min(file_size.unwrap_or(u64::MAX)),
    };
    let least = full.fixed_bytes() + 2 * LEAST_REGION_BYTES;
    if budget < least {
        let least_mib = least.div_ceil(1 << 20);
        return Err(match (limits.address_space, share == Some(budget)) {
            (Some(limit), true) => format!(
                "the program's address space is limited to {} (RLIMIT_AS), and the hook area needs {least_mib} MiB, more than a {SHARE_OF_LIMIT}th of it",
                size(limit)
            ),
            _ => format!(
                "memsup's own file size limit (RLIMIT_FSIZE) is {}, and the hook area, a file in memory, needs {least_mib} MiB",
                size(budget)
            ),
        });
    }
    let region = (budget - full.fixed_bytes()) / 2 / PAGE * PAGE;
    Ok(Shape {
        table_bytes: region.min(full.table_bytes),
        store_bytes: region.min(full.store_bytes),
        ..full
    })
}

/// A limit as a reason gives it: whole MiB, or bytes below one.
fn size(bytes: u64) -> String {
    match bytes >> 20 {
        0 => format!("{bytes} bytes"),
        mib => format!("{mib} MiB"),
    }
}

/// memsup's own soft RLIMIT_FSIZE (None: unlimited).
pub fn own_file_size_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0;
    (read && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn full() -> Shape {
        Shape::full(2, 4096)
    }

    fn address_space(limit: u64) -> Limits {
        Limits {
            address_space: Some(limit),
            file_size: None,
        }
    }

    fn file_size(limit: u64) -> Limits {
        Limits {
            address_space: None,
            file_size: Some(limit),
        }
    }

    #[test]
    fn without_limits_the_area_is_full() {
        assert_eq!(shape_within(full(), Limits::default()), Ok(full()));
        assert_eq!(shape_within(full(), address_space(64 << 30)), Ok(full()));
        assert_eq!(shape_within(full(), file_size(1 << 30)), Ok(full()));
    }

    #[test]
    fn an_address_space_limit_shrinks_the_table_and_store_regions_to_a_sixteenth_of_it() {
        let shape = shape_within(full(), address_space(1 << 30)).unwrap();
        assert_eq!((shape.ring_count, shape.capacity), (2, 4096));
        // The fixed parts of two rings of 4,096 records: 1 MiB of rings, the rule cache,
        // the known-stack set, the walk memories and the MPI section.
        assert_eq!(full().fixed_bytes(), 27_795_456);
        let region = (64 * MIB - 27_795_456) / 2 / PAGE * PAGE;
        assert_eq!((shape.table_bytes, shape.store_bytes), (region, region));
        assert_eq!(shape.bytes(), 27_795_456 + 2 * region);
        assert!(shape.bytes() <= 64 * MIB);
    }

    #[test]
    fn the_tighter_limit_binds() {
        let both = Limits {
            address_space: Some(1 << 30),
            file_size: Some(48 * MIB),
        };
        let shape = shape_within(full(), both).unwrap();
        assert_eq!(shape, shape_within(full(), file_size(48 * MIB)).unwrap());
        assert!(shape.bytes() <= 48 * MIB);
        assert_eq!(shape.table_bytes, (48 * MIB - 27_795_456) / 2 / PAGE * PAGE);
    }

    #[test]
    fn a_limit_too_small_for_the_least_area_refuses_it() {
        let least = full().fixed_bytes() + 2 * LEAST_REGION_BYTES;
        let refused = shape_within(full(), address_space(least * SHARE_OF_LIMIT - 1));
        assert_eq!(
            refused.unwrap_err(),
            "the program's address space is limited to 488 MiB (RLIMIT_AS), and the hook area needs 31 MiB, more than a 16th of it"
        );
        let shape = shape_within(full(), address_space(least * SHARE_OF_LIMIT)).unwrap();
        assert_eq!(shape.table_bytes, LEAST_REGION_BYTES);
        assert_eq!(shape.bytes(), least);
        assert_eq!(
            shape_within(full(), file_size(16 * MIB)).unwrap_err(),
            "memsup's own file size limit (RLIMIT_FSIZE) is 16 MiB, and the hook area, a file in memory, needs 31 MiB"
        );
        assert_eq!(
            shape_within(full(), file_size(least)).unwrap().bytes(),
            least
        );
        assert_eq!(
            shape_within(full(), file_size(4096)).unwrap_err(),
            "memsup's own file size limit (RLIMIT_FSIZE) is 4096 bytes, and the hook area, a file in memory, needs 31 MiB"
        );
    }
}
