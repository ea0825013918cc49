//! memsup's entry point: parse, run, and turn errors into one line and an exit code.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use memsup::analysis::job::Job;
use memsup::cli::{output_request, Cli, Command, Format, MetricArg};
use memsup::error::{exit_code, Error, Result};
use memsup::ptrace::signals;
use memsup::record::{self, AttachOptions, RunOptions, SnapshotOptions};
use memsup::report::choose::destination::Destination;
use memsup::report::choose::select::{select_images, ImageFilter};
use memsup::trace::dump::dump;
use memsup::trace::reader::ProfileReader;
use memsup::{analysis, report};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    memsup::failure::install_panic_hook();
    if matches!(cli.command, Command::Run { .. } | Command::Attach { .. }) {
        // Before any setup: a Ctrl-C or SIGTERM during it is kept for the tracer loop and
        // handled like a later one, instead of killing memsup.
        signals::install();
        raise_for_tests();
    }
    let executed = std::panic::catch_unwind(|| execute(cli.command));
    match executed {
        Ok(Ok(status)) => ExitCode::from(status.clamp(0, 255) as u8),
        Ok(Err(error)) => {
            eprintln!("memsup: error: {}", with_advice(&error));
            ExitCode::from(error.exit_code() as u8)
        }
        // A panic outside a recording (one inside detaches first and returns an error).
        Err(_) => {
            let description = memsup::failure::panic_description().unwrap_or_default();
            eprintln!("memsup: error: internal error: {description}");
            ExitCode::from(exit_code::INTERNAL as u8)
        }
    }
}

/// The profile `-o` asks for; a bad template is reported in one line (None: exit 2).
fn requested_output(
    output: Option<std::path::PathBuf>,
    force: bool,
    name: &str,
    target_pid: u32,
) -> Option<memsup::trace::output_file::OutputRequest> {
    output_request(output, force, name, target_pid)
        .map_err(|message| eprintln!("memsup: error: {message}"))
        .ok()
}

/// The first PID of `attach` and `snapshot` (clap requires one), for `%p`.
fn first_pid(pids: &[i32]) -> u32 {
    pids.first().map_or(0, |&pid| pid as u32)
}

