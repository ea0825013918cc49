//! `memsup report --format speedscope`: the call sites as speedscope's file format
//! (https://www.speedscope.app/file-format-schema.json). One `sampled` profile per process
//! image and metric (bytes live at the image's peak, bytes allocated, bytes still live at
//! its end), one sample per call site (merged by source location) weighing its bytes, its
//! stack root first; frames, shared by all profiles, are functions (name and file). No `evented` timeline: the analysis keeps
//! no per-site history (see DESIGN.md).

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use crate::analysis::{Analysis, Frame, ProcessAnalysis, SiteMetrics};
use crate::report::folded::NO_STACK;

pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// What a site weighs in one profile.
type Weight = fn(&SiteMetrics) -> u64;

/// What each image's profiles weigh, with the words their names end with.
const METRICS: [(&str, Weight); 3] = [
    ("bytes at the peak", |metrics| metrics.peak_bytes),
    ("bytes allocated", |metrics| metrics.bytes_allocated),
    ("bytes leaked", |metrics| metrics.leaked_bytes),
];

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
struct Frames {
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
    fn stack(&mut self, stack: &[Frame]) -> Vec<usize> {
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

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let mut frames = Frames::default();
    let mut profiles = Vec::new();
    for image in &analysis.processes {
        for (words, value) in METRICS {
            profiles.push(sampled_profile(image, words, value, &mut frames));
        }
    }
    let file = File {
        schema: SCHEMA,
        shared: Shared {
            frames: frames.frames,
        },
        profiles,
        name: analysis.profile.path.clone(),
        active_profile_index: 0,
        exporter: format!("memsup {}", env!("CARGO_PKG_VERSION")),
    };
    serde_json::to_writer(&mut *out, &file)?;
    writeln!(out)
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
    let program = image.exe.rsplit('/').next().unwrap_or_default();
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
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;
    use crate::analysis::analyze;
    use crate::analysis::site_tests::two_process_profile;

    const FILL: &str = "fill_values(std::vector<int, std::allocator<int> >&)";

    fn exported() -> Value {
        let analysis = analyze(&two_process_profile(), Path::new("two.msup"));
        let mut out = Vec::new();
        render(&analysis, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_sampled_profile_per_image_and_metric_with_stacks_root_first() {
        let file = exported();
        assert_eq!(file["$schema"], SCHEMA);
        assert_eq!(file["name"], "two.msup");
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
                "app (pid 7): bytes allocated",
                "app (pid 7): bytes leaked",
                "app (pid 8): bytes at the peak",
                "app (pid 8): bytes allocated",
                "app (pid 8): bytes leaked",
            ]
        );
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
