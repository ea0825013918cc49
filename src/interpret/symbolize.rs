//! Symbols of every address in a process image's stacks, resolved once when the image ends
//! and written into the profile, so that reports need neither the binaries nor this machine.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crossbeam_channel::Sender;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::stacks::ModuleRange;
use crate::module::{MappedInode, ModuleStore};
use crate::symbols::{SymbolFrame, Symbolizer};
use crate::trace::format::{Record, SourceFrame, TRUNCATED_FRAME};

/// The name of a signal return trampoline that no symbol table names (libc.so.6 without its
/// debug file): glibc's and musl's name for it, which memsup recognised by its code.
pub const SIGNAL_TRAMPOLINE: &str = "__restore_rt";

/// The addresses of an image's stacks that are not return addresses.
#[derive(Debug, Default)]
pub struct SignalFrames {
    /// Signal return trampolines: a handler's frame "returns" to the first instruction of
    /// one, and `a - 1` would lie in whatever precedes it.
    pub trampolines: BTreeSet<u64>,
    /// Instructions a signal interrupted (the frame after a trampoline).
    pub interrupted: BTreeSet<u64>,
}

/// Batches smaller than this finish too fast for a progress bar to help.
const PROGRESS_THRESHOLD: usize = 2_000;

pub struct ImageSymbolizer {
    /// ELF symbol tables (the containing function and the offset into it), and DWARF
    /// (inlined frames, file:line).
    symbolizer: Symbolizer,
    bars: MultiProgress,
}

impl ImageSymbolizer {
    /// Progress is drawn on `bars` (hidden when stderr is no terminal or memsup is quiet).
    pub fn new(bars: MultiProgress, modules: Arc<ModuleStore>) -> ImageSymbolizer {
        ImageSymbolizer {
            symbolizer: Symbolizer::with_store(modules),
            bars,
        }
    }

    /// One `Symbol` record per address of process `pid` that lies in one of its `modules`:
    /// the one at the index given with the address (the module that held it when it was
    /// recorded), else the newest that holds it. Return addresses are looked up at `a - 1`,
    /// the addresses in `signal` at `a`.
    pub fn symbolize(
        &mut self,
        pid: u32,
        modules: &[ModuleRange],
        addresses: Vec<(u64, Option<usize>)>,
        signal: &SignalFrames,
    ) -> Vec<Record> {
        let bar = if addresses.len() >= PROGRESS_THRESHOLD {
            let bar = self.bars.add(ProgressBar::new(addresses.len() as u64));
            bar.set_style(
                ProgressStyle::with_template(
                    "memsup: symbolising process {msg} {wide_bar} {pos}/{len} addresses",
                )
                .expect("valid template"),
            );
            bar.set_message(pid.to_string());
            bar
        } else {
            ProgressBar::hidden()
        };
        let mut records = Vec::with_capacity(addresses.len());
        for (address, module) in addresses {
            bar.inc(1);
            if address == TRUNCATED_FRAME {
                continue;
            }
            // Without a module recorded with the address, the newest module there wins: an
            // older one was unmapped (dlclose).
            let recorded = module.and_then(|index| modules.get(index));
            let Some(module) = recorded.or_else(|| modules.iter().rev().find(|m| m.holds(address)))
            else {
                continue;
            };
            let (path, inode) = (&module.path, module.inode);
            let file_address = address.wrapping_sub(module.bias);
            let trampoline = signal.trampolines.contains(&address);
            let exact = trampoline || signal.interrupted.contains(&address);
            // Return addresses may sit just past a call to a noreturn function: look up the
            // call instruction.
            let lookup = if exact {
                file_address
            } else {
                file_address.wrapping_sub(1)
            };
            let (mut function, offset) = match self
                .symbolizer
                .mapped_elf(path, inode)
                .and_then(|elf| elf.symbolize(lookup))
            {
                Some((name, offset)) => (name, offset + file_address - lookup),
                None => (String::new(), 0),
            };
            let mut frames = self
                .symbolizer
                .symbolize_mapped(path, inode, file_address, !exact);
            if trampoline {
                if function.is_empty() {
                    function = SIGNAL_TRAMPOLINE.to_string();
                }
                if frames.is_empty() {
                    frames.push(SymbolFrame {
                        function: function.clone(),
                        raw_name: function.clone(),
                        file: None,
                        line: None,
                        column: None,
                        inlined: false,
                    });
                }
            }
            records.push(Record::Symbol {
                pid,
                address,
                function,
                offset,
                module: path.clone(),
                frames: frames.into_iter().map(source_frame).collect(),
            });
        }
        bar.finish_and_clear();
        records
    }
}

