//! The outputs of `memsup diff` (`analysis::diff`): text for people, JSON for programs
//! (docs/report-json.md, "memsup diff"), and an HTML page of differential flame graphs.

pub mod html;
pub mod json;
pub mod text;

use std::io::Write;
use std::path::Path;

use crate::analysis::diff::{diff, Diff, ImageName, NothingMatches};
use crate::analysis::suppress::Suppressions;
use crate::analysis::{load, Analysis, Frame, Settings, SiteMetrics};
use crate::error::{Error, Result};
use crate::report::choose::destination::Destination;
use crate::report::folded::Metric;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Text,
    Json,
    Html,
}

/// How `memsup diff` compares and writes.
pub struct Compared {
    pub format: DiffFormat,
    pub metric: Metric,
    /// Changed sites per pair of images in the text.
    pub top: usize,
    /// The leaks both sides leave out (`report --suppressions`).
    pub suppressions: Suppressions,
}

/// `memsup diff`: reads both profiles, compares them and writes the diff to `destination`;
/// 0, or `Error::NothingToCompare` when no image of one matches an image of the other.
pub fn run(base: &Path, new: &Path, compared: &Compared, destination: &Destination) -> Result<i32> {
    let settings = Settings::default();
    let mut base = load::analyze_file(base, &settings)?;
    let mut new = load::analyze_file(new, &settings)?;
    compared.suppressions.apply(std::slice::from_mut(&mut base));
    compared.suppressions.apply(std::slice::from_mut(&mut new));
    let (format, metric, top) = (compared.format, compared.metric, compared.top);
    let diff = compare(&base, &new, metric)
        .map_err(|refused| Error::NothingToCompare(refusal(&base, &new, &refused)))?;
    let mut out = destination.open()?;
    let written = match format {
        DiffFormat::Text => text::render(&diff, metric, top, &mut out),
        DiffFormat::Json => json::render(&diff, metric, &mut out),
        DiffFormat::Html => html::render(&diff, &mut out),
    };
    match written.and_then(|()| out.flush()) {
        // A reader that stopped early (`| head`) is not an error.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(error) => Err(Error::io("writing the diff", error)),
        Ok(()) => {
            destination.announce();
            Ok(0)
        }
    }
}

/// "nothing to compare: no program of BASE (sh, ls) is in NEW (cat, id)".
fn refusal(base: &Analysis, new: &Analysis, refused: &NothingMatches) -> String {
    let programs = |images: &[ImageName]| {
        let names: Vec<&str> = images.iter().map(ImageName::program).collect();
        if names.is_empty() {
            "no process image".to_string()
        } else {
            names.join(", ")
        }
    };
    format!(
        "nothing to compare: no program of {} ({}) is in {} ({})",
        base.profile.path,
        programs(&refused.base),
        new.profile.path,
        programs(&refused.new)
    )
}

/// The value of `metric` in a site's numbers.
pub fn metric_value(metric: Metric) -> fn(&SiteMetrics) -> u64 {
    match metric {
        Metric::Peak => |metrics| metrics.peak_bytes,
        Metric::Leaked => |metrics| metrics.leaked_bytes,
        Metric::Allocated => |metrics| metrics.bytes_allocated,
        Metric::Temporary => |metrics| metrics.temporary_bytes,
    }
}

/// `base` against `new`, sites sorted by the change of `metric`.
pub fn compare(base: &Analysis, new: &Analysis, metric: Metric) -> Result<Diff, NothingMatches> {
    diff(base, new, metric_value(metric))
}

/// "+4096", "-12", "0".
pub fn signed(change: i64) -> String {
    if change > 0 {
        format!("+{change}")
    } else {
        change.to_string()
    }
}

/// Frames a site line shows: up to `main` (or at most `LABEL_FRAMES`), the C library's
/// start-up tail left out.
const LABEL_FRAMES: usize = 4;

/// "make_extra diff_sites.c:52 ← main diff_sites.c:71 (diff_sites)", innermost first.
pub fn site_label(stack: &[Frame]) -> String {
    if stack.is_empty() {
        return crate::report::folded::NO_STACK.to_string();
    }
    let end = stack
        .iter()
        .position(|frame| frame.function == "main")
        .map_or(stack.len(), |main| main + 1)
        .min(LABEL_FRAMES);
    let frames: Vec<String> = stack[..end].iter().map(frame_label).collect();
    let module = stack[0].module_file_name();
    let mut label = frames.join(" ← ");
    if !module.is_empty() {
        label.push_str(&format!(" ({module})"));
    }
    label
}

fn frame_label(frame: &Frame) -> String {
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => {
            let file = crate::platform::libraries::file_name(file);
            format!("{} {file}:{line}", frame.name())
        }
        _ => frame.name(),
    }
}
