//! `memsup run` and `memsup attach`: the pipeline. The tracer runs on this thread; the
//! sampler, the interpret stage and the writer on their own, fed over bounded channels. The
//! pipeline owns what its stages share: the event clock's origin, the set of supervised
//! processes, the stack-copy feedback.

mod job;
mod join;
pub mod progress;
mod safety;
mod snapshot;

pub use snapshot::{snapshot, SnapshotOptions};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::breakpoints::table::StepOverPolicy;
use crate::error::{Error, Result, TraceError};
use crate::events::{monotonic_ns, EventKind, EventSink, Watched};
use crate::hooks::drain::RingFull;
use crate::interpret::{self, LiveStats};
use crate::module::ModuleStore;
use crate::ptrace::capture::StackMode;
use crate::ptrace::launch::{launch, resolve_command, Launched};
use crate::ptrace::tracer::{Mode, Tracer};
use crate::ptrace::{attach, signals};
use crate::sampler::{Rates, Sampler, Snapshots};
use crate::symbols::elf::check_executable;
use crate::trace::format::{Engine, ExitKind, Header, RecordMode, StartCause, RECORD_TIME_UNIT_NS};
use crate::trace::output_file::OutputRequest;
use crate::trace::writer::{self, ProfileWriter};
use progress::Progress;
use safety::{detach_on_failure, distinct_processes, OomShield};

/// Capacity of the interpret-to-writer channel, in batches of at most about 4,096 records
/// (a batch of symbols at an image's end can be larger).
const CHANNEL_CAPACITY: usize = 16;
/// Capacity of the sources-to-interpret channel, in batches: the tracer's hold one event,
/// the hook drain's up to 1,024 and wait behind `events::sink::EVENTS_IN_FLIGHT_LIMIT`
/// events; the stack copies they carry are bounded by bytes
/// (`events::sink::COPIES_IN_FLIGHT_LIMIT`).
const EVENT_CHANNEL_CAPACITY: usize = 1 << 16;

pub struct RunOptions {
    pub output: OutputRequest,
    pub command: Vec<OsString>,
    pub quiet: bool,
    pub step_over: StepOverPolicy,
    pub stacks: StackMode,
    pub engine: Engine,
    pub ring_full: RingFull,
    /// How often residency is sampled.
    pub rates: Rates,
}

pub struct AttachOptions {
    pub output: OutputRequest,
    pub pids: Vec<i32>,
    /// `--job`: join every process of the MPI job each PID belongs to.
    pub job: bool,
    /// Detach after this long (`--duration`).
    pub duration: Option<std::time::Duration>,
    pub quiet: bool,
    pub step_over: StepOverPolicy,
    pub stacks: StackMode,
    pub engine: Engine,
    pub ring_full: RingFull,
    pub rates: Rates,
}

/// The threads behind the tracer, and how to wind them down.
struct Pipeline {
    sink: EventSink,
    /// What the tracer may ask of the sampler.
    snapshots: Snapshots,
    /// Module files, read once for the tracer's probes and the interpret stage's stacks.
    modules: Arc<ModuleStore>,
    interpret: JoinHandle<()>,
    /// None for a snapshot: it reads smaps itself, once.
    sampler: Option<Sampler>,
    writer: JoinHandle<std::result::Result<u64, TraceError>>,
    progress: Progress,
    output: PathBuf,
    quiet: bool,
}

impl Pipeline {
    /// Creates the profile (failing before anything is launched) and starts the threads;
    /// the sampler only with `sampling` rates.
    fn start(
        output: &OutputRequest,
        header: Header,
        quiet: bool,
        sampling: Option<Rates>,
    ) -> Result<Pipeline> {
        let writer = ProfileWriter::open(output, &header).map_err(|error| match error {
            TraceError::Io { path, source } => Error::OutputNotWritable { path, source },
            other => Error::Trace(other),
        })?;
        let output = writer.path().to_path_buf();
        let stats = Arc::new(LiveStats::default());
        // Worker threads inherit a mask that keeps memsup's signals for the tracer thread.
        signals::install();
        signals::block_in_this_thread();
        let (event_sender, event_receiver) = crossbeam_channel::bounded(EVENT_CHANNEL_CAPACITY);
        let (record_sender, writer_receiver) = crossbeam_channel::bounded(CHANNEL_CAPACITY);
        // A snapshot's few events need no progress line.
        let bars = progress::bars(quiet || sampling.is_none());
        let modules = Arc::new(ModuleStore::new());
        let shared = interpret::Shared {
            stats: stats.clone(),
            bars: bars.clone(),
            copies: Arc::default(),
            windows: Arc::default(),
            watched: Arc::new(Watched::default()),
            modules: Arc::clone(&modules),
            origin_ns: monotonic_ns(),
            time_unit_ns: RECORD_TIME_UNIT_NS,
        };
        let sink = EventSink::new(
            event_sender,
            shared.origin_ns,
            Arc::clone(&shared.copies),
            Arc::clone(&shared.windows),
            Arc::clone(&shared.watched),
        );
        let snapshots = Snapshots::new(Arc::clone(&shared.watched));
        let sampler =
            sampling.map(|rates| Sampler::spawn(Arc::clone(&shared.watched), sink.clone(), rates));
        let interpret = interpret::spawn(event_receiver, record_sender, shared);
        let writer = writer::spawn(writer, writer_receiver);
        let progress = Progress::start(stats, &bars);
        signals::unblock_in_this_thread();
        Ok(Pipeline {
            sink,
            snapshots,
            modules,
            interpret,
            sampler,
            writer,
            progress,
            output,
            quiet,
        })
    }

