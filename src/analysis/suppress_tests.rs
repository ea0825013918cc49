use super::*;
use crate::analysis::SiteMetrics;
use crate::trace::format::StartCause;

fn frame(function: &str, file: Option<&str>, module: &str) -> Frame {
    Frame {
        function: function.to_string(),
        file: file.map(str::to_string),
        line: Some(1),
        module: module.to_string(),
        address: 0x1000,
        offset: 0,
        inlined: false,
    }
}

fn leaking_site(stack: Vec<Frame>, blocks: u64, bytes: u64) -> Site {
    let metrics = SiteMetrics {
        leaked_blocks: blocks,
        leaked_bytes: bytes,
        ..SiteMetrics::default()
    };
    Site { stack, metrics }
}

#[test]
fn patterns_match_as_leak_sanitizer_does() {
    let cases = [
        ("make", "make_buffer", true),
        ("buf", "make_buffer", true),
        ("^make", "make_buffer", true),
        ("^buffer", "make_buffer", false),
        ("buffer$", "make_buffer", true),
        ("make$", "make_buffer", false),
        ("m*_b*r", "make_buffer", true),
        ("^m*r$", "make_buffer", true),
        ("^m*x$", "make_buffer", false),
        ("b*a", "make_buffer", false),
    ];
    for (pattern, text, expected) in cases {
        assert_eq!(
            Pattern(pattern.into()).matches(text),
            expected,
            "{pattern} on {text}"
        );
    }
}

#[test]
fn a_rule_matches_a_function_a_module_file_or_a_source_file_in_the_stack() {
    let stack = [
        frame(
            "make_buffer",
            Some("/src/alloc_script.c"),
            "/tmp/alloc_script",
        ),
        frame("main", Some("/src/main.c"), "/tmp/alloc_script"),
    ];
    let rules = parse("# comment\n\nleak:main.c\n").unwrap();
    assert!(rules[0].matches(&stack));
    for pattern in ["main", "alloc_script", "^alloc_script.c$", "make_*"] {
        let rules = parse(&format!("leak:{pattern}")).unwrap();
        assert!(rules[0].matches(&stack), "{pattern}");
    }
    // A module matches by its file name, not its directory.
    assert!(!parse("leak:tmp").unwrap()[0].matches(&stack));
}

#[test]
fn bad_lines_are_named() {
    assert_eq!(
        parse("leak:a\nrace:b").unwrap_err(),
        "line 2: suppression type \"race\" (only leak: is read)"
    );
    assert_eq!(
        parse("leak:  ").unwrap_err(),
        "line 1: leak: without a pattern"
    );
    assert_eq!(
        parse("malloc").unwrap_err(),
        "line 1: \"malloc\" is not leak:PATTERN"
    );
}

fn analyses_of(image: ProcessAnalysis) -> Vec<Analysis> {
    vec![Analysis::of_run("run.msup", vec![image])]
}

/// libstdc++'s pool (1 block, 72,704 bytes) and 2 blocks of the program's own (128 bytes).
fn leaking_image() -> ProcessAnalysis {
    let pool = vec![
        frame("", None, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"),
        frame(
            "_dl_init",
            Some("./elf/dl-init.c"),
            "/lib64/ld-linux-x86-64.so.2",
        ),
    ];
    let own = vec![frame("leak_small", Some("a.c"), "/tmp/app")];
    let mut image = ProcessAnalysis::new(1, None, StartCause::Launch, 0);
    image.sites = vec![leaking_site(pool, 1, 72704), leaking_site(own, 2, 128)];
    image.source_sites = image.sites.clone();
    image.live_blocks_at_exit = 3;
    image.live_bytes_at_exit = 72704 + 128;
    image
}

fn leaked(sites: &[Site]) -> Vec<u64> {
    sites.iter().map(|site| site.metrics.leaked_bytes).collect()
}

#[test]
fn suppressed_leaks_leave_the_sites_and_the_image() {
    let mut analyses = analyses_of(leaking_image());
    Suppressions::new(true, None).unwrap().apply(&mut analyses);
    let image = &analyses[0].processes[0];
    let expected = Suppressed {
        blocks: 1,
        bytes: 72704,
        rules: 1,
    };
    assert_eq!(image.suppressed, expected);
    assert_eq!(
        (image.live_blocks_at_exit, image.live_bytes_at_exit),
        (2, 128)
    );
    assert_eq!(leaked(&image.sites), [0, 128]);
    assert_eq!(leaked(&image.source_sites), [0, 128]);
}

#[test]
fn a_files_rules_without_the_defaults() {
    let mut analyses = analyses_of(leaking_image());
    let rules = Suppressions::new(false, Some("leak:leak_small")).unwrap();
    rules.apply(&mut analyses);
    let image = &analyses[0].processes[0];
    assert_eq!((image.suppressed.blocks, image.suppressed.bytes), (2, 128));
    assert_eq!(leaked(&image.sites), [72704, 0]);
}
