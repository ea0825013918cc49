//! `memsup report --format csv`: the timelines of every process image in long form, one row
//! per point: `pid,image_start_ns,time_ns,component,metric,bytes,estimated`. Times are ns
//! since the recording started; `metric` is requested, rss, pss or swap; the process totals
//! are the component `total`; `estimated` is 1 for a component's rss, pss or swap at a
//! snapshot that is an estimate from pagemap, else 0. Rows are grouped by image, component
//! (the analysis's order, `total` last), metric, then time. Fields are quoted as RFC 4180
//! says when they need it.

use std::io::Write;

use std::collections::HashSet;

use super::series::{image_series, TOTAL};
use crate::analysis::Analysis;

pub const HEADER: &str = "pid,image_start_ns,time_ns,component,metric,bytes,estimated";

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    // RFC 4180 ends every line with CRLF; most readers take LF, which the other formats use.
    writeln!(out, "{HEADER}")?;
    for image in &analysis.processes {
        let estimates: HashSet<u64> = (image.components.snapshots.iter())
            .filter(|snapshot| snapshot.pagemap_mappings.is_some())
            .map(|snapshot| snapshot.time_ns)
            .collect();
        for series in image_series(&image.components) {
            let component = field(series.component);
            // A component's residency comes from snapshots; requested bytes and the
            // totals never from an estimate.
            let of_snapshots = series.metric != "requested" && series.component != TOTAL;
            for (time_ns, bytes) in &series.points {
                let estimated = u8::from(of_snapshots && estimates.contains(time_ns));
                writeln!(
                    out,
                    "{},{},{time_ns},{component},{},{bytes},{estimated}",
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
            "100,1000,1000,app,requested,1000,0",
            "100,1000,2000,app,requested,3000,0",
            "100,1000,3000,app,requested,2000,0",
            "100,1000,1500,app,rss,4096,0",
            "100,1000,2500,app,rss,8192,1",
            "100,1000,1500,app,pss,4096,0",
            "100,1000,2500,app,pss,6144,1",
            "100,1000,1500,app,swap,0,0",
            "100,1000,2500,app,swap,0,1",
            "100,1000,1000,libc,requested,500,0",
            "100,1000,2000,libc,requested,500,0",
            "100,1000,3000,libc,requested,0,0",
            "100,1000,1500,libc,rss,4096,0",
            "100,1000,2500,libc,rss,4096,1",
            "100,1000,1500,libc,pss,2048,0",
            "100,1000,2500,libc,pss,2048,1",
            "100,1000,1500,libc,swap,0,0",
            "100,1000,2500,libc,swap,4096,1",
            "100,1000,1500,overhead,rss,0,0",
            "100,1000,2500,overhead,rss,2048,1",
            "100,1000,1500,overhead,pss,0,0",
            "100,1000,2500,overhead,pss,2048,1",
            "100,1000,1500,overhead,swap,0,0",
            "100,1000,2500,overhead,swap,0,1",
            "100,1000,1000,total,requested,1500,0",
            "100,1000,2000,total,requested,3500,0",
            "100,1000,3000,total,requested,2000,0",
            "100,1000,1000,total,rss,10000,0",
            "100,1000,2000,total,rss,20000,0",
            "100,1000,3000,total,rss,16000,0",
            "100,1000,1000,total,pss,9000,0",
            "100,1000,2000,total,pss,18000,0",
            "100,1000,3000,total,pss,15000,0",
            "100,1000,1000,total,swap,0,0",
            "100,1000,2000,total,swap,4096,0",
            "100,1000,3000,total,swap,4096,0",
        ]);
        assert_eq!(lines, expected);
        assert!(text.ends_with("4096,0\n"));
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
            format!(
                "{HEADER}\n100,1000,10,\"my,\"\"lib\"\"\",requested,7,0\n\
                 100,1000,20,plain name,requested,8,0\n"
            )
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
                "{HEADER}\n100,1000,10,app,requested,1,0\n100,1000,20,app,requested,2,0\n\
                 100,1000,30,app,requested,3,0\n"
            )
        );
        analysis.processes[0].components = Default::default();
        assert_eq!(rendered(&analysis), format!("{HEADER}\n"));
    }
}
