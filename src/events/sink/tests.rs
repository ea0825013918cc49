use super::*;
use crate::events::{RawStack, StackCopy};
use crate::trace::format::AllocFunction;
use crate::unwind::StackSnapshot;

fn sink_over(sender: Sender<EventBatch>, copies: &Arc<CopiesInFlight>) -> EventSink {
    EventSink::new(
        sender,
        0,
        Arc::clone(copies),
        Arc::default(),
        Arc::default(),
    )
}

fn sink_watching(sender: Sender<EventBatch>, watched: &Arc<Watched>) -> EventSink {
    EventSink::new(
        sender,
        0,
        Arc::default(),
        Arc::default(),
        Arc::clone(watched),
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
        .flatten()
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
    let event = receiver.try_recv().unwrap().pop().unwrap();
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
    for event in receiver.iter().flatten() {
        times.push(event.time_ns);
        counts[event.pid as usize] += 1;
    }
    for source in sources {
        source.join().unwrap();
    }
    assert_eq!(counts, [0, EACH, EACH]);
    assert!(times.is_sorted());
}

/// A process is watched from the moment its start is sent until its exit is, with no
/// snapshot asked for: the tracer sees to each image's first one.
#[test]
fn the_watched_set_follows_starts_and_exits_as_they_are_sent() {
    use crate::trace::format::{ExitKind, StartCause};
    let (sender, receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = sink_watching(sender, &watched);
    let start = |cause| EventKind::ProcessStart {
        parent_pid: None,
        cause,
    };
    sink.send(7, 7, start(StartCause::Launch));
    sink.send(8, 8, start(StartCause::Fork));
    sink.send(9, 9, start(StartCause::Attach));
    assert!(watched.contains(7) && watched.contains(8) && watched.contains(9));
    let (mut snapshots, mut peaks) = (Vec::new(), Vec::new());
    watched.take_requests(&mut snapshots, &mut peaks);
    assert_eq!(snapshots, []);
    let exit = EventKind::ProcessExit {
        status: ExitKind::Code(0),
        counters: Default::default(),
    };
    sink.send(7, 7, exit);
    assert!(!watched.contains(7) && watched.contains(8));
    assert_eq!(receiver.try_iter().flatten().count(), 4);
}

fn free_at(time_ns: u64, tid: u32) -> Event {
    Event {
        time_ns,
        pid: 3,
        tid,
        kind: EventKind::Free { address: 0x10 },
    }
}

/// A hook drain's batch: one message, each event with its own time unless that is later
/// than the sending, counted in flight until the interpret stage releases it.
#[test]
fn a_batch_is_one_message_whose_events_keep_their_times() {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let copies = Arc::new(CopiesInFlight::default());
    let sink = sink_over(sender, &copies);
    let before = monotonic_ns();
    let future = before + 60_000_000_000;
    sink.send_batch(vec![free_at(5, 3), free_at(7, 4), free_at(future, 3)]);
    let after = monotonic_ns();
    sink.send_batch(Vec::new());
    let batch = receiver.try_recv().unwrap();
    assert!(
        receiver.try_recv().is_err(),
        "one message, none for an empty batch"
    );
    let sent: Vec<(u64, u32)> = batch[..2].iter().map(|e| (e.time_ns, e.tid)).collect();
    assert_eq!(sent, [(5, 3), (7, 4)]);
    assert!((before..=after).contains(&batch[2].time_ns));
    assert_eq!(copies.events_in_flight(), 3);
    copies.release_events(3);
    assert_eq!((copies.events_in_flight(), sink.stalls()), (0, 0));
}

/// A batch waits while the interpret stage is `EVENTS_IN_FLIGHT_LIMIT` events behind, and
/// goes as soon as it catches up.
#[test]
fn a_batch_waits_behind_the_events_in_flight() {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let copies = Arc::new(CopiesInFlight::default());
    let sink = sink_over(sender, &copies);
    let limit = EVENTS_IN_FLIGHT_LIMIT as usize;
    sink.send_batch((0..limit).map(|time| free_at(time as u64, 3)).collect());
    let waiting = {
        let sink = sink.clone();
        std::thread::spawn(move || sink.send_batch(vec![free_at(u64::MAX, 3)]))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(receiver.len(), 1, "the second batch went past the limit");
    let first = receiver.recv().unwrap();
    assert_eq!(first.len(), limit);
    copies.release_events(limit as u64);
    waiting.join().unwrap();
    assert_eq!(receiver.recv().unwrap().len(), 1);
    assert_eq!((copies.events_in_flight(), sink.stalls()), (1, 1));
}

/// A batch follows starts and exits as single sends do: a process started and ended in one
/// batch is not left watched.
#[test]
fn a_batch_keeps_the_watched_set_as_single_sends_would() {
    use crate::trace::format::{ExitKind, StartCause};
    let (sender, _receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = sink_watching(sender, &watched);
    let event = |pid, kind| Event {
        time_ns: 1,
        pid,
        tid: pid,
        kind,
    };
    let start = |pid| {
        let kind = EventKind::ProcessStart {
            parent_pid: None,
            cause: StartCause::Launch,
        };
        event(pid, kind)
    };
    let exit = |pid| {
        let kind = EventKind::ProcessExit {
            status: ExitKind::Code(0),
            counters: Default::default(),
        };
        event(pid, kind)
    };
    sink.send_batch(vec![start(7), exit(7), start(8)]);
    assert!(!watched.contains(7) && watched.contains(8));
    sink.send_batch(vec![exit(8), start(8)]);
    assert!(watched.contains(8), "a start after the exit in the batch");
}

#[test]
fn mapping_calls_are_counted_as_they_are_sent() {
    use crate::trace::format::{ExitKind, MapCall};
    let (sender, _receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = sink_watching(sender, &watched);
    let mapping = |call, result| EventKind::Mapping {
        call,
        args: [0; 6],
        result,
        stack: RawStack::Caller(0x1000),
    };
    watched.insert(5);
    watched.insert(6);
    sink.send(5, 5, mapping(MapCall::Mmap, 0x7f00_0000_0000));
    sink.send(5, 6, mapping(MapCall::Shmat, 0x7f00_1000_0000));
    // Failed calls, and calls that make no mapping of their own, count for nothing.
    sink.send(5, 5, mapping(MapCall::Mmap, -12));
    sink.send(5, 5, mapping(MapCall::Mremap, 0x7f00_2000_0000));
    sink.send(5, 5, mapping(MapCall::Brk, 0x5600_0000_0000));
    let event = |kind| Event {
        time_ns: 1,
        pid: 5,
        tid: 5,
        kind,
    };
    let calls = [MapCall::Mmap, MapCall::Mmap, MapCall::Munmap];
    sink.send_batch(calls.map(|call| event(mapping(call, 0))).to_vec());
    sink.send(6, 6, mapping(MapCall::Munmap, 0));
    assert_eq!(
        (watched.mappings_made(5), watched.mappings_made(6)),
        (3, -1)
    );
    let exit = EventKind::ProcessExit {
        status: ExitKind::Code(0),
        counters: Default::default(),
    };
    sink.send(5, 5, exit);
    // Nor is a call of a process not watched (any more).
    sink.send(5, 5, mapping(MapCall::Mmap, 0x7f00_3000_0000));
    assert_eq!(watched.mappings_made(5), 0);
}

/// The ranges a process's calls mapped are kept as they are sent and copied to a fork
/// child; from its exec's stop they cut nothing, and a call of the image it left, sent
/// before the exec's event, is not of the new one.
#[test]
fn made_ranges_follow_the_calls_sent_until_the_exec() {
    use crate::trace::format::MapCall;
    let (sender, _receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = sink_watching(sender, &watched);
    let mmap = |start: i64, length: u64| EventKind::Mapping {
        call: MapCall::Mmap,
        args: [0, length, 3, 0x22, u64::MAX, 0],
        result: start,
        stack: RawStack::Caller(0x1000),
    };
    watched.insert(5);
    sink.send(5, 5, mmap(0x10000, 0x2000));
    sink.send(5, 5, mmap(0x12000, 0x1000));
    let both = vec![(0x10000, 0x12000), (0x12000, 0x13000)];
    assert_eq!(watched.made_inside(5, 0x10000, 0x13000), both);
    watched.insert(6);
    watched.forked(5, 6);
    assert_eq!(watched.made_inside(6, 0x10000, 0x13000), both);
    let exec = EventKind::Exec {
        exe: "/bin/true".into(),
        argv: Vec::new(),
    };
    watched.exec_begins(5);
    // From the exec's stop, the old image's ranges cut nothing, nor do its calls sent
    // between that stop and the exec's event; the new image's calls count.
    assert_eq!(watched.made_inside(5, 0x10000, 0x13000), []);
    sink.send(5, 5, mmap(0x20000, 0x1000));
    assert_eq!(watched.made_inside(5, 0x20000, 0x21000), []);
    sink.send(5, 5, exec);
    assert_eq!(watched.made_inside(5, 0, u64::MAX), []);
    sink.send(5, 5, mmap(0x30000, 0x1000));
    assert_eq!(watched.made_inside(5, 0, u64::MAX), [(0x30000, 0x31000)]);
    assert_eq!(watched.made_inside(6, 0x10000, 0x13000), both);
}

/// What a process unmaps is logged as its calls are sent: an estimate from a base read
/// before gets it, one from a base read after does not; a base read before the one kept is
/// not kept, and an estimate from a base replaced meanwhile learns that its ranges are gone.
#[test]
fn unmapped_ranges_reach_the_base_read_before_them() {
    use crate::trace::format::{MapCall, MappingResidency};
    let (sender, _receiver) = crossbeam_channel::unbounded();
    let watched = Arc::new(Watched::default());
    let sink = sink_watching(sender, &watched);
    let munmap = |start: u64, length: u64, result| EventKind::Mapping {
        call: MapCall::Munmap,
        args: [start, length, 0, 0, 0, 0],
        result,
        stack: RawStack::Caller(0x1000),
    };
    watched.insert(5);
    let image = watched.image(5);
    sink.send(5, 5, munmap(0x7f00_0000_0000, 0x1000, 0));
    let mark = watched.unmapped_mark(5);
    let base = Arc::new(vec![MappingResidency::default()]);
    watched.keep_base(5, image, Arc::clone(&base), mark);
    sink.send(5, 5, munmap(0x7f00_0010_0000, 0x2000, 0));
    // A failed call unmapped nothing.
    sink.send(5, 5, munmap(0x7f00_0020_0000, 0x2000, -22));
    let from = watched.base(5, image).expect("the base");
    assert!(Arc::ptr_eq(&from.mappings, &base));
    let (now, unmapped) = watched.unmapped_since(5, &from);
    assert_eq!(unmapped, Some(vec![(0x7f00_0010_0000, 0x7f00_0010_2000)]));
    // The estimate's pieces, read after its mark, are the next base.
    let pieces = Arc::new(vec![]);
    sink.send(5, 5, munmap(0x7f00_0030_0000, 0x1000, 0));
    watched.keep_estimate_base(5, (image, &base), Arc::clone(&pieces), now);
    let next = watched.base(5, image).expect("the pieces");
    assert!(Arc::ptr_eq(&next.mappings, &pieces));
    let unmapped = watched.unmapped_since(5, &next).1;
    assert_eq!(unmapped, Some(vec![(0x7f00_0030_0000, 0x7f00_0030_1000)]));
    // Read before those pieces (the tracer's, at a stop): not kept.
    watched.keep_base(5, image, Arc::clone(&base), mark);
    assert!(Arc::ptr_eq(
        &watched.base(5, image).unwrap().mappings,
        &pieces
    ));
    // The first base's ranges were forgotten with it.
    assert_eq!(watched.unmapped_since(5, &from).1, None);
    assert!(watched.base(5, image + 1).is_none());
}
