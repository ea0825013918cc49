//! The JSON report (schema `memsup-report`, version 2), as specified in docs/report-json.md.
//!
//! The output is built from borrowed view structs whose field order is the documented key
//! order; the analysis types stay free of serialisation concerns.

use std::io::Write;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::choose::overview::{self, OverviewRow};
use super::job::json::JobJson;
use super::json_arena_free::ArenaFreeJson;
use super::json_census::CensusJson;
use super::json_components::{ComponentJson, PeakSplitJson, SnapshotJson, TimelineJson};
use super::json_mpi::MpiRoleJson;
use super::json_sites::{MappingSiteJson, SiteJson};
use super::json_threads::ThreadsJson;
use super::node_totals::{node_totals, NodeTotals};
use crate::analysis::job::Job;
use crate::analysis::live_end::LiveEnd;
use crate::analysis::mmap_threshold::MmapThresholdRise;
use crate::analysis::mpi_calls::MpiFunctionStats;
use crate::analysis::roles::rank_of;
use crate::analysis::size_histogram::SizeClass;
use crate::analysis::suppress::Suppressed;
use crate::analysis::unknown_frees::UnknownFrees;
use crate::analysis::{
    cause_name, mode_name, Analysis, MappingStats, ProcessAnalysis, ProfileInfo, ResidencySummary,
    MAP_CALLS,
};
use crate::trace::format::{
    AllocFunction, HookCallCosts, HookCounters, HookStackCosts, ProbeCounters, ProbeSite,
    RecorderCosts, SamplerCosts, UnwindCosts,
};

pub const SCHEMA: &str = "memsup-report";
/// 2: call sites are whole stacks (`sites`, `mapping_sites`) instead of return addresses
/// (`top_sites`); `unwind_costs`.
pub const SCHEMA_VERSION: u32 = 3;

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let report = ReportJson {
        schema: SCHEMA,
        schema_version: SCHEMA_VERSION,
        overview: overview::rows(std::slice::from_ref(analysis)),
        job: None,
        profile: ProfileReportJson::new(analysis),
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}

/// The report of a job: one profile keeps its keys with `job` added; several go into
/// `profiles`, each with the keys of a one-profile report but the schema's.
pub fn render_job(analyses: &[Analysis], job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    let job = JobJson::new(job);
    match analyses {
        [analysis] => serde_json::to_writer_pretty(
            &mut *out,
            &ReportJson {
                schema: SCHEMA,
                schema_version: SCHEMA_VERSION,
                overview: overview::rows(analyses),
                job: Some(job),
                profile: ProfileReportJson::new(analysis),
            },
        )?,
        _ => serde_json::to_writer_pretty(
            &mut *out,
            &JobReportJson {
                schema: SCHEMA,
                schema_version: SCHEMA_VERSION,
                overview: overview::rows(analyses),
                job,
                profiles: analyses.iter().map(ProfileReportJson::new).collect(),
            },
        )?,
    }
    writeln!(out)
}

#[derive(serde::Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    schema_version: u32,
    /// Every image, by peak requested bytes (`choose::overview`).
    overview: Vec<OverviewRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<JobJson<'a>>,
    #[serde(flatten)]
    profile: ProfileReportJson<'a>,
}

#[derive(serde::Serialize)]
struct JobReportJson<'a> {
    schema: &'static str,
    schema_version: u32,
    overview: Vec<OverviewRow>,
    job: JobJson<'a>,
    profiles: Vec<ProfileReportJson<'a>>,
}

/// What one profile's report holds.
#[derive(serde::Serialize)]
struct ProfileReportJson<'a> {
    profile: ProfileJson<'a>,
    /// Field order of `UnwindCosts` is the documented key order; null when absent.
    unwind_costs: Option<&'a UnwindCosts>,
    /// Field order of `SamplerCosts`; null when absent.
    sampler_costs: Option<&'a SamplerCosts>,
    /// What memsup itself used (`RecorderCosts`); null when absent.
    recorder: Option<&'a RecorderCosts>,
    processes: Vec<ProcessJson<'a>>,
    /// The sums over the ranks of the profile; null for fewer than two ranks.
    node_totals: Option<NodeTotals>,
}

