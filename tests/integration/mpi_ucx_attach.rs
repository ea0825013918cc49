//! `memsup attach` to the ranks of a running MPICH job, whose libc mapping entries UCX has
//! already rewritten into jumps to its hooks: with either engine, memsup joins both ranks
//! for a moment and leaves: every byte of their code is as before the attach (UCX's jumps
//! included), no foreign patch is counted (none was written while memsup was there), and
//! the job ends with its native output. fixtures/mpi_alltoall.c, 2 ranks.

use std::path::Path;
use std::time::Duration;

use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, read_byte, wait_until,
};
use crate::common::mpi::{mpi_fixture, MpiLibrary, MpiLinking};
use crate::common::mpi_job::{images_of, rank_pids};
use crate::common::report::report_json;
use crate::common::run::{memsup_binary, run_command, spawn_piped, wait_with_timeout};
use crate::common::{file_name, require_tool};

const RANKS: u32 = 2;
/// Enough alltoalls that the ranks outlive the attach by seconds (2 to 12 ms each natively
/// on 2 busy cores; 1,000 once ended before the hook engine's attach had detached).
const ITERATIONS: u32 = 3000;
const TIMEOUT: Duration = Duration::from_secs(60);

/// The running processes whose executable is `program`.
fn processes_of(program: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == program)
        })
        .collect();
    pids.sort();
    pids
}

/// The functions of libc UCX rewrites at MPI_Init (reference §5b).
const PATCHED: [&str; 8] = [
    "mmap", "munmap", "mremap", "madvise", "brk", "sbrk", "shmat", "shmdt",
];
const JUMP: u8 = 0xe9;

/// The offsets of `PATCHED` in the C library, from its dynamic symbol table (read once).
fn libc_offsets(libc: &str) -> &'static [u64] {
    static OFFSETS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    OFFSETS.get_or_init(|| read_offsets(libc))
}

fn read_offsets(libc: &str) -> Vec<u64> {
    let output = std::process::Command::new("nm")
        .args(["-D", "--defined-only", libc])
        .output()
        .expect("running nm");
    let symbols = String::from_utf8_lossy(&output.stdout);
    let offsets: Vec<u64> = PATCHED
        .iter()
        .filter_map(|name| {
            symbols.lines().find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let symbol = fields.get(2)?.split('@').next()?;
                (symbol == *name).then(|| u64::from_str_radix(fields[0], 16).ok())?
            })
        })
        .collect();
    assert_eq!(offsets.len(), PATCHED.len(), "{libc}: {symbols}");
    offsets
}

/// The C library `pid` maps, and where: (path, base address).
fn libc_of(pid: u32) -> Option<(String, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let path = fields.get(5)?;
        let is_libc = path.rsplit('/').next()?.starts_with("libc.so");
        let start = fields[0].split_once('-')?.0;
        (is_libc && fields[2] == "00000000")
            .then(|| Some((path.to_string(), u64::from_str_radix(start, 16).ok()?)))?
    })
}

/// True once UCX has rewritten every one of `PATCHED` in `pid` into a jump.
fn is_patched(pid: u32) -> bool {
    let Some((libc, base)) = libc_of(pid) else {
        return false;
    };
    libc_offsets(&libc)
        .iter()
        .all(|offset| read_byte(pid, base + offset) == JUMP)
}

#[test]
fn attaching_to_ranks_ucx_has_patched_leaves_their_code_as_it_was() {
    let library = MpiLibrary::Mpich;
    if !require_tool(library.compiler()) || !require_tool(library.launcher()) || !require_tool("nm")
    {
        return;
    }
    let fixture = mpi_fixture("mpi_alltoall", library, MpiLinking::Dynamic);
    let program = std::fs::canonicalize(&fixture).unwrap();
    let iterations = ITERATIONS.to_string();
    let native = run_command(library.launch(RANKS, &fixture, &[&iterations]), None);
    rank_pids(&native.stdout, RANKS, ITERATIONS);
    for engine in ["int3", "hooks"] {
        let (job, description) = spawn_piped(library.launch(RANKS, &fixture, &[&iterations]));
        let mut ranks = Vec::new();
        wait_until("UCX has patched both ranks", TIMEOUT, || {
            ranks = processes_of(&program);
            ranks.len() == RANKS as usize && ranks.iter().all(|&pid| is_patched(pid))
        });
        let before: Vec<_> = ranks.iter().map(|&pid| executable_mappings(pid)).collect();
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        let mut attach = library.command(memsup_binary());
        attach
            .args([
                "attach",
                "-q",
                "--engine",
                engine,
                "--duration",
                "0.5",
                "-o",
            ])
            .arg(&profile)
            .args(ranks.iter().map(u32::to_string));
        let attached = run_command(attach, None);
        assert_eq!(
            attached.status.code(),
            Some(0),
            "{engine}: {}",
            String::from_utf8_lossy(&attached.stderr)
        );
        for (pid, code) in ranks.iter().zip(&before) {
            assert_code_unchanged(*pid, code);
        }
        let finished = wait_with_timeout(job, &description);
        assert_eq!(finished.status.code(), native.status.code(), "{engine}");
        assert_eq!(finished.stderr, native.stderr, "{engine}");
        let printed = rank_pids(&finished.stdout, RANKS, ITERATIONS);
        let mut printed: Vec<i64> = printed.into_values().collect();
        printed.sort();

        let report = report_json(&profile);
        let images = images_of(&report, &file_name(&fixture));
        assert_eq!(
            images.keys().copied().collect::<Vec<_>>(),
            printed,
            "{engine}"
        );
        for (pid, image) in images {
            assert_eq!(image["exit"]["kind"], "detached", "{engine}: {pid}");
            assert_eq!(image["probes"]["foreign_patches"], 0, "{engine}: {pid}");
        }
    }
}
