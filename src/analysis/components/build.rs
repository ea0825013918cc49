//! Works out an ended image's `Components` from what the replay kept of it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::arena::{split, Residency};
use super::arena_free::ArenaFree;
use super::attribution::{holder, Holder, ImageFacts};
use super::classify::{is_libc_file, Classifier, MPI, UNKNOWN};
use super::fragmentation::FragmentationWatch;
use super::loaded_by_mpi::{mpi_modules, read_dynamic, ModuleFacts};
use super::replay::Sample;
use super::resolve::{Images, Resolver};
use super::timeline::{sampled, Buckets, PointSeries, StepSeries};
use super::tracker::{ImageTracker, PendingSnapshot};
use super::{
    near, Component, Components, HighAtSnapshot, PeakSplit, ProcessTimeline, ResidentPoint,
    SnapshotSummary, OVERHEAD,
};
use crate::analysis::local_peak::{GroupStep, LiveChanges};
use crate::analysis::sites::ImageStacks;
use crate::analysis::{ProcessAnalysis, Settings};
use crate::trace::format::{StartCause, MAPPING_EXECUTE};
use crate::trace::stacks::StackId;

/// What the replay hands over when an image ends.
#[derive(Debug, Default)]
pub(in crate::analysis) struct ClosedImage {
    pub tracker: ImageTracker,
    pub samples: ImageSamples,
}

/// The residency samples taken during one image, as far as its components need them.
#[derive(Debug, Clone, Default)]
pub(in crate::analysis) struct ImageSamples {
    /// VmRSS and VmSwap of the status samples.
    rss: PointSeries,
    swap: PointSeries,
    /// Pss of the rollup samples.
    pss: PointSeries,
    fragmentation: FragmentationWatch,
}

impl ImageSamples {
    /// Adds a sample taken when the image's live requested bytes were `requested`.
    pub fn add(&mut self, sample: Sample, requested: u64) {
        match sample {
            Sample::Status { time_ns, rss, swap } => {
                self.rss.add(time_ns, rss);
                self.swap.add(time_ns, swap);
                self.fragmentation.sample(time_ns, rss, requested);
            }
            Sample::Rollup { time_ns, pss, .. } => self.pss.add(time_ns, pss),
        }
    }
}

/// Fills `image.components` and adds a fragmentation warning when there is one.
pub(in crate::analysis) fn build(
    image: &mut ProcessAnalysis,
    stacks: &ImageStacks,
    closed: ClosedImage,
    settings: &Settings,
    images: &Images,
) {
    let tracker = &closed.tracker;
    let mut paths: BTreeSet<&str> = tracker.modules.iter().map(String::as_str).collect();
    for snapshot in &tracker.snapshots {
        paths.extend(
            snapshot
                .mappings
                .iter()
                .map(|mapping| mapping.path.as_str()),
        );
    }
    let classifier = Classifier::new(&settings.components, &image.exe, paths);
    let loaded_by_mpi = {
        let probe = Resolver::new(stacks, &settings.skip, classifier.clone()).with_images(images);
        brought_in_by_mpi(tracker, probe)
    };
    let classifier = classifier.with_loaded_by_mpi(loaded_by_mpi);
    let mut resolver = Resolver::new(stacks, &settings.skip, classifier).with_images(images);
    let buckets = Buckets::new(image.start_ns, image.start_ns + image.duration_ns);

    let requested = Requested::replay(&stacks.heap.changes, buckets, &mut resolver);
    // Blocks allocated before an attach were never seen: the arena pages they hold cannot be
    // told from the allocator's own, so what no known block accounts for is `unknown`.
    let remainder = if image.cause == StartCause::Attach {
        UNKNOWN
    } else {
        OVERHEAD
    };
    let snapshots: Vec<Attributed> = tracker
        .snapshots
        .iter()
        .map(|snapshot| attribute(snapshot, tracker, remainder, &mut resolver))
        .collect();

    let mut components: BTreeMap<String, Component> = BTreeMap::new();
    for (name, series) in requested.components {
        let component = entry(&mut components, &name);
        component.peak_requested_bytes = series.peak;
        component.requested = series.points();
    }
    let resident_names: BTreeSet<&String> = snapshots.iter().flat_map(|s| s.held.keys()).collect();
    for name in resident_names {
        let component = entry(&mut components, name);
        for snapshot in &snapshots {
            let held = snapshot.held.get(name).copied().unwrap_or_default();
            component.resident.push(ResidentPoint {
                time_ns: snapshot.summary.time_ns,
                rss: held.rss,
                pss: held.pss,
                swap: held.swap,
            });
            component.peak_rss_bytes = component.peak_rss_bytes.max(held.rss);
            component.peak_pss_bytes = component.peak_pss_bytes.max(held.pss);
            component.peak_swap_bytes = component.peak_swap_bytes.max(held.swap);
        }
    }
    let mut components: Vec<Component> = components.into_values().filter(holds_anything).collect();
    sort_components(&mut components);

    let samples = &closed.samples;
    let overhead_after = |time_ns: u64| {
        let after = snapshots.iter().find(|s| s.summary.time_ns >= time_ns)?;
        Some(after.held.get(OVERHEAD).map_or(0, |held| held.rss))
    };
    if let Some(warning) = samples
        .fragmentation
        .warning(image.start_ns, overhead_after)
    {
        image.warnings.push(warning);
    }
    // Blocks from before an attach or a fork are not known: what lies between the known
    // ones is not free. The snapshot where the arenas held the most no block accounts for
    // says why; not an estimate, whose arenas may be as an earlier snapshot had them.
    if image.every_block_seen {
        image.arena_free = (tracker.snapshots.iter().zip(&snapshots))
            .filter(|(pending, _)| pending.reason.sampled_mappings().is_none())
            .filter(|(_, attributed)| !attributed.free.is_empty())
            .max_by_key(|(pending, _)| (pending.free_score, std::cmp::Reverse(pending.time_ns)))
            .map(|(_, attributed)| attributed.free.clone());
    }
    let snapshots: Vec<SnapshotSummary> = snapshots.into_iter().map(|s| s.summary).collect();
    image.components = Components {
        components,
        peak_split: peak_split(&snapshots, samples.rss.points()),
        snapshots,
        timeline: ProcessTimeline {
            requested: requested.total,
            rss: sampled(buckets, samples.rss.points()),
            pss: sampled(buckets, samples.pss.points()),
            swap: sampled(buckets, samples.swap.points()),
        },
    };
}

