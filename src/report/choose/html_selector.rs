//! The HTML page's process selector: the images in the overview's order (peak requested
//! bytes, highest first); choosing one shows only its charts (`timelines-INDEX` sections).

use super::overview::{order, rows};
use crate::analysis::Analysis;
use crate::report::html::escape;
use crate::report::text::short_bytes;

/// Shows the chosen image's section, or all of them.
const SCRIPT: &str = r#"<script>
(() => {
  const selector = document.getElementById("process-selector");
  const show = () => {
    for (const section of document.querySelectorAll("section.timelines")) {
      section.hidden = selector.value !== "all" && section.id !== selector.value;
    }
  };
  selector.addEventListener("change", show);
  show();
})();
</script>"#;

/// The selector, as a section to put before the images' sections; empty for one image.
pub fn selector_section(analyses: &[Analysis]) -> String {
    let rows = rows(analyses);
    if rows.len() < 2 {
        return String::new();
    }
    let mut html = String::from(
        "<nav class=\"process-selector\"><label>Process image \
         <select id=\"process-selector\">\n<option value=\"all\">all images</option>\n",
    );
    for (row, index) in rows.iter().zip(order(analyses)) {
        html.push_str(&format!(
            "<option value=\"timelines-{index}\" data-pid=\"{}\">{} {} (peak {})</option>\n",
            row.pid,
            row.pid,
            escape(&row.program),
            short_bytes(row.peak_requested_bytes)
        ));
    }
    html.push_str("</select></label></nav>\n");
    html.push_str(SCRIPT);
    html.push('\n');
    html
}
