//! The allocation size histogram (`analysis::size_histogram`) as people read it: one text
//! row of counts per class, and a small HTML table per process image.

use std::fmt::Write;

use super::html::escape;
use crate::analysis::size_histogram::SizeClass;
use crate::analysis::ProcessAnalysis;

/// "0 B", "1 B", "64–127 B", "2–4 KiB" (2,048 to 4,095 bytes), "512–1024 KiB".
pub fn label(class: &SizeClass) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (min, max) = (class.min_bytes, class.max_bytes);
    if max < 1024 {
        return match min == max {
            true => format!("{min} B"),
            false => format!("{min}–{max} B"),
        };
    }
    let unit = (min.ilog2() / 10).clamp(1, 6);
    let scale = 1u64 << (10 * unit);
    let end = (max / scale) + 1;
    format!("{}–{end} {}", min / scale, UNITS[unit as usize - 1])
}

/// "0 B 1, 64–127 B 2 (2 live), ...": each class's allocations and live blocks; None when
/// nothing was allocated.
pub fn text_row(image: &ProcessAnalysis) -> Option<(&'static str, String)> {
    let classes = image.size_histogram.classes();
    if classes.is_empty() {
        return None;
    }
    let parts: Vec<String> = (classes.iter())
        .map(|class| match class.live {
            0 => format!("{} {}", label(class), class.allocations),
            live => format!("{} {} ({live} live)", label(class), class.allocations),
        })
        .collect();
    Some(("allocation sizes", parts.join(", ")))
}

/// A table of the classes of `image` (the `index`th of the page), or "" when it allocated
/// nothing.
pub fn html_section(image: &ProcessAnalysis, index: usize) -> String {
    let classes = image.size_histogram.classes();
    if classes.is_empty() {
        return String::new();
    }
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<section class=\"sizes\" id=\"sizes-{index}\" data-pid=\"{}\">\n\
         <h2>Allocation sizes: {} {}</h2>\n<table class=\"sizes\">\n\
         <tr><th>size</th><th>allocations</th><th>bytes</th><th>live at end</th></tr>",
        image.pid,
        image.pid,
        escape(&image.exe)
    );
    for class in &classes {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            label(class),
            class.allocations,
            class.bytes,
            class.live
        );
    }
    html.push_str("</table>\n</section>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(min_bytes: u64, max_bytes: u64) -> SizeClass {
        SizeClass {
            min_bytes,
            max_bytes,
            ..SizeClass::default()
        }
    }

    #[test]
    fn labels_name_each_class_in_its_unit() {
        let labels: Vec<String> = [
            class(0, 0),
            class(1, 1),
            class(64, 127),
            class(512, 1023),
            class(2048, 4095),
            class(1 << 19, (1 << 20) - 1),
            class(1 << 20, (1 << 21) - 1),
        ]
        .iter()
        .map(label)
        .collect();
        assert_eq!(
            labels,
            [
                "0 B",
                "1 B",
                "64–127 B",
                "512–1023 B",
                "2–4 KiB",
                "512–1024 KiB",
                "1–2 MiB"
            ]
        );
    }
}
