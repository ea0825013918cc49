//! `memsup report --pid PID --exe REGEX`: only the process images asked for.

use regex::Regex;

use crate::analysis::{Analysis, ProcessAnalysis};
use crate::platform::libraries::file_name;

/// Which images to keep: an image is kept when its pid is one of `pids` (any pid when
/// empty) and its exe path or file name matches `exe` (any exe when None).
#[derive(Debug, Clone, Default)]
pub struct ImageFilter {
    pub pids: Vec<u32>,
    pub exe: Option<Regex>,
}

impl ImageFilter {
    /// The filter of `--pid` and `--exe`; a bad regular expression in one line.
    pub fn new(pids: Vec<u32>, exe: Option<&str>) -> Result<ImageFilter, String> {
        let exe = exe
            .map(|pattern| {
                Regex::new(pattern).map_err(|error| {
                    let first_line = error.to_string();
                    let first_line = first_line.lines().last().unwrap_or_default().trim();
                    format!("--exe {pattern:?}: not a regular expression: {first_line}")
                })
            })
            .transpose()?;
        Ok(ImageFilter { pids, exe })
    }

    /// True when the filter keeps every image.
    pub fn keeps_all(&self) -> bool {
        self.pids.is_empty() && self.exe.is_none()
    }

    fn keeps(&self, image: &ProcessAnalysis) -> bool {
        let pid_wanted = self.pids.is_empty() || self.pids.contains(&image.pid);
        let exe_wanted = self.exe.as_ref().map_or(true, |exe| {
            exe.is_match(&image.exe) || exe.is_match(file_name(&image.exe))
        });
        pid_wanted && exe_wanted
    }
}

/// The profiles cut down to the images `filter` keeps, profiles left with none left out.
/// When no image of any profile is kept: every image, as "PID (NAME)", to name in the error.
pub fn select_images(
    analyses: Vec<Analysis>,
    filter: &ImageFilter,
) -> Result<Vec<Analysis>, Vec<String>> {
    if filter.keeps_all() {
        return Ok(analyses);
    }
    let mut present = Vec::new();
    let mut selected = Vec::new();
    for mut analysis in analyses {
        present.extend(analysis.processes.iter().map(describe));
        analysis.processes.retain(|image| filter.keeps(image));
        if !analysis.processes.is_empty() {
            selected.push(analysis);
        }
    }
    if selected.is_empty() {
        present.dedup();
        return Err(present);
    }
    Ok(selected)
}

/// "4242 (app)".
fn describe(image: &ProcessAnalysis) -> String {
    format!("{} ({})", image.pid, file_name(&image.exe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::components_analysis as sample_analysis;

    fn images(analyses: &[Analysis]) -> Vec<(u32, String)> {
        analyses
            .iter()
            .flat_map(|analysis| &analysis.processes)
            .map(|image| (image.pid, image.exe.clone()))
            .collect()
    }

    fn two_images() -> Analysis {
        let mut analysis = sample_analysis();
        let mut child = analysis.processes[0].clone();
        child.pid = 4243;
        child.exe = "/usr/bin/ls".to_string();
        analysis.processes.push(child);
        analysis
    }

    #[test]
    fn pids_and_exe_keep_exactly_the_images_that_match_both() {
        let base = two_images();
        let first = (base.processes[0].pid, base.processes[0].exe.clone());
        let kept = |pids: Vec<u32>, exe: Option<&str>| {
            let filter = ImageFilter::new(pids, exe).unwrap();
            select_images(vec![base.clone()], &filter).map(|kept| images(&kept))
        };
        assert_eq!(
            kept(vec![4243], None),
            Ok(vec![(4243, "/usr/bin/ls".into())])
        );
        assert_eq!(
            kept(vec![], Some("^ls$")),
            Ok(vec![(4243, "/usr/bin/ls".into())])
        );
        assert_eq!(
            kept(vec![], Some("^/usr/bin/")),
            Ok(vec![(4243, "/usr/bin/ls".into())])
        );
        assert_eq!(
            kept(vec![first.0, 4243], Some("^ls$")),
            Ok(vec![(4243, "/usr/bin/ls".into())])
        );
        assert_eq!(kept(vec![first.0], None), Ok(vec![first.clone()]));
        let none = kept(vec![first.0], Some("^ls$")).unwrap_err();
        assert_eq!(none.len(), 2);
        assert_eq!(none[1], "4243 (ls)");
    }

    #[test]
    fn a_bad_regular_expression_is_one_line() {
        let error = ImageFilter::new(vec![], Some("(")).unwrap_err();
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(
            error.starts_with("--exe \"(\": not a regular expression"),
            "{error}"
        );
    }
}
