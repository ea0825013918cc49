//! Symbols of every address in a process image's stacks, resolved once when the image ends
//! and written into the profile, so that reports need neither the binaries nor this machine.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::collector::ModuleRange;
use crate::symbols::{SymbolCache, Symbolizer};
use crate::trace::format::{Record, TRUNCATED_FRAME};

/// Batches smaller than this finish too fast for a progress bar to help.
const PROGRESS_THRESHOLD: usize = 2_000;

pub struct ImageSymbolizer {
    /// DWARF: inlined frames, file:line.
    symbolizer: Symbolizer,
    /// ELF symbol tables: the containing function and the offset into it.
    symbol_tables: SymbolCache,
    bars: MultiProgress,
}

impl ImageSymbolizer {
    /// Progress is drawn on `bars` (hidden when stderr is no terminal or memsup is quiet).
    pub fn new(bars: MultiProgress) -> ImageSymbolizer {
        ImageSymbolizer {
            symbolizer: Symbolizer::default(),
            symbol_tables: SymbolCache::default(),
            bars,
        }
    }

    /// One `Symbol` record per address of process `pid` that lies in one of its `modules`.
    pub fn symbolize(
        &mut self,
        pid: u32,
        modules: &[ModuleRange],
        addresses: Vec<u64>,
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
        for address in addresses {
            bar.inc(1);
            if address == TRUNCATED_FRAME {
                continue;
            }
            // The newest module at an address wins: an older one was unmapped (dlclose).
            let Some((path, _, _, bias)) = modules
                .iter()
                .rev()
                .find(|(_, start, end, _)| (*start..*end).contains(&address))
            else {
                continue;
            };
            let file_address = address.wrapping_sub(*bias);
            // Return addresses may sit just past a call to a noreturn function: look up the
            // call instruction.
            let (function, offset) = match self
                .symbol_tables
                .get(path)
                .ok()
                .and_then(|elf| elf.symbolize(file_address.wrapping_sub(1)))
            {
                Some((name, offset)) => (name, offset + 1),
                None => (String::new(), 0),
            };
            let frames = self.symbolizer.symbolize(path, file_address, true);
            records.push(Record::Symbol {
                pid,
                address,
                function,
                offset,
                module: path.clone(),
                frames,
            });
        }
        bar.finish_and_clear();
        records
    }
}
