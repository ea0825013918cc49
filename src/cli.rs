//! The command line: verbs and their options, turned into the core option types.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::breakpoints::table::StepOverPolicy;
use crate::hooks::drain::RingFull;
use crate::ptrace::capture::StackMode;
use crate::report::folded::Metric;
use crate::trace::format::Engine;
use crate::trace::output_file::OutputRequest;
use crate::trace::output_name::{expand, NameValues};

pub mod program_hint;
pub mod suppress_args;

#[derive(Parser, Debug)]
#[command(
    name = "memsup",
    version,
    about = "Supervise the memory of Linux programs from outside, with ptrace"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Launch a program and record its heap and mapping activity.
    Run {
        /// Profile to write (default: memsup.NAME.N.msup in the current directory, N being
        /// memsup's process id). `%r` MPI rank (else memsup's pid), `%p` memsup's pid, `%h`
        /// host, `%n` program name, `%j` job id, `%%` a `%`; `DIR/`: memsup.NAME.RANK.msup in DIR.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Overwrite the -o file if it exists (never through a symbolic link).
        #[arg(short, long)]
        force: bool,
        /// Print nothing of memsup's own but errors and warnings.
        #[arg(short, long)]
        quiet: bool,
        #[command(flatten)]
        probes: ProbeArgs,
        #[command(flatten)]
        sampling: SampleArgs,
        /// The program and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },
    /// Join running processes; Ctrl-C or --duration detaches and leaves them running.
    Attach {
        /// Profile to write (default: memsup.attach.N.msup in the current directory, N being
        /// memsup's process id). `%p` the first PID, `%r` MPI rank (else the first PID), `%h`
        /// host, `%n` "attach", `%j` job id, `%%` a `%`; `DIR/`: memsup.attach.RANK.msup in DIR.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Overwrite the -o file if it exists (never through a symbolic link).
        #[arg(short, long)]
        force: bool,
        /// Detach after this long: seconds (`0.2`, `1.5s`), `500ms` or minutes (`2m`).
        #[arg(short, long, value_name = "DURATION", value_parser = parse_duration)]
        duration: Option<Duration>,
        /// Print nothing of memsup's own but errors and warnings.
        #[arg(short, long)]
        quiet: bool,
        #[command(flatten)]
        probes: ProbeArgs,
        #[command(flatten)]
        sampling: SampleArgs,
        /// Join every process of the MPI job each PID belongs to on this node: the job's
        /// launchers and its ranks (PID: a rank or a launcher of it).
        #[arg(long)]
        job: bool,
        /// The processes to join (every thread of each).
        // Negative numbers are values, so `-5` is refused as a PID rather than as a flag.
        #[arg(
            required = true,
            value_name = "PID",
            allow_negative_numbers = true,
            value_parser = clap::value_parser!(i32).range(1..)
        )]
        pids: Vec<i32>,
    },
    /// Stop running processes for a moment and write where every thread is (its stack and
    /// state) and what memory each process holds; nothing is run in them or written to them.
    Snapshot {
        /// Profile to write (default: memsup.snapshot.N.msup in the current directory, N being
        /// memsup's process id); `%` specifiers and `DIR/` as for attach.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Overwrite the -o file if it exists (never through a symbolic link).
        #[arg(short, long)]
        force: bool,
        /// Print nothing of memsup's own but errors and warnings (nor the report).
        #[arg(short, long)]
        quiet: bool,
        /// Look at every process of the MPI job each PID belongs to on this node: the job's
        /// launchers and its ranks, one after the other (PID: a rank or a launcher of it).
        #[arg(long)]
        job: bool,
        /// The processes to look at (every thread of each).
        #[arg(
            required = true,
            value_name = "PID",
            allow_negative_numbers = true,
            value_parser = clap::value_parser!(i32).range(1..)
        )]
        pids: Vec<i32>,
    },
    /// Analyse a profile.
    Report {
        /// `text` for people, `json` for programs (schema memsup-report, version 2),
        /// `folded` for flame graphs (one `frame;frame;frame VALUE` line per call stack),
        /// `html` for one self-contained page with a flame graph per metric and charts of
        /// memory over time, `csv` for the timelines in long form
        /// (`pid,image_start_ns,time_ns,component,metric,bytes,estimated`), `perfetto` for the timelines
        /// as counter tracks of a Chrome trace, estimates marked (ui.perfetto.dev,
        /// chrome://tracing).
        /// `pprof` for a gzip'd protobuf profile of the call sites (`go tool pprof`; sample
        /// types alloc_objects, alloc_space, inuse_objects, inuse_space, in use meaning live
        /// at the end; `pid` and `exe` tags), `speedscope` for speedscope's JSON (a profile
        /// per process image for bytes at the peak, allocated and leaked).
        /// `massif` for a massif.out file (ms_print, massif-visualizer) and `heaptrack` for a
        /// heaptrack data file (heaptrack_print, heaptrack_gui), both of one process image:
        /// the launched one, or `--rank N`'s.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// With `--format csv`: one row per call site (pid, exe, site, function, file, line,
        /// module, stack, allocations, bytes allocated, peak, leaked, temporary) instead of
        /// the timelines.
        #[arg(long)]
        sites: bool,
        /// With `--format csv`: one row per MPI function across the ranks (function, ranks,
        /// delta_bytes, then min, max, mean, std and max_rank of calls, time_ns,
        /// allocations, allocated_bytes and live_bytes_at_finalize) instead of the timelines.
        #[arg(long, conflicts_with = "sites")]
        mpi_functions: bool,
        /// Call sites per list of the text report (other formats list them all).
        #[arg(long, value_name = "N", default_value_t = crate::report::text::DEFAULT_TOP)]
        top: usize,
        /// How the text report shows call sites: `short`, one line each with its stack cut
        /// at the program's own code, in one list by bytes at the peak; `full`, every list
        /// with whole stacks and every number, the dynamic loader's mapping sites included.
        #[arg(long = "stacks", value_enum, default_value_t = ReportStacksArg::Short)]
        report_stacks: ReportStacksArg,
        /// Also print what watching cost and the diagnostics (text report): probe stops,
        /// hook rings, smaps snapshots, sampler and unwinding costs.
        #[arg(short, long)]
        verbose: bool,
        /// What the folded stacks count (`--format folded` only): bytes live at the peak,
        /// bytes still live at exit, bytes allocated, or bytes of temporary allocations.
        #[arg(long, value_enum, default_value_t = MetricArg::Peak)]
        metric: MetricArg,
        /// Also drop frames whose function matches PATTERN (a glob: `*` matches anything)
        /// from the innermost end of call stacks, like the allocator wrappers dropped by
        /// default (operator new, std::allocator, g_malloc, xmalloc, strdup ...). Repeatable.
        #[arg(long = "skip-frames", value_name = "PATTERN")]
        skip_frames: Vec<String>,
        /// Drop only the frames given with --skip-frames, none of the default ones.
        #[arg(long = "no-default-skip-frames")]
        no_default_skip_frames: bool,
        /// Count memory whose module path or call stack (a frame's module path or function)
        /// matches REGEX as component NAME, before the built-in components (app, mpi, libc,
        /// libraries by name ...). Repeatable; the first matching rule wins.
        #[arg(long = "component", value_name = "NAME=REGEX")]
        components: Vec<String>,
        /// Only the process images of MPI rank N (from the ranks' environment, or the
        /// program's own MPI_Comm_rank); a job's table still shows every rank.
        #[arg(long, value_name = "N")]
        rank: Option<u32>,
        #[command(flatten)]
        choose: ChooseArgs,
        #[command(flatten)]
        suppress: suppress_args::SuppressArgs,
        /// Profiles written by `memsup run`, `memsup attach` or `memsup snapshot`, or
        /// directories of them (every *.msup inside); none: the newest *.msup in the current
        /// directory. Several profiles, or one with MPI
        /// ranks, start with the job table: each rank's high-water marks and components,
        /// and their min, max, mean and standard deviation across ranks.
        #[arg(value_name = "PROFILE")]
        profiles: Vec<PathBuf>,
    },
    /// Compare two profiles: which heap sites grew or shrank (matched by function, file and
    /// line, so a rebuilt program compares with its old build). One image each: those two;
    /// else images are paired by program name and order of start.
    Diff {
        /// `text` for people, `json` for programs (schema memsup-diff, version 1), `html` for
        /// a page of differential flame graphs (the new profile's, red where it grew, blue
        /// where it shrank).
        #[arg(short, long, value_enum, default_value_t = DiffFormatArg::Text)]
        format: DiffFormatArg,
        /// The change that orders the sites: of bytes live at the peak, still live at exit,
        /// allocated, or of temporary allocations.
        #[arg(long, value_enum, default_value_t = MetricArg::Peak)]
        metric: MetricArg,
        /// Changed sites listed per pair of images by the text output (JSON lists them all).
        #[arg(long, value_name = "N", default_value_t = crate::report::text::DEFAULT_TOP)]
        top: usize,
        /// Write the diff to FILE (`-` for stdout). Default: stdout, except for `html`,
        /// written to NEW.diff.html in the current directory (NEW's name less .msup).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Overwrite the diff's file if it exists (never through a symbolic link).
        #[arg(long)]
        force: bool,
        /// The leaks both profiles leave out, as in `report`.
        #[command(flatten)]
        suppress: suppress_args::SuppressArgs,
        /// The profile compared with (before).
        #[arg(value_name = "BASE")]
        base: PathBuf,
        /// The profile compared (after).
        #[arg(value_name = "NEW")]
        new: PathBuf,
    },
    /// Print a profile's records, one per line, with damage and truncation marked where met.
    Dump {
        /// `text` (the records as memsup names them, addresses in hex) or `json` (JSON lines).
        #[arg(short, long, value_enum, default_value_t = DumpFormatArg::Text)]
        format: DumpFormatArg,
        /// Only the records of this process.
        #[arg(long, value_name = "N")]
        pid: Option<u32>,
        #[arg(value_name = "PROFILE")]
        profile: PathBuf,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormatArg {
    Text,
    Json,
    Html,
}

impl DiffFormatArg {
    /// What a diff file of this format is named after NEW's stem, when it goes to a file
    /// by default (a page is never written to a terminal).
    pub fn file_suffix(self) -> Option<&'static str> {
        match self {
            DiffFormatArg::Html => Some("diff.html"),
            DiffFormatArg::Text | DiffFormatArg::Json => None,
        }
    }

    pub fn format(self) -> crate::report::diff::DiffFormat {
        match self {
            DiffFormatArg::Text => crate::report::diff::DiffFormat::Text,
            DiffFormatArg::Json => crate::report::diff::DiffFormat::Json,
            DiffFormatArg::Html => crate::report::diff::DiffFormat::Html,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpFormatArg {
    Text,
    Json,
}

impl DumpFormatArg {
    pub fn format(self) -> crate::trace::dump::DumpFormat {
        match self {
            DumpFormatArg::Text => crate::trace::dump::DumpFormat::Text,
            DumpFormatArg::Json => crate::trace::dump::DumpFormat::JsonLines,
        }
    }
}

/// How probes are planted.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ProbeArgs {
    /// How a probe hit gets past the instruction its int3 replaced: `auto` emulates it in
    /// memsup when it can (no extra stop), else runs a relocated copy out of line; the other
    /// values force a fallback, to test or measure it.
    #[arg(long, value_enum, default_value_t = StepOverArg::Auto)]
    pub step_over: StepOverArg,
    /// What each allocator and mapping call records of its call stack: `full` copies the
    /// stack at the stop and unwinds it off the stop path; `caller` keeps only the return
    /// address into the calling code (cheaper, no stacks in reports).
    #[arg(long, value_enum, default_value_t = StacksArg::Full)]
    pub stacks: StacksArg,
    /// How allocator calls are recorded: `hooks` patches each allocator entry with a jump
    /// to code memsup injects, which walks the call stack and writes the call into rings
    /// memsup reads, with no stop; `auto` (the default) is `hooks`, with an int3 probe for
    /// each function that cannot be patched; `int3` stops the program at each call. The
    /// MEMSUP_ENGINE environment variable (`auto`, `hooks` or `int3`) sets the default.
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// What a hook does when its ring is full: `wait` for memsup to drain it (lossless), or
    /// `drop` the call and count it.
    #[arg(long = "ring-full", value_enum, default_value_t = RingFullArg::Wait)]
    pub ring_full: RingFullArg,
}

impl ProbeArgs {
    /// `--engine`, else `MEMSUP_ENGINE`, else `auto`: the hooks.
    pub fn engine(self) -> Engine {
        let from_environment = || match std::env::var("MEMSUP_ENGINE").as_deref() {
            Ok("int3") => Some(EngineArg::Int3),
            Ok("hooks") => Some(EngineArg::Hooks),
            _ => None,
        };
        match self.engine.or_else(from_environment) {
            Some(EngineArg::Int3) => Engine::Int3,
            Some(EngineArg::Auto | EngineArg::Hooks) | None => Engine::Hooks,
        }
    }

    pub fn ring_full(self) -> RingFull {
        match self.ring_full {
            RingFullArg::Wait => RingFull::Wait,
            RingFullArg::Drop => RingFull::Drop,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineArg {
    Auto,
    Hooks,
    Int3,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingFullArg {
    Wait,
    Drop,
}

/// How residency (RSS, PSS) is sampled, without ptrace.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct SampleArgs {
    /// Milliseconds between samples of each process's RSS (/proc/PID/status). PSS
    /// (smaps_rollup) is sampled less often, at a rate that keeps sampling under 5 % of a core.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = crate::sampler::DEFAULT_INTERVAL_MS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub interval: u32,
    /// Also take a full /proc/PID/smaps snapshot of every process each MS milliseconds
    /// (they are always taken at start, exec, exit, new peaks and on SIGUSR1 to memsup).
    #[arg(long = "smaps-interval", value_name = "MS", value_parser = clap::value_parser!(u32).range(1..))]
    pub smaps_interval: Option<u32>,
}

impl SampleArgs {
    pub fn interval(self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.interval))
    }

    pub fn rates(self) -> crate::sampler::Rates {
        crate::sampler::Rates {
            interval: self.interval(),
            smaps_interval: self
                .smaps_interval
                .map(|ms| std::time::Duration::from_millis(u64::from(ms))),
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StacksArg {
    Full,
    Caller,
}

impl StacksArg {
    pub fn mode(self) -> StackMode {
        match self {
            StacksArg::Full => StackMode::Full,
            StacksArg::Caller => StackMode::Caller,
        }
    }
}

/// `report --stacks`: how much of each call site the text report shows.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportStacksArg {
    Short,
    Full,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOverArg {
    Auto,
    OutOfLine,
    StopTheWorld,
}

impl StepOverArg {
    pub fn policy(self) -> StepOverPolicy {
        match self {
            StepOverArg::Auto => StepOverPolicy::Auto,
            StepOverArg::OutOfLine => StepOverPolicy::OutOfLine,
            StepOverArg::StopTheWorld => StepOverPolicy::StopTheWorld,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Folded,
    Html,
    Csv,
    Perfetto,
    Pprof,
    Speedscope,
    Massif,
    Heaptrack,
}

impl Format {
    /// What a report of this format is named after the profile (`job.msup` gives
    /// `job.SUFFIX`) when it is a file, as a page or a trace is: those are written to a file
    /// unless `-o -` asks for stdout. None: the format goes to stdout.
    pub fn file_suffix(self) -> Option<&'static str> {
        match self {
            Format::Html => Some("html"),
            Format::Perfetto => Some("perfetto.json"),
            Format::Pprof => Some("pb.gz"),
            Format::Speedscope => Some("speedscope.json"),
            Format::Massif => Some("massif.out"),
            Format::Heaptrack => Some("heaptrack"),
            Format::Text | Format::Json | Format::Folded | Format::Csv => None,
        }
    }

    /// True for the formats that go to a file by default (`file_suffix`).
    pub fn writes_a_file(self) -> bool {
        self.file_suffix().is_some()
    }
}

/// Which images `memsup report` shows, and where the report goes.
#[derive(clap::Args, Debug, Clone)]
pub struct ChooseArgs {
    /// Only the process images of PID (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Only the process images whose executable's path or file name matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub exe: Option<String>,
    /// Write the report to FILE (`-` for stdout). Default: stdout, except for `html` and
    /// `perfetto`, written to PROFILE.html and PROFILE.perfetto.json in the current directory
    /// (the profile's name less .msup; memsup.report.* for several profiles).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Overwrite the report file if it exists (never through a symbolic link). No `-f`:
    /// that is `--format` here.
    #[arg(long)]
    pub force: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricArg {
    Peak,
    Leaked,
    Allocated,
    Temporary,
}

impl MetricArg {
    pub fn metric(self) -> Metric {
        match self {
            MetricArg::Peak => Metric::Peak,
            MetricArg::Leaked => Metric::Leaked,
            MetricArg::Allocated => Metric::Allocated,
            MetricArg::Temporary => Metric::Temporary,
        }
    }
}

/// The profile `-o` names, its `%` specifiers expanded (`trace::output_name`; `%p` is
/// `target_pid`), or memsup.NAME.PID.msup (memsup.NAME.PID.N.msup when that name is taken),
/// NAME being the program's file name (or "attach"). `-o DIR/` (or an existing directory)
/// names memsup.NAME.RANK.msup in DIR, RANK being the MPI rank or else `target_pid`.
pub fn output_request(
    output: Option<PathBuf>,
    force: bool,
    name: &str,
    target_pid: u32,
) -> Result<OutputRequest, String> {
    let values = NameValues::for_this_process(target_pid, name);
    let Some(template) = output else {
        return Ok(OutputRequest::Default {
            stem: PathBuf::from(format!("memsup.{}.{}", values.program, std::process::id())),
        });
    };
    let path = PathBuf::from(expand(template.as_os_str(), &values)?);
    let names_directory = template.as_os_str().as_encoded_bytes().ends_with(b"/") || path.is_dir();
    Ok(if names_directory {
        OutputRequest::InDirectory {
            directory: path,
            name: format!("memsup.{}.{}", values.program, values.rank),
        }
    } else {
        OutputRequest::Explicit { path, force }
    })
}

/// A `--duration`: a positive number of seconds, or of `ms`, `s` or `m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit_seconds) = if let Some(number) = text.strip_suffix("ms") {
        (number, 0.001)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1.0)
    } else if let Some(number) = text.strip_suffix('m') {
        (number, 60.0)
    } else {
        (text, 1.0)
    };
    let malformed =
        || "expected seconds (0.2, 1.5s), milliseconds (500ms) or minutes (2m)".to_string();
    // Only digits and one point: f64's parser would also take "inf", "NaN" and "1e3".
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(malformed());
    }
    let value: f64 = number.parse().map_err(|_| malformed())?;
    let duration = Duration::try_from_secs_f64(value * unit_seconds).map_err(|_| malformed())?;
    // The interval timer counts in microseconds and a zero timer never fires.
    if duration < Duration::from_millis(1) {
        return Err("the duration must be at least 1ms".to_string());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_after_the_command_belong_to_the_program() {
        let cli = Cli::parse_from([
            "memsup", "run", "-o", "p.msup", "--", "./app", "--flag", "-x",
        ]);
        match cli.command {
            Command::Run {
                output, command, ..
            } => {
                assert_eq!(output, Some(PathBuf::from("p.msup")));
                assert_eq!(command, ["./app", "--flag", "-x"].map(OsString::from));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn skip_patterns_repeat_and_the_metric_defaults_to_peak() {
        let cli = Cli::parse_from([
            "memsup",
            "report",
            "--format",
            "folded",
            "--skip-frames",
            "my_alloc*",
            "--skip-frames",
            "pool_get",
            "p.msup",
        ]);
        match cli.command {
            Command::Report {
                format,
                top,
                metric,
                skip_frames,
                no_default_skip_frames,
                ..
            } => {
                assert_eq!(format, Format::Folded);
                assert_eq!(top, 10);
                assert_eq!(metric, MetricArg::Peak);
                assert_eq!(skip_frames, ["my_alloc*", "pool_get"]);
                assert!(!no_default_skip_frames);
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn component_rules_repeat_in_order() {
        let cli = Cli::parse_from([
            "memsup",
            "report",
            "--component",
            "solver=libpetsc",
            "--component",
            "io=^h5",
            "p.msup",
        ]);
        match cli.command {
            Command::Report { components, .. } => {
                assert_eq!(components, ["solver=libpetsc", "io=^h5"]);
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn csv_and_perfetto_are_report_formats() {
        for (name, expected) in [("csv", Format::Csv), ("perfetto", Format::Perfetto)] {
            let cli = Cli::parse_from(["memsup", "report", "--format", name, "p.msup"]);
            match cli.command {
                Command::Report { format, .. } => assert_eq!(format, expected),
                other => panic!("parsed as {other:?}"),
            }
        }
        assert!(Cli::try_parse_from(["memsup", "report", "--format", "svg", "p.msup"]).is_err());
    }

    #[test]
    fn the_sampling_interval_is_a_positive_number_of_milliseconds() {
        let interval = |arguments: &[&str]| {
            Cli::try_parse_from(arguments).map(|cli| match cli.command {
                Command::Run { sampling, .. } | Command::Attach { sampling, .. } => {
                    sampling.interval()
                }
                other => panic!("parsed as {other:?}"),
            })
        };
        let millis = std::time::Duration::from_millis;
        assert_eq!(interval(&["memsup", "run", "./app"]).unwrap(), millis(20));
        assert_eq!(
            interval(&["memsup", "attach", "--interval", "5", "42"]).unwrap(),
            millis(5)
        );
        assert!(interval(&["memsup", "run", "--interval", "0", "./app"]).is_err());
    }

    #[test]
    fn the_default_profile_name_uses_the_program_name_and_memsup_s_pid() {
        assert_eq!(
            output_request(None, false, "/usr/bin/app", 77)
                .unwrap()
                .first_path(),
            PathBuf::from(format!("memsup.app.{}.msup", std::process::id()))
        );
        assert_eq!(
            output_request(Some("p.msup".into()), true, "/usr/bin/app", 77),
            Ok(OutputRequest::Explicit {
                path: "p.msup".into(),
                force: true
            })
        );
    }

    #[test]
    fn an_output_template_is_expanded_and_a_directory_gets_default_names() {
        let directory = tempfile::tempdir().unwrap();
        let existing = directory.path().to_string_lossy().into_owned();
        let host = nix::unistd::gethostname().unwrap();
        let host = host.to_string_lossy();
        assert_eq!(
            output_request(Some("%n.%p.%h.%%.msup".into()), false, "/usr/bin/app", 77),
            Ok(OutputRequest::Explicit {
                path: format!("app.77.{host}.%.msup").into(),
                force: false
            })
        );
        let rank = NameValues::for_this_process(77, "app").rank;
        for template in [format!("{existing}/new/"), existing.clone()] {
            let request = output_request(Some(template.clone().into()), false, "app", 77).unwrap();
            assert_eq!(
                request,
                OutputRequest::InDirectory {
                    directory: template.into(),
                    name: format!("memsup.app.{rank}")
                }
            );
        }
        assert_eq!(
            output_request(Some("rank.%d.msup".into()), false, "app", 77)
                .unwrap_err()
                .lines()
                .count(),
            1
        );
    }

    #[test]
    fn durations_take_fractions_and_units() {
        let millis = Duration::from_millis;
        for (text, expected) in [
            ("0.2", millis(200)),
            ("1.5s", millis(1500)),
            ("500ms", millis(500)),
            ("2m", millis(120_000)),
            ("3", millis(3000)),
            ("0.001", millis(1)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        for text in [
            "0", "0s", "0.0004", "-1", "x", "", "s", "1.5x", "1..5", "inf", "1e3", " 1",
        ] {
            assert!(parse_duration(text).is_err(), "{text} must be refused");
        }
    }

    #[test]
    fn pids_are_positive_numbers() {
        let pids = |arguments: &[&str]| {
            Cli::try_parse_from(arguments).map(|cli| match cli.command {
                Command::Attach { pids, .. } => pids,
                other => panic!("parsed as {other:?}"),
            })
        };
        assert_eq!(pids(&["memsup", "attach", "42", "7"]).unwrap(), [42, 7]);
        for bad in ["-5", "0", "abc"] {
            let error = pids(&["memsup", "attach", bad]).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{bad}"
            );
        }
    }
}
