//! How large an image's hook area may be. The kernel weighs every mapping against the
//! address-space limit (RLIMIT_AS), reserved or not, so under a limit the area's sparse
//! table and store regions shrink until the whole area takes at most a sixteenth of it;
//! the program keeps the rest, as it would natively. A stack that no longer fits in the
//! store is recorded by its caller and counted as lost.

use super::layout::Shape;

/// The area takes at most this share (1/n) of a limited address space.
pub const SHARE_OF_LIMIT: u64 = 16;
/// The smallest table and store regions, each, worth hooking with.
pub const LEAST_REGION_BYTES: u64 = 2 << 20;

const PAGE: u64 = 4096;

/// The shape of an area of `full`'s rings under address-space limit `limit` (None:
/// unlimited), or why no hook area fits in it.
pub fn shape_within(full: Shape, limit: Option<u64>) -> Result<Shape, String> {
    let Some(limit) = limit else {
        return Ok(full);
    };
    let budget = limit / SHARE_OF_LIMIT;
    let least = full.fixed_bytes() + 2 * LEAST_REGION_BYTES;
    if budget < least {
        return Err(format!(
            "the program's address space is limited to {} MiB (RLIMIT_AS), and the hook area needs {} MiB, more than a {}th of it",
            limit >> 20,
            least.div_ceil(1 << 20),
            SHARE_OF_LIMIT
        ));
    }
    let region = (budget - full.fixed_bytes()) / 2 / PAGE * PAGE;
    Ok(Shape {
        table_bytes: region.min(full.table_bytes),
        store_bytes: region.min(full.store_bytes),
        ..full
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn full() -> Shape {
        Shape::full(2, 4096)
    }

    #[test]
    fn an_unlimited_address_space_gets_the_full_area() {
        assert_eq!(shape_within(full(), None), Ok(full()));
        let huge = shape_within(full(), Some(64 << 30)).unwrap();
        assert_eq!(huge, full());
    }

    #[test]
    fn a_limit_shrinks_the_table_and_store_regions_to_a_sixteenth_of_it() {
        let shape = shape_within(full(), Some(1 << 30)).unwrap();
        assert_eq!((shape.ring_count, shape.capacity), (2, 4096));
        assert_eq!(shape.table_bytes, shape.store_bytes);
        assert_eq!(shape.table_bytes % PAGE, 0);
        assert!(shape.bytes() <= 64 * MIB, "{} bytes", shape.bytes());
        assert!(
            shape.bytes() > 64 * MIB - 2 * PAGE,
            "{} bytes",
            shape.bytes()
        );
        // The fixed parts of two rings of 4,096 records: 1 MiB of rings, the rule cache,
        // the known-stack set, the walk memories and the MPI section.
        assert_eq!(full().fixed_bytes(), 27_795_456);
        assert_eq!(shape.table_bytes, (64 * MIB - 27_795_456) / 2 / PAGE * PAGE);
    }

    #[test]
    fn a_limit_too_small_for_the_least_area_refuses_it() {
        let least = full().fixed_bytes() + 2 * LEAST_REGION_BYTES;
        let limit = least * SHARE_OF_LIMIT - 1;
        let refused = shape_within(full(), Some(limit)).unwrap_err();
        assert_eq!(
            refused,
            "the program's address space is limited to 488 MiB (RLIMIT_AS), and the hook area needs 31 MiB, more than a 16th of it"
        );
        let shape = shape_within(full(), Some(least * SHARE_OF_LIMIT)).unwrap();
        assert_eq!(shape.table_bytes, LEAST_REGION_BYTES);
        assert_eq!(shape.bytes(), least);
    }
}
