//! The launched program starts with the signal dispositions it would have without memsup:
//! memsup's own handlers and the ignored SIGPIPE of its runtime must not leak through exec.

use std::process::Output;

use crate::common::run::{assert_same_behaviour, clean_command, run_command, run_memsup};

fn native_and_supervised(script: &str) -> (Output, Output) {
    let mut native = clean_command("sh");
    native.args(["-c", script]);
    let native = run_command(native, None);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("dispositions.msup");
    let profile = profile.to_str().unwrap();
    let supervised = run_memsup(["run", "-q", "-o", profile, "--", "sh", "-c", script], None);
    (native, supervised)
}

/// `output` with signals 32 and 33 taken out of its SigIgn line. They are glibc's own
/// (thread cancellation, set*id broadcast), which no program can see or set through libc,
/// and how they arrive depends on how the launcher started the program: glibc's
/// posix_spawn, which std uses for a program given by path like memsup, leaves them ignored
/// in the new program, a fork does not, and memsup's own glibc takes 33 over at start.
fn without_glibc_internal_signals(mut output: Output) -> Output {
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let lines: Vec<String> = text
        .lines()
        .map(|line| match line.strip_prefix("SigIgn:\t") {
            Some(mask) => {
                let mask = u64::from_str_radix(mask, 16).expect("a hex mask");
                format!("SigIgn:\t{:016x}", mask & !(0b11 << 31))
            }
            None => line.to_string(),
        })
        .collect();
    output.stdout = (lines.join("\n") + "\n").into_bytes();
    output
}

#[test]
fn the_program_inherits_the_signal_mask_and_dispositions_it_would_without_memsup() {
    let script = "grep -E '^(SigIgn|SigBlk)' /proc/self/status";
    let (native, supervised) = native_and_supervised(script);
    assert!(String::from_utf8_lossy(&native.stdout).starts_with("SigBlk:"));
    assert_same_behaviour(
        &without_glibc_internal_signals(supervised),
        &without_glibc_internal_signals(native),
    );
}

#[test]
fn a_signal_ignored_by_memsup_s_parent_stays_ignored_in_the_program() {
    // SIGINT (bit 2) ignored by the parent, as `nohup` or `&` in a script does.
    let memsup = crate::common::run::memsup_binary()
        .to_str()
        .unwrap()
        .to_string();
    let show = "grep SigIgn /proc/self/status";
    let mut native = clean_command("sh");
    native.args(["-c", &format!("trap '' INT; {show}")]);
    let native = run_command(native, None);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("ignored.msup");
    let mut supervised = clean_command("sh");
    let run = format!("{memsup} run -q -o {} -- {show}", profile.display());
    supervised.args(["-c", &format!("trap '' INT; {run}")]);
    let supervised = run_command(supervised, None);
    let mask = String::from_utf8_lossy(&native.stdout);
    let mask = u64::from_str_radix(mask.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_ne!(mask & 0b10, 0, "SIGINT is ignored natively");
    assert_same_behaviour(&supervised, &native);
}

#[test]
fn a_pipeline_whose_reader_stops_early_ends_quietly() {
    // `yes` dies of SIGPIPE when `head` leaves, silently; with SIGPIPE ignored it would
    // complain about a broken pipe on stderr.
    let (native, supervised) = native_and_supervised("yes | head -1");
    assert_eq!(String::from_utf8_lossy(&native.stdout), "y\n");
    assert_eq!(String::from_utf8_lossy(&native.stderr), "");
    assert_same_behaviour(&supervised, &native);
}
