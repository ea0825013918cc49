//! Statistics of one column of the job table across ranks: min, max, mean, standard
//! deviation and which rank holds the max (load imbalance).

/// A column's statistics over the ranks that have a value in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnStatistics {
    /// Ranks with a value (a rank without a smaps snapshot has no split).
    pub count: usize,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    /// Population standard deviation (divided by the number of ranks, not one less): the
    /// ranks are the whole job, not a sample of it.
    pub standard_deviation: f64,
    /// The first rank, in table order, holding the max, and its pid.
    pub max_rank: u32,
    pub max_pid: u32,
}

impl ColumnStatistics {
    /// The statistics of `values`, each with its rank and pid, in table order; None when
    /// there is none.
    pub fn of(values: impl IntoIterator<Item = (u64, u32, u32)>) -> Option<Self> {
        let values: Vec<(u64, u32, u32)> = values.into_iter().collect();
        let &(first, first_rank, first_pid) = values.first()?;
        let (mut min, mut max, mut max_rank, mut max_pid) = (first, first, first_rank, first_pid);
        // Sums in u128: 1,024 ranks of terabytes stay exact.
        let mut sum: u128 = 0;
        for &(value, rank, pid) in &values {
            min = min.min(value);
            if value > max {
                (max, max_rank, max_pid) = (value, rank, pid);
            }
            sum += u128::from(value);
        }
        let count = values.len();
        let mean = sum as f64 / count as f64;
        // Two passes: the deviations from the mean, not E[x²] − mean², which cancels badly
        // for large equal values.
        let squares: f64 = values
            .iter()
            .map(|&(value, _, _)| {
                let deviation = value as f64 - mean;
                deviation * deviation
            })
            .sum();
        Some(ColumnStatistics {
            count,
            min,
            max,
            mean,
            standard_deviation: (squares / count as f64).sqrt(),
            max_rank,
            max_pid,
        })
    }

    /// max / mean: 1 for a balanced job; 0 when every value is 0.
    pub fn max_over_mean(&self) -> f64 {
        if self.mean == 0.0 {
            return 0.0;
        }
        self.max as f64 / self.mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_numbers_give_exact_statistics_and_the_first_rank_at_the_max() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population variance 4, deviation 2.
        let values = [2, 4, 4, 4, 5, 5, 7, 9]
            .iter()
            .enumerate()
            .map(|(rank, &value)| (value, rank as u32, 1000 + rank as u32));
        let statistics = ColumnStatistics::of(values).unwrap();
        assert_eq!(
            statistics,
            ColumnStatistics {
                count: 8,
                min: 2,
                max: 9,
                mean: 5.0,
                standard_deviation: 2.0,
                max_rank: 7,
                max_pid: 1007,
            }
        );
        assert_eq!(statistics.max_over_mean(), 1.8);
    }

    #[test]
    fn a_tie_at_the_max_names_the_first_rank_in_table_order() {
        let values = [
            (3 << 20, 0, 10),
            (8 << 20, 1, 11),
            (8 << 20, 2, 12),
            (1 << 20, 3, 13),
        ];
        let statistics = ColumnStatistics::of(values).unwrap();
        assert_eq!(
            (statistics.max, statistics.max_rank, statistics.max_pid),
            (8 << 20, 1, 11)
        );
        assert_eq!(statistics.min, 1 << 20);
        assert_eq!(statistics.mean, 5.0 * (1 << 20) as f64);
        // Deviations −2, 3, 3, −4 MiB: variance 38/4 MiB².
        assert_eq!(
            statistics.standard_deviation,
            (38.0f64 / 4.0).sqrt() * (1 << 20) as f64
        );
    }

    #[test]
    fn one_rank_has_no_spread_and_large_equal_values_none_either() {
        let one = ColumnStatistics::of([(12345, 4, 99)]).unwrap();
        assert_eq!(
            (one.min, one.max, one.mean, one.standard_deviation),
            (12345, 12345, 12345.0, 0.0)
        );
        assert_eq!((one.max_rank, one.max_pid), (4, 99));
        let large = u64::MAX / 2;
        let equal = ColumnStatistics::of((0..1024).map(|rank| (large, rank, rank))).unwrap();
        assert_eq!(equal.standard_deviation, 0.0);
        assert_eq!(equal.max_rank, 0);
    }

    #[test]
    fn no_values_no_statistics_and_zeros_have_no_imbalance() {
        assert_eq!(ColumnStatistics::of([]), None);
        let zeros = ColumnStatistics::of([(0, 0, 1), (0, 1, 2)]).unwrap();
        assert_eq!(zeros.max_over_mean(), 0.0);
    }
}
