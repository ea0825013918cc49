//! Leak suppressions: LeakSanitizer's file format (`leak:PATTERN` lines, `#` comments), and
//! built-in rules for the one-time allocations of the C and C++ runtimes, which every program
//! "leaks" and no program can free (heaptrack suppresses the same by default). A suppressed
//! site's live blocks leave its leak numbers and the image's; the image counts them apart.

use super::{Analysis, Frame, ProcessAnalysis, Site};

/// What suppressions took out of an image's leaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Suppressed {
    pub blocks: u64,
    pub bytes: u64,
    /// How many rules matched a leaked block.
    pub rules: u64,
}

/// A pattern as LeakSanitizer matches it: `*` matches any run of characters, a leading `^`
/// and a trailing `$` anchor it, else it matches anywhere in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern(String);

impl Pattern {
    fn matches(&self, text: &str) -> bool {
        let pattern = self.0.as_str();
        let (anchored_start, pattern) = match pattern.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let (anchored_end, pattern) = match pattern.strip_suffix('$') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let pieces: Vec<&str> = pattern.split('*').collect();
        let mut position = 0;
        for (index, piece) in pieces.iter().enumerate() {
            let first = index == 0;
            let last = index == pieces.len() - 1;
            if first && anchored_start {
                if !text.starts_with(piece) {
                    return false;
                }
                position = piece.len();
            } else if last && anchored_end {
                return text.len() >= position + piece.len() && text.ends_with(piece);
            } else {
                match text[position..].find(piece) {
                    Some(found) => position += found + piece.len(),
                    None => return false,
                }
            }
        }
        !anchored_end || pieces.len() == 1 && position == text.len()
    }

    /// The frame's function, its module's file name or its source file's name matches.
    fn matches_frame(&self, frame: &Frame) -> bool {
        let file_name = |path: &str| path.rsplit('/').next().unwrap_or("").to_string();
        let source = frame.file.as_deref().map(file_name).unwrap_or_default();
        [frame.function.as_str(), &file_name(&frame.module), &source]
            .iter()
            .any(|text| !text.is_empty() && self.matches(text))
    }
}

/// One rule: from a file, a pattern any frame of the site may match; built in, a pattern
/// the site's innermost frame matches, within a stack that a second pattern matches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    innermost: bool,
    pattern: Pattern,
    within: Option<Pattern>,
}

impl Rule {
    fn matches(&self, stack: &[Frame]) -> bool {
        let frames = if self.innermost {
            &stack[..stack.len().min(1)]
        } else {
            stack
        };
        let matched = frames.iter().any(|frame| self.pattern.matches_frame(frame));
        let within =
            (self.within.iter()).all(|within| stack.iter().any(|f| within.matches_frame(f)));
        matched && within
    }
}

/// The built-in rules, measured on an empty C and C++ program and the fixtures (DESIGN.md):
/// libstdc++'s emergency exception pool (72,704 bytes with gcc 12), allocated by a
/// constructor of libstdc++ as ld.so loads it; the dynamic loader's own blocks (a thread's
/// DTV, dlopen's link maps); stdio's buffers.
fn built_in_rules() -> Vec<Rule> {
    let rule = |innermost: bool, pattern: &str, within: Option<&str>| Rule {
        innermost,
        pattern: Pattern(pattern.to_string()),
        within: within.map(|within| Pattern(within.to_string())),
    };
    vec![
        // The pool: dynamic, libstdc++'s code run by ld.so; static, its initialiser by name.
        rule(true, "^libstdc++.so", Some("^_dl_init$")),
        rule(false, "^_GLOBAL__sub_I_eh_alloc.cc$", None),
        rule(true, "pool::pool", None),
        // ld.so's own blocks, or static glibc's copy of its code (`_dl_new_object`).
        rule(true, "^ld-linux", None),
        rule(true, "^_dl_", None),
        rule(false, "_IO_file_doallocate", None),
    ]
}

/// The rules a report applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suppressions {
    rules: Vec<Rule>,
}

impl Suppressions {
    /// The built-in rules (unless `defaults` is false), then those of `file_text`.
    pub fn new(defaults: bool, file_text: Option<&str>) -> Result<Self, String> {
        let mut rules = if defaults {
            built_in_rules()
        } else {
            Vec::new()
        };
        if let Some(text) = file_text {
            rules.extend(parse(text)?);
        }
        Ok(Suppressions { rules })
    }

    /// Takes the leaks the rules match out of every image of `analyses`.
    pub fn apply(&self, analyses: &mut [Analysis]) {
        if self.rules.is_empty() {
            return;
        }
        for analysis in analyses {
            for image in &mut analysis.processes {
                self.apply_to_image(image);
            }
        }
    }

    fn apply_to_image(&self, image: &mut ProcessAnalysis) {
        let mut matched = vec![false; self.rules.len()];
        let mut suppressed = Suppressed::default();
        // Per address and merged by source line: the same blocks, counted once.
        for site in &mut image.sites {
            if let Some((blocks, bytes)) = self.suppress(site, &mut matched) {
                suppressed.blocks += blocks;
                suppressed.bytes += bytes;
            }
        }
        for site in &mut image.source_sites {
            self.suppress(site, &mut vec![false; self.rules.len()]);
        }
        suppressed.rules = matched.iter().filter(|&&matched| matched).count() as u64;
        image.live_blocks_at_exit = image.live_blocks_at_exit.saturating_sub(suppressed.blocks);
        image.live_bytes_at_exit = image.live_bytes_at_exit.saturating_sub(suppressed.bytes);
        image.suppressed = suppressed;
    }

    /// Clears the leaks of `site` when a rule matches it: the blocks and bytes cleared.
    fn suppress(&self, site: &mut Site, matched: &mut [bool]) -> Option<(u64, u64)> {
        let metrics = &mut site.metrics;
        if metrics.leaked_blocks == 0 {
            return None;
        }
        let rule = self
            .rules
            .iter()
            .position(|rule| rule.matches(&site.stack))?;
        matched[rule] = true;
        let cleared = (metrics.leaked_blocks, metrics.leaked_bytes);
        metrics.leaked_blocks = 0;
        metrics.leaked_bytes = 0;
        Some(cleared)
    }
}

/// The rules of a LeakSanitizer suppression file; an error names the line.
fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let number = index + 1;
        let Some((kind, pattern)) = line.split_once(':') else {
            return Err(format!("line {number}: {line:?} is not leak:PATTERN"));
        };
        if kind.trim() != "leak" {
            return Err(format!(
                "line {number}: suppression type {:?} (only leak: is read)",
                kind.trim()
            ));
        }
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err(format!("line {number}: leak: without a pattern"));
        }
        rules.push(Rule {
            innermost: false,
            pattern: Pattern(pattern.to_string()),
            within: None,
        });
    }
    Ok(rules)
}

#[cfg(test)]
#[path = "suppress_tests.rs"]
mod tests;
