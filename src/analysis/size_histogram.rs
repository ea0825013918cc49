//! The sizes of an image's allocations in power-of-two classes: how many blocks of each class
//! were allocated, their bytes, and how many were still live at the end.

/// One class: blocks of `min_bytes` to `max_bytes` bytes (0, 1, 2–3, 4–7 ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SizeClass {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub allocations: u64,
    pub bytes: u64,
    /// Blocks of the class still live when the image's recording ended.
    pub live: u64,
}

/// The classes with at least one allocation, smallest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SizeHistogram {
    /// Indexed by class: 0 for size 0, k + 1 for sizes 2^k to 2^(k+1) - 1.
    classes: Vec<SizeClass>,
}

fn class_of(size: u64) -> usize {
    match size {
        0 => 0,
        size => 64 - size.leading_zeros() as usize,
    }
}

fn bounds(class: usize) -> (u64, u64) {
    match class {
        0 => (0, 0),
        64 => (1 << 63, u64::MAX),
        class => (1 << (class - 1), (1 << class) - 1),
    }
}

impl SizeHistogram {
    fn class_mut(&mut self, size: u64) -> &mut SizeClass {
        let class = class_of(size);
        while self.classes.len() <= class {
            let (min_bytes, max_bytes) = bounds(self.classes.len());
            self.classes.push(SizeClass {
                min_bytes,
                max_bytes,
                ..SizeClass::default()
            });
        }
        &mut self.classes[class]
    }

    /// A block of `size` bytes was allocated.
    pub fn allocated(&mut self, size: u64) {
        let class = self.class_mut(size);
        class.allocations += 1;
        class.bytes = class.bytes.saturating_add(size);
    }

    /// A block of `size` bytes was live at the end.
    pub fn live(&mut self, size: u64) {
        self.class_mut(size).live += 1;
    }

    /// The classes that had allocations, smallest first.
    pub fn classes(&self) -> Vec<SizeClass> {
        (self.classes.iter())
            .filter(|class| class.allocations > 0)
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_power_of_two_classes() {
        let mut histogram = SizeHistogram::default();
        for size in [0, 1, 64, 127, 128, 1000, u64::MAX] {
            histogram.allocated(size);
        }
        histogram.live(64);
        let rows: Vec<(u64, u64, u64, u64, u64)> = (histogram.classes().iter())
            .map(|class| {
                let SizeClass {
                    min_bytes,
                    max_bytes,
                    allocations,
                    bytes,
                    live,
                } = *class;
                (min_bytes, max_bytes, allocations, bytes, live)
            })
            .collect();
        assert_eq!(
            rows,
            [
                (0, 0, 1, 0, 0),
                (1, 1, 1, 1, 0),
                (64, 127, 2, 191, 1),
                (128, 255, 1, 128, 0),
                (512, 1023, 1, 1000, 0),
                (1 << 63, u64::MAX, 1, u64::MAX, 0),
            ]
        );
    }
}
