//! The hooks' stack walker runs in this process, on this thread's real stack, over tables
//! compiled from this process's modules: each stack it stores equals the specification's
//! walk (`unwind::tables::walk`) of a copy of the same stack, through Rust frames, libc's
//! qsort and the thread's start, for stacks of many depths.

use std::arch::global_asm;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use super::code::CpuSource;
use super::layout::stacks::StackRef;
use super::layout::{Op, Shape};
use super::ring::{Drainer, RawRecord};
use super::stack_section::{SegmentTable, StackSection};
use super::test_support::*;
use crate::module::loaded::of_process;
use crate::module::ModuleStore;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::trace::format::TRUNCATED_FRAME;
use crate::unwind::tables::set::{table_set, MappedFile, TableCache};
use crate::unwind::StackSnapshot;

/// rbp as the hooked function saw it at its entry: the walker's starting rbp.
static PROBE_RBP: AtomicU64 = AtomicU64::new(0);

global_asm!(
    ".globl memsup_walk_probe_target",
    "memsup_walk_probe_target:",
    "mov [rip + {rbp}], rbp",
    "lea rax, [rdi + 1]",
    "ret",
    rbp = sym PROBE_RBP,
);

extern "C" {
    fn memsup_walk_probe_target(size: u64) -> u64;
}

/// The module files this process maps, with their load biases.
fn mapped_files(store: &ModuleStore, pid: i32) -> Vec<MappedFile> {
    MappedFile::of_modules(store, pid, &of_process(pid).unwrap())
}

/// Hooks with the walker switched on, this process's tables and this thread's stack.
fn walking_harness() -> Harness {
    walking_harness_in(&Shape::full(1, 1024))
}

/// As `walking_harness`, with the stack section of `shape` (of one ring of 1,024 records;
/// its table and store regions no larger than the full ones).
fn walking_harness_in(shape: &Shape) -> Harness {
    let config = AreaConfig::waiting(1, 1024);
    let target = memsup_walk_probe_target as *const () as u64;
    let harness = Harness::new(CpuSource::Single, config, &[Op::Malloc], &[target]);
    let pid = std::process::id() as i32;
    let mut section = StackSection::new(&harness.area, harness.area_address(), shape, true);
    let store = ModuleStore::new();
    let files = mapped_files(&store, pid);
    let tables = table_set(&store, &mut TableCache::new(), &files);
    let segments = tables
        .set
        .segments()
        .iter()
        .map(SegmentTable::from)
        .collect();
    section.publish(&harness.area, segments);
    let here = 0u8;
    let maps = read_maps(pid).unwrap();
    let stack = mapping_containing(&maps, &here as *const u8 as u64).unwrap();
    // SAFETY: gettid has no arguments.
    let tid = unsafe { libc::gettid() } as u32;
    section.set_thread(&harness.area, tid, Some((stack.start, stack.end)));
    std::mem::forget(section);
    harness
}

/// What one hooked call gave: the record, and the specification's walk of the same stack.
struct Walked {
    record: RawRecord,
    expected: Vec<u64>,
}

/// Calls the hooked malloc from here and copies this stack above the call at once.
#[inline(never)]
fn call_and_copy(malloc: extern "C" fn(u64) -> u64, size: u64, out: &mut Vec<(u64, u64, Vec<u8>)>) {
    let result = malloc(size);
    black_box(result);
    // From a little below rsp: the call's return address slot lies just under it.
    let low: u64;
    // SAFETY: reads rsp.
    unsafe { std::arch::asm!("lea {}, [rsp - 64]", out(reg) low, options(nomem, nostack)) };
    let pid = std::process::id() as i32;
    let maps = read_maps(pid).unwrap();
    let stack = mapping_containing(&maps, low).unwrap();
    let mut bytes = vec![0u8; (stack.end - low) as usize];
    // SAFETY: [low, stack.end) is this thread's live stack.
    unsafe { std::ptr::copy_nonoverlapping(low as *const u8, bytes.as_mut_ptr(), bytes.len()) };
    out.push((low, PROBE_RBP.load(Ordering::Relaxed), bytes));
}

#[inline(never)]
fn descend(depth: u32, malloc: extern "C" fn(u64) -> u64, out: &mut Vec<(u64, u64, Vec<u8>)>) {
    if depth == 0 {
        call_and_copy(malloc, 100 + out.len() as u64, out);
    } else if depth % 3 == 0 {
        descend(depth - 1, malloc, out);
        black_box(depth);
    } else {
        descend(depth - 1, malloc, out);
        descend(0, malloc, out);
    }
}