impl<'a> ProfileReportJson<'a> {
    fn new(analysis: &'a Analysis) -> Self {
        ProfileReportJson {
            profile: ProfileJson::new(&analysis.profile),
            unwind_costs: analysis.profile.unwind_costs.as_ref(),
            sampler_costs: analysis.profile.sampler_costs.as_ref(),
            recorder: analysis.profile.recorder_costs.as_ref(),
            processes: analysis.processes.iter().map(ProcessJson::new).collect(),
            node_totals: node_totals(&analysis.processes),
        }
    }
}

#[derive(serde::Serialize)]
struct ProfileJson<'a> {
    path: &'a str,
    truncated: bool,
    damage: &'a [String],
    mode: &'static str,
    target: &'a [String],
    memsup_version: &'a str,
    host: &'a str,
}

impl<'a> ProfileJson<'a> {
    fn new(profile: &'a ProfileInfo) -> Self {
        ProfileJson {
            path: &profile.path,
            truncated: profile.truncated,
            damage: &profile.damage,
            mode: mode_name(profile.mode),
            target: &profile.target,
            memsup_version: &profile.memsup_version,
            host: &profile.host,
        }
    }
}

#[derive(serde::Serialize)]
struct ProcessJson<'a> {
    pid: u32,
    parent_pid: Option<u32>,
    cause: &'static str,
    exe: &'a str,
    argv: &'a [String],
    /// Its rank in MPI_COMM_WORLD; null when it is no rank.
    rank: Option<u32>,
    /// Its part in an MPI job; null when it has none.
    mpi: Option<MpiRoleJson<'a>>,
    /// Its MPI functions (`analysis::mpi_calls`); empty when it made no MPI call.
    mpi_calls: &'a [MpiFunctionStats],
    exit: ExitJson,
    start_ns: u64,
    duration_ns: u64,
    calls: NamedCounts,
    allocations: u64,
    bytes_allocated: u64,
    frees: u64,
    null_frees: u64,
    unknown_frees: u64,
    /// Where the unknown frees come from (`analysis::unknown_frees`).
    unknown_free_sources: UnknownFrees,
    failed_allocations: u64,
    peak_live_bytes: u64,
    peak_live_blocks: u64,
    peak_time_ns: u64,
    live_bytes_at_exit: u64,
    live_blocks_at_exit: u64,
    /// When the two above were counted (`analysis::live_end`): leaks only at "exit".
    live_at: &'static str,
    /// What leak suppressions took out of the two `live_*_at_exit` above.
    suppressed: Suppressed,
    largest_allocation: u64,
    /// Allocations by power-of-two size class (`analysis::size_histogram`).
    size_histogram: Vec<SizeClass>,
    mappings: MappingsJson,
    /// Field order of `ProbeCounters` is the documented key order.
    probes: &'a ProbeCounters,
    /// `hooks` or `int3`: what recorded the allocator calls.
    engine: &'static str,
    probe_sites: &'a [ProbeSite],
    hooks: &'a HookCounters,
    /// What the hooks' stack walks cost; null unless the hooks walked stacks.
    hook_stacks: Option<&'a HookStackCosts>,
    /// What the hooks' calls cost; null unless the hooks recorded.
    hook_calls: Option<&'a HookCallCosts>,
    residency: ResidencyJson,
    /// glibc's mmap threshold rose and served later blocks from the arena; null otherwise.
    mmap_threshold: Option<MmapThresholdJson>,
    arena_free: Option<ArenaFreeJson>,
    components: Vec<ComponentJson<'a>>,
    snapshots: Vec<SnapshotJson>,
    peak_split: Option<PeakSplitJson>,
    timeline: TimelineJson,
    sites: Vec<SiteJson<'a>>,
    mapping_sites: Vec<MappingSiteJson<'a>>,
    warnings: &'a [String],
    /// A snapshot's threads by stack; null for recordings.
    threads: Option<ThreadsJson<'a>>,
    /// A snapshot's glibc heap census; null for recordings.
    heap_census: Option<CensusJson<'a>>,
}

#[derive(serde::Serialize)]
struct MmapThresholdJson {
    threshold_bytes: u64,
    trim_threshold_bytes: u64,
    time_ns: u64,
    rises: u64,
    blocks_from_arena: u64,
    bytes_from_arena: u64,
}