fn execute(command: Command) -> Result<i32> {
    match command {
        Command::Run {
            output,
            force,
            quiet,
            probes,
            sampling,
            command,
        } => {
            let name = command
                .first()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            // The profile is created before the program starts: %p is memsup's own pid.
            let Some(output) = requested_output(output, force, &name, std::process::id()) else {
                return Ok(exit_code::USAGE);
            };
            record::run(RunOptions {
                output,
                command,
                quiet,
                step_over: probes.step_over.policy(),
                stacks: probes.stacks.mode(),
                engine: probes.engine(),
                ring_full: probes.ring_full(),
                rates: sampling.rates(),
            })
        }
        Command::Attach {
            output,
            force,
            duration,
            quiet,
            probes,
            sampling,
            job,
            pids,
        } => {
            let Some(output) = requested_output(output, force, "attach", first_pid(&pids)) else {
                return Ok(exit_code::USAGE);
            };
            record::attach(AttachOptions {
                output,
                pids,
                job,
                duration,
                quiet,
                step_over: probes.step_over.policy(),
                stacks: probes.stacks.mode(),
                engine: probes.engine(),
                ring_full: probes.ring_full(),
                rates: sampling.rates(),
            })
        }
        Command::Snapshot {
            output,
            force,
            quiet,
            job,
            pids,
        } => {
            let Some(output) = requested_output(output, force, "snapshot", first_pid(&pids)) else {
                return Ok(exit_code::USAGE);
            };
            let written = record::snapshot(SnapshotOptions {
                output,
                pids,
                job,
                quiet,
            })?;
            // On a terminal the user wants to see it; a pipe or a file gets the profile only.
            if !quiet && std::io::stdout().is_terminal() {
                let analysis = analyze_file(&written, &analysis::Settings::default())?;
                let mut out = std::io::stdout().lock();
                report::text::render(&analysis, report::text::TextOptions::default(), &mut out)
                    .and_then(|()| out.flush())
                    .map_err(|error| Error::io("writing the report", error))?;
            }
            Ok(0)
        }
        Command::Report {
            format,
            sites,
            mpi_functions,
            top,
            report_stacks,
            verbose,
            metric,
            skip_frames,
            no_default_skip_frames,
            components,
            rank,
            choose,
            suppress,
            profiles,
        } => {
            // Exports of their own (report::export): one image, or one row per site.
            let table = match (sites, mpi_functions) {
                (true, _) => Some(("--sites", report::export::Export::CsvSites)),
                (_, true) => Some(("--mpi-functions", report::export::Export::CsvMpiFunctions)),
                _ => None,
            };
            let export = match (format, table) {
                (Format::Csv, Some((_, export))) => Some(export),
                (_, Some((flag, _))) => {
                    eprintln!(
                        "memsup: error: {flag} goes with --format csv (see memsup report --help)"
                    );
                    return Ok(exit_code::USAGE);
                }
                (Format::Speedscope, None) => Some(report::export::Export::Speedscope),
                (Format::Massif, None) => Some(report::export::Export::Massif),
                (Format::Heaptrack, None) => Some(report::export::Export::Heaptrack),
                _ => None,
            };
            let components = match analysis::ComponentRules::parse_all(&components) {
                Ok(rules) => rules,
                Err(message) => {
                    eprintln!("memsup: error: {message}");
                    return Ok(exit_code::USAGE);
                }
            };
            let settings = analysis::Settings {
                skip: analysis::SkipFrames::new(!no_default_skip_frames, &skip_frames),
                components,
            };
            let filter = match ImageFilter::new(choose.pids, choose.exe.as_deref()) {
                Ok(filter) => filter,
                Err(message) => {
                    eprintln!("memsup: error: {message}");
                    return Ok(exit_code::USAGE);
                }
            };
            let profiles = report::choose::newest::profiles_or_newest(profiles)?;
            let paths = analysis::load::expand_inputs(&profiles)?;
            let analyses = analysis::load::analyze_files(&paths, &settings)?;
            // The table is of the whole job, whichever rank is shown after it.
            let job = Job::applies_to(&analyses).then(|| Job::of(&analyses));
            let analyses = match rank {
                None => analyses,
                Some(rank) => report::job::select_rank(analyses, rank)
                    .map_err(|ranks| Error::NoSuchRank { rank, ranks })?,
            };
            let mut analyses = select_images(analyses, &filter)
                .map_err(|images| Error::NoMatchingImage { images })?;
            suppressions(&suppress)?.apply(&mut analyses);
            let destination =
                Destination::new(choose.output, choose.force, format.file_suffix(), &profiles);
            let mut out = destination.open()?;
            if let Some(export) = export {
                report::export::render(export, &analyses, &settings.skip, &mut out)?;
                destination.announce();
                return Ok(0);
            }
            let text = report::text::TextOptions {
                top,
                full: report_stacks == memsup::cli::ReportStacksArg::Full,
                verbose,
            };
            // A job's text starts with its table, the overview after it (`job::render_text`).
            if format == Format::Text && job.is_none() {
                report::choose::overview::render_text(&analyses, &mut out)
                    .map_err(|error| Error::io("writing the report", error))?;
            }
            let rendered = match job {
                None => render_profile(&analyses[0], format, text, metric, &mut out),
                Some(job) => render_job(&analyses, &job, format, text, metric, &mut out),
            };
            match rendered.and_then(|_| out.flush()) {
                // A reader that stopped early (`| head`) is not an error.
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
                Err(error) => Err(Error::io("writing the report", error)),
                Ok(()) => {
                    destination.announce();
                    Ok(0)
                }
            }
        }
        Command::Diff {
            format,
            metric,
            top,
            output,
            force,
            suppress,
            base,
            new,
        } => {
            let destination = Destination::new(
                output,
                force,
                format.file_suffix(),
                std::slice::from_ref(&new),
            );
            let compared = report::diff::Compared {
                format: format.format(),
                metric: metric.metric(),
                top,
                suppressions: suppressions(&suppress)?,
            };
            report::diff::run(&base, &new, &compared, &destination)
        }
        Command::Dump {
            format,
            pid,
            profile,
        } => {
            require_input(&profile)?;
            let mut reader = ProfileReader::open(&profile)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match dump(&mut reader, format.format(), pid, &mut out).and_then(|()| out.flush()) {
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
                Err(error) => Err(Error::io("writing the dump", error)),
                Ok(()) => Ok(0),
            }
        }
    }
}

/// One profile's report, as it always was.
fn render_profile(
    analysis: &analysis::Analysis,
    format: Format,
    text: report::text::TextOptions,
    metric: MetricArg,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        Format::Text => report::text::render(analysis, text, out),
        Format::Json => report::json::render(analysis, out),
        Format::Folded => report::folded::render(analysis, metric.metric(), out),
        Format::Html => report::html_report::render(analysis, out),
        Format::Csv => report::csv::render(analysis, out),
        Format::Perfetto => report::perfetto::render(analysis, out),
        Format::Pprof => report::export::pprof::render(analysis, out),
        Format::Speedscope | Format::Massif | Format::Heaptrack => {
            unreachable!("written by report::export")
        }
    }
}

/// The report of a job: the job table first where the format has room for it.
fn render_job(
    analyses: &[analysis::Analysis],
    job: &Job,
    format: Format,
    text: report::text::TextOptions,
    metric: MetricArg,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        Format::Text => report::job::render_text(analyses, job, text, out),
        Format::Json => report::json::render_job(analyses, job, out),
        Format::Csv => report::job::csv::render(job, out),
        Format::Html => report::job::render_html(analyses, job, out),
        Format::Speedscope | Format::Massif | Format::Heaptrack => {
            unreachable!("written by report::export")
        }
        Format::Folded | Format::Perfetto | Format::Pprof => {
            let merged = report::job::merged(analyses);
            render_profile(&merged, format, text, metric, out)
        }
    }
}

