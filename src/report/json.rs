//! The JSON report (schema `memsup-report`, version 1).

use std::io::Write;

use crate::analysis::Analysis;

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let _ = (analysis, out);
    todo!()
}