impl MmapThresholdJson {
    fn new(rise: MmapThresholdRise) -> Self {
        MmapThresholdJson {
            threshold_bytes: rise.threshold_bytes,
            trim_threshold_bytes: rise.trim_threshold_bytes(),
            time_ns: rise.time_ns,
            rises: rise.rises,
            blocks_from_arena: rise.blocks_from_arena,
            bytes_from_arena: rise.bytes_from_arena,
        }
    }
}

impl<'a> ProcessJson<'a> {
    fn new(image: &'a ProcessAnalysis) -> Self {
        ProcessJson {
            pid: image.pid,
            parent_pid: image.parent_pid,
            cause: cause_name(image.cause),
            exe: &image.exe,
            argv: &image.argv,
            rank: rank_of(image.role.as_ref()),
            mpi: image.role.as_ref().map(MpiRoleJson::new),
            mpi_calls: &image.mpi_calls,
            exit: ExitJson {
                kind: image.exit.kind(),
                value: image.exit.value(),
            },
            start_ns: image.start_ns,
            duration_ns: image.duration_ns,
            calls: NamedCounts(
                AllocFunction::ALL
                    .iter()
                    .map(|&function| (function.name(), image.call_count(function)))
                    .collect(),
            ),
            allocations: image.allocations,
            bytes_allocated: image.bytes_allocated,
            frees: image.frees,
            null_frees: image.null_frees,
            unknown_frees: image.unknown_frees,
            unknown_free_sources: image.unknown_free_sources,
            failed_allocations: image.failed_allocations,
            peak_live_bytes: image.peak_live_bytes,
            peak_live_blocks: image.peak_live_blocks,
            peak_time_ns: image.peak_time_ns,
            live_bytes_at_exit: image.live_bytes_at_exit,
            live_blocks_at_exit: image.live_blocks_at_exit,
            live_at: LiveEnd::of(image).name(),
            suppressed: image.suppressed,
            largest_allocation: image.largest_allocation,
            size_histogram: image.size_histogram.classes(),
            mappings: MappingsJson::new(&image.mappings),
            engine: image.engine.name(),
            probe_sites: &image.probe_sites,
            hooks: &image.hooks,
            hook_stacks: image.hook_stacks.as_ref(),
            hook_calls: image.hook_calls.as_ref(),
            probes: &image.probes,
            residency: ResidencyJson::new(&image.residency),
            mmap_threshold: image.mmap_threshold.map(MmapThresholdJson::new),
            arena_free: image.arena_free.as_ref().map(ArenaFreeJson::new),
            components: ComponentJson::list(&image.components),
            snapshots: image
                .components
                .snapshots
                .iter()
                .map(SnapshotJson::new)
                .collect(),
            peak_split: image.components.peak_split.map(PeakSplitJson::new),
            timeline: TimelineJson::new(&image.components.timeline),
            sites: image.sites.iter().map(SiteJson::new).collect(),
            mapping_sites: image
                .mapping_sites
                .iter()
                .map(MappingSiteJson::new)
                .collect(),
            warnings: &image.warnings,
            threads: image.snapshot.as_ref().map(ThreadsJson::new),
            heap_census: image
                .snapshot
                .as_ref()
                .and_then(|snapshot| snapshot.heap_census.as_ref())
                .or(image.census_at_attach.as_ref())
                .map(CensusJson::new),
        }
    }
}

/// The sampled residency of an image (zeros when nothing was sampled).
#[derive(serde::Serialize)]
struct ResidencyJson {
    status_samples: u64,
    rollup_samples: u64,
    peak_rss_bytes: u64,
    peak_pss_bytes: u64,
    peak_swap_bytes: u64,
}

impl ResidencyJson {
    fn new(summary: &ResidencySummary) -> Self {
        ResidencyJson {
            status_samples: summary.status_samples,
            rollup_samples: summary.rollup_samples,
            peak_rss_bytes: summary.peak_rss_bytes,
            peak_pss_bytes: summary.peak_pss_bytes,
            peak_swap_bytes: summary.peak_swap_bytes,
        }
    }
}

#[derive(serde::Serialize)]
struct ExitJson {
    kind: &'static str,
    /// Only for "code" and "signal".
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<i32>,
}

