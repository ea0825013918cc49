//! Between the tracer and the writer: symbolises each process image's call sites once, when
//! the image ends (exec, exit, end of recording), so profiles report without the binaries;
//! and keeps the live counters the progress line shows.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::symbols::SymbolCache;
use crate::trace::format::Record;

/// Counters shared with the progress line.
#[derive(Default)]
pub struct LiveStats {
    pub events: AtomicU64,
    pub processes: AtomicU64,
    pub live_bytes: AtomicI64,
}

#[derive(Clone, Default)]
struct Image {
    /// (path, start, end, bias)
    modules: Vec<(String, u64, u64, u64)>,
    callers: HashSet<u64>,
}

struct Collector {
    output: Sender<Record>,
    images: HashMap<u32, Image>,
    live_blocks: HashMap<(u32, u64), u64>,
    symbols: SymbolCache,
    stats: Arc<LiveStats>,
}

pub fn spawn(
    input: Receiver<Record>,
    output: Sender<Record>,
    stats: Arc<LiveStats>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("memsup-collector".into())
        .spawn(move || {
            let mut collector = Collector {
                output,
                images: HashMap::new(),
                live_blocks: HashMap::new(),
                symbols: SymbolCache::default(),
                stats,
            };
            for record in input {
                collector.take(record);
            }
            let pids: Vec<u32> = collector.images.keys().copied().collect();
            for pid in pids {
                collector.symbolize(pid);
            }
        })
        .expect("spawning the collector thread")
}

impl Collector {
    fn take(&mut self, record: Record) {
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        match &record {
            Record::ProcessStart {
                pid, parent_pid, ..
            } => {
                let inherited = parent_pid
                    .and_then(|p| self.images.get(&p))
                    .cloned()
                    .unwrap_or_default();
                self.images.insert(
                    *pid,
                    Image {
                        callers: HashSet::new(),
                        ..inherited
                    },
                );
                self.stats.processes.fetch_add(1, Ordering::Relaxed);
            }
            Record::Module {
                pid,
                path,
                start,
                end,
                bias,
                ..
            } => {
                self.images.entry(*pid).or_default().modules.push((
                    path.clone(),
                    *start,
                    *end,
                    *bias,
                ));
            }
            Record::Exec { pid, .. } => {
                self.symbolize(*pid);
                self.images.insert(*pid, Image::default());
            }
            Record::ProcessExit { pid, .. } => {
                self.symbolize(*pid);
                self.images.remove(pid);
                self.stats.processes.fetch_sub(1, Ordering::Relaxed);
            }
            Record::End { .. } => {
                let pids: Vec<u32> = self.images.keys().copied().collect();
                for pid in pids {
                    self.symbolize(pid);
                }
            }
            _ => self.track_heap(&record),
        }
        let _ = self.output.send(record);
    }

    fn track_heap(&mut self, record: &Record) {
        let mut note_caller = |pid: u32, caller: u64| {
            if caller != 0 {
                self.images.entry(pid).or_default().callers.insert(caller);
            }
        };
        match *record {
            Record::Alloc {
                pid,
                address,
                size,
                caller,
                ..
            } => {
                note_caller(pid, caller);
                if address != 0 {
                    self.live_blocks.insert((pid, address), size);
                    self.stats
                        .live_bytes
                        .fetch_add(size as i64, Ordering::Relaxed);
                }
            }
            Record::Realloc {
                pid,
                old_address,
                new_address,
                size,
                caller,
                ..
            } => {
                note_caller(pid, caller);
                if new_address != 0 || size == 0 {
                    self.forget_block(pid, old_address);
                }
                if new_address != 0 {
                    self.live_blocks.insert((pid, new_address), size);
                    self.stats
                        .live_bytes
                        .fetch_add(size as i64, Ordering::Relaxed);
                }
            }
            Record::Free { pid, address, .. } => self.forget_block(pid, address),
            Record::Mapping { pid, caller, .. } => note_caller(pid, caller),
            _ => {}
        }
    }

    fn forget_block(&mut self, pid: u32, address: u64) {
        if let Some(size) = self.live_blocks.remove(&(pid, address)) {
            self.stats
                .live_bytes
                .fetch_sub(size as i64, Ordering::Relaxed);
        }
    }

    /// Emits a Symbol record for every call site of the image, before the record that ends it.
    fn symbolize(&mut self, pid: u32) {
        let Some(image) = self.images.get_mut(&pid) else {
            return;
        };
        let callers = std::mem::take(&mut image.callers);
        let modules = image.modules.clone();
        let mut callers: Vec<u64> = callers.into_iter().collect();
        callers.sort_unstable();
        for address in callers {
            let Some((path, _, _, bias)) = modules
                .iter()
                .find(|(_, start, end, _)| (*start..*end).contains(&address))
            else {
                continue;
            };
            // A return address may sit just past the end of a call to a noreturn function.
            let lookup = address.wrapping_sub(*bias).wrapping_sub(1);
            let (function, offset) = match self
                .symbols
                .get(path)
                .ok()
                .and_then(|elf| elf.symbolize(lookup))
            {
                Some((name, offset)) => (name, offset + 1),
                None => (String::new(), 0),
            };
            let _ = self.output.send(Record::Symbol {
                pid,
                address,
                function,
                offset,
                module: path.clone(),
            });
        }
    }
}