    fn finish(self) -> Result<()> {
        let Pipeline {
            sink,
            snapshots: _,
            modules,
            interpret,
            sampler,
            writer,
            progress,
            output,
            quiet,
        } = self;
        // The sampler's records, its costs last, are all sent before End.
        if let Some(sampler) = sampler {
            sampler.stop();
        }
        sink.send(0, 0, EventKind::End);
        drop(sink);
        let _ = interpret.join();
        modules.print_read_counts_if_asked();
        let written = writer
            .join()
            .map_err(|_| Error::Internal("the writer thread panicked".into()))?;
        progress.stop();
        written?;
        if !quiet {
            eprintln!("memsup: profile written to {}", output.display());
        }
        Ok(())
    }
}

fn header(mode: RecordMode, target: Vec<String>, options: Vec<String>) -> Header {
    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Header {
        memsup_version: env!("CARGO_PKG_VERSION").to_string(),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        mode,
        target,
        start_unix_ns,
        options,
    }
}

fn stacks_option(mode: StackMode) -> String {
    match mode {
        StackMode::Full => "stacks=full".into(),
        StackMode::Caller => "stacks=caller".into(),
    }
}

fn engine_option(engine: Engine) -> String {
    format!("engine={}", engine.name())
}

/// `interval=20ms`, and `smaps-interval=...` when given.
fn rate_options(rates: Rates) -> Vec<String> {
    let mut options = vec![format!("interval={}ms", rates.interval.as_millis())];
    if let Some(interval) = rates.smaps_interval {
        options.push(format!("smaps-interval={}ms", interval.as_millis()));
    }
    options
}

fn print_warnings(tracer: &mut Tracer) {
    for warning in tracer.take_warnings() {
        eprintln!("memsup: warning: {warning}");
    }
}

/// The exit status memsup passes on: the program's own, 128+N for signal N.
fn exit_status(exit: Option<ExitKind>) -> i32 {
    match exit {
        Some(ExitKind::Code(code)) => code,
        Some(ExitKind::Signal(signal)) => 128 + signal,
        _ => 0,
    }
}

/// Launches the command under supervision; returns the program's exit status.
pub fn run(options: RunOptions) -> Result<i32> {
    let program = options
        .command
        .first()
        .ok_or_else(|| Error::Internal("no command given".into()))?;
    let path = resolve_command(program)?;
    if !is_script(&path) {
        check_executable(&path.to_string_lossy())?;
    }
    let target = options
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let pipeline = Pipeline::start(
        &options.output,
        header(
            RecordMode::Run,
            target,
            [
                "seccomp=on".into(),
                stacks_option(options.stacks),
                engine_option(options.engine),
            ]
            .into_iter()
            .chain(rate_options(options.rates))
            .collect(),
        ),
        options.quiet,
        Some(options.rates),
    )?;
    // Interrupted during setup: the program has not started and was sent nothing, so it is
    // not started at all (a later Ctrl-C reaches the program from the terminal instead).
    if let Some(signal) = signals::pending_interruption() {
        let written_to = pipeline.output.clone();
        let _ = pipeline.finish_quietly();
        let _ = std::fs::remove_file(written_to);
        eprintln!(
            "memsup: {} before the program was started: nothing was run",
            signal_name(signal)
        );
        return Ok(128 + signal);
    }
    let launched = launch(&path, &options.command, true);
    let pid = match launched {
        Ok(Launched::AtExec(pid)) => pid,
        Ok(Launched::Killed { pid, signal }) => {
            record_killed_at_start(&pipeline.sink, pid, &path, &options.command, signal);
            pipeline.finish()?;
            return Ok(128 + signal);
        }
        Err(error) => {
            let written_to = pipeline.output.clone();
            let _ = pipeline.finish_quietly();
            let _ = std::fs::remove_file(written_to);
            return Err(error);
        }
    };
    let mut tracer = Tracer::new(
        Mode::Run,
        pid,
        &pipeline.sink,
        &pipeline.snapshots,
        Arc::clone(&pipeline.modules),
    );
    tracer.set_step_over_policy(options.step_over);
    tracer.set_stack_mode(options.stacks);
    tracer.set_engine(options.engine, options.ring_full);
    tracer.adopt_launched(pid)?;
    print_warnings(&mut tracer);
    let outcome = tracer.run();
    print_warnings(&mut tracer);
    let status = exit_status(tracer.root_exit());
    drop(tracer);
    pipeline.finish()?;
    outcome?;
    Ok(status)
}

