//! The HTML report: one self-contained page with an interactive flamegraph per metric, then
//! any sections the caller adds (the charts of memory over time, `charts.rs`, inline SVG that
//! needs no script).
//!
//! Nothing on the page is fetched: the style sheet and the script (`html/page.css`,
//! `html/flame.js`) are inlined, and a Content-Security-Policy of `default-src 'none'` makes
//! the browser refuse any fetch that a later change might add. Every text written here is
//! HTML-escaped. The stacks are merged into one prefix tree per metric here, in Rust, and
//! embedded as JSON in a `<script type="application/json">` block with `<`, `>` and `&`
//! written as `\u003c`, `\u003e` and `\u0026`, so no frame name can close the block; the
//! script parses the block and draws the frames as absolutely positioned divs.
//!
//! Embedded data, one object per metric in `graphs`:
//! `{"metric", "description", "total", "names": [frame name, ...], "runtime": [index into
//! names, ...], "nodes": [[parent, name, value], ...]}`. `nodes` is the merged tree in
//! pre-order (a parent before its children, children by value descending, then by name);
//! `parent` is an index into `nodes`, -1 for the children of the root; `value` is the sum of
//! the stacks through the node, `total` the root's. `runtime` lists the frames of the C
//! library, the dynamic linker and the language runtimes (see `is_runtime_frame`), drawn in a blue family
//! instead of the warm colors of the others. A differential page (`render_differential`) adds
//! `"base"` to each graph (`html/differential.rs`).
//!
//! Graphs of a profile (`render_detailed`, `html/site_stacks.rs`) add what the tooltip shows:
//! `"count_label"` (what the counts count, e.g. "allocations") and `"counts"` (per node, the
//! blocks of the stacks through it); `"modules"` (distinct module file names) and
//! `"name_modules"` (per name, an index into them or -1); `"locations"` (distinct texts of
//! source lines, e.g. "a.c:48, a.c:83") and `"node_locations"` (per node, an index into them
//! or -1: the lines of the calls the frames merged into the node made). Each is left out when
//! empty. The page may also carry a table of call sites (`html/site_table.rs`), sorted by the
//! second script (`html/table.js`).

pub mod charts;
mod differential;
mod graph_json;
pub mod job_chart;
mod merge;
pub mod moment_graphs;
pub mod palette;
pub mod site_stacks;
pub mod site_table;
pub mod thread_groups;

use std::io::Write;

use graph_json::{DataJson, GraphJson};
use merge::Merged;
pub use merge::{DetailedGraph, DetailedStack, FrameLabel, GraphMoment};

use super::text::human_bytes;
use crate::platform::libraries::LibraryKind;

/// One flamegraph: stacks with their values, frames root first.
pub struct FlameGraph {
    /// Short id and tab label, e.g. "peak", "leaked", "allocated", "temporary".
    pub metric: String,
    /// What the values mean, shown above the graph, e.g. "bytes live at the global peak".
    pub description: String,
    /// (frames root first, value in bytes); a frame may appear in many stacks.
    pub stacks: Vec<(Vec<String>, u64)>,
}

/// Stacks with their values, frames root first.
pub type Stacks = Vec<(Vec<String>, u64)>;

const STYLE: &str = include_str!("html/page.css");
const SCRIPT: &str = concat!(
    include_str!("html/flame_views.js"),
    include_str!("html/flame.js")
);
/// Sorts the call-site table (`site_table.rs`); does nothing on a page without one.
const TABLE_SCRIPT: &str = include_str!("html/table.js");

/// Id of the `<script type="application/json">` block the page's script reads.
const DATA_ID: &str = "memsup-data";

/// Writes the page. `title` names the profile (e.g. the program and the profile path);
/// `summary` is a few lines of plain text shown at the top (escaped).
pub fn render(
    title: &str,
    summary: &[String],
    graphs: &[FlameGraph],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_with_sections(title, summary, graphs, &[], out)
}

/// `render`, with `sections` (HTML written as is, e.g. `charts::process_section`) after the
/// flamegraphs.
pub fn render_with_sections(
    title: &str,
    summary: &[String],
    graphs: &[FlameGraph],
    sections: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let graphs: Vec<DetailedGraph> = graphs.iter().map(DetailedGraph::from).collect();
    render_page(title, summary, &graphs, None, sections, out)
}

/// `render_with_sections` for graphs whose frames carry modules, source lines and counts,
/// which the tooltip shows.
pub fn render_detailed(
    title: &str,
    summary: &[String],
    graphs: &[DetailedGraph],
    sections: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_page(title, summary, graphs, None, sections, out)
}

/// A page of differential flame graphs: graph `i` drawn as in `render`, each frame coloured
/// by the change of its own bytes from `bases[i]`, the stacks of the profile compared with
/// (`differential.rs`).
pub fn render_differential(
    title: &str,
    summary: &[String],
    graphs: &[FlameGraph],
    bases: &[Stacks],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let graphs: Vec<DetailedGraph> = graphs.iter().map(DetailedGraph::from).collect();
    render_page(title, summary, &graphs, Some(bases), &[], out)
}

