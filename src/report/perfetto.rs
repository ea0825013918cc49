//! `memsup report --format perfetto`: the timelines as a Chrome trace (JSON object format),
//! which ui.perfetto.dev and chrome://tracing open. Per process image, a `process_name`
//! metadata event ("PID exe"), then one counter track per component and metric, named
//! "COMPONENT METRIC" (metric requested, rss, pss or swap; the process totals are component
//! `total`), with an event `{"ph":"C","ts":µs since the recording started,"args":{"bytes":N}}`
//! per point. Images of one PID (before and after an exec) share its tracks. A snapshot that
//! is an estimate from pagemap is also a process-scoped instant event named `estimated from
//! pagemap` (`{"ph":"i","s":"p","args":{"pagemap_mappings":N}}`) at its time.

use std::io::Write;

use serde::Serialize;

use super::series::image_series;
use crate::analysis::Analysis;

#[derive(Serialize)]
struct Trace {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Event>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Event {
    Metadata {
        ph: &'static str,
        name: &'static str,
        pid: u32,
        args: NameArgs,
    },
    Counter {
        ph: &'static str,
        name: String,
        pid: u32,
        /// Microseconds.
        ts: f64,
        args: BytesArgs,
    },
    Instant {
        ph: &'static str,
        /// `p`: the mark spans the process's tracks.
        s: &'static str,
        name: &'static str,
        pid: u32,
        ts: f64,
        args: EstimateArgs,
    },
}

#[derive(Serialize)]
struct EstimateArgs {
    pagemap_mappings: u64,
}

#[derive(Serialize)]
struct NameArgs {
    name: String,
}

#[derive(Serialize)]
struct BytesArgs {
    bytes: u64,
}

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let mut events = Vec::new();
    for image in &analysis.processes {
        events.push(Event::Metadata {
            ph: "M",
            name: "process_name",
            pid: image.pid,
            args: NameArgs {
                name: format!("{} {}", image.pid, image.exe),
            },
        });
        for series in image_series(&image.components) {
            let name = format!("{} {}", series.component, series.metric);
            for &(time_ns, bytes) in &series.points {
                events.push(Event::Counter {
                    ph: "C",
                    name: name.clone(),
                    pid: image.pid,
                    ts: time_ns as f64 / 1000.0,
                    args: BytesArgs { bytes },
                });
            }
        }
        for snapshot in &image.components.snapshots {
            let Some(pagemap_mappings) = snapshot.pagemap_mappings else {
                continue;
            };
            events.push(Event::Instant {
                ph: "i",
                s: "p",
                name: "estimated from pagemap",
                pid: image.pid,
                ts: snapshot.time_ns as f64 / 1000.0,
                args: EstimateArgs { pagemap_mappings },
            });
        }
    }
    let trace = Trace {
        trace_events: events,
        display_time_unit: "ms",
    };
    serde_json::to_writer(&mut *out, &trace)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{json, Value};

    use super::*;
    use crate::report::test_data::components_analysis;

    fn rendered(analysis: &Analysis) -> Value {
        let mut out = Vec::new();
        render(analysis, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn one_counter_track_per_component_and_metric() {
        let trace = rendered(&components_analysis());
        assert_eq!(trace["displayTimeUnit"], "ms");
        let events = trace["traceEvents"].as_array().unwrap();
        assert_eq!(
            events[0],
            json!({"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "100 /bin/app"}})
        );
        // app and libc: 3 requested points and 2 snapshots of 3 metrics each; overhead: 2
        // snapshots; totals: 4 metrics of 3 points; the second snapshot is an estimate.
        assert_eq!(events.len(), 1 + 9 + 9 + 6 + 12 + 1);
        assert_eq!(
            events.last().unwrap(),
            &json!({"ph": "i", "s": "p", "name": "estimated from pagemap", "pid": 100,
                "ts": 2.5, "args": {"pagemap_mappings": 3}})
        );
        let counters: Vec<&Value> = events.iter().filter(|event| event["ph"] == "C").collect();
        assert_eq!(counters.len(), 36);
        assert!(counters.iter().all(|event| event["pid"] == 100));
        let tracks: BTreeSet<&str> = counters
            .iter()
            .map(|event| event["name"].as_str().unwrap())
            .collect();
        let expected: BTreeSet<&str> = [
            "app requested",
            "app rss",
            "app pss",
            "app swap",
            "libc requested",
            "libc rss",
            "libc pss",
            "libc swap",
            "overhead rss",
            "overhead pss",
            "overhead swap",
            "total requested",
            "total rss",
            "total pss",
            "total swap",
        ]
        .into_iter()
        .collect();
        assert_eq!(tracks, expected);
        let app_rss: Vec<&&Value> = counters
            .iter()
            .filter(|event| event["name"] == "app rss")
            .collect();
        assert_eq!(
            app_rss,
            [
                &&json!({"ph": "C", "name": "app rss", "pid": 100, "ts": 1.5, "args": {"bytes": 4096}}),
                &&json!({"ph": "C", "name": "app rss", "pid": 100, "ts": 2.5, "args": {"bytes": 8192}}),
            ]
        );
        let total_swap_last = counters
            .iter()
            .rev()
            .find(|event| event["name"] == "total swap")
            .unwrap();
        assert_eq!(total_swap_last["ts"], 3.0);
        assert_eq!(total_swap_last["args"]["bytes"], 4096);
    }

    #[test]
    fn an_image_without_timelines_has_only_its_name() {
        let mut analysis = components_analysis();
        analysis.processes[0].components = Default::default();
        let trace = rendered(&analysis);
        assert_eq!(trace["traceEvents"].as_array().unwrap().len(), 1);
    }
}