/// A program killed before its exec stop was seen: its start, its program and its end, so
/// the profile says what happened to it as for any other.
fn record_killed_at_start(
    sink: &EventSink,
    pid: i32,
    path: &Path,
    command: &[OsString],
    signal: i32,
) {
    let pid = pid as u32;
    let start = EventKind::ProcessStart {
        parent_pid: None,
        cause: StartCause::Launch,
    };
    sink.send(pid, pid, start);
    let exec = EventKind::Exec {
        exe: path.to_string_lossy().into_owned(),
        argv: command
            .iter()
            .map(|argument| argument.to_string_lossy().into_owned())
            .collect(),
    };
    sink.send(pid, pid, exec);
    let exit = EventKind::ProcessExit {
        status: ExitKind::Signal(signal),
        counters: Default::default(),
    };
    sink.send(pid, pid, exit);
}

/// Joins running processes until Ctrl-C, `--duration` or their exit; then detaches.
pub fn attach(options: AttachOptions) -> Result<i32> {
    let pids = if options.job {
        processes_to_join(&job::live_processes_of_jobs(&options.pids, options.quiet)?)?
    } else {
        processes_to_join(&options.pids)?
    };
    let target = pids.iter().map(|p| p.to_string()).collect();
    let duration = options
        .duration
        .map(|duration| format!("duration={}s", duration.as_secs_f64()))
        .into_iter()
        .chain([stacks_option(options.stacks), engine_option(options.engine)])
        .chain(rate_options(options.rates))
        .collect();
    let pipeline = Pipeline::start(
        &options.output,
        header(RecordMode::Attach, target, duration),
        options.quiet,
        Some(options.rates),
    )?;
    let oom_shield = OomShield::lower_score();
    let mut tracer = Tracer::new(
        Mode::Attach,
        pids[0],
        &pipeline.sink,
        &pipeline.snapshots,
        Arc::clone(&pipeline.modules),
    );
    tracer.set_step_over_policy(options.step_over);
    tracer.set_stack_mode(options.stacks);
    tracer.set_engine(options.engine, options.ring_full);
    let joined = |tracer: &mut Tracer| join::join_all(tracer, &pids, options.job);
    if let Err(error) = detach_on_failure(&mut tracer, joined) {
        drop(tracer);
        drop(oom_shield);
        let written_to = pipeline.output.clone();
        let _ = pipeline.finish_quietly();
        let _ = std::fs::remove_file(written_to);
        return Err(error);
    }
    tracer.mark_attached();
    if let Some(duration) = options.duration {
        signals::alarm_after(duration);
    }
    print_warnings(&mut tracer);
    let attached = join::attached_line(&tracer.supervised_pids(), options.duration);
    if let Some(line) = attached.filter(|_| !options.quiet) {
        eprintln!("memsup: {line}");
    }
    let outcome = detach_on_failure(&mut tracer, |tracer| tracer.run());
    print_warnings(&mut tracer);
    drop(tracer);
    drop(oom_shield);
    if outcome.is_err() {
        // The failure is the one line to show; the profile holds what was recorded.
        let _ = pipeline.finish_quietly();
        return outcome.map(|_| 0);
    }
    pipeline.finish()?;
    Ok(0)
}

/// The thread-group IDs behind the PIDs given, each once (with a note when merged).
fn processes_to_join(given: &[i32]) -> Result<Vec<i32>> {
    let mut named = Vec::new();
    for &pid in given {
        named.push((pid, attach::check_attachable(pid)?));
    }
    let (processes, note) = distinct_processes(&named);
    if let Some(note) = note {
        // Even with -q: it is about the user's own command line.
        eprintln!("memsup: note: {note}");
    }
    Ok(processes)
}

impl Pipeline {
    fn finish_quietly(mut self) -> Result<()> {
        self.quiet = true;
        self.finish()
    }
}

fn signal_name(signal: i32) -> &'static str {
    nix::sys::signal::Signal::try_from(signal).map_or("a signal", |signal| signal.as_str())
}

fn is_script(path: &Path) -> bool {
    let mut start = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut start))
        .map(|_| &start == b"#!")
        .unwrap_or(false)
}
