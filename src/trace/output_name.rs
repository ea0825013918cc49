//! `-o` templates: `%p`, `%r`, `%h`, `%n`, `%j` and `%%` in a profile's name, so that every
//! memsup of an MPI job (`mpirun -n 4 memsup run -o 'job/%r.msup' -- ./app`) writes a file of
//! its own. The values come from memsup's own environment, which the job's launcher gives
//! memsup as it would give the rank.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::platform::mpi_roles::{job_from_environment, rank_from_environment};

/// What the specifiers expand to for one memsup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameValues {
    /// `%p`: the process memsup records (attach: the first PID; run: memsup itself, as the
    /// profile is created before the program is started).
    pub pid: u32,
    /// `%r`: the MPI rank, or `pid` when the environment has none.
    pub rank: String,
    /// `%h`: the host name.
    pub host: String,
    /// `%n`: the program's file name (`attach`, `snapshot` for those verbs).
    pub program: String,
    /// `%j`: the job id, or memsup's parent's PID (the launcher that started it) when the
    /// environment has none.
    pub job: String,
}

impl NameValues {
    /// The values for this memsup: its environment, host name and parent.
    pub fn for_this_process(pid: u32, program: &str) -> NameValues {
        let host = nix::unistd::gethostname()
            .map(|host| host.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "localhost".into());
        let parent = std::os::unix::process::parent_id();
        let environment: HashMap<String, String> = std::env::vars().collect();
        NameValues::from_lookup(pid, program, &host, parent, |name| {
            environment.get(name).map(String::as_str)
        })
    }

    /// The values from `lookup` (an environment), read as a rank's is
    /// (`platform::mpi_roles`).
    pub fn from_lookup<'a>(
        pid: u32,
        program: &str,
        host: &str,
        parent: u32,
        lookup: impl Fn(&str) -> Option<&'a str>,
    ) -> NameValues {
        // A rank is a number; anything else in the variable is not trusted with a file name.
        let rank = rank_from_environment(&lookup, || None)
            .map_or_else(|| pid.to_string(), |rank| rank.rank.to_string());
        let job = job_from_environment(&lookup)
            .map(|job| file_name_safe(&job))
            .unwrap_or_else(|| parent.to_string());
        let program = program.rsplit('/').next().unwrap_or(program);
        NameValues {
            pid,
            rank,
            host: file_name_safe(host),
            program: file_name_safe(program),
            job,
        }
    }
}

/// `template` with every specifier replaced; an unknown one (or a `%` at the end) is
/// refused with a message naming it.
pub fn expand(template: &OsStr, values: &NameValues) -> Result<OsString, String> {
    let mut expanded = Vec::with_capacity(template.len());
    let mut bytes = template.as_bytes().iter();
    while let Some(&byte) = bytes.next() {
        if byte != b'%' {
            expanded.push(byte);
            continue;
        }
        let value = match bytes.next() {
            Some(b'p') => values.pid.to_string(),
            Some(b'r') => values.rank.clone(),
            Some(b'h') => values.host.clone(),
            Some(b'n') => values.program.clone(),
            Some(b'j') => values.job.clone(),
            Some(b'%') => "%".to_string(),
            Some(&other) => {
                return Err(format!(
                    "-o {}: unknown specifier %{}; use %p (pid), %r (MPI rank), %h (host), \
                     %n (program), %j (job id) or %% (a %)",
                    template.to_string_lossy(),
                    String::from_utf8_lossy(&[other])
                ))
            }
            None => {
                return Err(format!(
                    "-o {}: a % at the end; write %% for a % in the name",
                    template.to_string_lossy()
                ))
            }
        };
        expanded.extend_from_slice(value.as_bytes());
    }
    Ok(OsString::from_vec(expanded))
}

/// `text` with what cannot be in one file name component (`/`, NUL) made `_`, and `.` or
/// `..` whole made `_` too.
fn file_name_safe(text: &str) -> String {
    let safe: String = text
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    match safe.as_str() {
        "." | ".." => "_".into(),
        _ => safe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(variables: &'a [(&'a str, &'a str)]) -> NameValues {
        NameValues::from_lookup(4242, "/opt/bin/app", "node7", 4000, |name| {
            variables
                .iter()
                .find(|(variable, _)| *variable == name)
                .map(|(_, value)| *value)
        })
    }

    fn expanded(template: &str, values: &NameValues) -> Result<String, String> {
        expand(OsStr::new(template), values).map(|name| name.to_string_lossy().into_owned())
    }

    #[test]
    fn every_specifier_expands() {
        let values = values(&[("OMPI_COMM_WORLD_RANK", "3"), ("PMIX_NAMESPACE", "1993")]);
        assert_eq!(
            expanded("job/%j/%h.%n.%r.%p.msup", &values).unwrap(),
            "job/1993/node7.app.3.4242.msup"
        );
        assert_eq!(expanded("100%%-%r%%", &values).unwrap(), "100%-3%");
        assert_eq!(expanded("plain.msup", &values).unwrap(), "plain.msup");
    }

    #[test]
    fn an_unknown_specifier_or_a_lone_percent_is_one_line_of_error() {
        let values = values(&[]);
        assert_eq!(
            expanded("rank.%d.msup", &values).unwrap_err(),
            "-o rank.%d.msup: unknown specifier %d; use %p (pid), %r (MPI rank), %h (host), \
             %n (program), %j (job id) or %% (a %)"
        );
        assert_eq!(
            expanded("rank.%", &values).unwrap_err(),
            "-o rank.%: a % at the end; write %% for a % in the name"
        );
    }

    #[test]
    fn the_rank_comes_from_the_first_variable_that_holds_a_number() {
        let rank = |variables: &[(&str, &str)]| values(variables).rank;
        assert_eq!(rank(&[("PMI_RANK", "2"), ("SLURM_PROCID", "9")]), "2");
        assert_eq!(
            rank(&[("OMPI_COMM_WORLD_RANK", "1"), ("PMIX_RANK", "5")]),
            "1"
        );
        assert_eq!(rank(&[("MV2_COMM_WORLD_RANK", "6")]), "6");
        assert_eq!(rank(&[("SLURM_PROCID", "11")]), "11");
        // Not a number: the next variable, else the pid.
        assert_eq!(rank(&[("PMIX_RANK", "../x"), ("PMI_RANK", "4")]), "4");
        assert_eq!(rank(&[("PMIX_RANK", "-1")]), "4242");
        assert_eq!(rank(&[]), "4242");
    }

    #[test]
    fn the_job_comes_from_the_environment_else_from_the_parent() {
        let job = |variables: &[(&str, &str)]| values(variables).job;
        assert_eq!(
            job(&[("OMPI_MCA_ess_base_jobid", "77"), ("SLURM_JOB_ID", "5")]),
            "77"
        );
        assert_eq!(job(&[("PMI_KVSNAME", "kvs_12_0")]), "kvs_12_0");
        assert_eq!(job(&[("SLURM_JOB_ID", "123456")]), "123456");
        assert_eq!(job(&[("PMIX_NAMESPACE", "a/b")]), "a_b");
        assert_eq!(job(&[("PMIX_NAMESPACE", "..")]), "_");
        assert_eq!(job(&[("PMIX_NAMESPACE", "")]), "4000");
        assert_eq!(job(&[]), "4000");
    }

    #[test]
    fn this_process_s_values_name_its_host_and_program() {
        let values = NameValues::for_this_process(17, "/usr/bin/true");
        assert_eq!(values.pid, 17);
        assert_eq!(values.program, "true");
        assert_eq!(
            values.host,
            nix::unistd::gethostname().unwrap().to_string_lossy()
        );
    }
}
