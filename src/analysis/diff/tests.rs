use super::*;
use crate::analysis::Site;
use crate::trace::format::StartCause;

fn frame(function: &str, line: u32, module: &str) -> Frame {
    Frame {
        function: function.to_string(),
        file: Some("app.c".to_string()),
        line: Some(line),
        module: module.to_string(),
        address: u64::from(line) * 16,
        offset: 4,
        inlined: false,
    }
}

fn site(function: &str, line: u32, module: &str, peak: u64, allocations: u64) -> Site {
    Site {
        stack: vec![frame(function, line, module), frame("main", 90, module)],
        metrics: SiteMetrics {
            allocations,
            bytes_allocated: peak,
            peak_bytes: peak,
            ..SiteMetrics::default()
        },
    }
}

fn image(pid: u32, exe: &str, sites: Vec<Site>) -> ProcessAnalysis {
    let mut image = ProcessAnalysis::new(pid, None, StartCause::Launch, 0);
    image.exe = exe.to_string();
    image.peak_live_bytes = sites.iter().map(|site| site.metrics.peak_bytes).sum();
    image.source_sites = sites;
    image
}

fn analysis(path: &str, processes: Vec<ProcessAnalysis>) -> Analysis {
    Analysis::of_run(path, processes)
}

fn peak(metrics: &SiteMetrics) -> u64 {
    metrics.peak_bytes
}

#[test]
fn sites_of_a_rebuilt_program_match_by_source_and_sort_by_change() {
    let base = analysis(
        "old.msup",
        vec![image(
            10,
            "/build1/app",
            vec![
                site("grow", 5, "/build1/app", 1000, 1),
                site("same", 7, "/build1/app", 500, 2),
                site("shrink", 9, "/build1/app", 800, 1),
                site("gone", 11, "/build1/app", 100, 1),
            ],
        )],
    );
    let new = analysis(
        "new.msup",
        vec![image(
            20,
            "/build2/app",
            vec![
                site("grow", 5, "/build2/app", 5096, 2),
                site("same", 7, "/build2/app", 500, 2),
                site("shrink", 9, "/build2/app", 300, 1),
                site("added", 13, "/build2/app", 64, 1),
            ],
        )],
    );
    let diff = diff(&base, &new, peak).expect("one image each");
    assert_eq!(diff.images.len(), 1);
    let image = &diff.images[0];
    assert_eq!((image.base.pid, image.new.pid), (10, 20));
    assert_eq!(
        (image.base_totals.peak_bytes, image.new_totals.peak_bytes),
        (2400, 5960)
    );
    let listed: Vec<(&str, &str, i64)> = image
        .sites
        .iter()
        .map(|site| {
            (
                site.stack[0].function.as_str(),
                site.status().name(),
                site.change(peak),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("grow", "changed", 4096),
            ("shrink", "changed", -500),
            ("gone", "gone", -100),
            ("added", "new", 64),
            ("same", "unchanged", 0),
        ]
    );
    assert_eq!(image.sites[0].change(|metrics| metrics.allocations), 1);
    // NEW's frames are kept for a matched site.
    assert_eq!(image.sites[0].stack[0].module, "/build2/app");
    assert!(diff.unmatched_base.is_empty() && diff.unmatched_new.is_empty());
}

#[test]
fn several_images_pair_by_program_name_in_order_and_nothing_in_common_is_refused() {
    let base = vec![
        image(1, "/bin/sh", Vec::new()),
        image(2, "/usr/bin/cc", Vec::new()),
        image(3, "/usr/bin/cc", Vec::new()),
        image(4, "/usr/bin/ld", Vec::new()),
    ];
    let new = vec![
        image(11, "/bin/sh", Vec::new()),
        image(12, "/opt/bin/cc", Vec::new()),
        image(13, "/usr/bin/as", Vec::new()),
    ];
    assert_eq!(pair_images(&base, &new), [(0, 0), (1, 1)]);
    let diff = diff(&analysis("a", base), &analysis("b", new), peak).unwrap();
    let pids = |names: &[ImageName]| names.iter().map(|name| name.pid).collect::<Vec<_>>();
    assert_eq!(pids(&diff.unmatched_base), [3, 4]);
    assert_eq!(pids(&diff.unmatched_new), [13]);

    // One image each: compared whatever their names.
    let one = [image(1, "/a/app-v1", Vec::new())];
    let other = [image(2, "/a/app-v2", Vec::new())];
    assert_eq!(pair_images(&one, &other), [(0, 0)]);

    let base = analysis(
        "a",
        vec![
            image(1, "/bin/sh", Vec::new()),
            image(2, "/bin/ls", Vec::new()),
        ],
    );
    let new = analysis(
        "b",
        vec![
            image(5, "/bin/cat", Vec::new()),
            image(6, "/bin/id", Vec::new()),
        ],
    );
    let refused = super::diff(&base, &new, peak).unwrap_err();
    assert_eq!(pids(&refused.base), [1, 2]);
    assert_eq!(pids(&refused.new), [5, 6]);
}