/// Whether a component held anything at some point.
pub(super) fn holds_anything(component: &Component) -> bool {
    let peaks = [
        component.peak_requested_bytes,
        component.peak_rss_bytes,
        component.peak_pss_bytes,
        component.peak_swap_bytes,
    ];
    peaks.iter().any(|&peak| peak > 0)
}

/// By peak RSS, then peak requested bytes (highest first), then name.
pub(super) fn sort_components(components: &mut [Component]) {
    components.sort_by(|a, b| {
        (b.peak_rss_bytes, b.peak_requested_bytes)
            .cmp(&(a.peak_rss_bytes, a.peak_requested_bytes))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The modules of the image that MPI brought in (`loaded_by_mpi`): the roots are MPI by
/// name or were mapped by a call from MPI code (a dlopen of MPI's).
fn brought_in_by_mpi(tracker: &ImageTracker, mut resolver: Resolver) -> BTreeSet<String> {
    let mut paths: BTreeSet<&str> = tracker.modules.iter().map(String::as_str).collect();
    for snapshot in &tracker.snapshots {
        paths.extend(
            snapshot
                .mappings
                .iter()
                .filter(|mapping| mapping.flags & MAPPING_EXECUTE != 0)
                .map(|mapping| mapping.path.as_str())
                .filter(|path| path.starts_with('/')),
        );
    }
    // A module's record may come before its mapping call's: the snapshots' mappings name
    // their creators too.
    let mut by_mpi: BTreeSet<&str> = BTreeSet::new();
    let module_mappings = tracker.snapshots.iter().flat_map(|s| &s.mappings);
    let creators = (tracker.module_creators.iter())
        .map(|(path, &creator)| (path.as_str(), Some(creator)))
        .chain(module_mappings.map(|mapping| (mapping.path.as_str(), mapping.creator)));
    for (path, creator) in creators {
        let Some(creator) = creator else { continue };
        if paths.contains(path)
            && !by_mpi.contains(path)
            && resolver.creator_component(creator) == MPI
        {
            by_mpi.insert(path);
        }
    }
    let modules: Vec<ModuleFacts> = paths
        .into_iter()
        .map(|path| {
            let mapped_by_mpi = by_mpi.contains(path);
            ModuleFacts {
                path,
                root: resolver.classifier.is_mpi_module(path) || mapped_by_mpi,
                runtime: is_libc_file(path),
            }
        })
        .collect();
    mpi_modules(&modules, resolver.classifier.exe(), read_dynamic)
}

fn entry<'m>(components: &'m mut BTreeMap<String, Component>, name: &str) -> &'m mut Component {
    components
        .entry(name.to_string())
        .or_insert_with(|| Component {
            name: name.to_string(),
            ..Component::default()
        })
}

/// Live requested bytes over time, per component and for the whole image.
struct Requested {
    components: Vec<(String, StepSeries)>,
    /// The image's downsampled total (empty without heap events).
    total: Vec<super::TimePoint>,
}

impl Requested {
    fn replay(changes: &LiveChanges, buckets: Buckets, resolver: &mut Resolver) -> Requested {
        let mut names: Vec<String> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut by_stack: HashMap<StackId, usize> = HashMap::new();
        let mut series: Vec<StepSeries> = Vec::new();
        let component_of = |stack: StackId| {
            *by_stack.entry(stack).or_insert_with(|| {
                let name = resolver.heap_component(stack).to_string();
                *by_name.entry(name.clone()).or_insert_with(|| {
                    names.push(name);
                    names.len() - 1
                })
            })
        };
        changes.replay_groups(component_of, |component, step| {
            if series.len() <= component {
                series.resize(component + 1, StepSeries::new(buckets));
            }
            follow(&mut series[component], step);
        });
        let mut total = StepSeries::new(buckets);
        let mut changed = false;
        changes.replay_groups(
            |_| 0,
            |_, step| {
                changed = true;
                follow(&mut total, step);
            },
        );
        Requested {
            components: names.into_iter().zip(series).collect(),
            total: if changed { total.points() } else { Vec::new() },
        }
    }
}

/// Moves `series` through one stretch: a high inside it counts at its start.
fn follow(series: &mut StepSeries, step: GroupStep) {
    if step.high > step.before.max(step.after) {
        series.set(step.start_ns, step.high);
    }
    series.set(step.end_ns, step.after);
}

/// One snapshot, attributed.
struct Attributed {
    summary: SnapshotSummary,
    held: BTreeMap<String, Residency>,
    free: ArenaFree,
}

fn attribute(
    snapshot: &PendingSnapshot,
    tracker: &ImageTracker,
    remainder: &str,
    resolver: &mut Resolver,
) -> Attributed {
    let executable_files: BTreeSet<&str> = snapshot
        .mappings
        .iter()
        .filter(|mapping| mapping.flags & MAPPING_EXECUTE != 0)
        .map(|mapping| mapping.path.as_str())
        .collect();
    let facts = ImageFacts {
        scratch_pages: &tracker.scratch_pages,
        modules: &tracker.modules,
        executable_files: &executable_files,
    };
    let mut summary = SnapshotSummary {
        time_ns: snapshot.time_ns,
        reason: snapshot.reason,
        cost_ns: snapshot.cost_ns,
        mappings: snapshot.mappings.len() as u64,
        rss: 0,
        pss: 0,
        swap: 0,
        arena_rss: 0,
        arena_requested: 0,
        arena_overhead_rss: 0,
        requested: snapshot.requested,
        high: None,
        pagemap_mappings: snapshot.reason.sampled_mappings().map(u64::from),
    };
    let mut held: BTreeMap<String, Residency> = BTreeMap::new();
    let mut add = |name: &str, residency: Residency| {
        held.entry(name.to_string()).or_default().add(residency);
    };
    let mut free = ArenaFree {
        time_ns: snapshot.time_ns,
        ..ArenaFree::default()
    };
    for mapping in &snapshot.mappings {
        let residency = Residency {
            rss: mapping.rss,
            pss: mapping.pss,
            swap: mapping.swap,
        };
        summary.rss += mapping.rss;
        summary.pss += mapping.pss;
        summary.swap += mapping.swap;
        match holder(mapping, &facts, resolver) {
            Holder::Component(name) => add(&name, residency),
            Holder::Arena => {
                // Live bytes by component, in name order so that ties split the same way.
                let mut live: BTreeMap<String, u64> = BTreeMap::new();
                for &(stack, bytes) in &mapping.live {
                    *live
                        .entry(resolver.heap_component(stack).to_string())
                        .or_default() += bytes;
                }
                let weights: Vec<u64> = live.values().copied().collect();
                let arena = split(residency, &weights);
                for (name, share) in live.keys().zip(arena.shares) {
                    add(name, share);
                }
                add(remainder, arena.overhead);
                summary.arena_rss += mapping.rss;
                summary.arena_requested += arena.requested;
                summary.arena_overhead_rss += arena.overhead.rss;
                free.add(mapping, arena.overhead.rss);
            }
        }
    }
    summary.high = high_at(&summary);
    Attributed {
        summary,
        held,
        free,
    }
}

/// The high a snapshot was taken for, and whether the snapshot still shows it.
fn high_at(summary: &SnapshotSummary) -> Option<HighAtSnapshot> {
    let (bytes, delay_ns) = summary.reason.high()?;
    let (kind, held) = match summary.reason.high_is_requested()? {
        true => ("requested", summary.requested >= bytes),
        false => ("rss", near(summary.rss, bytes)),
    };
    Some(HighAtSnapshot {
        kind,
        bytes,
        delay_ns,
        held,
    })
}

/// The snapshot with the highest RSS against the highest VmRSS sampled.
fn peak_split(snapshots: &[SnapshotSummary], rss: &[(u64, u64)]) -> Option<PeakSplit> {
    let highest = snapshots.iter().max_by_key(|snapshot| snapshot.rss)?;
    let peak_rss = rss.iter().map(|&(_, bytes)| bytes).max().unwrap_or(0);
    Some(PeakSplit {
        peak_rss,
        snapshot_time_ns: highest.time_ns,
        snapshot_rss: highest.rss,
        measured: near(highest.rss, peak_rss),
        estimated: highest.pagemap_mappings.is_some(),
    })
}
