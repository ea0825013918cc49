use super::*;
use crate::events::RawStack;
use crate::trace::format::AllocFunction;

const PID: u32 = 100;
/// Thread keys (self pointers) and their thread ids.
const T: (u64, u32) = (0x7000, 100);
const U: (u64, u32) = (0x8000, 101);
/// The stack pointers at entry of an outer and an inner call.
const OUTER_SP: u64 = 0x7ffd_0000;
const INNER_SP: u64 = 0x7ffc_ff00;
const SEND: u32 = 3;
const WAIT: u32 = 4;

/// What the fold sent, shortened: (time, tid, what).
fn sent(events: &[Event]) -> Vec<(u64, u32, String)> {
    events
        .iter()
        .map(|event| {
            let what = match &event.kind {
                EventKind::MpiCall {
                    function, entry, ..
                } => {
                    format!("{} {function}", if *entry { "entry" } else { "return" })
                }
                EventKind::MpiCalls {
                    function,
                    calls,
                    inside_ns,
                } => format!("{calls} calls of {function} in {inside_ns} ns"),
                other => format!("{other:?}"),
            };
            (event.time_ns, event.tid, what)
        })
        .collect()
}

fn call(time_ns: u64, (_, tid): (u64, u32), function: u32, entry: bool) -> Event {
    Event {
        time_ns,
        pid: PID,
        tid,
        kind: EventKind::MpiCall {
            function,
            entry,
            stack_pointer: 0,
        },
    }
}

fn key((thread, _): (u64, u32), function: u32, stack_pointer: u64) -> CallKey {
    CallKey {
        thread,
        function,
        stack_pointer,
    }
}

fn malloc(time_ns: u64, (_, tid): (u64, u32)) -> Event {
    Event {
        time_ns,
        pid: PID,
        tid,
        kind: EventKind::Alloc {
            function: AllocFunction::Malloc,
            address: 0x5000,
            size: 24,
            stack: RawStack::Caller(0x401000),
        },
    }
}

/// Feeds the fold as the drain does: entries and returns by thread, function and stack
/// pointer, anything else sent.
struct Feed {
    fold: MpiFold,
    out: Vec<Event>,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            fold: MpiFold::default(),
            out: Vec::new(),
        }
    }

    fn enter(&mut self, time_ns: u64, thread: (u64, u32), function: u32, sp: u64) -> &mut Self {
        self.fold.saw(time_ns);
        let event = call(time_ns, thread, function, true);
        self.fold
            .enter(key(thread, function, sp), event, &mut self.out);
        self
    }

    fn leave(&mut self, time_ns: u64, thread: (u64, u32), function: u32, sp: u64) -> &mut Self {
        self.fold.saw(time_ns);
        let event = call(time_ns, thread, function, false);
        self.fold
            .leave(key(thread, function, sp), event, &mut self.out);
        self
    }

    fn other(&mut self, event: Event) -> &mut Self {
        self.fold.saw(event.time_ns);
        self.fold.send(event, &mut self.out);
        self
    }

    fn finish(&mut self) -> Vec<(u64, u32, String)> {
        self.fold.finish(&mut self.out);
        let times: Vec<u64> = self.out.iter().map(|event| event.time_ns).collect();
        assert!(times.is_sorted(), "times go back: {times:?}");
        sent(&self.out)
    }
}

#[test]
fn calls_in_which_nothing_happened_are_one_sum_per_thread_and_function() {
    let mut feed = Feed::new();
    for call in 0..5 {
        let start = 100 * call;
        feed.enter(start, T, SEND, OUTER_SP)
            .leave(start + 7, T, SEND, OUTER_SP);
    }
    feed.enter(600, T, WAIT, OUTER_SP)
        .leave(650, T, WAIT, OUTER_SP);
    assert_eq!(
        feed.finish(),
        [
            (650, 100, "5 calls of 3 in 35 ns".to_string()),
            (650, 100, "1 calls of 4 in 50 ns".to_string()),
        ]
    );
}

