//! An independent count of a program's mapping system calls: strace of the native run,
//! summed the way the report's `mappings` object sums them.

use std::fs;
use std::path::Path;

use serde_json::Value;

use super::report::number;
use super::run::{clean_command, run_command};

pub const MAPPING_CALLS: [&str; 6] = ["mmap", "munmap", "mremap", "brk", "shmat", "shmdt"];

/// The `mappings` numbers of one process image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MappingTotals {
    /// In MAPPING_CALLS order.
    pub calls: [u64; 6],
    /// Sum of the lengths of successful mmap calls.
    pub mmap_bytes: u64,
    /// Sum of the lengths of successful munmap calls.
    pub munmap_bytes: u64,
    /// Sum of the positive movements of the program break.
    pub brk_growth_bytes: u64,
}

impl MappingTotals {
    pub fn from_image(image: &Value) -> MappingTotals {
        let mut totals = MappingTotals::default();
        for (index, call) in MAPPING_CALLS.iter().enumerate() {
            totals.calls[index] = number(image, &format!("/mappings/calls/{call}"));
        }
        totals.mmap_bytes = number(image, "/mappings/mmap_bytes");
        totals.munmap_bytes = number(image, "/mappings/munmap_bytes");
        totals.brk_growth_bytes = number(image, "/mappings/brk_growth_bytes");
        totals
    }

    /// `self - earlier`, field by field (a run's contribution over a baseline run).
    pub fn minus(&self, earlier: &MappingTotals) -> MappingTotals {
        let mut difference = MappingTotals::default();
        for index in 0..MAPPING_CALLS.len() {
            difference.calls[index] = self.calls[index].wrapping_sub(earlier.calls[index]);
        }
        difference.mmap_bytes = self.mmap_bytes.wrapping_sub(earlier.mmap_bytes);
        difference.munmap_bytes = self.munmap_bytes.wrapping_sub(earlier.munmap_bytes);
        difference.brk_growth_bytes = self.brk_growth_bytes.wrapping_sub(earlier.brk_growth_bytes);
        difference
    }
}

fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Sums strace lines of the form `PID name(arguments) = result`.
pub fn totals_from_strace(log: &str) -> MappingTotals {
    let mut totals = MappingTotals::default();
    let mut current_break: Option<u64> = None;
    for line in log.lines() {
        let line = line
            .split_once(' ')
            .map_or(line, |(_, rest)| rest)
            .trim_start();
        let Some((name, rest)) = line.split_once('(') else {
            continue;
        };
        let Some(index) = MAPPING_CALLS.iter().position(|call| *call == name) else {
            continue;
        };
        // strace pads short calls with spaces before " = result".
        let Some((arguments, result)) = rest.rsplit_once(" = ") else {
            panic!("unexpected strace line (unfinished call?): {line}");
        };
        let arguments = arguments.trim_end().trim_end_matches(')');
        totals.calls[index] += 1;
        let result = result.split_whitespace().next().unwrap_or_default();
        let succeeded = !result.starts_with('-');
        let length = arguments.split(", ").nth(1).and_then(parse_number);
        match name {
            "mmap" if succeeded => totals.mmap_bytes += length.expect("mmap length"),
            "munmap" if succeeded => totals.munmap_bytes += length.expect("munmap length"),
            "brk" => {
                let new_break = parse_number(result).expect("brk result");
                if let Some(previous) = current_break {
                    totals.brk_growth_bytes += new_break.saturating_sub(previous);
                }
                current_break = Some(new_break);
            }
            _ => {}
        }
    }
    totals
}

/// Runs `fixture args` natively under strace (same environment as every other run) and sums
/// its mapping system calls. The caller checks `require_tool("strace")` first.
pub fn strace_mapping_totals(fixture: &Path, args: &[&str]) -> MappingTotals {
    let directory = tempfile::tempdir().expect("creating a temporary directory");
    let log = directory.path().join("strace.log");
    let mut command = clean_command("strace");
    command
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=mmap,munmap,mremap,brk,shmat,shmdt",
            "-o",
        ])
        .arg(&log)
        .arg(fixture)
        .args(args);
    let output = run_command(command, None);
    assert!(
        output.status.success(),
        "strace {} failed: {}",
        fixture.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    totals_from_strace(&fs::read_to_string(&log).expect("reading the strace log"))
}

#[test]
fn strace_lines_are_summed_like_the_report() {
    let log = "\
7 brk(NULL)                         = 0x83e1000
7 brk(0x83e1d00)                    = 0x83e1d00
7 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f824e191000
7 mmap(NULL, 0, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = -1 EINVAL (Invalid argument)
7 munmap(0x7f824e188000, 33699)     = 0
7 mremap(0x7f824e18c000, 8192, 20480, MREMAP_MAYMOVE) = 0x7f824df9e000
7 shmat(0, NULL, 0)                 = 0x7f824e18d000
7 shmdt(0x7f824e18d000)             = 0
7 brk(0x83e1000)                    = 0x83e1000
7 +++ exited with 0 +++
";
    let totals = totals_from_strace(log);
    assert_eq!(totals.calls, [2, 1, 1, 3, 1, 1]);
    assert_eq!(totals.mmap_bytes, 8192);
    assert_eq!(totals.munmap_bytes, 33699);
    assert_eq!(totals.brk_growth_bytes, 0xd00);
}
