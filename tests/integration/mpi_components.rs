//! The MPI component whole: under Open MPI, MPICH and static MPICH, 2 ranks, run mode
//! (`memsup run -- mpirun`) and attach mode (`memsup attach` to the ranks of a running job),
//! each rank's memory is app / mpi / mpi:shm / libc / ... and nothing else: the libraries and
//! plugins MPI brought in are inside `mpi`, its shared-memory transports are `mpi:shm`, and
//! the fixture's buffers are `app` exactly. fixtures/mpi_alltoall.c, mpi_wait_shm.c.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread;

use serde_json::Value;

use crate::common::attach_window::{AttachWindow, EVENT_TIMEOUT};
use crate::common::mpi::mpi_builds;
use crate::common::mpi::{mpi_fixture, MpiLibrary};
use crate::common::report::{processes, report_json};
use crate::common::run::{memsup_binary, run_command, wait_with_timeout};

/// Each rank's buffers: a send and a receive buffer of 2 MiB (1 MiB per rank of 2).
const BUFFERS: u64 = 2 * (2 << 20);

/// A rank's components in run mode: arena pages no block accounts for are `overhead`.
const RUN_COMPONENTS: [&str; 7] = [
    "app", "libc", "memsup", "mpi", "mpi:shm", "overhead", "stacks",
];
/// After an attach the blocks allocated before it are `unknown` (never seen); what glibc
/// held free then is `overhead`, by the heap census taken at the attach.
const ATTACH_COMPONENTS: [&str; 8] = [
    "app", "libc", "memsup", "mpi", "mpi:shm", "overhead", "stacks", "unknown",
];

/// The images of `report` that run `fixture` (the ranks), in report order.
fn rank_images<'a>(report: &'a Value, fixture: &Path) -> Vec<&'a Value> {
    let exe = fixture.to_string_lossy();
    processes(report)
        .iter()
        .filter(|image| image["exe"].as_str() == Some(&exe))
        .collect()
}

/// At most what a snapshot may see of mappings whose calls the tracer had not recorded yet:
/// one UCX segment (4 MiB and its control pages).
const RACED_PAGES_BYTES: u64 = 5 << 20;

fn component<'a>(image: &'a Value, name: &str) -> &'a Value {
    let components = image["components"].as_array().expect("components");
    components
        .iter()
        .find(|component| component["name"] == name)
        .unwrap_or_else(|| panic!("no component {name} in {components:#?}"))
}

/// Every rank: the buffers as `app` requested bytes, exactly `expected`
/// components and shared memory as `mpi:shm` with PSS, and the node totals sum the ranks'
/// `mpi:shm` PSS.
fn assert_rank_components(report: &Value, fixture: &Path, expected: &[&str], what: &str) {
    let ranks = rank_images(report, fixture);
    assert_eq!(ranks.len(), 2, "{what}: two ranks");
    let mut shared_memory = 0;
    for rank in &ranks {
        let pid = &rank["pid"];
        // In a static program MPI's blocks are told from the program's by the names of the
        // whole stack (yaksa's, khash's callers are no MPI names), and what static hwloc
        // dlopens (libXNVCtrl, libX11...) by the dlopen's stack.
        let app = component(rank, "app")["peak_requested_bytes"].as_u64();
        assert_eq!(app, Some(BUFFERS), "{what}: rank {pid}'s buffers");
        let mut names: BTreeSet<&str> = rank["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|component| component["name"].as_str().unwrap())
            .collect();
        // A mapping made between a snapshot and the tracer's record of its call (the rank
        // runs on while the tracer serves other ranks' stops) has no recorded creator in that
        // snapshot: under MPICH that can be UCX's 4 MiB shared segment, once, never more.
        if names.contains("unknown") && !expected.contains(&"unknown") {
            let unknown = component(rank, "unknown")["peak_rss_bytes"]
                .as_u64()
                .unwrap();
            assert!(
                unknown <= RACED_PAGES_BYTES,
                "{what}: rank {pid}: unknown RSS {unknown}"
            );
            names.remove("unknown");
        }
        let expected: BTreeSet<&str> = expected.iter().copied().collect();
        assert_eq!(names, expected, "{what}: rank {pid}");
        let pss = component(rank, "mpi:shm")["peak_pss_bytes"]
            .as_u64()
            .unwrap();
        assert!(pss > 0, "{what}: rank {pid} has mpi:shm PSS");
        shared_memory += pss;
    }
    if shared_memory == 0 {
        return;
    }
    let totals = &report["node_totals"];
    let pids: Vec<&Value> = ranks.iter().map(|rank| &rank["pid"]).collect();
    let counted: Vec<&Value> = totals["pids"].as_array().unwrap().iter().collect();
    assert_eq!(counted, pids, "{what}: the ranks of the node totals");
    let summed = totals["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|component| component["name"] == "mpi:shm")
        .map(|component| component["pss_bytes"].as_u64().unwrap());
    assert_eq!(summed, Some(shared_memory), "{what}: node total of mpi:shm");
}

/// Every rank's `mpi:shm` is resident in the snapshot at MPI_Finalize's entry, taken while
/// MPI is whole whatever the timing: the second at an MPI entry (MPI_Init's is the first).
fn assert_shared_memory_at_finalize(report: &Value, fixture: &Path, what: &str) {
    for rank in rank_images(report, fixture) {
        let pid = &rank["pid"];
        let snapshots = rank["snapshots"].as_array().unwrap();
        let mut entries = snapshots
            .iter()
            .filter(|snapshot| snapshot["reason"] == "mpi_entry");
        let finalize = entries.nth(1).expect("a snapshot at MPI_Finalize's entry");
        let time_ns = finalize["time_ns"].as_u64();
        // [time_ns, rss, pss, swap]
        let timeline = component(rank, "mpi:shm")["resident_timeline"].as_array();
        let at_finalize: u64 = (timeline.unwrap().iter())
            .filter(|point| point[0].as_u64() == time_ns)
            .map(|point| point[2].as_u64().unwrap())
            .sum();
        assert!(
            at_finalize > 0,
            "{what}: rank {pid}'s mpi:shm at MPI_Finalize"
        );
    }
}

/// The fixture's lines, sorted, without pids.
fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| line.split(", pid ").next().unwrap_or(line).to_string())
        .collect();
    lines.sort();
    lines
}

