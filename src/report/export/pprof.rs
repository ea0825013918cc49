//! `memsup report --format pprof`: the call sites as a gzip'd protobuf profile of pprof's
//! profile.proto, shaped like Go's heap profiles so that `go tool pprof` reads it as one.
//! Sample types `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`, in-use being
//! what was still live when the image ended (at detach in attach mode); one sample per call
//! site (merged by source location) of every image, with a numeric `pid` and a string `exe`
//! label; locations keep the return address and the functions inlined at it.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::pprof_tables::Tables;
use super::profile_proto::{Label, Profile, Sample, ValueType};
use crate::analysis::{mode_name, Analysis, Frame, ModuleSpan, ProcessAnalysis, Site};
use crate::report::folded::NO_STACK;

/// (type, unit) of each value of a sample, in the order of Go's heap profiles.
pub const SAMPLE_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// The sample type pprof shows when not told otherwise.
pub const DEFAULT_SAMPLE_TYPE: &str = "inuse_space";

/// Writes the gzip'd profile of `analysis` to `out`.
pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let mut encoder = GzEncoder::new(out, Compression::default());
    encoder.write_all(&profile(analysis).encode_to_vec())?;
    encoder.finish()?;
    Ok(())
}

/// The profile of `analysis`, before encoding.
pub fn profile(analysis: &Analysis) -> Profile {
    let mut tables = Tables::new();
    let sample_type = SAMPLE_TYPES
        .iter()
        .map(|(kind, unit)| ValueType {
            r#type: tables.string(kind),
            unit: tables.string(unit),
        })
        .collect();
    let mut samples = Vec::new();
    for image in &analysis.processes {
        image_samples(image, &mut tables, &mut samples);
    }
    let info = &analysis.profile;
    let comment = format!(
        "memsup {} {} {}",
        info.memsup_version,
        mode_name(info.mode),
        info.target.join(" ")
    );
    let comment = vec![tables.string(&comment)];
    let default_sample_type = tables.string(DEFAULT_SAMPLE_TYPE);
    Profile {
        sample_type,
        sample: samples,
        mapping: tables.mappings,
        location: tables.locations,
        function: tables.functions,
        string_table: tables.strings,
        time_nanos: info.start_unix_ns as i64,
        duration_nanos: recording_span_ns(analysis) as i64,
        comment,
        default_sample_type,
    }
}

/// One sample per call site of `image`, added to `samples`.
fn image_samples(image: &ProcessAnalysis, tables: &mut Tables, samples: &mut Vec<Sample>) {
    // The executable first: pprof takes the first mapping for the main binary.
    let mut modules: Vec<&ModuleSpan> = image.modules.iter().collect();
    modules.sort_by_key(|span| span.path != image.exe);
    for span in &modules {
        tables.mapping(span);
    }
    let labels = vec![
        Label {
            key: tables.string("pid"),
            num: i64::from(image.pid),
            ..Label::default()
        },
        Label {
            key: tables.string("exe"),
            str: tables.string(&image.exe),
            ..Label::default()
        },
    ];
    for site in &image.source_sites {
        let metrics = &site.metrics;
        samples.push(Sample {
            location_id: site_locations(site, &modules, tables),
            value: [
                metrics.allocations,
                metrics.bytes_allocated,
                metrics.leaked_blocks,
                metrics.leaked_bytes,
            ]
            .map(|value| value as i64)
            .to_vec(),
            label: labels.clone(),
        });
    }
}

/// The location ids of `site`'s stack, innermost first; a site without frames gets one
/// location named `[no stack]`, as in the folded stacks.
fn site_locations(site: &Site, modules: &[&ModuleSpan], tables: &mut Tables) -> Vec<u64> {
    if site.stack.is_empty() {
        let frame = Frame {
            function: NO_STACK.to_string(),
            file: None,
            line: None,
            module: String::new(),
            address: 0,
            offset: 0,
            inlined: false,
        };
        return vec![tables.location(0, &[frame])];
    }
    address_groups(&site.stack)
        .into_iter()
        .map(|frames| {
            let mapping_id = frame_mapping(&frames[0], modules, tables);
            tables.location(mapping_id, frames)
        })
        .collect()
}

/// The stack cut into the frames of each return address: a frame inlined into the next
/// one shares its address and its location.
fn address_groups(stack: &[Frame]) -> Vec<&[Frame]> {
    let mut groups = Vec::new();
    let mut start = 0;
    for index in 0..stack.len() {
        let next_is_same_address = stack
            .get(index + 1)
            .is_some_and(|next| stack[index].inlined && next.address == stack[index].address);
        if !next_is_same_address {
            groups.push(&stack[start..=index]);
            start = index + 1;
        }
    }
    groups
}

/// The mapping of the module holding `frame`'s address; a module the image never recorded
/// gets a mapping without addresses, and a frame without module none (0).
fn frame_mapping(frame: &Frame, modules: &[&ModuleSpan], tables: &mut Tables) -> u64 {
    if frame.module.is_empty() {
        return 0;
    }
    let recorded = modules
        .iter()
        .find(|span| span.path == frame.module && (span.start..=span.end).contains(&frame.address));
    match recorded {
        Some(span) => tables.mapping(span),
        None => tables.mapping(&ModuleSpan {
            path: frame.module.clone(),
            start: 0,
            end: 0,
        }),
    }
}

/// From the first image's start to the last image's end.
fn recording_span_ns(analysis: &Analysis) -> u64 {
    let images = &analysis.processes;
    let start = images.iter().map(|image| image.start_ns).min();
    let end = images
        .iter()
        .map(|image| image.start_ns + image.duration_ns)
        .max();
    match (start, end) {
        (Some(start), Some(end)) => end - start,
        _ => 0,
    }
}
