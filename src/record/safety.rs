//! What keeps an attach safe for the processes it joins: each process joined once however
//! the user named it, memsup shielded from the OOM killer while its probes are in them, and
//! every process detached before memsup reports its own failure.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Result};
use crate::failure::panic_description;
use crate::ptrace::signals;
use crate::ptrace::tracer::Tracer;

/// The processes behind the PIDs the user gave, each given as (PID, its thread-group ID):
/// each process once, in the order first named; and, when a PID was repeated or named a
/// thread, a one-line note saying which process is joined for which PIDs.
pub(crate) fn distinct_processes(given: &[(i32, i32)]) -> (Vec<i32>, Option<String>) {
    let mut processes: Vec<i32> = Vec::new();
    for &(_, tgid) in given {
        if !processes.contains(&tgid) {
            processes.push(tgid);
        }
    }
    let merged: Vec<String> = processes
        .iter()
        .filter_map(|&tgid| {
            let names: Vec<String> = given
                .iter()
                .filter(|(_, of)| *of == tgid)
                .map(|(pid, _)| pid.to_string())
                .collect();
            (names.len() > 1 || names[0] != tgid.to_string())
                .then(|| format!("process {tgid} (given as {})", names.join(", ")))
        })
        .collect();
    let note = (!merged.is_empty()).then(|| {
        format!(
            "attaching to each process once, as a whole: {}",
            merged.join("; ")
        )
    });
    (processes, note)
}

const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// While attached, memsup asks the OOM killer to spare it: killed, it would leave int3s in
/// the processes it joined, and their next hit would kill them. Lowering needs
/// CAP_SYS_RESOURCE; without it the score stays. The previous score is put back on drop.
pub(crate) struct OomShield {
    previous: Option<String>,
}

impl OomShield {
    pub(crate) fn lower_score() -> OomShield {
        let previous = std::fs::read_to_string(OOM_SCORE_ADJ).ok();
        let lowered = previous.is_some() && std::fs::write(OOM_SCORE_ADJ, "-1000").is_ok();
        OomShield {
            previous: previous.filter(|_| lowered),
        }
    }
}

impl Drop for OomShield {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            let _ = std::fs::write(OOM_SCORE_ADJ, previous.trim());
        }
    }
}

/// Runs `work` on the tracer; if it panics, fails, or another memsup thread panicked
/// meanwhile, every process is detached before the error is returned.
pub(crate) fn detach_on_failure(
    tracer: &mut Tracer,
    work: impl FnOnce(&mut Tracer) -> Result<()>,
) -> Result<()> {
    let outcome = catch_unwind(AssertUnwindSafe(|| work(&mut *tracer)));
    let failure = match outcome {
        Ok(Ok(())) if !signals::failure_reported() => return Ok(()),
        Ok(Ok(())) | Err(_) => panic_error(),
        Ok(Err(error)) => error,
    };
    if let Err(detach_error) = tracer.detach_all() {
        eprintln!("memsup: warning: detaching after the failure: {detach_error}");
    }
    Err(failure)
}

fn panic_error() -> Error {
    let description = panic_description().unwrap_or_else(|| "a memsup thread panicked".into());
    Error::Internal(format!(
        "internal error: {description}; detached from every process"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_processes_keep_the_order_and_note_what_was_merged() {
        assert_eq!(
            distinct_processes(&[(10, 10), (20, 20)]),
            (vec![10, 20], None)
        );
        assert_eq!(
            distinct_processes(&[(10, 10), (10, 10)]),
            (
                vec![10],
                Some(
                    "attaching to each process once, as a whole: process 10 (given as 10, 10)"
                        .into()
                )
            )
        );
        assert_eq!(
            distinct_processes(&[(30, 30), (11, 10), (10, 10), (31, 30)]),
            (
                vec![30, 10],
                Some(
                    "attaching to each process once, as a whole: process 30 (given as 30, 31); \
                     process 10 (given as 11, 10)"
                        .into()
                )
            )
        );
        assert_eq!(
            distinct_processes(&[(11, 10)]),
            (
                vec![10],
                Some("attaching to each process once, as a whole: process 10 (given as 11)".into())
            )
        );
    }
}