/// The records of `harness` and, for each, the specification's frames from `copies`.
fn walked(harness: &Harness, copies: &[(u64, u64, Vec<u8>)]) -> Vec<Walked> {
    let mut drainer = Drainer::new(&harness.area);
    let mut records = Vec::new();
    drainer.finish(&harness.area, &mut records);
    assert_eq!(records.len(), copies.len());
    let pid = std::process::id() as i32;
    let store = ModuleStore::new();
    let files = mapped_files(&store, pid);
    let set = table_set(&store, &mut TableCache::new(), &files).set;
    records
        .into_iter()
        .zip(copies)
        .map(|(record, (low, rbp, bytes))| {
            let skip = (record.stack_pointer - low) as usize;
            let mut stack = bytes[skip..].to_vec();
            // The return address's slot was reused once the call returned.
            stack[..8].copy_from_slice(&record.caller.to_le_bytes());
            let snapshot = StackSnapshot {
                ip: 0,
                at_function_entry: true,
                sp: record.stack_pointer,
                bp: *rbp,
                stack,
            };
            let walk = set.walk(&snapshot);
            let mut expected = walk.frames;
            if walk.truncated {
                expected.push(TRUNCATED_FRAME);
            }
            Walked { record, expected }
        })
        .collect()
}

fn stored_frames(harness: &Harness, record: &RawRecord) -> Vec<u64> {
    let shape = Shape::full(1, 1024);
    let section = StackSection::new(&harness.area, harness.area_address(), &shape, true);
    section
        .frames(&harness.area, StackRef(record.stack))
        .expect("a stack was walked")
}

#[test]
fn the_hooks_walk_equals_the_specification_at_every_depth() {
    let harness = walking_harness();
    let mut copies = Vec::new();
    // A vector the compiler cannot see through: one loop, one call site, not unrolled.
    let depths = black_box(vec![0, 1, 2, 5, 12, 40, 5, 12]);
    for &depth in depths.iter() {
        descend(depth, harness.malloc(), &mut copies);
    }
    let walks = walked(&harness, &copies);
    let mut distinct = std::collections::HashSet::new();
    let mut distinct_frames = std::collections::HashSet::new();
    for walk in &walks {
        let frames = stored_frames(&harness, &walk.record);
        assert_eq!(frames, walk.expected, "record {:x?}", walk.record);
        assert_eq!(frames[0], walk.record.caller);
        assert!(!frames.contains(&TRUNCATED_FRAME), "{frames:x?}");
        distinct.insert(walk.record.stack);
        distinct_frames.insert(frames);
    }
    // One stored stack per distinct stack: the known-stack set found every repeat.
    assert_eq!(walks.len(), 48 + 5 + 9);
    assert_eq!(distinct.len(), distinct_frames.len());
    assert!(distinct.len() < walks.len(), "{} stacks", distinct.len());
}

#[test]
fn a_walk_whose_frames_do_not_fit_in_the_store_is_lost_and_counted() {
    let shape = Shape {
        store_bytes: 4096,
        ..Shape::full(1, 1024)
    };
    let harness = walking_harness_in(&shape);
    let mut copies = Vec::new();
    let depths = black_box(vec![0, 40, 40, 0]);
    for &depth in depths.iter() {
        descend(depth, harness.malloc(), &mut copies);
    }
    let walks = walked(&harness, &copies);
    // Each new stack claims its frames' bytes, stored or not; a stack stored once is found
    // again; one whose claim ends past the page is lost.
    let section = StackSection::new(&harness.area, harness.area_address(), &shape, true);
    let mut claimed = 0;
    let mut stored_stacks = std::collections::HashSet::new();
    let (mut stored, mut lost) = (0, 0);
    for walk in &walks {
        let fits = stored_stacks.contains(&walk.expected) || {
            claimed += 8 * walk.expected.len() as u64;
            claimed <= 4096
        };
        if !fits {
            assert_eq!(walk.record.stack, 0, "lost after {claimed} bytes");
            lost += 1;
            continue;
        }
        let frames = section.frames(&harness.area, StackRef(walk.record.stack));
        assert_eq!(frames.as_ref(), Some(&walk.expected));
        stored_stacks.insert(walk.expected.clone());
        stored += 1;
    }
    assert_eq!(harness.area.stacks_lost(), lost);
    assert_eq!(harness.area.stack_store_used(), claimed);
    assert!(stored > 1 && lost > 1, "{stored} stored, {lost} lost");
    std::mem::forget(section);
}

