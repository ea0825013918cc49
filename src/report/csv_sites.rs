//! `memsup report --format csv --sites`: one row per heap call site of every process image,
//! the sites merged by source location as the text report lists them (by bytes live at the
//! peak), numbered from 1 in each image. The innermost frame (the allocator's caller) gives
//! `function`, `file`, `line` and `module`; `stack` is every kept frame, outermost first,
//! `function (file:line)` joined by `;`. Fields are quoted as RFC 4180 says when they need it.

use std::io::Write;

use super::csv::field;
use crate::analysis::{Analysis, Frame, ProcessAnalysis};

pub const HEADER: &str = "pid,exe,site,function,file,line,module,stack,allocations,\
bytes_allocated,peak_bytes,leaked_bytes,leaked_blocks,temporary_allocations,temporary_bytes";

/// Every image of every analysis, in order.
pub fn render(analyses: &[Analysis], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{HEADER}")?;
    for image in analyses.iter().flat_map(|analysis| &analysis.processes) {
        render_image(image, out)?;
    }
    Ok(())
}

fn render_image(image: &ProcessAnalysis, out: &mut dyn Write) -> std::io::Result<()> {
    for (index, site) in image.source_sites.iter().enumerate() {
        let innermost = site.stack.first();
        let text = |value: Option<&str>| field(value.unwrap_or_default());
        let line = innermost
            .and_then(|frame| frame.line)
            .map_or(String::new(), |line| line.to_string());
        let stack: Vec<String> = site.stack.iter().rev().map(frame_text).collect();
        let metrics = &site.metrics;
        writeln!(
            out,
            "{},{},{},{},{},{line},{},{},{},{},{},{},{},{},{}",
            image.pid,
            field(&image.exe),
            index + 1,
            field(&innermost.map(Frame::name).unwrap_or_default()),
            text(innermost.and_then(|frame| frame.file.as_deref())),
            text(innermost.map(|frame| frame.module.as_str())),
            field(&stack.join(";")),
            metrics.allocations,
            metrics.bytes_allocated,
            metrics.peak_bytes,
            metrics.leaked_bytes,
            metrics.leaked_blocks,
            metrics.temporary_allocations,
            metrics.temporary_bytes,
        )?;
    }
    Ok(())
}

/// `function (file:line)`, or the function alone without a line.
fn frame_text(frame: &Frame) -> String {
    let file = frame
        .file
        .as_deref()
        .map(crate::platform::libraries::file_name);
    match (file, frame.line) {
        (Some(file), Some(line)) => format!("{} ({file}:{line})", frame.name()),
        _ => frame.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Site, SiteMetrics};
    use crate::report::test_data::components_analysis;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.to_string(),
            file: file.map(str::to_string),
            line,
            module: "/bin/app".to_string(),
            address: 0x1000,
            offset: 0,
            inlined: false,
        }
    }

    #[test]
    fn one_row_per_source_site_innermost_frame_first_stack_outermost_first() {
        let metrics = SiteMetrics {
            allocations: 3,
            bytes_allocated: 300,
            peak_bytes: 200,
            leaked_bytes: 100,
            leaked_blocks: 1,
            temporary_allocations: 1,
            temporary_bytes: 100,
            ..SiteMetrics::default()
        };
        let site = Site {
            stack: vec![
                frame("make, \"it\"", Some("/src/a.c"), Some(48)),
                frame("main", Some("/src/a.c"), Some(83)),
                frame("_start", None, None),
            ],
            metrics,
        };
        let mut analysis = components_analysis();
        analysis.processes[0].exe = "/bin/app".to_string();
        analysis.processes[0].source_sites = vec![site];
        let mut out = Vec::new();
        render(&[analysis], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(
            lines[1],
            "100,/bin/app,1,\"make, \"\"it\"\"\",/src/a.c,48,/bin/app,\
             \"_start;main (a.c:83);make, \"\"it\"\" (a.c:48)\",3,300,200,100,1,1,100"
        );
        assert_eq!(lines.len(), 2);
    }
}
