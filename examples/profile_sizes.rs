//! Rewrites profiles in the current encoding and prints their sizes, and what each
//! compressor and level makes of the same encoded blocks.
//!
//! Usage: `cargo run --release --example profile_sizes -- PROFILE... [--out DIR]`

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use memsup::trace::codec::BlockEncoder;
use memsup::trace::reader::ProfileReader;
use memsup::trace::writer::{ProfileWriter, BLOCK_BYTES};

/// Events: the records a program's work produces (everything but symbols and stack nodes).
fn is_event(record: &memsup::trace::format::Record) -> bool {
    use memsup::trace::format::Record;
    !matches!(record, Record::Symbol { .. } | Record::StackNode { .. })
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let out = arguments
        .iter()
        .position(|argument| argument == "--out")
        .map(|index| PathBuf::from(&arguments[index + 1]))
        .unwrap_or_else(std::env::temp_dir);
    let profiles: Vec<&String> = arguments
        .iter()
        .enumerate()
        .filter(|(index, argument)| {
            *argument != "--out"
                && arguments.get(index.wrapping_sub(1)).map(String::as_str) != Some("--out")
        })
        .map(|(_, argument)| argument)
        .collect();
    for profile in profiles {
        rewrite(Path::new(profile), &out);
    }
}

fn rewrite(path: &Path, out: &Path) {
    let mut reader = ProfileReader::open(path).expect("reading the profile");
    let header = reader.header().clone();
    let target = out.join(format!(
        "{}.v3",
        path.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&target);
    let mut writer = ProfileWriter::create(&target, &header).expect("creating the copy");
    let mut blocks = vec![Vec::new()];
    let mut encoder = BlockEncoder::default();
    let (mut records, mut events) = (0u64, 0u64);
    for record in reader.by_ref() {
        records += 1;
        events += u64::from(is_event(&record));
        writer.push(&record).expect("writing");
        encoder.push(&record).expect("encoding");
        if encoder.bytes() >= BLOCK_BYTES {
            blocks.push(encoder.take());
        }
    }
    blocks.push(encoder.take());
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
    compare(&blocks, events);
}

/// Each compressor and level on the same blocks: bytes per event and MB/s of encoded input.
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
        report(format!("deflate {level}"), &|block| {
            let mut encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
            encoder.write_all(block).unwrap();
            encoder.finish().unwrap()
        });
    }
    for level in [1, 3, 6, 9, 19] {
        report(format!("zstd {level}"), &|block| {
            zstd::bulk::compress(block, level).unwrap()
        });
    }
}
