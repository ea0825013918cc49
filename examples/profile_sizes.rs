//! Rewrites profiles in the current encoding and prints their sizes, and what each
//! compressor and level makes of the same encoded blocks.
//!
//! Usage: `cargo run --release --example profile_sizes -- PROFILE... [--out DIR] [--microseconds]
//! [--flush-ms MS] [--quick]`
//!
//! `--microseconds` truncates the times of the records to whole microseconds first, as the
//! recorder's clock now gives them, for profiles recorded before it did.
//!
//! `--flush-ms MS` cuts the measured blocks as a recording does: also when the block's first
//! record is MS milliseconds older than the current one by the records' times (the writer
//! cuts at 100 ms of wall clock, which the records' times follow), and at every process exit.
//! Without it blocks are cut at 256 KiB of encoded records only.
//!
//! `--verify` decodes every measured block and checks it gives back the records it holds.
//!
//! `--quick` leaves out the comparison of compressors and the rewritten copy.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use memsup::trace::block_decoder::BlockDecoder;
use memsup::trace::codec::{BlockEncoder, STREAMS, STREAM_NAMES};
use memsup::trace::format::Record;
use memsup::trace::frame::{compress, compress_at_level, FRAME_BYTES};
use memsup::trace::reader::ProfileReader;
use memsup::trace::writer::{ProfileWriter, BLOCK_BYTES};

/// Events: the records a program's work produces (everything but symbols and stack nodes).
fn is_event(record: &Record) -> bool {
    !matches!(record, Record::Symbol { .. } | Record::StackNode { .. })
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let out = arguments
        .iter()
        .position(|argument| argument == "--out")
        .map(|index| PathBuf::from(&arguments[index + 1]))
        .unwrap_or_else(std::env::temp_dir);
    let microseconds = arguments
        .iter()
        .any(|argument| argument == "--microseconds");
    let flush_ns = arguments
        .iter()
        .position(|argument| argument == "--flush-ms")
        .map(|index| arguments[index + 1].parse::<u64>().expect("--flush-ms MS") * 1_000_000);
    let options = Options {
        microseconds,
        flush_ns,
        quick: arguments.iter().any(|argument| argument == "--quick"),
        verify: arguments.iter().any(|argument| argument == "--verify"),
    };
    let profiles: Vec<&String> = arguments
        .iter()
        .enumerate()
        .filter(|(index, argument)| {
            let previous = arguments.get(index.wrapping_sub(1)).map(String::as_str);
            !argument.starts_with("--") && !matches!(previous, Some("--out" | "--flush-ms"))
        })
        .map(|(_, argument)| argument)
        .collect();
    for profile in profiles {
        rewrite(Path::new(profile), &out, &options);
    }
}

struct Options {
    microseconds: bool,
    flush_ns: Option<u64>,
    quick: bool,
    verify: bool,
}

/// Where the measured blocks are cut: by encoded bytes, and by age when asked.
#[derive(Default)]
struct Cutter {
    block_start_ns: Option<u64>,
    last_ns: u64,
}

impl Cutter {
    /// Whether the block must be written after `record`, as the writer would.
    fn cut_after(
        &mut self,
        record: &Record,
        encoder: &BlockEncoder,
        flush_ns: Option<u64>,
    ) -> bool {
        if let Some(time) = record.time_ns() {
            self.last_ns = self.last_ns.max(time);
        }
        let start = *self.block_start_ns.get_or_insert(self.last_ns);
        let old = flush_ns.is_some_and(|flush| self.last_ns.saturating_sub(start) >= flush);
        let closes = matches!(record, Record::ProcessExit { .. } | Record::End { .. });
        let cut = encoder.bytes() >= BLOCK_BYTES || (flush_ns.is_some() && (old || closes));
        if cut {
            self.block_start_ns = None;
        }
        cut
    }
}