/// Calls the hooked malloc `calls` times from `depth` frames down; the records are drained
/// as they come so the ring never waits.
#[inline(never)]
fn call_many(
    depth: u32,
    harness: &Harness,
    drainer: &mut Drainer,
    calls: u64,
) -> std::time::Duration {
    if depth > 0 {
        let elapsed = call_many(depth - 1, harness, drainer, calls);
        black_box(depth);
        return elapsed;
    }
    let malloc = harness.malloc();
    let mut sink = Vec::new();
    let started = std::time::Instant::now();
    for round in 0..calls {
        black_box(malloc(round));
        if round % 512 == 511 {
            drainer.drain_published(&harness.area, super::clock::rdtsc(), &mut sink);
            sink.clear();
        }
    }
    started.elapsed()
}

/// What a walk costs in this process: the hooked malloc called a million times from 20
/// frames down (each walk 20 frames and more: the test harness's own), the walker on and
/// off. `cargo test --release --lib hook_walk_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn hook_walk_cost() {
    let harness = walking_harness();
    let calls = 1_000_000;
    let mut drainer = Drainer::new(&harness.area);
    let walking = call_many(20, &harness, &mut drainer, calls);
    let stacks = super::layout::header::STACKS;
    harness.area.u32_at(stacks).store(0, Ordering::Release);
    let plain = call_many(20, &harness, &mut drainer, calls);
    harness.area.u32_at(stacks).store(1, Ordering::Release);
    call_many(20, &harness, &mut drainer, 1);
    let mut records = Vec::new();
    drainer.finish(&harness.area, &mut records);
    let frames = StackRef(records.last().unwrap().stack).frames();
    let per_call = |elapsed: std::time::Duration| elapsed.as_nanos() as f64 / calls as f64;
    let added = per_call(walking) - per_call(plain);
    println!(
        "hook walk: {:.0} ns per call walking, {:.0} ns without; {added:.0} ns per walk of \
         about {frames} frames, {:.1} ns per frame",
        per_call(walking),
        per_call(plain),
        added / frames as f64
    );
}

/// The rule-cache misses of a walk's lookups, each frame's return address less one (as the
/// walker looks them up), on a direct-mapped cache keyed like the hooks'
/// (`stacks::CACHE_HASH`, `CACHE_BITS`).
fn simulated_misses(cache: &mut std::collections::HashMap<u64, u64>, looked_up: &[u64]) -> u32 {
    use super::layout::stacks::{CACHE_BITS, CACHE_HASH};
    let mut misses = 0;
    for frame in looked_up {
        let key = frame - 1;
        let slot = key.wrapping_mul(CACHE_HASH) >> (64 - CACHE_BITS);
        if cache.insert(slot, key) != Some(key) {
            misses += 1;
        }
    }
    misses
}

#[inline(never)]
fn call_from_one_place(malloc: extern "C" fn(u64) -> u64, calls: u64) {
    for round in 0..black_box(calls) {
        black_box(malloc(black_box(round)));
    }
}

#[test]
fn each_record_carries_its_walk_s_rule_lookups_and_cache_misses_and_every_call_is_timed() {
    let harness = walking_harness();
    harness.area.set_sample_mask(0);
    call_from_one_place(harness.malloc(), black_box(10));
    let mut records = Vec::new();
    Drainer::new(&harness.area).finish(&harness.area, &mut records);
    assert_eq!(records.len(), 10);
    let frames = stored_frames(&harness, &records[0]);
    assert!(frames.len() > 5, "{frames:x?}");
    // The first walk looks up every frame's rule, the outermost's to find the walk ends
    // there; being a new stack, its second pass, into the store, stops once it has the
    // frames.
    let mut looked_up = frames.clone();
    looked_up.extend_from_slice(&frames[..frames.len() - 1]);
    assert_eq!(records[0].lookups as usize, looked_up.len());
    let misses = simulated_misses(&mut std::collections::HashMap::new(), &looked_up);
    assert_eq!(records[0].misses, misses);
    assert!(misses > 0);
    // The others start where the first did: its memory gives every frame, no lookup.
    for (index, record) in records.iter().enumerate().skip(1) {
        assert_eq!((record.lookups, record.misses), (0, 0), "record {index}");
        assert_eq!(record.stack, records[0].stack, "record {index}");
    }
    let (timed, ticks) = harness.area.timed();
    assert_eq!(timed, 10);
    assert!(ticks > 0);
}