/// Reads and parses the debug information of a module on a thread of its own as soon as a
/// stack address lies in it, while the program runs: the symbolising at the image's end,
/// which waits for the interpret thread's input to end first, then mostly finds it done. A
/// module file parses it once, whoever asks first; a later asker waits for that.
pub struct DebugPreloader {
    modules: Arc<ModuleStore>,
    requested: HashMap<String, HashSet<MappedInode>>,
    /// The loading thread, started at the first request.
    sender: Option<Sender<(String, MappedInode)>>,
}

impl DebugPreloader {
    pub fn new(modules: Arc<ModuleStore>) -> DebugPreloader {
        DebugPreloader {
            modules,
            requested: HashMap::new(),
            sender: None,
        }
    }

    /// Loads the debug information of `module`'s file in the background, once.
    pub fn request(&mut self, module: &ModuleRange) {
        let requested = self.requested.get(&module.path);
        if requested.is_some_and(|inodes| inodes.contains(&module.inode)) {
            return;
        }
        (self.requested.entry(module.path.clone()).or_default()).insert(module.inode);
        let modules = &self.modules;
        let sender = self.sender.get_or_insert_with(|| spawn_loader(modules));
        // Without the thread the symbolising loads it itself.
        let _ = sender.send((module.path.clone(), module.inode));
    }
}

fn spawn_loader(modules: &Arc<ModuleStore>) -> Sender<(String, MappedInode)> {
    let (sender, files) = crossbeam_channel::unbounded::<(String, MappedInode)>();
    let modules = Arc::clone(modules);
    let _ = std::thread::Builder::new()
        .name("memsup-debuginfo".into())
        .spawn(move || {
            for (path, inode) in files {
                if let Ok(file) = modules.get_mapped(&path, inode) {
                    file.debug_info(modules.debug_files());
                }
            }
        });
    sender
}

/// The symboliser's frame as the profile stores it.
fn source_frame(frame: SymbolFrame) -> SourceFrame {
    SourceFrame {
        function: frame.function,
        raw_name: frame.raw_name,
        file: frame.file,
        line: frame.line,
        column: frame.column,
        inlined: frame.inlined,
    }
}

#[cfg(test)]
mod tests {
    use indicatif::ProgressDrawTarget;

    use super::*;
    use crate::symbols::elf::ElfFile;

    const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
    const BIAS: u64 = 0x7f00_0000_0000;

    fn symbolize(addresses: &[u64], signal: &SignalFrames) -> Vec<(String, u64, Vec<String>)> {
        let modules = [ModuleRange {
            path: LIBC.to_string(),
            inode: MappedInode::default(),
            start: BIAS,
            end: BIAS + (64 << 20),
            bias: BIAS,
        }];
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        let addresses = addresses.iter().map(|&a| (a, Some(0))).collect();
        ImageSymbolizer::new(bars, Arc::new(ModuleStore::new()))
            .symbolize(1, &modules, addresses, signal)
            .into_iter()
            .map(|record| match record {
                Record::Symbol {
                    function,
                    offset,
                    frames,
                    ..
                } => (
                    function,
                    offset,
                    frames.into_iter().map(|frame| frame.function).collect(),
                ),
                other => panic!("not a symbol: {other:?}"),
            })
            .collect()
    }

    /// A handler returns to the first instruction of the trampoline, and a signal may
    /// interrupt a function at its first instruction: looked up at `a - 1`, both would be
    /// named after whatever precedes them.
    #[test]
    fn signal_frames_are_named_at_their_own_address() {
        let libc = ModuleStore::new().get(LIBC).unwrap();
        let trampoline = BIAS + libc.unwind().unwrap().sigreturn[0];
        let elf = ElfFile::open(LIBC).unwrap();
        let malloc = BIAS + elf.find_functions(&["malloc"])[0].address;
        let (malloc_name, _) = elf.symbolize(malloc - BIAS).unwrap();
        let signal = SignalFrames {
            trampolines: [trampoline].into(),
            interrupted: [malloc].into(),
        };
        let named = symbolize(&[trampoline, malloc], &signal);
        // libc.so.6's own symbol table does not name the trampoline; its debug file may.
        assert_eq!(named[0].0, SIGNAL_TRAMPOLINE);
        assert_eq!(named[0].1, 0);
        assert_eq!(named[0].2, [SIGNAL_TRAMPOLINE]);
        assert_eq!((named[1].0.as_str(), named[1].1), (malloc_name.as_str(), 0));

        let as_return_addresses = symbolize(&[trampoline, malloc], &SignalFrames::default());
        assert_ne!(as_return_addresses[0].0, SIGNAL_TRAMPOLINE);
        assert_ne!(as_return_addresses[1].0, malloc_name);
    }
}
