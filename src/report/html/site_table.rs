//! The table of call sites: one row per site merged by source location (the sites of the
//! text report), its innermost frame's function, file:line and module, then its numbers.
//! Numeric cells carry their exact value in `data-value`; `table.js` sorts the rows when a
//! header is clicked.

use std::fmt::Write as _;

use super::escape;
use super::site_stacks::location;
use crate::analysis::{Analysis, Site};
use crate::report::folded::image_frame;
use crate::report::text::short_bytes;

/// Rows past this many (the sites with the least bytes at the peak) are left out, so that a
/// profile of a large program keeps a page a browser opens quickly.
pub const MAX_ROWS: usize = 1000;

/// The headers: (label, numeric).
const HEADERS: [(&str, bool); 7] = [
    ("function", false),
    ("file:line", false),
    ("module", false),
    ("allocations", true),
    ("bytes at peak", true),
    ("leaked", true),
    ("temporary", true),
];

/// The section of the table; empty when no image has a heap site.
pub fn site_table_section(analysis: &Analysis) -> String {
    let name_images = analysis.processes.len() > 1;
    let mut rows: Vec<(Option<String>, &Site)> = Vec::new();
    for image in &analysis.processes {
        let process = name_images.then(|| image_frame(image));
        rows.extend(
            image
                .source_sites
                .iter()
                .map(|site| (process.clone(), site)),
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    // The images' own orders interleaved: by bytes at the peak, then bytes allocated.
    rows.sort_by_key(|(_, site)| {
        let metrics = &site.metrics;
        std::cmp::Reverse((metrics.peak_bytes, metrics.bytes_allocated))
    });
    let total = rows.len();
    rows.truncate(MAX_ROWS);
    let mut html = String::from("<section class=\"sites\">\n<h2>Call sites</h2>\n");
    let _ = writeln!(
        html,
        "<p class=\"description\">{}; click a header to sort by it.</p>",
        if total > MAX_ROWS {
            format!("The {MAX_ROWS} sites of {total} with the most bytes live at the peak")
        } else {
            format!("{total} sites, merged by source line")
        }
    );
    html.push_str("<table id=\"sites\">\n<thead><tr>");
    if name_images {
        html.push_str("<th data-kind=\"text\">process</th>");
    }
    for (label, numeric) in HEADERS {
        let kind = if numeric { "number" } else { "text" };
        let _ = write!(html, "<th data-kind=\"{kind}\">{label}</th>");
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for (index, (process, site)) in rows.iter().enumerate() {
        row(index, process.as_deref(), site, &mut html);
    }
    html.push_str("</tbody>\n</table>\n</section>\n");
    html
}

fn row(index: usize, process: Option<&str>, site: &Site, html: &mut String) {
    let chain: Vec<String> = site.stack.iter().map(|frame| frame.name()).collect();
    let _ = write!(
        html,
        "<tr data-row=\"{index}\" title=\"{}\">",
        escape(&chain.join(" \u{2190} "))
    );
    if let Some(process) = process {
        let _ = write!(html, "<td>{}</td>", escape(process));
    }
    let innermost = site.stack.first();
    let texts = [
        innermost.map_or_else(|| "[no stack]".to_string(), |frame| frame.name()),
        innermost.map(location).unwrap_or_default(),
        innermost.map_or_else(String::new, |frame| frame.module_file_name().to_string()),
    ];
    for text in texts {
        let _ = write!(html, "<td>{}</td>", escape(&text));
    }
    let metrics = &site.metrics;
    let numbers = [
        (metrics.allocations, metrics.allocations.to_string()),
        (metrics.peak_bytes, short_bytes(metrics.peak_bytes)),
        (metrics.leaked_bytes, short_bytes(metrics.leaked_bytes)),
        (
            metrics.temporary_allocations,
            metrics.temporary_allocations.to_string(),
        ),
    ];
    for (value, text) in numbers {
        let _ = write!(
            html,
            "<td class=\"number\" data-value=\"{value}\">{text}</td>"
        );
    }
    html.push_str("</tr>\n");
}