fn render_page(
    title: &str,
    summary: &[String],
    graphs: &[DetailedGraph],
    bases: Option<&[Stacks]>,
    sections: &[String],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let merged: Vec<Merged> = graphs.iter().map(Merged::new).collect();
    let title = escape(title);
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, "<html lang=\"en\">")?;
    writeln!(out, "<head>")?;
    writeln!(out, "<meta charset=\"utf-8\">")?;
    writeln!(
        out,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
    )?;
    writeln!(
        out,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(out, "<title>memsup: {title}</title>")?;
    writeln!(out, "<style>\n{STYLE}</style>")?;
    writeln!(out, "</head>")?;
    writeln!(out, "<body>")?;
    writeln!(out, "<header>")?;
    writeln!(out, "<h1>memsup: {title}</h1>")?;
    if !summary.is_empty() {
        let lines: Vec<String> = summary.iter().map(|line| escape(line)).collect();
        writeln!(out, "<pre class=\"summary\">{}</pre>", lines.join("\n"))?;
    }
    writeln!(out, "</header>")?;
    if graphs.is_empty() {
        writeln!(
            out,
            "<p class=\"empty\">Nothing to show: no flamegraph.</p>"
        )?;
    } else {
        render_controls(graphs, out)?;
        render_sections(graphs, &merged, out)?;
    }
    for section in sections {
        out.write_all(section.as_bytes())?;
    }
    writeln!(out, "<div id=\"tooltip\" hidden></div>")?;
    writeln!(
        out,
        "<noscript><p class=\"empty\">The flamegraphs are drawn by JavaScript, \
         which is turned off.</p></noscript>"
    )?;
    let mut data = DataJson {
        graphs: merged.iter().map(GraphJson::new).collect(),
    };
    if let Some(bases) = bases {
        differential::add_bases(&mut data.graphs, &merged, bases);
    }
    let json = serde_json::to_string(&data)?;
    writeln!(
        out,
        "<script type=\"application/json\" id=\"{DATA_ID}\">{}</script>",
        escape_json(&json)
    )?;
    writeln!(out, "<script>\n{SCRIPT}{TABLE_SCRIPT}</script>")?;
    writeln!(out, "</body>")?;
    writeln!(out, "</html>")
}

/// The tabs, the search box and the reset button.
fn render_controls(graphs: &[DetailedGraph], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "<nav class=\"tabs\" role=\"tablist\">")?;
    for (index, graph) in graphs.iter().enumerate() {
        if graph.moment.is_some() {
            continue;
        }
        writeln!(
            out,
            "<button type=\"button\" class=\"tab\" role=\"tab\" data-graph=\"{index}\" \
             aria-selected=\"{}\">{}</button>",
            index == 0,
            escape(&graph.metric)
        )?;
    }
    if graphs.iter().any(|graph| graph.moment.is_some()) {
        writeln!(
            out,
            "<button type=\"button\" class=\"tab\" role=\"tab\" id=\"moment-tab\" \
             aria-selected=\"false\">live at a moment</button>"
        )?;
    }
    writeln!(out, "</nav>")?;
    moment_graphs::render_picker(graphs, out)?;
    writeln!(out, "<div class=\"controls\">")?;
    writeln!(
        out,
        "<input type=\"search\" id=\"search\" placeholder=\"Search frames\" \
         aria-label=\"Search frames (case-insensitive)\" autocomplete=\"off\">"
    )?;
    writeln!(
        out,
        "<button type=\"button\" id=\"reset\">Reset zoom</button>"
    )?;
    writeln!(
        out,
        "<button type=\"button\" id=\"invert\" aria-pressed=\"false\" \
         title=\"The functions that called the allocator at the root, their callers below\">\
         Bottom-up</button>"
    )?;
    writeln!(out, "<span id=\"matched\"></span>")?;
    writeln!(out, "</div>")
}

/// One section per graph: its description and total, then the chart the script fills, or
/// the note that there is nothing to show. Only the first is visible until a tab is chosen.
fn render_sections(
    graphs: &[DetailedGraph],
    merged: &[Merged],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "<main>")?;
    for (index, (graph, tree)) in graphs.iter().zip(merged).enumerate() {
        let hidden = if index == 0 { "" } else { " hidden" };
        writeln!(
            out,
            "<section class=\"graph\" id=\"graph-{index}\" data-metric=\"{}\"{hidden}>",
            escape(&graph.metric)
        )?;
        writeln!(
            out,
            "<p class=\"description\">{}; total {}</p>",
            escape(&graph.description),
            escape(&human_bytes(tree.total))
        )?;
        if tree.total == 0 {
            writeln!(
                out,
                "<p class=\"empty\">Nothing to show: no stack has a value for {}.</p>",
                escape(&graph.metric)
            )?;
        } else {
            writeln!(out, "<div class=\"chart\" id=\"chart-{index}\"></div>")?;
        }
        writeln!(out, "</section>")?;
    }
    writeln!(out, "</main>")
}

/// True for a frame of the C library, the dynamic linker or a language runtime. Frame names are free
/// text; this only recognises a module named at the end, after a space, in brackets or
/// parentheses: `malloc [libc.so.6]`, `operator new(unsigned long) (/usr/lib/libstdc++.so.6)`.
fn is_runtime_frame(name: &str) -> bool {
    let name = name.trim_end();
    let module = if let Some(rest) = name.strip_suffix(']') {
        rest.rsplit_once(" [")
    } else if let Some(rest) = name.strip_suffix(')') {
        rest.rsplit_once(" (")
    } else {
        None
    };
    let Some((_, module)) = module else {
        return false;
    };
    LibraryKind::of(module).is_runtime()
}

/// Text as HTML, safe both between tags and inside a double- or single-quoted attribute.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(character),
        }
    }
    escaped
}

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` only occur inside JSON
/// strings, where their `\u` escapes mean the same characters.
fn escape_json(json: &str) -> String {
    json.replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod detail_tests;
