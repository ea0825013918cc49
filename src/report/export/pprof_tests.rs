//! The pprof profile of the scripted profile of `analysis::site_tests`, decoded back.

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;
use prost::Message;

use super::pprof::render;
use super::profile_proto::{Location, Profile, Sample};
use crate::analysis::site_tests::{sites_profile, two_process_profile};
use crate::analysis::{analyze_with, ModuleSpan, SkipFrames};
use crate::trace::format::Record;
use crate::trace::reader::Profile as Recorded;

const FILL: &str = "fill_values(std::vector<int, std::allocator<int> >&)";

/// `recorded` with /bin/app's module record (0x1000..=0x3fff) for process 7, first thing.
fn with_app_module(mut recorded: Recorded) -> Recorded {
    let module = Record::Module {
        time_ns: 0,
        pid: 7,
        path: "/bin/app".to_string(),
        start: 0x1000,
        end: 0x3fff,
        bias: 0x1000,
    };
    recorded.records.insert(1, module);
    recorded
}

/// Renders `recorded` as pprof and decodes the gzip'd protobuf again.
fn exported(recorded: &Recorded, skip: &SkipFrames) -> Profile {
    let analysis = analyze_with(recorded, Path::new("sites.msup"), skip);
    let mut gzipped = Vec::new();
    render(&analysis, &mut gzipped).unwrap();
    let mut encoded = Vec::new();
    GzDecoder::new(gzipped.as_slice())
        .read_to_end(&mut encoded)
        .unwrap();
    Profile::decode(encoded.as_slice()).unwrap()
}

fn text(profile: &Profile, index: i64) -> &str {
    &profile.string_table[index as usize]
}

fn location(profile: &Profile, id: u64) -> &Location {
    &profile.location[id as usize - 1]
}

/// The function names of each location of `sample`, innermost first.
fn stack_names<'a>(profile: &'a Profile, sample: &Sample) -> Vec<Vec<&'a str>> {
    let function_name = |id: u64| text(profile, profile.function[id as usize - 1].name);
    sample
        .location_id
        .iter()
        .map(|&id| {
            let lines = &location(profile, id).line;
            lines
                .iter()
                .map(|line| function_name(line.function_id))
                .collect()
        })
        .collect()
}

/// (leaf function, values) of every sample, sorted.
fn leaf_values(profile: &Profile) -> Vec<(&str, Vec<i64>)> {
    let mut leaves: Vec<(&str, Vec<i64>)> = profile
        .sample
        .iter()
        .map(|sample| (stack_names(profile, sample)[0][0], sample.value.clone()))
        .collect();
    leaves.sort();
    leaves
}

#[test]
fn one_sample_per_site_with_go_heap_profile_values() {
    let profile = exported(&with_app_module(sites_profile()), &SkipFrames::default());
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|kind| (text(&profile, kind.r#type), text(&profile, kind.unit)))
        .collect();
    assert_eq!(types, super::pprof::SAMPLE_TYPES);
    assert_eq!(text(&profile, profile.default_sample_type), "inuse_space");
    assert_eq!(profile.string_table[0], "");
    assert_eq!(
        leaf_values(&profile),
        vec![
            ("build_index", vec![3, 450, 0, 0]),
            (FILL, vec![3, 1200, 1, 200]),
            ("main", vec![3, 430, 1, 300]),
        ]
    );
    let fill = profile
        .sample
        .iter()
        .find(|sample| sample.value[1] == 1200)
        .unwrap();
    assert_eq!(
        stack_names(&profile, fill),
        vec![vec![FILL], vec!["load_table()"], vec!["main"]]
    );
    let addresses: Vec<u64> = fill
        .location_id
        .iter()
        .map(|&id| location(&profile, id).address)
        .collect();
    assert_eq!(addresses, [0x3000, 0x2000, 0x1000]);
    let lines: Vec<i64> = fill
        .location_id
        .iter()
        .map(|&id| location(&profile, id).line[0].line)
        .collect();
    assert_eq!(lines, [12, 20, 50]);
    // main's two addresses are two locations of one function.
    assert_eq!(profile.location.len(), 5);
    assert_eq!(profile.function.len(), 4);
    assert_eq!(profile.mapping.len(), 1);
    let app = &profile.mapping[0];
    assert_eq!(text(&profile, app.filename), "/bin/app");
    assert_eq!((app.memory_start, app.memory_limit), (0x1000, 0x3fff));
    assert!(app.has_functions && app.has_filenames && app.has_line_numbers);
    assert!(!app.has_inline_frames, "the inlined frames were skipped");
    assert!(profile
        .location
        .iter()
        .all(|location| location.mapping_id == 1));
}

#[test]
fn inlined_functions_are_lines_of_one_location_innermost_first() {
    let keep_all = SkipFrames::new(false, &[]);
    let profile = exported(&with_app_module(sites_profile()), &keep_all);
    let fill = profile
        .sample
        .iter()
        .find(|sample| sample.value[1] == 400 + 200)
        .unwrap();
    assert_eq!(
        stack_names(&profile, fill),
        vec![
            vec!["operator new(unsigned long)"],
            vec![
                "std::__new_allocator<int>::allocate(unsigned long, void const*)",
                "std::allocator<int>::allocate(unsigned long)",
                FILL,
            ],
            vec!["load_table()"],
            vec!["main"],
        ]
    );
    // libstdc++ has no module record: a mapping of its path without addresses.
    let operator_new = location(&profile, fill.location_id[0]);
    let libstdcxx = &profile.mapping[operator_new.mapping_id as usize - 1];
    assert_eq!(text(&profile, libstdcxx.filename), "/lib/libstdc++.so.6");
    assert_eq!((libstdcxx.memory_start, libstdcxx.memory_limit), (0, 0));
    assert!(profile.mapping[0].has_inline_frames);
}

#[test]
fn every_image_labels_its_samples_and_shares_locations() {
    let recorded = with_app_module(two_process_profile());
    let profile = exported(&recorded, &SkipFrames::default());
    let labels: Vec<(i64, &str)> = profile
        .sample
        .iter()
        .map(|sample| {
            let [pid, exe] = &sample.label[..] else {
                panic!("two labels: {:?}", sample.label)
            };
            assert_eq!(
                (text(&profile, pid.key), text(&profile, exe.key)),
                ("pid", "exe")
            );
            (pid.num, text(&profile, exe.str))
        })
        .collect();
    let expected: Vec<(i64, &str)> = [7, 7, 7, 8].map(|pid| (pid, "/bin/app")).to_vec();
    assert_eq!(labels, expected);
    assert_eq!(
        leaf_values(&profile)[0],
        ("build_index", vec![1, 64, 1, 64])
    );
    // The child's build_index frame is its parent's location, in the inherited mapping.
    assert_eq!(
        profile.location.len(),
        6,
        "five of pid 7, [truncated] of pid 8"
    );
    assert_eq!(profile.mapping.len(), 1);
    let analysis = analyze_with(&recorded, Path::new("f"), &SkipFrames::default());
    let app = ModuleSpan {
        path: "/bin/app".to_string(),
        start: 0x1000,
        end: 0x3fff,
    };
    assert_eq!(analysis.processes[1].modules, vec![app]);
}
