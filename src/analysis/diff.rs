//! `memsup diff BASE NEW`: the heap sites of two profiles matched by their source chain
//! (`source_location`), so that a rebuilt program, whose addresses all moved, still meets its
//! old sites.
//!
//! Which process images are compared: when each profile has one image, those two, whatever
//! their programs are called (a renamed rebuild still compares); otherwise images are paired
//! by the file name of their executable and their order of start (the first `cc` of BASE
//! with the first `cc` of NEW, ...). Images left without a partner are named, not compared.

use std::cmp::Reverse;
use std::collections::HashMap;

use super::source_location::{source_chain, SourceLocation};
use super::{Analysis, Frame, ProcessAnalysis, SiteMetrics};

/// Two profiles compared: one entry per pair of images.
#[derive(Debug, Clone)]
pub struct Diff {
    pub base_path: String,
    pub new_path: String,
    pub images: Vec<ImageDiff>,
    /// Images of BASE and of NEW that no image of the other profile matched.
    pub unmatched_base: Vec<ImageName>,
    pub unmatched_new: Vec<ImageName>,
}

/// A process image, as the diff names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    pub pid: u32,
    pub exe: String,
}

/// Two images compared.
#[derive(Debug, Clone)]
pub struct ImageDiff {
    pub base: ImageName,
    pub new: ImageName,
    pub base_totals: Totals,
    pub new_totals: Totals,
    /// Every site of either side, by the absolute change of the chosen metric (largest
    /// first), then the other changes, then by source chain; unchanged sites last.
    pub sites: Vec<SiteDiff>,
}

/// An image's heap as a whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Highest sum of live requested bytes.
    pub peak_bytes: u64,
    /// Live when the image ended.
    pub leaked_bytes: u64,
    pub bytes_allocated: u64,
    pub allocations: u64,
}

/// One source chain and its numbers on each side (None: the side has no such site).
#[derive(Debug, Clone)]
pub struct SiteDiff {
    /// Innermost first; NEW's frames when it has the site, else BASE's.
    pub stack: Vec<Frame>,
    pub base: Option<SiteMetrics>,
    pub new: Option<SiteMetrics>,
}

/// How a site of the diff compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteStatus {
    /// Only in NEW.
    New,
    /// Only in BASE.
    Gone,
    Changed,
    Unchanged,
}

/// Neither profile has an image the other's matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NothingMatches {
    pub base: Vec<ImageName>,
    pub new: Vec<ImageName>,
}

impl SiteStatus {
    pub fn name(self) -> &'static str {
        match self {
            SiteStatus::New => "new",
            SiteStatus::Gone => "gone",
            SiteStatus::Changed => "changed",
            SiteStatus::Unchanged => "unchanged",
        }
    }
}

impl Totals {
    pub fn of(image: &ProcessAnalysis) -> Totals {
        Totals {
            peak_bytes: image.peak_live_bytes,
            leaked_bytes: image.live_bytes_at_exit,
            bytes_allocated: image.bytes_allocated,
            allocations: image.allocations,
        }
    }
}

impl SiteDiff {
    pub fn status(&self) -> SiteStatus {
        match (&self.base, &self.new) {
            (None, _) => SiteStatus::New,
            (_, None) => SiteStatus::Gone,
            (Some(base), Some(new)) if compared(base) == compared(new) => SiteStatus::Unchanged,
            _ => SiteStatus::Changed,
        }
    }

    /// NEW's value minus BASE's of what `value` reads (0 for a side without the site).
    pub fn change(&self, value: impl Fn(&SiteMetrics) -> u64) -> i64 {
        let side = |metrics: &Option<SiteMetrics>| metrics.as_ref().map_or(0, &value);
        change(side(&self.base), side(&self.new))
    }
}

