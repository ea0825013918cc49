//! Splitting an allocator arena's resident memory between the components whose live blocks
//! it holds; what the blocks do not account for is the allocator's `overhead`.

/// RSS, PSS and swap of one thing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Residency {
    pub rss: u64,
    pub pss: u64,
    pub swap: u64,
}

impl Residency {
    pub fn add(&mut self, other: Residency) {
        self.rss += other.rss;
        self.pss += other.pss;
        self.swap += other.swap;
    }
}

/// How one arena mapping was split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ArenaSplit {
    /// In the order of `live`.
    pub shares: Vec<Residency>,
    pub overhead: Residency,
    /// Live requested bytes inside the mapping.
    pub requested: u64,
}

/// Splits `arena` by the live requested bytes of each component inside it (`live`). Live
/// bytes can be attributed at most the resident bytes (pages never touched are not resident;
/// blocks larger than their touched pages), so a component gets `min(L, R) * L_c / L`; PSS
/// follows RSS in proportion, and the live bytes not resident are split the same way against
/// the swapped bytes.
pub(super) fn split(arena: Residency, live: &[u64]) -> ArenaSplit {
    let requested: u64 = live.iter().sum();
    let rss_attributed = requested.min(arena.rss);
    let pss_attributed = if arena.rss == 0 {
        0
    } else {
        scale(arena.pss, rss_attributed, arena.rss)
    };
    // Live bytes already counted resident are not swapped out as well.
    let swap_attributed = (requested - rss_attributed).min(arena.swap);
    let rss = proportional(rss_attributed, live);
    let pss = proportional(pss_attributed, live);
    let swap = proportional(swap_attributed, live);
    let shares = (0..live.len())
        .map(|index| Residency {
            rss: rss[index],
            pss: pss[index],
            swap: swap[index],
        })
        .collect();
    ArenaSplit {
        shares,
        overhead: Residency {
            rss: arena.rss - rss_attributed,
            pss: arena.pss - pss_attributed,
            swap: arena.swap - swap_attributed,
        },
        requested,
    }
}

/// value * numerator / denominator without overflow (numerator <= denominator).
fn scale(value: u64, numerator: u64, denominator: u64) -> u64 {
    (u128::from(value) * u128::from(numerator) / u128::from(denominator)) as u64
}

/// `total` split in proportion to `weights`; the rounding remainder goes to the largest
/// weight (the first of equal ones), so the parts add up to `total` exactly.
pub(super) fn proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u64 = weights.iter().sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut parts: Vec<u64> = weights
        .iter()
        .map(|&weight| scale(total, weight, sum))
        .collect();
    let remainder = total - parts.iter().sum::<u64>();
    let largest = (0..weights.len())
        .max_by(|&a, &b| weights[a].cmp(&weights[b]).then(b.cmp(&a)))
        .unwrap_or(0);
    parts[largest] += remainder;
    parts
}
