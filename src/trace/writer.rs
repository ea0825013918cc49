//! Writes profiles: the preamble first, then framed compressed blocks, flushed at least
//! every 100 ms.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::error::TraceError;
use crate::failure::{test_fault, TestFault};
use crate::trace::codec::{BlockEncoder, MAX_BLOCK_THREADS};
use crate::trace::format::{Header, Record};
use crate::trace::frame::{compress, encode_preamble, new_recording_id, Frame, MAX_INFLATED_BYTES};
use crate::trace::output_file::{open_output, OutputFile, OutputRequest};

/// Encoded bytes buffered before a block is written regardless of age.
pub const BLOCK_BYTES: usize = 256 * 1024;
/// Longest time a record waits in the buffer, so a killed memsup loses at most this much.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Records the interpret stage passes on in one channel message, in order.
pub type RecordBatch = Vec<Record>;

/// The bincode configuration of headers and of the records stored whole (varint integers).
/// Reader and writer must agree on it.
pub(crate) fn encoding() -> bincode::DefaultOptions {
    bincode::DefaultOptions::new()
}

/// Appends records to a profile file in framed, compressed blocks.
pub struct ProfileWriter {
    path: PathBuf,
    file: File,
    recording_id: u64,
    /// Sequence number of the next block.
    sequence: u64,
    /// Records not yet written.
    block: BlockEncoder,
    /// When the oldest buffered record arrived; None when the buffer is empty.
    oldest_buffered: Option<Instant>,
    records_written: u64,
}

