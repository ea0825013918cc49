//! Headless Chromium (Debian's `chromium`), for the tests that look at the HTML report as a
//! browser draws it.

use std::path::Path;
use std::process::{Child, Stdio};

use super::run::{clean_command, wait_with_timeout};

/// Starts Chromium dumping the DOM of `page` once it is loaded: the page's scripts are inline
/// and synchronous, so they have run by then. Debian 12's chromium refuses to start as root
/// without `--no-sandbox`; `--disable-dev-shm-usage` spares a container's small /dev/shm.
/// Each run gets its own profile directory (and HOME, which the clean environment lacks).
pub fn start_chromium(page: &Path, profile: &Path) -> Child {
    let mut command = clean_command("chromium");
    command
        .env("HOME", profile)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
        .spawn()
        .unwrap_or_else(|error| panic!("starting chromium: {error}"))
}

pub fn dumped_dom(child: Child) -> String {
    let output = wait_with_timeout(child, "chromium --dump-dom");
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && dom.contains("</html>"),
        "chromium failed ({:?}); stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    dom
}
