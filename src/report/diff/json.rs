//! `memsup diff --format json` (schema `memsup-diff`, version 1, in docs/report-json.md).

use std::io::Write;

use crate::analysis::diff::{change, Diff, ImageDiff, ImageName, SiteDiff, Totals};
use crate::analysis::{Frame, SiteMetrics};
use crate::report::folded::Metric;

pub const SCHEMA: &str = "memsup-diff";
pub const SCHEMA_VERSION: u32 = 1;

pub fn render(diff: &Diff, metric: Metric, out: &mut dyn Write) -> std::io::Result<()> {
    let report = DiffJson {
        schema: SCHEMA,
        schema_version: SCHEMA_VERSION,
        base: &diff.base_path,
        new: &diff.new_path,
        metric: metric.name(),
        images: diff.images.iter().map(ImageJson::new).collect(),
        unmatched_base: diff.unmatched_base.iter().map(NameJson::new).collect(),
        unmatched_new: diff.unmatched_new.iter().map(NameJson::new).collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}

#[derive(serde::Serialize)]
struct DiffJson<'a> {
    schema: &'static str,
    schema_version: u32,
    base: &'a str,
    new: &'a str,
    metric: &'static str,
    images: Vec<ImageJson<'a>>,
    unmatched_base: Vec<NameJson<'a>>,
    unmatched_new: Vec<NameJson<'a>>,
}

#[derive(serde::Serialize)]
struct NameJson<'a> {
    pid: u32,
    exe: &'a str,
}

impl<'a> NameJson<'a> {
    fn new(image: &'a ImageName) -> Self {
        NameJson {
            pid: image.pid,
            exe: &image.exe,
        }
    }
}

#[derive(serde::Serialize)]
struct ImageJson<'a> {
    base: NameJson<'a>,
    new: NameJson<'a>,
    totals: SidesJson<TotalsJson>,
    sites: Vec<SiteJson<'a>>,
}

impl<'a> ImageJson<'a> {
    fn new(image: &'a ImageDiff) -> Self {
        ImageJson {
            base: NameJson::new(&image.base),
            new: NameJson::new(&image.new),
            totals: SidesJson {
                base: Some(TotalsJson::of(&image.base_totals)),
                new: Some(TotalsJson::of(&image.new_totals)),
                change: ChangeJson::between(
                    &TotalsJson::of(&image.base_totals),
                    &TotalsJson::of(&image.new_totals),
                ),
            },
            sites: image.sites.iter().map(SiteJson::new).collect(),
        }
    }
}

/// Both sides and NEW minus BASE.
#[derive(serde::Serialize)]
struct SidesJson<T> {
    base: Option<T>,
    new: Option<T>,
    change: ChangeJson,
}

#[derive(serde::Serialize, Default)]
struct TotalsJson {
    peak_bytes: u64,
    leaked_bytes: u64,
    bytes_allocated: u64,
    allocations: u64,
}

impl TotalsJson {
    fn of(totals: &Totals) -> Self {
        TotalsJson {
            peak_bytes: totals.peak_bytes,
            leaked_bytes: totals.leaked_bytes,
            bytes_allocated: totals.bytes_allocated,
            allocations: totals.allocations,
        }
    }
}

#[derive(serde::Serialize)]
struct ChangeJson {
    peak_bytes: i64,
    leaked_bytes: i64,
    bytes_allocated: i64,
    allocations: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    temporary_bytes: Option<i64>,
}

impl ChangeJson {
    fn between(base: &TotalsJson, new: &TotalsJson) -> Self {
        ChangeJson {
            peak_bytes: change(base.peak_bytes, new.peak_bytes),
            leaked_bytes: change(base.leaked_bytes, new.leaked_bytes),
            bytes_allocated: change(base.bytes_allocated, new.bytes_allocated),
            allocations: change(base.allocations, new.allocations),
            temporary_bytes: None,
        }
    }
}

#[derive(serde::Serialize)]
struct SiteJson<'a> {
    status: &'static str,
    stack: Vec<FrameJson<'a>>,
    #[serde(flatten)]
    sides: SidesJson<SiteNumbersJson>,
}

#[derive(serde::Serialize)]
struct SiteNumbersJson {
    peak_bytes: u64,
    leaked_bytes: u64,
    bytes_allocated: u64,
    allocations: u64,
    temporary_bytes: u64,
}

impl SiteNumbersJson {
    fn of(metrics: &SiteMetrics) -> Self {
        SiteNumbersJson {
            peak_bytes: metrics.peak_bytes,
            leaked_bytes: metrics.leaked_bytes,
            bytes_allocated: metrics.bytes_allocated,
            allocations: metrics.allocations,
            temporary_bytes: metrics.temporary_bytes,
        }
    }
}

impl<'a> SiteJson<'a> {
    fn new(site: &'a SiteDiff) -> Self {
        SiteJson {
            status: site.status().name(),
            stack: site.stack.iter().map(FrameJson::new).collect(),
            sides: SidesJson {
                base: site.base.as_ref().map(SiteNumbersJson::of),
                new: site.new.as_ref().map(SiteNumbersJson::of),
                change: ChangeJson {
                    peak_bytes: site.change(|metrics| metrics.peak_bytes),
                    leaked_bytes: site.change(|metrics| metrics.leaked_bytes),
                    bytes_allocated: site.change(|metrics| metrics.bytes_allocated),
                    allocations: site.change(|metrics| metrics.allocations),
                    temporary_bytes: Some(site.change(|metrics| metrics.temporary_bytes)),
                },
            },
        }
    }
}

/// A frame by what matched it: no address (the two sides' differ).
#[derive(serde::Serialize)]
struct FrameJson<'a> {
    function: String,
    file: Option<&'a str>,
    line: Option<u32>,
    module: &'a str,
}

impl<'a> FrameJson<'a> {
    fn new(frame: &'a Frame) -> Self {
        FrameJson {
            function: frame.name(),
            file: frame.file.as_deref(),
            line: frame.line,
            module: frame.module_file_name(),
        }
    }
}