#[test]
fn a_call_inside_which_any_thread_allocates_is_sent_whole_and_in_order() {
    let mut feed = Feed::new();
    feed.enter(10, T, SEND, OUTER_SP)
        .other(malloc(12, U))
        .leave(20, T, SEND, OUTER_SP);
    assert_eq!(
        feed.finish(),
        [
            (10, 100, "entry 3".to_string()),
            (12, 101, format!("{:?}", malloc(12, U).kind),),
            (20, 100, "return 3".to_string()),
        ]
    );
}

#[test]
fn calls_inside_an_open_call_are_summed_before_its_return() {
    // WAIT calls SEND twice; the interpret stage drops the sums, sent while WAIT is open.
    let mut feed = Feed::new();
    feed.enter(10, T, WAIT, OUTER_SP)
        .enter(11, T, SEND, INNER_SP)
        .leave(12, T, SEND, INNER_SP)
        .enter(13, T, SEND, INNER_SP)
        .leave(15, T, SEND, INNER_SP)
        .leave(20, T, WAIT, OUTER_SP);
    assert_eq!(
        feed.finish(),
        [
            (10, 100, "entry 4".to_string()),
            (20, 100, "2 calls of 3 in 3 ns".to_string()),
            (20, 100, "return 4".to_string()),
        ]
    );
}

#[test]
fn threads_calling_at_once_are_summed_apart() {
    let mut feed = Feed::new();
    feed.enter(10, T, SEND, OUTER_SP)
        .enter(11, U, SEND, OUTER_SP)
        .leave(12, U, SEND, OUTER_SP)
        .leave(14, T, SEND, OUTER_SP)
        .enter(20, U, WAIT, OUTER_SP)
        .other(malloc(21, U));
    assert_eq!(
        feed.finish(),
        [
            // U's sum goes before its next MPI event that is sent.
            (20, 101, "1 calls of 3 in 1 ns".to_string()),
            (20, 101, "entry 4".to_string()),
            (21, 101, format!("{:?}", malloc(21, U).kind)),
            (21, 100, "1 calls of 3 in 4 ns".to_string()),
        ]
    );
}

#[test]
fn a_return_whose_entry_was_not_held_is_sent_as_it_is() {
    // A dropped entry (`--ring-full drop`), or one sent at the end of an earlier pass.
    let mut feed = Feed::new();
    feed.leave(5, T, SEND, OUTER_SP)
        .enter(6, T, WAIT, OUTER_SP)
        .leave(8, T, SEND, INNER_SP);
    assert_eq!(
        feed.finish(),
        [
            (5, 100, "return 3".to_string()),
            (6, 100, "entry 4".to_string()),
            (8, 100, "return 3".to_string()),
        ]
    );
}

#[test]
fn an_entry_still_held_at_the_end_of_a_pass_is_sent_then() {
    let mut feed = Feed::new();
    feed.enter(5, T, SEND, OUTER_SP).leave(6, T, SEND, OUTER_SP);
    feed.enter(9, T, WAIT, OUTER_SP);
    assert_eq!(
        feed.finish(),
        [
            (9, 100, "1 calls of 3 in 1 ns".to_string()),
            (9, 100, "entry 4".to_string()),
        ]
    );
    // The next pass: its return is sent, not summed.
    let mut next = Feed::new();
    next.leave(30, T, WAIT, OUTER_SP);
    assert_eq!(next.finish(), [(30, 100, "return 4".to_string())]);
}

#[test]
fn a_return_of_another_function_or_frame_does_not_close_the_held_entry() {
    // Each condition alone: the same frame but another function, then the same function
    // from another frame (an inner return whose entry was dropped, `--ring-full drop`).
    let mut feed = Feed::new();
    feed.enter(10, T, SEND, OUTER_SP)
        .leave(11, T, WAIT, OUTER_SP)
        .enter(20, T, SEND, OUTER_SP)
        .leave(21, T, SEND, INNER_SP);
    assert_eq!(
        feed.finish(),
        [
            (10, 100, "entry 3".to_string()),
            (11, 100, "return 4".to_string()),
            (20, 100, "entry 3".to_string()),
            (21, 100, "return 3".to_string()),
        ]
    );
}
