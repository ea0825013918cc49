//! The mapping and rendezvous hooks run in this process: a munmap-shaped hook stamps its
//! record at entry and publishes it with the result, and the rendezvous hook waits for
//! memsup's service, or passes through when memsup is gone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::clock::rdtsc;
use super::code::CpuSource;
use super::layout::Op;
use super::ring::Drainer;
use super::test_support::*;

const ARGUMENTS: [u64; 6] = [0x7000_0000, 0x5000, 3, 4, 5, 6];

/// The TSC when `stamping_six` last ran.
static STAMPED: AtomicU64 = AtomicU64::new(0);

extern "C" fn stamping_six(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    STAMPED.store(rdtsc(), Ordering::SeqCst);
    fake_six(a, b, c, d, e, f)
}

fn six(arguments: [u64; 6]) -> u64 {
    let [a, b, c, d, e, f] = arguments;
    fake_six(a, b, c, d, e, f)
}

#[test]
fn around_shape_stamps_at_entry_and_publishes_the_result_after_the_call() {
    let target = stamping_six as *const () as u64;
    for op in [Op::Munmap, Op::Shmdt] {
        let harness = Harness::new(
            CpuSource::Single,
            AreaConfig::waiting(1, 64),
            &[op],
            &[target],
        );
        let before = rdtsc();
        let observed = call_observed(harness.entry(op), ARGUMENTS);
        let after = rdtsc();
        assert_eq!(observed.result, six(ARGUMENTS));
        assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
        let mut drainer = Drainer::new(&harness.area);
        let mut records = Vec::new();
        drainer.finish(&harness.area, &mut records);
        assert_eq!((records.len(), drainer.torn()), (1, 0));
        let record = records[0];
        assert_eq!(record.op, op);
        assert_eq!(record.arguments, ARGUMENTS);
        assert_eq!((record.result, record.entry_tsc), (six(ARGUMENTS), 0));
        assert_eq!(record.caller, observed.return_address);
        assert_eq!(record.stack_pointer, observed.stack_pointer);
        let stamped = STAMPED.load(Ordering::SeqCst);
        assert!(before < record.tsc && record.tsc < stamped && stamped < after);
    }
}

#[test]
fn around_shape_dropped_at_entry_still_calls_the_function_and_publishes_nothing() {
    let mut config = AreaConfig::waiting(1, 2);
    config.policy = super::layout::POLICY_DROP;
    let target = fake_six as *const () as u64;
    let harness = Harness::new(CpuSource::Single, config, &[Op::Munmap], &[target]);
    for _ in 0..3 {
        let observed = call_observed(harness.entry(Op::Munmap), ARGUMENTS);
        assert_eq!(observed.result, six(ARGUMENTS));
    }
    assert_eq!((harness.head(0), harness.area.dropped()), (2, 1));
}

/// The rendezvous function takes no argument: the hook may use their registers.
const RENDEZVOUS_RESULT: u64 = 0x5eed;

extern "C" fn fake_rendezvous() -> u64 {
    RENDEZVOUS_RESULT
}

fn rendezvous_harness(config: AreaConfig) -> Harness {
    let target = fake_rendezvous as *const () as u64;
    Harness::new(CpuSource::Single, config, &[Op::Rendezvous], &[target])
}

#[test]
fn rendezvous_waits_until_served() {
    let harness = rendezvous_harness(AreaConfig::waiting(1, 64));
    let served_at = std::thread::scope(|scope| {
        let server = scope.spawn(|| {
            while harness.area.rendezvous_asked() != 1 {
                std::hint::spin_loop();
            }
            std::thread::sleep(Duration::from_millis(20));
            let served_at = rdtsc();
            harness.area.serve_rendezvous(1);
            served_at
        });
        let observed = call_observed(harness.entry(Op::Rendezvous), ARGUMENTS);
        let returned_at = rdtsc();
        assert_eq!(observed.result, RENDEZVOUS_RESULT);
        assert_eq!(observed.callee_saved, CALLEE_SAVED_MARKS);
        let served_at = server.join().expect("the server thread");
        assert!(served_at < returned_at);
        served_at
    });
    assert!(served_at > 0);
    assert_eq!(harness.area.rendezvous_done(), 1);
    assert_eq!(harness.head(0), 0, "no record");
}

#[test]
fn rendezvous_passes_through_when_disabled_or_memsup_is_gone() {
    let harness = rendezvous_harness(AreaConfig::waiting(1, 64));
    harness.area.set_enabled(false);
    let observed = call_observed(harness.entry(Op::Rendezvous), ARGUMENTS);
    assert_eq!(observed.result, RENDEZVOUS_RESULT);
    assert_eq!(harness.area.rendezvous_asked(), 0);

    let mut config = AreaConfig::waiting(1, 64);
    config.stale_ticks = 1000;
    let harness = rendezvous_harness(config);
    harness.area.heartbeat(rdtsc() - 1_000_000);
    let observed = call_observed(harness.entry(Op::Rendezvous), ARGUMENTS);
    assert_eq!(observed.result, RENDEZVOUS_RESULT);
    assert_eq!(harness.area.rendezvous_asked(), 1);
    assert_eq!(harness.area.rendezvous_done(), 0);
    assert!(
        !harness.area.enabled(),
        "a stale heartbeat switches the hooks off"
    );

    let mut config = AreaConfig::waiting(1, 64);
    config.wait_limit_ticks = 1000;
    let harness = rendezvous_harness(config);
    call_observed(harness.entry(Op::Rendezvous), ARGUMENTS);
    assert_eq!(harness.area.rendezvous_asked(), 1);
    assert!(
        harness.area.enabled(),
        "a wait past its limit leaves the hooks on"
    );
}
