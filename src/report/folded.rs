//! Folded stacks (`root;caller;leaf VALUE`, one line per distinct stack), the input of
//! flamegraph.pl, inferno and speedscope. The stacks are the call sites: allocator frames
//! dropped, inlined functions as frames of their own.

use std::collections::BTreeMap;
use std::io::Write;

use crate::analysis::{Analysis, ProcessAnalysis, SiteMetrics};

/// The frame a site without any recorded frame gets.
pub const NO_STACK: &str = "[no stack]";

/// What the value of a stack is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Bytes live at the image's peak.
    Peak,
    /// Bytes still live when the image ended.
    Leaked,
    /// Bytes allocated over the whole image.
    Allocated,
    /// Bytes of temporary allocations (freed with no other heap event in between).
    Temporary,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::Peak,
        Metric::Leaked,
        Metric::Allocated,
        Metric::Temporary,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Peak => "peak",
            Metric::Leaked => "leaked",
            Metric::Allocated => "allocated",
            Metric::Temporary => "temporary",
        }
    }

    fn value(self, metrics: &SiteMetrics) -> u64 {
        match self {
            Metric::Peak => metrics.peak_bytes,
            Metric::Leaked => metrics.leaked_bytes,
            Metric::Allocated => metrics.bytes_allocated,
            Metric::Temporary => metrics.temporary_bytes,
        }
    }
}

/// Every stack with a non-zero value of `metric`, frames root first, sorted by frames: the
/// sites merged by source location (`ProcessAnalysis::source_sites`). Stacks that read the
/// same (two lines of one function) are one, their values added. With
/// more than one process image, each stack starts with a root frame naming its image,
/// `program (pid N)`.
pub fn stacks(analysis: &Analysis, metric: Metric) -> Vec<(Vec<String>, u64)> {
    let name_images = analysis.processes.len() > 1;
    let mut values: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for image in &analysis.processes {
        for site in &image.source_sites {
            let value = metric.value(&site.metrics);
            if value == 0 {
                continue;
            }
            let mut frames = Vec::with_capacity(site.stack.len() + 1);
            if name_images {
                frames.push(image_frame(image));
            }
            if site.stack.is_empty() {
                frames.push(NO_STACK.to_string());
            }
            frames.extend(site.stack.iter().rev().map(|frame| frame.name()));
            *values.entry(frames).or_default() += value;
        }
    }
    values.into_iter().collect()
}

/// One `frame;frame;frame VALUE` line per stack of `stacks`.
pub fn render(analysis: &Analysis, metric: Metric, out: &mut dyn Write) -> std::io::Result<()> {
    for (frames, value) in stacks(analysis, metric) {
        // `;` separates frames and a line ends the stack: neither may appear inside a name.
        let names: Vec<String> = frames
            .iter()
            .map(|name| name.replace([';', '\n'], ","))
            .collect();
        writeln!(out, "{} {value}", names.join(";"))?;
    }
    Ok(())
}

/// `program (pid N)`, the program being the executable's file name.
pub(crate) fn image_frame(image: &ProcessAnalysis) -> String {
    let program = crate::platform::libraries::file_name(&image.exe);
    let program = if program.is_empty() {
        "[unknown]"
    } else {
        program
    };
    format!("{program} (pid {})", image.pid)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::analysis::site_tests::{sites_profile, two_process_profile};
    use crate::analysis::{analyze, analyze_with, SkipFrames};
    use crate::trace::reader::Profile;

    const FILL: &str = "main;load_table();fill_values(std::vector<int, std::allocator<int> >&)";

    fn folded(profile: &Profile, skip: &SkipFrames, metric: Metric) -> String {
        let analysis = analyze_with(profile, Path::new("f.msup"), skip);
        let mut out = Vec::new();
        render(&analysis, metric, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn one_line_per_stack_for_each_metric() {
        let profile = sites_profile();
        let skip = SkipFrames::default();
        let expected = [
            (
                Metric::Peak,
                format!("main 350\nmain;build_index 250\n{FILL} 600\n"),
            ),
            (Metric::Leaked, format!("main 300\n{FILL} 200\n")),
            (
                Metric::Allocated,
                format!("main 430\nmain;build_index 450\n{FILL} 1200\n"),
            ),
            (
                Metric::Temporary,
                "main 80\nmain;build_index 350\n".to_string(),
            ),
        ];
        for (metric, lines) in expected {
            assert_eq!(folded(&profile, &skip, metric), lines, "{}", metric.name());
        }
    }

    #[test]
    fn stacks_that_read_the_same_are_one_line() {
        // Everything but the outermost frame dropped: every site reads "main".
        let skip = SkipFrames::new(false, &["*".to_string()]);
        assert_eq!(folded(&sites_profile(), &skip, Metric::Peak), "main 1200\n");
        let stacks = stacks(
            &analyze_with(&sites_profile(), Path::new("f"), &skip),
            Metric::Allocated,
        );
        assert_eq!(stacks, vec![(vec!["main".to_string()], 2080)]);
    }

    #[test]
    fn several_images_get_a_root_frame_each() {
        let text = folded(&two_process_profile(), &SkipFrames::default(), Metric::Peak);
        assert_eq!(
            text,
            format!(
                "app (pid 7);main 350\napp (pid 7);main;build_index 250\napp (pid 7);{FILL} 600\n\
                 app (pid 8);[truncated];build_index 64\n"
            )
        );
        let analysis = analyze(&two_process_profile(), Path::new("f"));
        let leaked = stacks(&analysis, Metric::Leaked);
        assert_eq!(leaked.len(), 3);
        assert_eq!(
            leaked[2],
            (
                vec![
                    "app (pid 8)".to_string(),
                    "[truncated]".to_string(),
                    "build_index".to_string()
                ],
                64
            )
        );
    }
}
