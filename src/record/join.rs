//! `memsup attach`: joining the processes asked for, and the line that says recording began.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::ptrace::signals;
use crate::ptrace::tracer::Tracer;

/// Joins every process; memsup asked to end (before or meanwhile) joins no further process,
/// and the event loop then detaches from those already joined.
/// `skip_gone`: a process that ended before it could be seized is passed over (a job's).
/// Among several PIDs, one that ended before it was seized, or while it was, is passed over
/// with a note; with nothing joined (and memsup not asked to end), that is the error.
pub(super) fn join_all(tracer: &mut Tracer, pids: &[i32], skip_gone: bool) -> Result<()> {
    let mut ended = None;
    for &pid in pids {
        if signals::ending_requested() {
            break;
        }
        match tracer.attach(pid) {
            Ok(()) => {}
            Err(Error::NoSuchProcess(_)) if skip_gone => {}
            // Even with -q: they are about processes the user named.
            Err(gone @ Error::NoSuchProcess(pid)) if pids.len() > 1 => {
                eprintln!("memsup: note: process {pid} ended before memsup could join it");
                ended = Some(gone);
            }
            Err(gone @ Error::EndedWhileJoining(pid)) if pids.len() > 1 => {
                eprintln!("memsup: note: process {pid} ended while memsup was joining it");
                ended = Some(gone);
            }
            Err(Error::AttachInterrupted(_)) => break,
            Err(error) => return Err(error),
        }
    }
    match ended {
        Some(error) if tracer.supervised_pids().is_empty() && !signals::ending_requested() => {
            Err(error)
        }
        _ => Ok(()),
    }
}

/// How many processes are listed by PID and name; a job's larger set is only counted.
const LISTED_PROCESSES: usize = 4;

/// "attached to process 1234 (app); Ctrl-C detaches", said once every process is joined:
/// from then on the program runs recorded. None when none was joined.
pub(super) fn attached_line(pids: &[i32], duration: Option<Duration>) -> Option<String> {
    let named = |pid: &i32| format!("{pid} ({})", command_name(*pid));
    let processes = match pids {
        [] => return None,
        [pid] => format!("process {}", named(pid)),
        _ if pids.len() <= LISTED_PROCESSES => {
            let listed: Vec<String> = pids.iter().map(named).collect();
            format!("{} processes: {}", pids.len(), listed.join(", "))
        }
        _ => format!("{} processes", pids.len()),
    };
    let end = match duration {
        Some(duration) => format!("detaching after {} s or on Ctrl-C", duration.as_secs_f64()),
        None => "Ctrl-C detaches".to_string(),
    };
    Some(format!("attached to {processes}; {end}"))
}

/// The process's command name (/proc/PID/comm), or "?" once it is gone.
fn command_name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim_end().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attached_line_names_few_processes_and_counts_many() {
        let own = std::process::id() as i32;
        let name = command_name(own);
        assert_eq!(
            attached_line(&[own], None),
            Some(format!(
                "attached to process {own} ({name}); Ctrl-C detaches"
            ))
        );
        assert_eq!(
            attached_line(&[own, own], Some(Duration::from_millis(1500))),
            Some(format!(
                "attached to 2 processes: {own} ({name}), {own} ({name}); detaching after 1.5 s or on Ctrl-C"
            ))
        );
        assert_eq!(
            attached_line(&[own; 5], None).as_deref(),
            Some("attached to 5 processes; Ctrl-C detaches")
        );
        assert_eq!(attached_line(&[], None), None);
    }
}