/// A JSON object of counters whose keys keep the given order.
pub(super) struct NamedCounts(Vec<(&'static str, u64)>);

impl Serialize for NamedCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, count) in &self.0 {
            map.serialize_entry(name, count)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
pub(super) struct MappingsJson {
    calls: NamedCounts,
    mmap_bytes: u64,
    munmap_bytes: u64,
    brk_growth_bytes: u64,
}

impl MappingsJson {
    pub(super) fn new(mappings: &MappingStats) -> Self {
        let count = |call| mappings.calls.get(&call).copied().unwrap_or(0);
        MappingsJson {
            calls: NamedCounts(
                MAP_CALLS
                    .iter()
                    .map(|&call| (call.name(), count(call)))
                    .collect(),
            ),
            mmap_bytes: mappings.mmap_bytes,
            munmap_bytes: mappings.munmap_bytes,
            brk_growth_bytes: mappings.brk_growth_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::analysis::site_tests::sites_profile;
    use crate::analysis::tests::{heap_profile, CALLER_A};
    use crate::trace::format::Record;
    use serde_json::Value;
    use std::path::Path;

    fn rendered() -> String {
        let analysis = analyze(&heap_profile(), Path::new("run.msup"));
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The keys of a JSON object in the order they appear in `text`.
    fn key_order(text: &str, keys: &[&str]) -> Vec<usize> {
        keys.iter()
            .map(|key| text.find(&format!("\"{key}\":")).expect(key))
            .collect()
    }

    fn assert_ascending(positions: &[usize]) {
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{positions:?}"
        );
    }

    #[test]
    fn profile_and_process_fields_parse_back() {
        let text = rendered();
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["schema"], "memsup-report");
        assert_eq!(json["schema_version"], 3);
        assert_eq!(
            json["unwind_costs"],
            Value::Null,
            "the scripted profile has none"
        );
        assert_eq!(json["sampler_costs"], Value::Null);
        let profile = &json["profile"];
        assert_eq!(profile["path"], "run.msup");
        assert_eq!(profile["truncated"], false);
        assert_eq!(profile["mode"], "run");
        assert_eq!(profile["target"], serde_json::json!(["./app", "x"]));
        assert_eq!(profile["memsup_version"], "0.1.0");
        assert_eq!(profile["host"], "node17");
        let process = &json["processes"][0];
        assert_eq!(process["pid"], 100);
        assert_eq!(process["parent_pid"], Value::Null);
        assert_eq!(process["cause"], "launch");
        assert_eq!(process["exe"], "/bin/app");
        assert_eq!(
            process["exit"],
            serde_json::json!({"kind": "code", "value": 3})
        );
        assert_eq!(process["start_ns"], 1000);
        assert_eq!(process["duration_ns"], 4000);
        assert_eq!(process["calls"]["malloc"], 4);
        assert_eq!(process["calls"]["pvalloc"], 0);
        assert_eq!(process["bytes_allocated"], 1200);
        assert_eq!(process["peak_live_bytes"], 550);
        assert_eq!(process["peak_time_ns"], 1300);
        assert_eq!(process["live_blocks_at_exit"], 2);
        assert_eq!(process["mappings"]["calls"]["brk"], 0);
        assert_eq!(process["probes"]["stop_the_world"], 1);
        assert_eq!(process["warnings"].as_array().unwrap().len(), 1);
        let site = &process["sites"][0];
        assert_eq!(
            site["stack"],
            serde_json::json!([{
                "function": "main", "file": null, "line": null, "module": "/bin/app",
                "address": CALLER_A, "inlined": false
            }])
        );
        assert_eq!(site["peak_bytes"], 300);
        assert_eq!(site["bytes_allocated"], 400);
        assert_eq!(process["sites"][1]["min_lifetime_ns"], Value::Null);
        assert_eq!(process["sites"].as_array().unwrap().len(), 3);
        assert_eq!(process["mapping_sites"], serde_json::json!([]));
    }

    #[test]
    fn sites_carry_every_metric_and_their_stack() {
        let mut profile = sites_profile();
        let costs = UnwindCosts {
            stacks: 17,
            frames: 80,
            truncated: 1,
            copied_bytes: 4096,
            unwind_ns: 5000,
            symbolize_ns: 7000,
            addresses: 11,
        };
        profile
            .records
            .insert(profile.records.len() - 1, Record::UnwindCosts(costs));
        let analysis = analyze(&profile, Path::new("sites.msup"));
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            json["unwind_costs"],
            serde_json::json!({
                "stacks": 17, "frames": 80, "truncated": 1, "copied_bytes": 4096,
                "unwind_ns": 5000, "symbolize_ns": 7000, "addresses": 11
            })
        );
        let process = &json["processes"][0];
        let main = &process["sites"][1];
        assert_eq!(
            main,
            &serde_json::json!({
                "stack": [{
                    "function": "main", "file": "app.cpp", "line": 52, "module": "/bin/app",
                    "address": 0x1020, "inlined": false
                }],
                "allocations": 3, "bytes_allocated": 430,
                "min_size": 50, "average_size": 143, "max_size": 300,
                "freed_blocks": 2,
                "min_lifetime_ns": 100, "average_lifetime_ns": 300, "max_lifetime_ns": 500,
                "peak_bytes": 350, "peak_blocks": 2, "local_peak_bytes": 380,
                "recycling_ratio": 430.0 / 380.0,
                "temporary_allocations": 1, "temporary_bytes": 80,
                "leaked_bytes": 300, "leaked_blocks": 1
            })
        );
        let fill_values = &process["sites"][0]["stack"];
        assert_eq!(fill_values[0]["line"], 12);
        assert_eq!(fill_values[2]["function"], "main");
        let mapping = &process["mapping_sites"][0];
        assert_eq!(mapping["stack"][0]["function"], "build_index");
        assert_eq!(
            mapping["calls"],
            serde_json::json!({
                "mmap": 1, "munmap": 0, "mremap": 0, "brk": 2, "shmat": 0, "shmdt": 0
            })
        );
        assert_eq!(
            (&mapping["mmap_bytes"], &mapping["brk_growth_bytes"]),
            (&serde_json::json!(4096), &serde_json::json!(0x21000))
        );
    }

    #[test]
    fn keys_come_in_the_documented_order() {
        let text = rendered();
        assert_ascending(&key_order(
            &text,
            &[
                "schema",
                "schema_version",
                "profile",
                "path",
                "truncated",
                "mode",
                "unwind_costs",
                "sampler_costs",
                "processes",
            ],
        ));
        let process = &text[text.find("\"processes\"").unwrap()..];
        let process_keys = [
            "pid",
            "parent_pid",
            "cause",
            "exe",
            "argv",
            "rank",
            "mpi",
            "exit",
            "start_ns",
            "duration_ns",
            "calls",
            "allocations",
            "bytes_allocated",
            "frees",
            "null_frees",
            "unknown_frees",
            "unknown_free_sources",
            "failed_allocations",
            "peak_live_bytes",
            "peak_live_blocks",
            "peak_time_ns",
            "live_bytes_at_exit",
            "live_blocks_at_exit",
            "live_at",
            "suppressed",
            "largest_allocation",
            "size_histogram",
            "mappings",
            "probes",
            "residency",
            "components",
            "snapshots",
            "timeline",
            "sites",
            "mapping_sites",
            "warnings",
        ];
        assert_ascending(&key_order(process, &process_keys));
        let calls: Vec<&str> = AllocFunction::ALL.iter().map(|f| f.name()).collect();
        assert_ascending(&key_order(process, &calls));
        let mappings = &process[process.find("\"mappings\"").unwrap()..];
        assert_ascending(&key_order(
            mappings,
            &[
                "mmap",
                "munmap",
                "mremap",
                "brk",
                "shmat",
                "shmdt",
                "mmap_bytes",
            ],
        ));
        let site = &process[process.find("\"sites\"").unwrap()..];
        assert_ascending(&key_order(
            site,
            &[
                "stack",
                "function",
                "file",
                "line",
                "module",
                "address",
                "inlined",
                "allocations",
                "bytes_allocated",
                "min_size",
                "average_size",
                "max_size",
                "freed_blocks",
                "min_lifetime_ns",
                "average_lifetime_ns",
                "max_lifetime_ns",
                "peak_bytes",
                "peak_blocks",
                "local_peak_bytes",
                "recycling_ratio",
                "temporary_allocations",
                "temporary_bytes",
                "leaked_bytes",
                "leaked_blocks",
            ],
        ));
    }

    #[test]
    fn components_snapshots_and_timeline() {
        let analysis = crate::report::test_data::components_analysis();
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let json: Value = serde_json::from_str(&text).unwrap();
        let process = &json["processes"][0];
        assert_eq!(process["components"].as_array().unwrap().len(), 3);
        assert_eq!(
            process["components"][0],
            serde_json::json!({
                "name": "app",
                "peak_requested_bytes": 3000,
                "peak_rss_bytes": 8192,
                "peak_pss_bytes": 6144,
                "peak_swap_bytes": 0,
                "requested_timeline": [[1000, 1000], [2000, 3000], [3000, 2000]],
                "resident_timeline": [[1500, 4096, 4096, 0], [2500, 8192, 6144, 0]]
            })
        );
        assert_eq!(process["components"][1]["peak_swap_bytes"], 4096);
        assert_eq!(process["components"][2]["name"], "overhead");
        assert_eq!(
            process["components"][2]["requested_timeline"],
            serde_json::json!([])
        );
        assert_eq!(
            process["snapshots"],
            serde_json::json!([
                {
                    "time_ns": 1500, "reason": "start", "cost_ns": 300000, "mappings": 40,
                    "rss": 8192, "pss": 6144, "swap": 0,
                    "arena_rss": 4096, "arena_requested": 1500, "arena_overhead_rss": 0,
                    "requested": 1500, "high": null, "estimated": false, "pagemap_mappings": null
                },
                {
                    "time_ns": 2500, "reason": "exit", "cost_ns": 200000, "mappings": 42,
                    "rss": 14336, "pss": 10240, "swap": 4096,
                    "arena_rss": 6144, "arena_requested": 3500, "arena_overhead_rss": 2048,
                    "requested": 3500,
                    "high": {"kind": "rss", "bytes": 20000, "delay_ns": 500, "held": true},
                    "estimated": true, "pagemap_mappings": 3
                }
            ])
        );
        assert_eq!(
            process["peak_split"],
            serde_json::json!({
                "measured": true, "peak_rss_bytes": 20000,
                "snapshot_time_ns": 2500, "snapshot_rss_bytes": 14336, "estimated": true
            })
        );
        assert_eq!(
            process["timeline"],
            serde_json::json!({
                "requested": [[1000, 1500], [2000, 3500], [3000, 2000]],
                "rss": [[1000, 10000], [2000, 20000], [3000, 16000]],
                "pss": [[1000, 9000], [2000, 18000], [3000, 15000]],
                "swap": [[1000, 0], [2000, 4096], [3000, 4096]]
            })
        );
        // Documented key order inside a component and a snapshot.
        let component = &text[text.find("\"components\"").unwrap()..];
        assert_ascending(&key_order(
            component,
            &[
                "name",
                "peak_requested_bytes",
                "peak_rss_bytes",
                "peak_pss_bytes",
                "peak_swap_bytes",
                "requested_timeline",
                "resident_timeline",
            ],
        ));
        let snapshot = &text[text.find("\"snapshots\"").unwrap()..];
        assert_ascending(&key_order(
            snapshot,
            &[
                "time_ns",
                "reason",
                "cost_ns",
                "mappings",
                "rss",
                "pss",
                "swap",
                "arena_rss",
                "arena_requested",
                "arena_overhead_rss",
                "requested",
                "high",
                "peak_split",
                "timeline",
            ],
        ));
        let timeline = &text[text.find("\"timeline\"").unwrap()..];
        assert_ascending(&key_order(timeline, &["requested", "rss", "pss", "swap"]));
    }

    #[test]
    fn an_image_without_components_has_empty_lists() {
        let mut analysis = analyze(&heap_profile(), Path::new("run.msup"));
        analysis.processes[0].components = Default::default();
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        let process = &json["processes"][0];
        assert_eq!(process["components"], serde_json::json!([]));
        assert_eq!(process["snapshots"], serde_json::json!([]));
        assert_eq!(
            process["timeline"],
            serde_json::json!({"requested": [], "rss": [], "pss": [], "swap": []})
        );
    }

    #[test]
    fn exit_value_only_for_code_and_signal() {
        let mut analysis = analyze(&heap_profile(), Path::new("run.msup"));
        analysis.processes[0].exit = crate::analysis::ImageExit::Exec;
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            json["processes"][0]["exit"],
            serde_json::json!({"kind": "exec"})
        );
    }
}
