//! `memsup report --format speedscope`: the call sites as speedscope's file format
//! (https://www.speedscope.app/file-format-schema.json). Three `sampled` profiles per process
//! image: bytes live at the image's peak and bytes still live at its end, one sample per
//! call site (merged by source location) weighing its bytes; and bytes allocated in time
//! order (`timeline`), so that speedscope's Time Order view shows which sites allocated when.
//! Stacks are root first; frames, shared by all profiles, are functions (name and file).

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use crate::analysis::{Analysis, Frame, ProcessAnalysis, SiteMetrics, SkipFrames};
use crate::report::folded::NO_STACK;

mod timeline;

pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// What a site weighs in one profile.
type Weight = fn(&SiteMetrics) -> u64;

/// The words that end the name of each image's time-ordered profile.
const IN_TIME_ORDER: &str = "bytes allocated, in time order";

#[derive(Serialize)]
struct File {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<SampledProfile>,
    name: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: String,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<SpeedscopeFrame>,
}

/// A function. speedscope takes a frame's `line` for where the function starts and tells
/// frames apart by it; memsup knows the line of each call, not that, so it gives none: a
/// function called from two lines is one frame, as in the folded stacks.
#[derive(Serialize, Clone, PartialEq, Eq, Hash)]
struct SpeedscopeFrame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
}

#[derive(Serialize)]
struct SampledProfile {
    r#type: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// The frames of every profile, each once.
#[derive(Default)]
pub(super) struct Frames {
    frames: Vec<SpeedscopeFrame>,
    index: HashMap<SpeedscopeFrame, usize>,
}

impl Frames {
    fn index_of(&mut self, frame: SpeedscopeFrame) -> usize {
        if let Some(&index) = self.index.get(&frame) {
            return index;
        }
        self.frames.push(frame.clone());
        self.index.insert(frame, self.frames.len() - 1);
        self.frames.len() - 1
    }

    /// The frame indices of `stack` (innermost first), root first.
    pub(super) fn stack(&mut self, stack: &[Frame]) -> Vec<usize> {
        if stack.is_empty() {
            return vec![self.index_of(SpeedscopeFrame {
                name: NO_STACK.to_string(),
                file: None,
            })];
        }
        stack
            .iter()
            .rev()
            .map(|frame| {
                self.index_of(SpeedscopeFrame {
                    name: frame.name(),
                    file: frame.file.clone(),
                })
            })
            .collect()
    }
}

/// Writes the images of `analyses` (one profile each, or the profiles of a job) as one
/// speedscope file, reading each profile again for its allocations in time order.
pub fn render(
    analyses: &[Analysis],
    skip: &SkipFrames,
    out: &mut dyn Write,
) -> crate::error::Result<()> {
    let mut frames = Frames::default();
    let mut profiles = Vec::new();
    for analysis in analyses {
        let path = std::path::Path::new(&analysis.profile.path);
        let images: Vec<&ProcessAnalysis> = analysis.processes.iter().collect();
        let orders = timeline::allocations_in_time_order(path, &images, skip)?;
        for (image, order) in analysis.processes.iter().zip(orders) {
            let peak = |metrics: &SiteMetrics| metrics.peak_bytes;
            profiles.push(sampled_profile(
                image,
                "bytes at the peak",
                peak,
                &mut frames,
            ));
            let (samples, weights) = order.samples(&mut frames);
            profiles.push(profile(image, IN_TIME_ORDER, samples, weights));
            let leaked = |metrics: &SiteMetrics| metrics.leaked_bytes;
            profiles.push(sampled_profile(image, "bytes leaked", leaked, &mut frames));
        }
    }
    let paths: Vec<&str> = analyses
        .iter()
        .map(|analysis| analysis.profile.path.as_str())
        .collect();
    let file = File {
        schema: SCHEMA,
        shared: Shared {
            frames: frames.frames,
        },
        profiles,
        name: paths.join(", "),
        active_profile_index: 0,
        exporter: format!("memsup {}", env!("CARGO_PKG_VERSION")),
    };
    let written = serde_json::to_writer(&mut *out, &file)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out));
    written.map_err(|error| crate::error::Error::io("writing the report", error))
}

