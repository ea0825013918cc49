//! `memsup attach --job PID` on a running two-rank job (fixture mpi_wait, whose ranks wait
//! for SIGUSR1): memsup joins the launchers and both ranks, the job then finishes with its
//! own output, and the profile labels every process; a PID in no job is refused.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::assert_exit;
use crate::common::live_process::{tracer_pid, wait_until, KillOnDrop};
use crate::common::mpi::{mpi_fixture, mpi_libraries, MpiLibrary, MpiLinking};
use crate::common::report::{processes, report_json};
use crate::common::run::{clean_command, memsup_binary, run_command, wait_within};
use crate::mpi_ranks::{launcher_programs, rank_source};

const LIMIT: Duration = Duration::from_secs(120);
const MIB: u64 = 1 << 20;

/// A running job and the lines it prints, as they come.
pub struct Job {
    pub launcher: KillOnDrop,
    pub lines: Receiver<String>,
    /// Pid of rank 0, rank 1.
    pub ranks: Vec<u32>,
}

/// Starts `mpirun -n 2 FIXTURE` (mpi_wait, mpi_recv_wait) and waits until both ranks are
/// ready ("rank R of 2 ready, pid P").
pub fn start(library: MpiLibrary, fixture: &std::path::Path) -> Job {
    let mut command = library.launch(2, fixture, &[]);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut launcher = command.spawn().expect("starting the job");
    let stdout = launcher.stdout.take().unwrap();
    let (sender, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut job = Job {
        launcher: KillOnDrop(Some(launcher)),
        lines,
        ranks: vec![0, 0],
    };
    let mut ready = 0;
    while ready < 2 {
        let line = job.lines.recv_timeout(LIMIT).expect("a rank's ready line");
        if !line.contains(" ready, pid ") {
            continue;
        }
        ready += 1;
        // "rank R of 2 ready, pid P"
        let (rank, pid) = line
            .strip_prefix("rank ")
            .and_then(|rest| rest.split_once(" of 2 ready, pid "))
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        job.ranks[rank.parse::<usize>().unwrap()] = pid.parse().unwrap();
    }
    job
}

/// Starts `memsup attach OPTIONS --job PID -o PROFILE`, its output piped.
pub fn attach_to_job(
    library: MpiLibrary,
    pid: u32,
    profile: &std::path::Path,
    options: &[&str],
) -> KillOnDrop {
    let mut attach: Command = library.command(memsup_binary());
    attach.arg("attach").args(options).arg("--job");
    attach.arg(pid.to_string()).arg("-o").arg(profile);
    attach
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    KillOnDrop(Some(attach.spawn().expect("starting memsup")))
}

/// Tells the ranks to finish; their lines (sorted, pids taken out) and the job's status.
fn finish(mut job: Job) -> (Vec<String>, bool) {
    for &pid in &job.ranks {
        // SAFETY: kill has no memory effects.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGUSR1) }, 0);
    }
    let launcher: Child = job.launcher.0.take().unwrap();
    let output = wait_within(launcher, "the MPI job", LIMIT);
    let mut lines: Vec<String> = job
        .lines
        .iter()
        .map(|line| match line.split_once(", pid ") {
            Some((before, after)) => format!(
                "{before}, {}",
                after.split_once(", ").map_or("", |(_, rest)| rest)
            ),
            None => line,
        })
        .collect();
    lines.sort();
    (lines, output.status.success())
}

fn done_lines() -> Vec<String> {
    vec![
        "rank 0 of 2 done, ok".to_string(),
        "rank 1 of 2 done, ok".to_string(),
    ]
}

/// The one site of `image` whose innermost frame is `function`: (allocations, bytes).
fn site_of(image: &Value, function: &str) -> (u64, u64) {
    let sites: Vec<&Value> = image["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|site| site["stack"][0]["function"] == function)
        .collect();
    assert_eq!(
        sites.len(),
        1,
        "sites of {function} in pid {}: {:#}",
        image["pid"],
        image["sites"]
    );
    (
        sites[0]["allocations"].as_u64().unwrap(),
        sites[0]["bytes_allocated"].as_u64().unwrap(),
    )
}

#[test]
fn attach_job_records_the_launchers_and_both_ranks() {
    for library in mpi_libraries() {
        let what = format!("{library:?}");
        let fixture = mpi_fixture("mpi_wait", library, MpiLinking::Dynamic);
        let native = start(library, &fixture);
        assert_eq!(finish(native), (done_lines(), true), "{what} natively");

        let job = start(library, &fixture);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        let mut memsup = attach_to_job(library, job.ranks[1], &profile, &[]);
        let memsup_pid = memsup.0.as_ref().unwrap().id();
        for &rank in &job.ranks {
            wait_until("memsup traces the rank", LIMIT, || {
                tracer_pid(rank) == memsup_pid
            });
        }
        let ranks = job.ranks.clone();
        let launcher_pid = job.launcher.0.as_ref().unwrap().id();
        assert_eq!(finish(job), (done_lines(), true), "{what} under memsup");
        let output = wait_within(memsup.0.take().unwrap(), "memsup attach --job", LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{what}: {stderr}");
        let note = stderr
            .lines()
            .find(|line| line.starts_with("memsup: note: the job's processes: "))
            .unwrap_or_else(|| panic!("{what}: no note in {stderr}"));
        // The launcher started by the test: mpirun.openmpi runs orterun, mpirun.mpich hydra.
        let outermost = match library {
            MpiLibrary::OpenMpi => "orterun",
            MpiLibrary::Mpich => "mpiexec.hydra",
        };
        let first = format!("the job's processes: {launcher_pid} ({outermost})");
        assert!(note.contains(&first), "{what}: {note}");
        assert!(
            note.ends_with(&format!("{} (rank 0), {} (rank 1)", ranks[0], ranks[1])),
            "{what}: {note}"
        );

        let report = report_json(&profile);
        let images = processes(&report);
        let programs = recorded_launchers(images);
        assert_eq!(programs, launcher_programs(library), "{what}");
        assert_eq!(images.len(), programs.len() + 2, "{what}");
        let mut job_id = None;
        for (rank, &pid) in ranks.iter().enumerate() {
            let image = images.iter().find(|image| image["pid"] == pid).unwrap();
            assert_eq!(image["cause"], "attach", "{what}");
            let id = image["mpi"]["job"].clone();
            assert_eq!(
                image["mpi"],
                json!({"role": "rank", "rank": rank, "world_size": 2, "job": id,
                       "source": rank_source(library)}),
                "{what}"
            );
            assert_ne!(id, "", "{what}");
            assert_eq!(*job_id.get_or_insert(id.clone()), id, "{what}: one job");
            assert_eq!(
                site_of(image, "allocate_after_signal"),
                (1, (rank as u64 + 1) * MIB),
                "{what}"
            );
            assert_exit(image, "code", Some(0));
        }
    }
}

/// A process with no rank variable that is no launcher: exit 81, one line, left untouched.
#[test]
fn attach_job_refuses_a_process_in_no_job() {
    let mut sleeper = clean_command("sleep");
    sleeper.arg("60").stdin(Stdio::null()).stdout(Stdio::null());
    let sleeper = KillOnDrop(Some(sleeper.spawn().expect("starting sleep")));
    let pid = sleeper.0.as_ref().unwrap().id();
    let mut attach = clean_command(memsup_binary());
    attach.args(["attach", "--job", &pid.to_string()]);
    let output = run_command(attach, None);
    assert_eq!(output.status.code(), Some(81));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: process {pid} is in no MPI job: it has no MPI rank variable in its \
             environment and is no MPI launcher\n"
        )
    );
    assert_eq!(tracer_pid(pid), 0);
    assert!(output.stdout.is_empty());
}

/// `memsup snapshot` of a waiting rank names its rank in the report's header; the job then
/// finishes as natively.
#[test]
fn a_snapshot_of_a_rank_names_its_rank() {
    for library in mpi_libraries() {
        let what = format!("{library:?}");
        let fixture = mpi_fixture("mpi_wait", library, MpiLinking::Dynamic);
        let job = start(library, &fixture);
        let launcher_pid = job.launcher.0.as_ref().unwrap().id();
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("rank.msup");
        let mut snapshot = clean_command(memsup_binary());
        snapshot
            .args(["snapshot", "-q", "-o"])
            .arg(&profile)
            .arg(job.ranks[1].to_string());
        let output = run_command(snapshot, None);
        assert!(output.status.success(), "{what}: {output:?}");
        assert_eq!(finish(job), (done_lines(), true), "{what}");

        let text = crate::common::report::report_output(&profile, &[]);
        let header = text
            .lines()
            .find(|line| line.starts_with("== process"))
            .unwrap();
        let job_id = match library {
            MpiLibrary::OpenMpi => {
                let id = header
                    .rsplit("job ")
                    .next()
                    .unwrap()
                    .trim_end_matches(") ==");
                assert!(id.parse::<u64>().is_ok(), "{what}: {header}");
                id.to_string()
            }
            MpiLibrary::Mpich => launcher_pid.to_string(),
        };
        let expected = format!(
            "(snapshot): rank 1 of 2 ({}, job {job_id}) ==",
            rank_source(library)
        );
        assert!(header.ends_with(&expected), "{what}: {header}");
    }
}

/// The programs of the images recorded as launchers, sorted.
fn recorded_launchers(images: &[Value]) -> Vec<&str> {
    let mut programs: Vec<&str> = images
        .iter()
        .filter(|image| image["mpi"]["role"] == "launcher")
        .map(|image| image["mpi"]["program"].as_str().unwrap())
        .collect();
    programs.sort_unstable();
    programs
}

/// The group of `image`'s snapshot threads that holds thread `tid`: its stack's function
/// names (innermost first) and that thread's state.
fn thread_of(image: &Value, tid: u64) -> (Vec<&str>, &str) {
    let groups = image["threads"]["groups"].as_array().unwrap();
    for group in groups {
        let threads = group["threads"].as_array().unwrap();
        if let Some(thread) = threads.iter().find(|thread| thread["tid"] == tid) {
            let stack = group["stack"].as_array().unwrap().iter();
            let functions = stack.map(|frame| frame["function"].as_str().unwrap());
            return (functions.collect(), thread["state"].as_str().unwrap());
        }
    }
    panic!("no thread {tid} in {groups:#?}")
}

/// `snapshot --job` of a rank takes the whole job: its launchers and both ranks, each rank
/// labelled, its main thread shown waiting in sigsuspend under the fixture's main.
#[test]
fn a_snapshot_of_a_job_shows_where_each_rank_waits() {
    for library in mpi_libraries() {
        let what = format!("{library:?}");
        let fixture = mpi_fixture("mpi_wait", library, MpiLinking::Dynamic);
        let job = start(library, &fixture);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        let mut snapshot = library.command(memsup_binary());
        snapshot
            .args(["snapshot", "--job", "-o"])
            .arg(&profile)
            .arg(job.ranks[0].to_string());
        let output = run_command(snapshot, None);
        assert!(output.status.success(), "{what}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let ranks_named = format!("{} (rank 0), {} (rank 1)", job.ranks[0], job.ranks[1]);
        assert!(stderr.contains(&ranks_named), "{what}: {stderr}");
        let ranks = job.ranks.clone();
        assert_eq!(finish(job), (done_lines(), true), "{what}");

        let report = report_json(&profile);
        let images = processes(&report);
        let programs = recorded_launchers(images);
        assert_eq!(programs, launcher_programs(library), "{what}");
        assert_eq!(images.len(), programs.len() + 2, "{what}");
        for (rank, &pid) in ranks.iter().enumerate() {
            let image = images.iter().find(|image| image["pid"] == pid).unwrap();
            assert_eq!(image["rank"], rank, "{what}");
            let (stack, state) = thread_of(image, u64::from(pid));
            assert!(stack.contains(&"main"), "{what}: rank {rank}: {stack:?}");
            assert_eq!(state, "in system call rt_sigsuspend", "{what}: {stack:?}");
        }
    }
}

/// `snapshot --job` while rank 0 waits inside MPI_Recv (fixture mpi_recv_wait) for a message
/// rank 1 sends only once woken: rank 0's main thread shows the receive under main, rank 1
/// waits in sigsuspend, and both go on to the end afterwards.
#[test]
fn a_snapshot_of_a_job_shows_the_rank_blocked_in_mpi_recv() {
    for library in mpi_libraries() {
        let what = format!("{library:?}");
        let fixture = mpi_fixture("mpi_recv_wait", library, MpiLinking::Dynamic);
        let mut job = start(library, &fixture);
        let (rank0, rank1) = (job.ranks[0], job.ranks[1]);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        // Rank 0 goes from its ready line into MPI_Recv: snapshots until one finds it there
        // (a busy node may take a while).
        let mut tries = 0;
        let report = loop {
            let mut snapshot = library.command(memsup_binary());
            snapshot
                .args(["snapshot", "-q", "-f", "--job", "-o"])
                .arg(&profile)
                .arg(rank1.to_string());
            let output = run_command(snapshot, None);
            assert!(output.status.success(), "{what}: {output:?}");
            let report = report_json(&profile);
            let image = processes(&report)
                .iter()
                .find(|image| image["pid"] == rank0)
                .unwrap();
            let (stack, _) = thread_of(image, u64::from(rank0));
            tries += 1;
            if stack.iter().any(|frame| frame.ends_with("MPI_Recv")) || tries == 20 {
                break report;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let images = processes(&report);
        let image_of = |pid: u32| images.iter().find(|image| image["pid"] == pid).unwrap();
        assert_eq!(image_of(rank0)["rank"], 0, "{what}");
        assert_eq!(image_of(rank1)["rank"], 1, "{what}");
        let (stack, _) = thread_of(image_of(rank0), u64::from(rank0));
        // Under main, with the progress engine inside it (Open MPI's opal_progress, UCX's
        // ucp_worker_progress under MPICH). MPI_Recv may be named PMPI_Recv, its alias.
        let receive = stack.iter().position(|frame| frame.ends_with("MPI_Recv"));
        let main = stack.iter().position(|&frame| frame == "main");
        assert!(
            matches!((receive, main), (Some(receive), Some(main)) if 0 < receive && receive < main),
            "{what}: rank 0: {stack:?}"
        );
        let (stack, state) = thread_of(image_of(rank1), u64::from(rank1));
        assert!(stack.contains(&"main"), "{what}: rank 1: {stack:?}");
        assert_eq!(state, "in system call rt_sigsuspend", "{what}: {stack:?}");

        // Rank 1 sends each number once woken; a second wake waits for the first's answer.
        let mut lines = Vec::new();
        for value in [41, 42] {
            // SAFETY: kill has no memory effects.
            assert_eq!(unsafe { libc::kill(rank1 as i32, libc::SIGUSR1) }, 0);
            let got = format!("rank 0 got {value}");
            while !lines.contains(&got) {
                lines.push(job.lines.recv_timeout(LIMIT).expect("rank 0's answer"));
            }
        }
        let launcher: Child = job.launcher.0.take().unwrap();
        let finished = wait_within(launcher, "the MPI job", LIMIT);
        assert!(finished.status.success(), "{what}: {finished:?}");
        lines.extend(job.lines.iter());
        for expected in ["rank 0 of 2 done, ok", "rank 1 of 2 done, ok"] {
            assert!(
                lines.iter().any(|line| line == expected),
                "{what}: {lines:?}"
            );
        }
    }
}