impl ProfileWriter {
    /// Creates a new file at `path` (refusing an existing one) and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<ProfileWriter, TraceError> {
        let request = OutputRequest::Explicit {
            path: path.to_path_buf(),
            force: false,
        };
        ProfileWriter::open(&request, header)
    }

    /// Opens the file as `request` says (see `output_file`) and writes the preamble at
    /// once, so an unwritable path fails before anything is launched.
    pub fn open(request: &OutputRequest, header: &Header) -> Result<ProfileWriter, TraceError> {
        let recording_id = new_recording_id();
        let preamble = encode_preamble(recording_id, header).map_err(TraceError::Encode)?;
        let OutputFile { path, mut file } = open_output(request)?;
        let io_error = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        file.write_all(&preamble).map_err(io_error)?;
        file.flush().map_err(io_error)?;
        Ok(ProfileWriter {
            path,
            file,
            recording_id,
            sequence: 0,
            block: BlockEncoder::default(),
            oldest_buffered: None,
            records_written: 0,
        })
    }

    /// Buffers one record; writes a block when the buffer is large or 100 ms old. A process
    /// exit or the end record is written at once, so it survives memsup being killed right after.
    pub fn push(&mut self, record: &Record) -> Result<(), TraceError> {
        self.push_all(std::slice::from_ref(record))
    }

    /// As `push` for records in order, with one clock reading for all of them.
    pub fn push_all(&mut self, records: &[Record]) -> Result<(), TraceError> {
        for record in records {
            self.encode(record)?;
            let closes_something =
                matches!(record, Record::ProcessExit { .. } | Record::End { .. });
            if closes_something || self.block.bytes() >= BLOCK_BYTES {
                self.flush_block()?;
            }
        }
        if !self.block.is_empty() {
            let now = Instant::now();
            let oldest = *self.oldest_buffered.get_or_insert(now);
            if now.duration_since(oldest) >= FLUSH_INTERVAL {
                self.flush_block()?;
            }
        }
        Ok(())
    }

    fn encode(&mut self, record: &Record) -> Result<(), TraceError> {
        if self.block.threads() >= MAX_BLOCK_THREADS {
            self.flush_block()?;
        }
        self.block
            .push(record)
            .map_err(|error| TraceError::Encode(error.to_string()))?;
        // Room for the stream table: a reader refuses a block past the cap.
        if self.block.bytes() + 128 > MAX_INFLATED_BYTES as usize {
            return Err(TraceError::Encode(
                "a record larger than a profile block can hold".to_string(),
            ));
        }
        Ok(())
    }

    /// Writes the buffered records as one whole block and flushes it to the file.
    pub fn flush_block(&mut self) -> Result<(), TraceError> {
        if self.block.is_empty() {
            return Ok(());
        }
        let records = self.block.records();
        let inflated = self.block.take();
        let block = frame_block(self.recording_id, self.sequence, &inflated, records)
            .map_err(|source| self.io_error(source))?;
        // One write_all per block: a reader never sees a block half written unless memsup
        // itself is killed in the middle of this call.
        self.file
            .write_all(&block)
            .and_then(|()| self.file.flush())
            .map_err(|source| self.io_error(source))?;
        self.sequence += 1;
        self.records_written += u64::from(records);
        self.oldest_buffered = None;
        Ok(())
    }

    /// Flushes what is buffered and closes the file.
    pub fn finish(mut self) -> Result<(), TraceError> {
        self.flush_block()?;
        self.file.sync_all().map_err(|source| self.io_error(source))
    }

    /// The file written: the default name may have taken a suffix.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The random id every block of this recording carries.
    pub fn recording_id(&self) -> u64 {
        self.recording_id
    }

    /// Records written to the file in whole blocks so far.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }

    /// When the buffered records must be written at the latest; None when nothing is buffered.
    pub fn flush_deadline(&self) -> Option<Instant> {
        self.oldest_buffered.map(|oldest| oldest + FLUSH_INTERVAL)
    }

    fn io_error(&self, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

/// The frame followed by the compressed block.
pub fn frame_block(
    recording_id: u64,
    sequence: u64,
    inflated: &[u8],
    records: u32,
) -> std::io::Result<Vec<u8>> {
    let payload = compress(inflated)?;
    let frame = Frame::new(
        recording_id,
        sequence,
        &payload,
        inflated.len() as u32,
        records,
    );
    let mut block = Vec::with_capacity(payload.len() + 32);
    block.extend_from_slice(&frame.encode());
    block.extend_from_slice(&payload);
    Ok(block)
}

/// Runs the writer on its own thread: drains `records` until every sender is gone, flushing a
/// block at least every 100 ms even when records trickle in. Returns how many records it wrote.
pub fn spawn(
    writer: ProfileWriter,
    records: Receiver<RecordBatch>,
) -> JoinHandle<Result<u64, TraceError>> {
    std::thread::Builder::new()
        .name("memsup-writer".to_string())
        .spawn(move || drain(writer, &records))
        .expect("spawning the profile writer thread")
}

fn drain(mut writer: ProfileWriter, records: &Receiver<RecordBatch>) -> Result<u64, TraceError> {
    let fail_at_first_allocation = test_fault() == Some(TestFault::WriterPanic);
    loop {
        // With nothing buffered there is no deadline, so wait for the next record as long as it takes.
        let received = match writer.flush_deadline() {
            Some(deadline) => {
                records.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            }
            None => records.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(batch) => {
                let allocation = |record: &Record| matches!(record, Record::Alloc { .. });
                if fail_at_first_allocation && batch.iter().any(allocation) {
                    panic!("test fault: the writer fails at its first allocation record");
                }
                writer.push_all(&batch)?
            }
            Err(RecvTimeoutError::Timeout) => writer.flush_block()?,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    writer.flush_block()?;
    let written = writer.records_written();
    writer.finish()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::RecordMode;
    use crate::trace::reader::read_profile;

    fn sample_header() -> Header {
        Header {
            memsup_version: "0.1.0".to_string(),
            host: "testhost".to_string(),
            mode: RecordMode::Run,
            target: vec!["./app".to_string(), "arg".to_string()],
            start_unix_ns: 1_700_000_000_000_000_000,
            options: vec!["stacks=off".to_string()],
        }
    }

    fn free_record(address: u64) -> Record {
        Record::Free {
            time_ns: address,
            pid: 7,
            tid: 7,
            address,
        }
    }

    #[test]
    fn create_writes_the_header_at_once() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        let _writer = ProfileWriter::create(&path, &sample_header()).unwrap();
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.header, sample_header());
        assert!(profile.records.is_empty());
        assert!(profile.truncated, "no End record yet");
    }

    #[test]
    fn create_fails_on_an_unwritable_path() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("missing").join("p.msup");
        let error = ProfileWriter::create(&path, &sample_header())
            .err()
            .expect("creating inside a missing directory must fail");
        assert!(matches!(error, TraceError::Io { .. }), "{error:?}");
    }

    #[test]
    fn writer_thread_flushes_within_100_ms_while_the_channel_stays_open() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        let writer = ProfileWriter::create(&path, &sample_header()).unwrap();
        let (sender, receiver) = crossbeam_channel::unbounded();
        let handle = spawn(writer, receiver);
        let sent: Vec<Record> = (1..=3).map(free_record).collect();
        for record in &sent {
            sender.send(vec![record.clone()]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.records, sent);
        assert!(profile.truncated);

        sender.send(vec![Record::End { time_ns: 9 }]).unwrap();
        drop(sender);
        assert_eq!(handle.join().unwrap().unwrap(), 4);
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.records.len(), 4);
        assert!(!profile.truncated);
    }

    #[test]
    fn large_buffers_are_written_without_waiting() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        let mut writer = ProfileWriter::create(&path, &sample_header()).unwrap();
        let started = Instant::now();
        let mut pushed = 0;
        while writer.records_written() == 0 {
            writer.push(&free_record(u64::MAX - pushed)).unwrap();
            pushed += 1;
        }
        assert_eq!(writer.records_written(), pushed);
        assert!(writer.flush_deadline().is_none());
        // Only meaningful when the age limit did not strike first on a busy machine.
        if started.elapsed() < FLUSH_INTERVAL {
            assert!(pushed > 1000, "a block holds about 256 KiB of records");
        }
    }

    #[test]
    fn a_process_exit_is_written_at_once() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        let mut writer = ProfileWriter::create(&path, &sample_header()).unwrap();
        writer.push(&free_record(1)).unwrap();
        assert_eq!(writer.records_written(), 0);
        writer
            .push(&Record::ProcessExit {
                time_ns: 2,
                pid: 7,
                status: crate::trace::format::ExitKind::Code(0),
                counters: Default::default(),
            })
            .unwrap();
        assert_eq!(writer.records_written(), 2);
        assert_eq!(read_profile(&path).unwrap().records.len(), 2);
    }

    #[test]
    fn a_block_never_names_more_threads_than_a_reader_accepts() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        let mut writer = ProfileWriter::create(&path, &sample_header()).unwrap();
        let threads = MAX_BLOCK_THREADS as u32 + 10;
        let records: Vec<Record> = (0..threads)
            .map(|tid| Record::Free {
                time_ns: 1,
                pid: 7,
                tid,
                address: 8,
            })
            .collect();
        // In one call: one clock reading, so a slow machine cannot flush by time meanwhile.
        writer.push_all(&records).unwrap();
        assert_eq!(writer.records_written(), MAX_BLOCK_THREADS as u64);
        writer.finish().unwrap();
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.records.len(), threads as usize);
        assert!(profile.damage.is_empty());
    }
}