/// The sites of `image` with a non-zero `value`, weighing it.
fn sampled_profile(
    image: &ProcessAnalysis,
    words: &str,
    value: Weight,
    frames: &mut Frames,
) -> SampledProfile {
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    for site in &image.source_sites {
        let weight = value(&site.metrics);
        if weight > 0 {
            samples.push(frames.stack(&site.stack));
            weights.push(weight);
        }
    }
    profile(image, words, samples, weights)
}

/// A sampled profile of `image` named "PROGRAM (pid N): WORDS".
fn profile(
    image: &ProcessAnalysis,
    words: &str,
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
) -> SampledProfile {
    let program = crate::platform::libraries::file_name(&image.exe);
    SampledProfile {
        r#type: "sampled",
        name: format!("{program} (pid {}): {words}", image.pid),
        unit: "bytes",
        start_value: 0,
        end_value: weights.iter().sum(),
        samples,
        weights,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::analysis::load::analyze_file;
    use crate::analysis::site_tests::two_process_profile;
    use crate::analysis::Settings;
    use crate::trace::writer::ProfileWriter;

    const FILL: &str = "fill_values(std::vector<int, std::allocator<int> >&)";

    fn exported() -> Value {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("two.msup");
        let profile = two_process_profile();
        let mut writer = ProfileWriter::create(&path, &profile.header).unwrap();
        for record in &profile.records {
            writer.push(record).unwrap();
        }
        writer.finish().unwrap();
        let analysis = analyze_file(&path, &Settings::default()).unwrap();
        let mut out = Vec::new();
        render(&[analysis], &SkipFrames::default(), &mut out).unwrap();
        let mut file: Value = serde_json::from_slice(&out).unwrap();
        file["name"] = json!(file["name"]
            .as_str()
            .unwrap()
            .replace(&directory.path().display().to_string(), "DIRECTORY"));
        file
    }

    #[test]
    fn a_sampled_profile_per_image_and_metric_with_stacks_root_first() {
        let file = exported();
        assert_eq!(file["$schema"], SCHEMA);
        assert_eq!(file["name"], "DIRECTORY/two.msup");
        let frames = &file["shared"]["frames"];
        assert_eq!(frames[0], json!({"name": "main", "file": "app.cpp"}));
        let names: Vec<&str> = file["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|profile| profile["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "app (pid 7): bytes at the peak",
                "app (pid 7): bytes allocated, in time order",
                "app (pid 7): bytes leaked",
                "app (pid 8): bytes at the peak",
                "app (pid 8): bytes allocated, in time order",
                "app (pid 8): bytes leaked",
            ]
        );
        // Every allocation of pid 7 in its own slice, in the order it was made (reallocs
        // included: each makes a block).
        let in_time_order = &file["profiles"][1];
        assert_eq!(
            in_time_order["weights"],
            json!([400, 100, 100, 600, 50, 300, 250, 80, 200])
        );
        assert_eq!(in_time_order["endValue"], 2080);
        let leaf = |sample: &Value| {
            let index = sample.as_array().unwrap().last().unwrap().as_u64().unwrap();
            frames[index as usize]["name"].as_str().unwrap().to_string()
        };
        let leaves: Vec<String> = in_time_order["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(leaf)
            .collect();
        assert_eq!(leaves[0], leaves[8], "{leaves:?}");
        assert_eq!(leaves[4], leaves[5], "{leaves:?}");
        let leaked = &file["profiles"][2];
        assert_eq!(leaked["weights"], json!([200, 300]));
        assert_eq!(leaked["endValue"], 500);
        assert_eq!(leaked["unit"], "bytes");
        assert_eq!(leaked["type"], "sampled");
        let stack: Vec<&Value> = leaked["samples"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|index| &frames[index.as_u64().unwrap() as usize]["name"])
            .collect();
        assert_eq!(
            stack,
            [&json!("main"), &json!("load_table()"), &json!(FILL)]
        );
        // The forked child's truncated stack: build_index under the truncation marker.
        let child_peak = &file["profiles"][3];
        assert_eq!(child_peak["weights"], json!([64]));
        let child_stack = child_peak["samples"][0].as_array().unwrap();
        let outermost = &frames[child_stack[0].as_u64().unwrap() as usize];
        assert_eq!(outermost, &json!({"name": "[truncated]"}));
    }
}