#[test]
fn in_run_mode_a_rank_is_app_mpi_mpi_shm_and_the_c_runtime() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?} run");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let native = run_command(library.launch(2, &fixture, &["3"]), None);
        assert!(native.status.success(), "{what}: {native:?}");

        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        let mut command = library.command(memsup_binary());
        command.args(["run", "-q", "-o"]).arg(&profile).arg("--");
        command
            .args(library.launch_arguments(2))
            .arg(&fixture)
            .arg("3");
        let supervised = run_command(command, None);
        assert!(
            supervised.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&supervised.stderr)
        );
        let printed = |output: &[u8]| sorted_lines(&String::from_utf8_lossy(output));
        assert_eq!(
            printed(&supervised.stdout),
            printed(&native.stdout),
            "{what}"
        );
        assert_eq!(printed(&native.stdout).len(), 2, "{what}");
        let report = report_json(&profile);
        assert_rank_components(&report, &fixture, &RUN_COMPONENTS, &what);
        assert_shared_memory_at_finalize(&report, &fixture, &what);
    }
}

/// A job of mpi_wait_shm started by its launcher, its stdout read line by line.
struct WaitingJob {
    launcher: Option<Child>,
    lines: Receiver<String>,
    printed: Vec<String>,
    go: PathBuf,
    _directory: tempfile::TempDir,
}

impl WaitingJob {
    fn start(library: MpiLibrary, fixture: &Path, files_first: bool) -> WaitingJob {
        let directory = tempfile::tempdir().unwrap();
        let go = directory.path().join("go");
        if files_first {
            std::fs::write(&go, "").unwrap();
            std::fs::write(go.with_extension("end"), "").unwrap();
        }
        let mut command = library.launch(2, fixture, &[go.to_str().unwrap(), "3"]);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut launcher = command.spawn().expect("starting the launcher");
        let lines = read_lines(launcher.stdout.take().unwrap());
        WaitingJob {
            launcher: Some(launcher),
            lines,
            printed: Vec::new(),
            go,
            _directory: directory,
        }
    }

    /// Reads lines until `count` of them contain `marker`; returns those.
    fn wait_for(&mut self, marker: &str, count: usize) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        while found.len() < count {
            let line = self
                .lines
                .recv_timeout(EVENT_TIMEOUT)
                .unwrap_or_else(|error| {
                    panic!(
                        "waiting for {marker:?}: {error}; printed {:?}",
                        self.printed
                    )
                });
            self.printed.push(line.clone());
            if line.contains(marker) {
                found.push(line);
            }
        }
        found
    }

    fn release(&self, file: &Path) {
        std::fs::write(file, "").unwrap();
    }

    /// Lets it finish; returns everything it printed (sorted, without pids) and whether it
    /// exited 0.
    fn finish(mut self) -> (Vec<String>, bool) {
        self.release(&self.go.with_extension("end"));
        let output = wait_with_timeout(self.launcher.take().unwrap(), "the MPI job");
        self.printed.extend(self.lines.try_iter());
        (
            sorted_lines(&self.printed.join("\n")),
            output.status.success(),
        )
    }
}

impl Drop for WaitingJob {
    /// A failed test still lets the job end by itself.
    fn drop(&mut self) {
        if let Some(launcher) = self.launcher.take() {
            let _ = std::fs::write(&self.go, "");
            let _ = std::fs::write(self.go.with_extension("end"), "");
            let _ = wait_with_timeout(launcher, "the MPI job");
        }
    }
}

fn read_lines(stdout: ChildStdout) -> Receiver<String> {
    let (sender, receiver) = channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

#[test]
fn in_attach_mode_the_ranks_of_a_running_job_split_the_same_way() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?} attach");
        let fixture = mpi_fixture("mpi_wait_shm", library, linking);
        let (native, native_ok) = WaitingJob::start(library, &fixture, true).finish();
        assert!(native_ok, "{what}: native run {native:?}");
        assert_eq!(native.len(), 4, "{what}: {native:?}");

        let mut job = WaitingJob::start(library, &fixture, false);
        let pids: Vec<u32> = job
            .wait_for(": ready, pid ", 2)
            .iter()
            .map(|line| line.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        // Not quiet: the window waits for memsup to say it joined both ranks before they go.
        let window = AttachWindow::open(&pids, &[]);
        job.release(&job.go.clone());
        job.wait_for(" alltoalls, ok", 2);
        let (_, report) = window.close();
        let (printed, ok) = job.finish();
        assert!(ok, "{what}: the job under attach");
        assert_eq!(printed, native, "{what}");
        assert_rank_components(&report, &fixture, &ATTACH_COMPONENTS, &what);
    }
}