/// `new - old`, signed.
pub fn change(old: u64, new: u64) -> i64 {
    (i128::from(new) - i128::from(old)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// The numbers a diff shows of a site: two sites with equal ones are unchanged.
fn compared(metrics: &SiteMetrics) -> [u64; 5] {
    [
        metrics.peak_bytes,
        metrics.leaked_bytes,
        metrics.bytes_allocated,
        metrics.allocations,
        metrics.temporary_bytes,
    ]
}

/// Compares `base` with `new`, sites ordered by the change of `value`.
pub fn diff(
    base: &Analysis,
    new: &Analysis,
    value: impl Fn(&SiteMetrics) -> u64,
) -> Result<Diff, NothingMatches> {
    let pairs = pair_images(&base.processes, &new.processes);
    if pairs.is_empty() {
        return Err(NothingMatches {
            base: base.processes.iter().map(ImageName::of).collect(),
            new: new.processes.iter().map(ImageName::of).collect(),
        });
    }
    let unmatched = |images: &[ProcessAnalysis], paired: &dyn Fn(usize) -> bool| {
        (0..images.len())
            .filter(|&index| !paired(index))
            .map(|index| ImageName::of(&images[index]))
            .collect()
    };
    Ok(Diff {
        base_path: base.profile.path.clone(),
        new_path: new.profile.path.clone(),
        images: pairs
            .iter()
            .map(|&(old, current)| {
                image_diff(&base.processes[old], &new.processes[current], &value)
            })
            .collect(),
        unmatched_base: unmatched(&base.processes, &|index| {
            pairs.iter().any(|&(old, _)| old == index)
        }),
        unmatched_new: unmatched(&new.processes, &|index| {
            pairs.iter().any(|&(_, current)| current == index)
        }),
    })
}

impl ImageName {
    pub fn of(image: &ProcessAnalysis) -> ImageName {
        ImageName {
            pid: image.pid,
            exe: image.exe.clone(),
        }
    }

    /// The executable's file name.
    pub fn program(&self) -> &str {
        program(&self.exe)
    }
}

fn program(exe: &str) -> &str {
    crate::platform::libraries::file_name(exe)
}

/// (index in `base`, index in `new`) of the images compared: the only image of each, or
/// images of one executable file name, in their order of start.
pub fn pair_images(base: &[ProcessAnalysis], new: &[ProcessAnalysis]) -> Vec<(usize, usize)> {
    if base.len() == 1 && new.len() == 1 {
        return vec![(0, 0)];
    }
    let mut taken = vec![false; base.len()];
    let mut pairs = Vec::new();
    for (current, image) in new.iter().enumerate() {
        let partner = (0..base.len())
            .find(|&old| !taken[old] && program(&base[old].exe) == program(&image.exe));
        if let Some(old) = partner {
            taken[old] = true;
            pairs.push((old, current));
        }
    }
    pairs
}

fn image_diff(
    base: &ProcessAnalysis,
    new: &ProcessAnalysis,
    value: &impl Fn(&SiteMetrics) -> u64,
) -> ImageDiff {
    let mut index: HashMap<Vec<SourceLocation>, usize> = HashMap::new();
    let mut sites: Vec<SiteDiff> = Vec::new();
    for site in &base.source_sites {
        index.insert(source_chain(&site.stack), sites.len());
        sites.push(SiteDiff {
            stack: site.stack.clone(),
            base: Some(site.metrics),
            new: None,
        });
    }
    for site in &new.source_sites {
        match index.get(&source_chain(&site.stack)) {
            Some(&matched) => {
                sites[matched].stack = site.stack.clone();
                sites[matched].new = Some(site.metrics);
            }
            None => sites.push(SiteDiff {
                stack: site.stack.clone(),
                base: None,
                new: Some(site.metrics),
            }),
        }
    }
    sort_sites(&mut sites, value);
    ImageDiff {
        base: ImageName::of(base),
        new: ImageName::of(new),
        base_totals: Totals::of(base),
        new_totals: Totals::of(new),
        sites,
    }
}

/// Changed, new and gone sites by the absolute change of `value`, then of the other numbers;
/// unchanged ones after them, by `value`; ties by stack.
fn sort_sites(sites: &mut [SiteDiff], value: &impl Fn(&SiteMetrics) -> u64) {
    sites.sort_by_cached_key(|site| {
        let unchanged = site.status() == SiteStatus::Unchanged;
        let others: Vec<u64> = OTHER_NUMBERS
            .iter()
            .map(|number| site.change(number).unsigned_abs())
            .collect();
        let size = site.new.as_ref().or(site.base.as_ref()).map_or(0, value);
        (
            unchanged,
            Reverse(site.change(value).unsigned_abs()),
            Reverse(others),
            Reverse(size),
            site.stack.clone(),
        )
    });
}

/// What breaks ties of the chosen metric's change.
const OTHER_NUMBERS: [fn(&SiteMetrics) -> u64; 4] = [
    |metrics| metrics.peak_bytes,
    |metrics| metrics.leaked_bytes,
    |metrics| metrics.bytes_allocated,
    |metrics| metrics.allocations,
];

#[cfg(test)]
mod tests;