/// The record with its time truncated to a whole microsecond (the kinds that make up the
/// events; the rare others keep theirs).
fn in_microseconds(mut record: Record) -> Record {
    match &mut record {
        Record::Alloc { time_ns, .. }
        | Record::Free { time_ns, .. }
        | Record::Realloc { time_ns, .. }
        | Record::StatusSample { time_ns, .. } => *time_ns -= *time_ns % 1000,
        _ => {}
    }
    record
}

fn rewrite(path: &Path, out: &Path, options: &Options) {
    let mut reader = ProfileReader::open(path).expect("reading the profile");
    let header = reader.header().clone();
    let target = out.join(format!(
        "{}.v3",
        path.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&target);
    let mut writer = ProfileWriter::create(&target, &header).expect("creating the copy");
    let mut blocks = vec![Vec::new()];
    let mut breakdown = Breakdown::default();
    let mut encoder = BlockEncoder::default();
    let (mut records, mut events) = (0u64, 0u64);
    let mut encoding = std::time::Duration::ZERO;
    let mut cutter = Cutter::default();
    let mut block_records = Vec::new();
    for record in reader.by_ref() {
        let record = match options.microseconds {
            true => in_microseconds(record),
            false => record,
        };
        records += 1;
        events += u64::from(is_event(&record));
        if !options.quick {
            writer.push(&record).expect("writing");
        }
        let started = Instant::now();
        encoder.push(&record).expect("encoding");
        encoding += started.elapsed();
        breakdown.count(&record);
        if options.verify {
            block_records.push(record.clone());
        }
        if cutter.cut_after(&record, &encoder, options.flush_ns) {
            breakdown.add_block(&encoder);
            blocks.push(encoder.take());
            verify(blocks.last().unwrap(), &mut block_records);
        }
    }
    if !encoder.is_empty() {
        breakdown.add_block(&encoder);
        blocks.push(encoder.take());
        verify(blocks.last().unwrap(), &mut block_records);
    }
    writer.finish().expect("finishing");
    let before = std::fs::metadata(path).unwrap().len();
    let after = std::fs::metadata(&target).unwrap().len();
    let encoded: usize = blocks.iter().map(Vec::len).sum();
    println!(
        "{}: version {}, {records} records, {events} events; {before} bytes ({:.2} B/event) -> {after} bytes ({:.2} B/event); encoded before compression {encoded} bytes ({:.2} B/event)",
        path.display(),
        reader.version(),
        before as f64 / events as f64,
        after as f64 / events as f64,
        encoded as f64 / events as f64
    );
    println!(
        "  encoding (records to streams): {:.0} ms, {:.1} M records/s, {:.0} MB/s of encoded bytes",
        encoding.as_secs_f64() * 1e3,
        records as f64 / encoding.as_secs_f64() / 1e6,
        encoded as f64 / encoding.as_secs_f64() / 1e6
    );
    let started = Instant::now();
    let framed: usize = blocks
        .iter()
        .filter(|block| !block.is_empty())
        .map(|block| compress(block).unwrap().len() + FRAME_BYTES)
        .sum();
    println!(
        "  {} blocks as the writer compresses them (zstd 3, a zstd block per stream) with their frames: \
         {framed} bytes, {:.3} B/event, {:.1} MB/s",
        blocks.iter().filter(|block| !block.is_empty()).count(),
        framed as f64 / events as f64,
        encoded as f64 / started.elapsed().as_secs_f64() / 1e6
    );
    let apart: usize = blocks
        .iter()
        .filter(|block| !block.is_empty())
        .map(|block| {
            memsup::trace::codec::stream_parts(block)
                .iter()
                .map(|part| deflate(part, 6).len())
                .sum::<usize>()
                + FRAME_BYTES
        })
        .sum();
    println!(
        "  the same parts deflated each alone: {apart} bytes, {:.3} B/event",
        apart as f64 / events as f64
    );
    if !options.quick {
        compare(&blocks, events);
    }
    breakdown.print(events);
}

/// Decodes `block` and checks it gives back `records` (when they were kept), then forgets them.
fn verify(block: &[u8], records: &mut Vec<Record>) {
    if records.is_empty() {
        return;
    }
    let mut decoder =
        BlockDecoder::new(block.to_vec(), records.len() as u32).expect("a block that decodes");
    for (index, record) in records.iter().enumerate() {
        let decoded = decoder.next_record().expect("a record that decodes");
        assert_eq!(
            decoded.as_ref(),
            Some(record),
            "record {index} of its block"
        );
    }
    assert_eq!(
        decoder.next_record(),
        Ok(None),
        "the block ends with its records"
    );
    records.clear();
}

/// Where the bytes go: each stream compressed on its own, block by block, and the records of
/// each kind that the streams hold.
#[derive(Default)]
struct Breakdown {
    stream_bytes: [(usize, usize); STREAMS],
    /// Zero bytes in each stream: in `references` and `reuses` (ranks of at most 32, one
    /// byte each) the frees and allocations stored by address.
    zeros: [usize; STREAMS],
    kinds: std::collections::BTreeMap<String, u64>,
}

impl Breakdown {
    fn count(&mut self, record: &Record) {
        let text = format!("{record:?}");
        let kind = text.split([' ', '(']).next().unwrap_or("").to_string();
        *self.kinds.entry(kind).or_default() += 1;
    }

    fn add_block(&mut self, encoder: &BlockEncoder) {
        for (index, stream) in encoder.streams().into_iter().enumerate() {
            self.stream_bytes[index].0 += stream.len();
            self.stream_bytes[index].1 += deflate(stream, 6).len();
            self.zeros[index] += stream.iter().filter(|&&byte| byte == 0).count();
        }
    }

    fn print(&self, events: u64) {
        println!("  stream       encoded   deflated  B/event");
        for (name, (encoded, deflated)) in STREAM_NAMES.iter().zip(self.stream_bytes) {
            println!(
                "  {name:<10} {encoded:>9} {deflated:>10}  {:>7.3}",
                deflated as f64 / events as f64
            );
        }
        for name in ["references", "reuses"] {
            let index = STREAM_NAMES
                .iter()
                .position(|&known| known == name)
                .unwrap();
            let (total, zeros) = (self.stream_bytes[index].0, self.zeros[index]);
            println!(
                "  {name}: {:.1} % by rank",
                100.0 * (total - zeros) as f64 / total.max(1) as f64
            );
        }
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        println!("  records: {}", kinds.join(", "));
    }
}

fn deflate(bytes: &[u8], level: u32) -> Vec<u8> {
    let mut encoder =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Each compressor and level on the same blocks, whole, and zstd also a block per stream as
/// the writer compresses (`/s`): bytes per event and MB/s of encoded input.
fn compare(blocks: &[Vec<u8>], events: u64) {
    let encoded: usize = blocks.iter().map(Vec::len).sum();
    let report = |name: String, compress: &dyn Fn(&[u8]) -> Vec<u8>| {
        let started = Instant::now();
        let size: usize = blocks.iter().map(|block| compress(block).len()).sum();
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "  {name:<10} {size:>10} bytes  {:>6.3} B/event  {:>7.1} MB/s",
            size as f64 / events as f64,
            encoded as f64 / seconds / 1e6
        );
    };
    for level in [1, 6, 9] {
        report(format!("deflate {level}"), &|block| deflate(block, level));
    }
    for level in [1, 3, 6, 9, 19] {
        report(format!("zstd {level}"), &|block| {
            zstd::bulk::compress(block, level).unwrap()
        });
    }
    // As the writer does it (`frame::compress`), at other levels.
    for level in [1, 3, 6] {
        report(format!("zstd {level}/s"), &|block| {
            compress_at_level(block, level).unwrap()
        });
    }
}
