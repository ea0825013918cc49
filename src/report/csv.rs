//! `memsup report --format csv`: the timelines of every process image in long form, one row
//! per point: `pid,image_start_ns,time_ns,component,metric,bytes`. Times are ns since the
//! recording started; `metric` is requested, rss, pss or swap; the process totals are the
//! component `total`. Rows are grouped by image, component (the analysis's order, `total`
//! last), metric, then time. Fields are quoted as RFC 4180 says when they need it.

use std::io::Write;

use super::series::image_series;
use crate::analysis::Analysis;

pub const HEADER: &str = "pid,image_start_ns,time_ns,component,metric,bytes";

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    // RFC 4180 ends every line with CRLF; most readers take LF, which the other formats use.
    writeln!(out, "{HEADER}")?;
    for image in &analysis.processes {
        for series in image_series(&image.components) {
            let component = field(series.component);
            for (time_ns, bytes) in &series.points {
                writeln!(
                    out,
                    "{},{},{time_ns},{component},{},{bytes}",
                    image.pid, image.start_ns, series.metric
                )?;
            }
        }
    }
    Ok(())
}

/// A field as RFC 4180 writes it: in double quotes, its quotes doubled, when it holds a
/// comma, a quote or a line break.
pub(super) fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::{component, components_analysis};

    fn rendered(analysis: &Analysis) -> String {
        let mut out = Vec::new();
        render(analysis, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn long_form_rows_grouped_by_component_metric_and_time() {
        let text = rendered(&components_analysis());
        let lines: Vec<&str> = text.lines().collect();
        let mut expected = vec![HEADER];
        expected.extend([
            "100,1000,1000,app,requested,1000",
            "100,1000,2000,app,requested,3000",
            "100,1000,3000,app,requested,2000",
            "100,1000,1500,app,rss,4096",
            "100,1000,2500,app,rss,8192",
            "100,1000,1500,app,pss,4096",
            "100,1000,2500,app,pss,6144",
            "100,1000,1500,app,swap,0",
            "100,1000,2500,app,swap,0",
            "100,1000,1000,libc,requested,500",
            "100,1000,2000,libc,requested,500",
            "100,1000,3000,libc,requested,0",
            "100,1000,1500,libc,rss,4096",
            "100,1000,2500,libc,rss,4096",
            "100,1000,1500,libc,pss,2048",
            "100,1000,2500,libc,pss,2048",
            "100,1000,1500,libc,swap,0",
            "100,1000,2500,libc,swap,4096",
            "100,1000,1500,overhead,rss,0",
            "100,1000,2500,overhead,rss,2048",
            "100,1000,1500,overhead,pss,0",
            "100,1000,2500,overhead,pss,2048",
            "100,1000,1500,overhead,swap,0",
            "100,1000,2500,overhead,swap,0",
            "100,1000,1000,total,requested,1500",
            "100,1000,2000,total,requested,3500",
            "100,1000,3000,total,requested,2000",
            "100,1000,1000,total,rss,10000",
            "100,1000,2000,total,rss,20000",
            "100,1000,3000,total,rss,16000",
            "100,1000,1000,total,pss,9000",
            "100,1000,2000,total,pss,18000",
            "100,1000,3000,total,pss,15000",
            "100,1000,1000,total,swap,0",
            "100,1000,2000,total,swap,4096",
            "100,1000,3000,total,swap,4096",
        ]);
        assert_eq!(lines, expected);
        assert!(text.ends_with("4096\n"));
    }

    #[test]
    fn names_with_commas_or_quotes_are_quoted() {
        let mut analysis = components_analysis();
        let components = &mut analysis.processes[0].components;
        components.components = vec![
            component("my,\"lib\"", &[(10, 7)], &[]),
            component("plain name", &[(20, 8)], &[]),
        ];
        components.timeline = Default::default();
        assert_eq!(
            rendered(&analysis),
            "pid,image_start_ns,time_ns,component,metric,bytes\n\
             100,1000,10,\"my,\"\"lib\"\"\",requested,7\n\
             100,1000,20,plain name,requested,8\n"
        );
    }

    #[test]
    fn points_out_of_order_are_sorted_and_empty_images_only_have_the_header() {
        let mut analysis = components_analysis();
        let components = &mut analysis.processes[0].components;
        components.components = vec![component("app", &[(30, 3), (10, 1), (20, 2)], &[])];
        components.timeline = Default::default();
        assert_eq!(
            rendered(&analysis),
            format!(
                "{HEADER}\n100,1000,10,app,requested,1\n100,1000,20,app,requested,2\n\
                 100,1000,30,app,requested,3\n"
            )
        );
        analysis.processes[0].components = Default::default();
        assert_eq!(rendered(&analysis), format!("{HEADER}\n"));
    }
}
