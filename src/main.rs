//! memsup's entry point: parse, run, and turn errors into one line and an exit code.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use memsup::cli::{default_output, Cli, Command, Format};
use memsup::error::{Error, Result};
use memsup::record::{self, AttachOptions, RunOptions};
use memsup::trace::reader::read_profile;
use memsup::{analysis, report};

fn main() -> ExitCode {
    let cli = Cli::parse();
    memsup::failure::install_panic_hook();
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
            ExitCode::from(memsup::error::exit_code::INTERNAL as u8)
        }
    }
}

fn execute(command: Command) -> Result<i32> {
    match command {
        Command::Run {
            output,
            quiet,
            probes,
            sampling,
            command,
        } => {
            let name = command
                .first()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let output = output.unwrap_or_else(|| default_output(&name));
            record::run(RunOptions {
                output,
                command,
                quiet,
                step_over: probes.step_over.policy(),
                stacks: probes.stacks.mode(),
                rates: sampling.rates(),
            })
        }
        Command::Attach {
            output,
            duration,
            quiet,
            probes,
            sampling,
            pids,
        } => {
            let output = output.unwrap_or_else(|| default_output("attach"));
            record::attach(AttachOptions {
                output,
                pids,
                duration_seconds: duration,
                quiet,
                step_over: probes.step_over.policy(),
                stacks: probes.stacks.mode(),
                rates: sampling.rates(),
            })
        }
        Command::Report {
            format,
            top,
            metric,
            skip_frames,
            no_default_skip_frames,
            components,
            profile,
        } => {
            let components = match analysis::ComponentRules::parse_all(&components) {
                Ok(rules) => rules,
                Err(message) => {
                    eprintln!("memsup: error: {message}");
                    return Ok(memsup::error::exit_code::USAGE);
                }
            };
            if !profile.exists() {
                return Err(Error::InputNotReadable {
                    path: profile,
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                });
            }
            let loaded = read_profile(&profile)?;
            let settings = analysis::Settings {
                skip: analysis::SkipFrames::new(!no_default_skip_frames, &skip_frames),
                components,
            };
            let analysis = analysis::analyze_configured(&loaded, &profile, &settings);
            let mut out = std::io::stdout().lock();
            let rendered = match format {
                Format::Text => report::text::render(&analysis, top, &mut out),
                Format::Json => report::json::render(&analysis, &mut out),
                Format::Folded => report::folded::render(&analysis, metric.metric(), &mut out),
                Format::Html => report::html_report::render(&analysis, &mut out),
                Format::Csv => report::csv::render(&analysis, &mut out),
                Format::Perfetto => report::perfetto::render(&analysis, &mut out),
            };
            match rendered.and_then(|_| out.flush()) {
                // A reader that stopped early (`| head`) is not an error.
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
                Err(error) => Err(Error::io("writing the report", error)),
                Ok(()) => Ok(0),
            }
        }
    }
}

/// The error, with what to do about a refused ptrace.
fn with_advice(error: &Error) -> String {
    match error.exit_code() {
        memsup::error::exit_code::PERMISSION_DENIED => format!(
            "{error}: ptrace was refused; check /proc/sys/kernel/yama/ptrace_scope (0 allows tracing any \
             process of your user), or run as root / with CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE)"
        ),
        _ => error.to_string(),
    }
}