/// A missing profile is "cannot read", like any unreadable input.
fn require_input(profile: &std::path::Path) -> Result<()> {
    analysis::load::require_input(profile)
}

/// Streams the records of the profile at `path` through the analysis.
fn analyze_file(path: &Path, settings: &analysis::Settings) -> Result<analysis::Analysis> {
    analysis::load::analyze_file(path, settings)
}

/// Help and version as clap prints them; any other command-line error as one line, exit 2.
/// The built-in leak suppressions and those of `--suppressions FILE`.
fn suppressions(
    args: &memsup::cli::suppress_args::SuppressArgs,
) -> Result<analysis::suppress::Suppressions> {
    let text = match &args.suppressions {
        None => None,
        Some(path) => Some(std::fs::read_to_string(path).map_err(|error| {
            let message = error.to_string();
            Error::BadSuppressions {
                path: path.clone(),
                message,
            }
        })?),
    };
    analysis::suppress::Suppressions::new(!args.no_default_suppressions, text.as_deref()).map_err(
        |message| {
            let path = args.suppressions.clone().unwrap_or_default();
            Error::BadSuppressions { path, message }
        },
    )
}

fn usage_error(error: &clap::Error) -> ExitCode {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    if error.kind() == ErrorKind::InvalidSubcommand {
        if let Some(message) = program_suggestion() {
            eprintln!("memsup: error: {message}");
            return ExitCode::from(exit_code::USAGE as u8);
        }
    }
    // clap's first paragraph, its continuation lines (the missing arguments, the possible
    // values) joined to the first; usage and tips are left to --help.
    let rendered = error.render().to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let joined = paragraph.join(" ");
    let message = joined.strip_prefix("error: ").unwrap_or(&joined);
    eprintln!("memsup: error: {message} (see {} --help)", help_command());
    ExitCode::from(exit_code::USAGE as u8)
}

/// `memsup ./app`: how to run the program, if the word where a verb belongs is one.
fn program_suggestion() -> Option<String> {
    let verbs = Cli::command();
    let names: Vec<&str> = verbs
        .get_subcommands()
        .map(|verb| verb.get_name())
        .collect();
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    memsup::cli::program_hint::run_suggestion(&arguments, &names)
}

/// `memsup VERB` when the command line names a verb before anything else, else `memsup`.
fn help_command() -> String {
    let verbs = Cli::command();
    // args_os: a program argument need not be UTF-8.
    let first_word = std::env::args_os()
        .skip(1)
        .find(|word| !word.to_string_lossy().starts_with('-'));
    match first_word.as_deref().and_then(|word| word.to_str()) {
        Some(word) if verbs.find_subcommand(word).is_some() => format!("memsup {word}"),
        _ => "memsup".to_string(),
    }
}

/// Test-only: `MEMSUP_TEST_RAISE_AT_START=INT` (or `TERM`) makes memsup send itself that
/// signal before any setup, where a real one could otherwise arrive unhandled.
fn raise_for_tests() {
    let signal = match std::env::var("MEMSUP_TEST_RAISE_AT_START").as_deref() {
        Ok("INT") => libc::SIGINT,
        Ok("TERM") => libc::SIGTERM,
        _ => return,
    };
    // SAFETY: raise has no memory effects; the handler installed above only sets a flag.
    unsafe { libc::raise(signal) };
}

/// The error, with what to do about a refused ptrace.
fn with_advice(error: &Error) -> String {
    match error {
        Error::PermissionDenied { pid: 1 } => format!("{error}: {}", init_refusal()),
        _ => match error.exit_code() {
            exit_code::PERMISSION_DENIED => ptrace_scope_advice(error),
            _ => error.to_string(),
        },
    }
}

/// Why the kernel refuses init: ptrace_scope advice cannot help there.
fn init_refusal() -> String {
    use std::os::unix::fs::MetadataExt;
    // /proc/1 belongs to init's effective user.
    let init_uid = std::fs::metadata("/proc/1").map(|metadata| metadata.uid());
    // SAFETY: geteuid has no side effects.
    let our_uid = unsafe { libc::geteuid() };
    match init_uid {
        Ok(uid) if uid != our_uid => format!(
            "PID 1 is init, run by uid {uid}; the kernel lets only a tracer with \
             CAP_SYS_PTRACE in init's user namespace trace another user's process"
        ),
        _ => "PID 1 is init; the kernel refused although memsup runs as its user: a security \
              module (Yama with ptrace_scope 3, SELinux, AppArmor) or a user namespace that \
              does not own init forbids it"
            .to_string(),
    }
}

/// What to do about a refused ptrace.
fn ptrace_scope_advice(error: &Error) -> String {
    format!(
        "{error}: ptrace was refused; check /proc/sys/kernel/yama/ptrace_scope (0 allows tracing any \
         process of your user), or run as root / with CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE)"
    )
}
