use super::*;
use crate::events::{RawStack, StackCopy};
use crate::trace::format::AllocFunction;
use crate::unwind::StackSnapshot;

fn sink_over(sender: Sender<Event>, copies: &Arc<CopiesInFlight>) -> EventSink {
    EventSink::new(
        sender,
        0,
        Arc::clone(copies),
        Arc::default(),
        Arc::default(),
    )
}

fn alloc_with(stack: RawStack) -> EventKind {
    EventKind::Alloc {
        function: AllocFunction::Malloc,
        address: 0x1000,
        size: 8,
        stack,
    }
}

fn copy_of(bytes: usize) -> RawStack {
    RawStack::Copy(Box::new(StackCopy {
        snapshot: StackSnapshot {
            stack: vec![0; bytes],
            ..StackSnapshot::default()
        },
        window_limited: false,
        substitute: None,
        substituted: Vec::new(),
    }))
}

#[test]
fn copies_in_flight_are_counted_until_released() {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let copies = Arc::new(CopiesInFlight::default());
    let sink = sink_over(sender, &copies);
    sink.send(1, 1, alloc_with(copy_of(4096)));
    sink.send(1, 1, alloc_with(RawStack::Caller(0x1000)));
    sink.send(1, 1, alloc_with(copy_of(100)));
    sink.send(1, 1, EventKind::End);
    assert_eq!(copies.in_flight(), 4196);
    let carried: Vec<u64> = receiver
        .try_iter()
        .map(|event| event.kind.stack().map_or(0, RawStack::copy_bytes))
        .collect();
    assert_eq!(carried, [4096, 0, 100, 0]);
    for bytes in carried {
        copies.release(bytes);
    }
    assert_eq!(copies.in_flight(), 0);
    assert_eq!(sink.stalls(), 0);
}

#[test]
fn events_are_stamped_when_sent() {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let sink = sink_over(sender, &Arc::default());
    let before = monotonic_ns();
    sink.send(3, 4, EventKind::ThreadStart);
    let after = monotonic_ns();
    let event = receiver.try_recv().unwrap();
    assert_eq!(
        (event.pid, event.tid, event.kind),
        (3, 4, EventKind::ThreadStart)
    );
    assert!((before..=after).contains(&event.time_ns));
}

/// Two sources racing on one sink (the tracer and the sampler): whatever the interleaving,
/// the channel holds every event of both, in time order.
#[test]
fn racing_sources_arrive_in_time_order() {
    const EACH: u32 = 20_000;
    let (sender, receiver) = crossbeam_channel::bounded(64);
    let sink = sink_over(sender, &Arc::default());
    let sources: Vec<_> = (1..=2)
        .map(|pid| {
            let sink = sink.clone();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    sink.send(pid, pid, EventKind::ThreadStart);
                }
            })
        })
        .collect();
    drop(sink);
    let mut times = Vec::new();
    let mut counts = [0u32; 3];
    for event in receiver.iter() {
        times.push(event.time_ns);
        counts[event.pid as usize] += 1;
    }
    for source in sources {
        source.join().unwrap();
    }
    assert_eq!(counts, [0, EACH, EACH]);
    assert!(times.is_sorted());
}

/// A process is watched from the moment its start is sent until its exit is: a launched one
/// with its start snapshot asked for, a fork child (a copy of its parent) without.
#[test]
fn the_watched_set_follows_starts_and_exits_as_they_are_sent() {
    use crate::trace::format::{ExitKind, SnapshotReason, StartCause};
    let (sender, receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = EventSink::new(
        sender,
        0,
        Arc::default(),
        Arc::default(),
        Arc::clone(&watched),
    );
    let start = |cause| EventKind::ProcessStart {
        parent_pid: None,
        cause,
    };
    sink.send(7, 7, start(StartCause::Launch));
    sink.send(8, 8, start(StartCause::Fork));
    assert!(watched.contains(7) && watched.contains(8));
    let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
    watched.take_requests(&mut snapshots, &mut peaks);
    assert_eq!(snapshots, [(7, SnapshotReason::Start)]);
    let exit = EventKind::ProcessExit {
        status: ExitKind::Code(0),
        counters: Default::default(),
    };
    sink.send(7, 7, exit);
    assert!(!watched.contains(7) && watched.contains(8));
    assert_eq!(receiver.try_iter().count(), 3);
}
