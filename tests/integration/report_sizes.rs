//! The allocation size histogram of fixtures/alloc_script.c, exactly: 9 blocks (0, 64, 64,
//! 1000 x 3, 2500, 5000, 9000 bytes), 3 still live at exit (1000, 64, 64).

use serde_json::json;

use crate::common::report::report_output;
use crate::common::*;

#[test]
fn alloc_script_sizes_by_power_of_two_class() {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        crate::alloc_script::ALLOC_SCRIPT_STDOUT
    );
    let image = launched_image(&recording.report, &fixture, &[]);
    let class = |min: u64, max: u64, allocations: u64, bytes: u64, live: u64| {
        json!({ "min_bytes": min, "max_bytes": max, "allocations": allocations,
                "bytes": bytes, "live": live })
    };
    let expected = json!([
        class(0, 0, 1, 0, 0),
        class(64, 127, 2, 128, 2),
        class(512, 1023, 3, 3000, 1),
        class(2048, 4095, 1, 2500, 0),
        class(4096, 8191, 1, 5000, 0),
        class(8192, 16383, 1, 9000, 0),
    ]);
    assert_eq!(image["size_histogram"], expected);
    let html = report_output(&recording.profile, &["--format", "html", "-o", "-"]);
    let rows = [
        "<tr><td>0 B</td><td>1</td><td>0</td><td>0</td></tr>",
        "<tr><td>64–127 B</td><td>2</td><td>128</td><td>2</td></tr>",
        "<tr><td>512–1023 B</td><td>3</td><td>3000</td><td>1</td></tr>",
        "<tr><td>2–4 KiB</td><td>1</td><td>2500</td><td>0</td></tr>",
        "<tr><td>4–8 KiB</td><td>1</td><td>5000</td><td>0</td></tr>",
        "<tr><td>8–16 KiB</td><td>1</td><td>9000</td><td>0</td></tr>",
    ];
    let table = rows.join("\n");
    assert!(html.contains(&table), "the HTML table of sizes");
}