/// Zeroes `bytes` of the area from the offset the header field `field` holds.
fn zero_part(harness: &Harness, field: u64, bytes: u64) {
    let offset = harness.area.u64_at(field).load(Ordering::Relaxed);
    harness.area.write_bytes(offset, &vec![0; bytes as usize]);
}

#[test]
fn a_stack_walked_again_comes_from_the_thread_s_memory_without_the_known_stack_set() {
    use super::layout::{header, stacks};
    let harness = walking_harness();
    let mut records = Vec::new();
    let mut drainer = Drainer::new(&harness.area);
    for round in 0..black_box(3) {
        match round {
            // Without the known-stack set and the rule cache, only the thread's memory
            // and its recent stacks can give the same reference without a lookup.
            1 => {
                zero_part(&harness, header::KNOWN_OFFSET, stacks::KNOWN_SLOTS * 16);
                zero_part(&harness, header::CACHE_OFFSET, stacks::CACHE_SLOTS * 16);
            }
            // Without the memory either: walked again, found in the recent stacks.
            2 => {
                let memories = harness
                    .area
                    .u64_at(header::MEMORY_OFFSET)
                    .load(Ordering::Relaxed);
                for slot in 0..stacks::MEMORY_SLOTS {
                    let at = memories + slot * stacks::MEMORY_SLOT_BYTES;
                    harness
                        .area
                        .write_bytes(at, &[0; stacks::MEMORY_KNOWN as usize]);
                }
            }
            _ => {}
        }
        call_from_one_place(harness.malloc(), 1);
        drainer.finish(&harness.area, &mut records);
    }
    assert_eq!(records.len(), 3);
    let frames = stored_frames(&harness, &records[0]).len() as u32;
    assert!(records[0].lookups > frames, "{records:x?}");
    // Round 1 looks up a rule or two at most: the loop around the call may keep its
    // counter in a register its callees save on the stack, a word the memory reads again.
    assert!(records[1].lookups < 4, "{records:x?}");
    assert_eq!(records[2].lookups, frames);
    assert!(records
        .iter()
        .all(|record| record.stack == records[0].stack));
    assert_eq!(
        harness
            .area
            .u64_at(header::STORE_USED)
            .load(Ordering::Relaxed),
        8 * frames as u64
    );
}

#[inline(never)]
fn through_inner(malloc: extern "C" fn(u64) -> u64, out: &mut Vec<(u64, u64, Vec<u8>)>) {
    call_and_copy(malloc, 7, out);
    black_box(out.len());
}

#[inline(never)]
fn first_caller(malloc: extern "C" fn(u64) -> u64, out: &mut Vec<(u64, u64, Vec<u8>)>) {
    through_inner(malloc, out);
    black_box(1);
}

#[inline(never)]
fn second_caller(malloc: extern "C" fn(u64) -> u64, out: &mut Vec<(u64, u64, Vec<u8>)>) {
    through_inner(malloc, out);
    black_box(2);
}

#[test]
fn a_walk_whose_frame_was_the_last_one_s_but_whose_caller_changed_walks_on() {
    let harness = walking_harness();
    let mut copies = Vec::new();
    let callers: [fn(_, &mut _); 2] = [first_caller, second_caller];
    for round in 0..black_box(4) {
        callers[round % 2](harness.malloc(), &mut copies);
    }
    let walks = walked(&harness, &copies);
    for walk in &walks {
        assert_eq!(stored_frames(&harness, &walk.record), walk.expected);
    }
    // The same frame state each time (the callers' frames are alike), so each walk after
    // the first took it from the memory, found the return address into the other caller
    // two frames up, looked up the rules of the three frames below the callers' and took
    // the rest from the memory where their frames ended. The second stack is new: its
    // second pass, into the store, looks up all but the outermost frame's rule.
    let frames = walks[0].expected.len() as u32;
    assert_eq!(walks[0].record.stack_pointer, walks[1].record.stack_pointer);
    let lookups: Vec<u32> = walks.iter().map(|walk| walk.record.lookups).collect();
    assert_eq!(lookups, [2 * frames - 1, 3 + frames - 1, 3, 3]);
    for (index, walk) in walks.iter().enumerate() {
        assert_ne!(walk.expected[2], walks[(index + 1) % 2].expected[2]);
        assert_eq!(walk.record.stack, walks[index % 2].record.stack);
    }
    assert_ne!(walks[0].record.stack, walks[1].record.stack);
}
