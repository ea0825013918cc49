//! The human-readable summary.

use std::io::Write;

use crate::analysis::Analysis;

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let _ = (analysis, out);
    todo!()
}
