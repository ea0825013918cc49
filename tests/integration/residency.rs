//! fixtures/residency.c: the residency sampler sees the 64 MiB the fixture makes resident,
//! in time order, without ptrace and within its CPU budget.

use memsup::trace::format::Record;
use memsup::trace::reader::read_profile;

use crate::common::*;

const TOUCHED: u64 = 64 << 20;
/// The program, its C library, its stack, glibc's or musl's own heap and memsup's scratch
/// page, on top of the touched blocks.
const MARGIN: u64 = 16 << 20;

#[test]
fn samples_follow_the_resident_memory() {
    for variant in variants("residency") {
        let program = fixture("residency", variant);
        let recording = record(&program, &[], None);
        let profile = read_profile(&recording.profile).expect("reading the profile");
        assert!(profile
            .header
            .options
            .contains(&"interval=20ms".to_string()));
        let launched = profile
            .records
            .iter()
            .find_map(|record| match record {
                Record::ProcessStart { pid, .. } => Some(*pid),
                _ => None,
            })
            .expect("a ProcessStart");
        let mut status_times = Vec::new();
        let mut status_peak = 0;
        let mut rollup_times = Vec::new();
        let mut rollup_peak = 0;
        let mut costs = None;
        for record in &profile.records {
            match record {
                Record::StatusSample {
                    time_ns, pid, rss, ..
                } if *pid == launched => {
                    status_times.push(*time_ns);
                    status_peak = status_peak.max(*rss);
                }
                Record::RollupSample {
                    time_ns,
                    pid,
                    rss,
                    pss,
                    ..
                } if *pid == launched => {
                    assert!(pss <= rss, "{record:?}");
                    rollup_times.push(*time_ns);
                    rollup_peak = rollup_peak.max(*rss);
                }
                Record::SamplerCosts(sampler) => costs = Some(*sampler),
                _ => {}
            }
        }
        let what = format!("{variant:?}");
        // 500 ms of run time at 20 ms: about 25 rounds; a loaded machine may delay some.
        assert!(status_times.len() >= 10, "{what}: {status_times:?}");
        assert!(!rollup_times.is_empty(), "{what}");
        assert!(status_times.is_sorted(), "{what}: {status_times:?}");
        assert!(rollup_times.is_sorted(), "{what}: {rollup_times:?}");
        for peak in [status_peak, rollup_peak] {
            assert!(
                (TOUCHED..=TOUCHED + MARGIN).contains(&peak),
                "{what}: peak RSS {peak}"
            );
        }
        // The report's residency of the image: exactly what its samples say.
        let image = process_image(&recording.report, &file_name(&program), "launch");
        let residency = &image["residency"];
        assert_eq!(
            number(residency, "/status_samples"),
            status_times.len() as u64
        );
        assert_eq!(
            number(residency, "/rollup_samples"),
            rollup_times.len() as u64
        );
        assert_eq!(
            number(residency, "/peak_rss_bytes"),
            status_peak.max(rollup_peak)
        );
        let peak_pss = number(residency, "/peak_pss_bytes");
        assert!(
            peak_pss > 0 && peak_pss <= rollup_peak,
            "{what}: {residency}"
        );
        let costs = costs.expect("a SamplerCosts record");
        assert!(
            costs.status_samples >= status_times.len() as u64,
            "{costs:?}"
        );
        assert!(
            costs.rollup_samples >= rollup_times.len() as u64,
            "{costs:?}"
        );
        assert_eq!(costs.status_interval_ns, 20_000_000);
        // The budget is 5 % of a core; allow for a first rollup round before it adapts.
        let spent = costs.status_cpu_ns + costs.rollup_cpu_ns;
        assert!(spent * 10 <= costs.elapsed_ns, "{what}: {costs:?}");
        eprintln!("{what}: {costs:?}");
    }
}
