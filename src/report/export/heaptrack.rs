//! `memsup report --format heaptrack`: one process image as heaptrack's interpreted data file
//! (file format 3, uncompressed text), which heaptrack_print and heaptrack_gui read. Lines:
//! `v` the format, `X` the command line, `A` for an attached process, `s` strings (sized),
//! `i` one frame each (address, module, function, file, line), `t` trace nodes (frame,
//! caller's node), `a` allocation infos (size, trace), `+`/`-` a block created/released by
//! its allocation info, `c` milliseconds since the image started. Every line is written
//! before the first line that refers to it; numbers are hexadecimal.
//!
//! The events come from a second pass over the profile (`analysis::heap_stream`), through the
//! heap model the analysis uses: a `+` per block created (realloc's new block included), a
//! `-` per known block released (or found replaced), nothing for frees of unknown pointers or
//! failed calls. So heaptrack's calls, peak and leaked bytes are memsup's allocations, peak
//! and live bytes at exit. A trace is the call site as memsup's report has it (allocator
//! frames dropped, inlined functions as frames of their own). No RSS lines are written.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::analysis::heap_stream::{replay_image_heap, SiteFrames};
use crate::analysis::{Analysis, Frame, ProcessAnalysis, SkipFrames};
use crate::error::{Error, Result};
use crate::events::heap::{Block, Outcome};
use crate::trace::format::StartCause;
use crate::trace::stacks::StackId;

/// The heaptrack release whose file format (version 3) this writes.
const HEAPTRACK_VERSION: u32 = 0x010400;
const FILE_FORMAT_VERSION: u32 = 3;

/// Writes `image` of `analysis`, reading the profile again for its events.
pub fn render(
    analysis: &Analysis,
    image: &ProcessAnalysis,
    skip: &SkipFrames,
    out: &mut dyn Write,
) -> Result<()> {
    let mut out = std::io::BufWriter::new(out);
    let mut writer = Writer::new(image.start_ns);
    let written = writer.header(image, &mut out);
    written.map_err(|error| Error::io("writing the report", error))?;
    let mut failure = None;
    let path = Path::new(&analysis.profile.path);
    replay_image_heap(path, image, skip, &mut |time_ns, outcome, sites| {
        if failure.is_none() {
            failure = writer.event(time_ns, outcome, sites, &mut out).err();
        }
    })?;
    let end_ms = image.duration_ns / 1_000_000;
    let ended = match failure {
        Some(error) => Err(error),
        None => writeln!(out, "c {end_ms:x}").and_then(|()| out.flush()),
    };
    ended.map_err(|error| Error::io("writing the report", error))
}

/// What has been written, so that each string, frame, trace and allocation info is written
/// once, before its first use.
struct Writer {
    start_ns: u64,
    last_ms: u64,
    strings: HashMap<String, u64>,
    frames: HashMap<(u64, u64, u64, u64, u32), u64>,
    traces: HashMap<(u64, u64), u64>,
    trace_of_stack: HashMap<StackId, u64>,
    infos: HashMap<(u64, u64), u64>,
}

impl Writer {
    fn new(start_ns: u64) -> Self {
        Writer {
            start_ns,
            last_ms: 0,
            strings: HashMap::new(),
            frames: HashMap::new(),
            traces: HashMap::new(),
            trace_of_stack: HashMap::new(),
            infos: HashMap::new(),
        }
    }

    fn header(&mut self, image: &ProcessAnalysis, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "v {HEAPTRACK_VERSION:x} {FILE_FORMAT_VERSION:x}")?;
        writeln!(out, "X {}", one_line(&image.argv.join(" ")))?;
        if image.cause == StartCause::Attach {
            writeln!(out, "A")?;
        }
        // heaptrack_print takes allocation info 0 for "no allocation just made" when it
        // counts temporary allocations: no block uses it, or its free after another free
        // would count as temporary.
        writeln!(out, "a 0 0")
    }

    fn event(
        &mut self,
        time_ns: u64,
        outcome: &Outcome,
        sites: &mut SiteFrames,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let ms = time_ns.saturating_sub(self.start_ns) / 1_000_000;
        if ms > self.last_ms {
            writeln!(out, "c {ms:x}")?;
            self.last_ms = ms;
        }
        for block in [outcome.released, outcome.replaced].into_iter().flatten() {
            let info = self.info(&block, sites, out)?;
            writeln!(out, "- {info:x}")?;
        }
        if let Some(block) = outcome.created {
            let info = self.info(&block, sites, out)?;
            writeln!(out, "+ {info:x}")?;
        }
        Ok(())
    }

    /// The allocation info (size and trace) of `block`, numbered from 1 (0 is the
    /// placeholder of `header`).
    fn info(
        &mut self,
        block: &Block,
        sites: &mut SiteFrames,
        out: &mut dyn Write,
    ) -> std::io::Result<u64> {
        let trace = match self.trace_of_stack.get(&block.stack) {
            Some(&trace) => trace,
            None => {
                let frames = sites.frames(block.stack).to_vec();
                let trace = self.trace(&frames, out)?;
                self.trace_of_stack.insert(block.stack, trace);
                trace
            }
        };
        let next = self.infos.len() as u64 + 1;
        let info = *self.infos.entry((block.size, trace)).or_insert(next);
        if info == next {
            writeln!(out, "a {:x} {trace:x}", block.size)?;
        }
        Ok(info)
    }

    /// The trace node of `frames` (innermost first), its callers' nodes written first;
    /// numbered from 1, 0 being the root.
    fn trace(&mut self, frames: &[Frame], out: &mut dyn Write) -> std::io::Result<u64> {
        let mut parent = 0;
        for frame in frames.iter().rev() {
            let frame_index = self.frame(frame, out)?;
            let next = self.traces.len() as u64 + 1;
            let node = *self.traces.entry((frame_index, parent)).or_insert(next);
            if node == next {
                writeln!(out, "t {frame_index:x} {parent:x}")?;
            }
            parent = node;
        }
        Ok(parent)
    }

    /// The `i` line of one frame, numbered from 1.
    fn frame(&mut self, frame: &Frame, out: &mut dyn Write) -> std::io::Result<u64> {
        let module = self.string(&frame.module, out)?;
        let function = self.string(&frame.function, out)?;
        let file = self.string(frame.file.as_deref().unwrap_or_default(), out)?;
        let line = frame.line.unwrap_or(0);
        let key = (frame.address, module, function, file, line);
        let next = self.frames.len() as u64 + 1;
        let index = *self.frames.entry(key).or_insert(next);
        if index == next {
            write!(out, "i {:x} {module:x}", frame.address)?;
            if function != 0 {
                write!(out, " {function:x} {file:x} {line:x}")?;
            }
            writeln!(out)?;
        }
        Ok(index)
    }

    /// The number of a string (from 1), written as `s LENGTH TEXT` when new; 0 for none.
    fn string(&mut self, text: &str, out: &mut dyn Write) -> std::io::Result<u64> {
        if text.is_empty() {
            return Ok(0);
        }
        let next = self.strings.len() as u64 + 1;
        let index = *self.strings.entry(text.to_string()).or_insert(next);
        if index == next {
            let text = one_line(text);
            writeln!(out, "s {:x} {text}", text.len())?;
        }
        Ok(index)
    }
}

/// A line break would end the line early.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
