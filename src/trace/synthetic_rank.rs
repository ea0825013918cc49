//! A synthetic MPI rank's profile, as `mpirun -n N memsup run -o 'job/%r.msup' -- ./app`
//! would write one: for the job report's benchmark (bench/job_merge.sh, 1,024 of them) and
//! its tests. Deterministic for a given rank, world size and number of heap events.
//!
//! One image (pid 10,000 + rank) of `/opt/app/solver`, rank `rank` of `world_size` from
//! `PMI_RANK`, on host `node{rank / 16}` (16 ranks per node), with the executable, libmpich
//! and libc as modules. It allocates an app buffer of (rank % 7 + 1) MiB and an MPI buffer
//! of 2 MiB, both held until the end, then churns `events` mallocs and frees of 16–4000
//! bytes over 512 slots from 4 app and 4 MPI stacks; a status sample every 100 events, an
//! smaps_rollup sample every 500, and smaps snapshots at the start, at the high and at the
//! exit with the executable, the libraries, the heap, a thread stack and a 4 MiB shared
//! memory segment.

use std::path::Path;

use crate::error::TraceError;
use crate::trace::format::{
    AllocFunction, ExitKind, Header, MappingResidency, MpiRank, ProbeCounters, ProcessRole, Record,
    RecordMode, SnapshotReason, SourceFrame, StartCause, MAPPING_EXECUTE, MAPPING_READ,
    MAPPING_SHARED, MAPPING_WRITE,
};
use crate::trace::writer::ProfileWriter;

const EXE: &str = "/opt/app/solver";
const MPI: &str = "/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.2";
const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const APP_START: u64 = 0x5555_5555_0000;
const MPI_START: u64 = 0x7f10_0000_0000;
const LIBC_START: u64 = 0x7f20_0000_0000;
const HEAP_START: u64 = 0x5555_6000_0000;
const SLOTS: u64 = 512;
const SIZES: [u64; 8] = [16, 24, 32, 64, 128, 256, 1024, 4000];
const MIB: u64 = 1 << 20;

/// The pid of `rank`'s image.
pub fn pid_of(rank: u32) -> u32 {
    10_000 + rank
}

/// The host `rank` runs on.
pub fn host_of(rank: u32) -> String {
    format!("node{}", rank / 16)
}

/// The app buffer `rank` holds, in bytes.
pub fn app_buffer(rank: u32) -> u64 {
    (u64::from(rank) % 7 + 1) * MIB
}

/// The MPI buffer every rank holds.
pub const MPI_BUFFER: u64 = 2 * MIB;

/// Writes the profile of `rank` at `path` (which must not exist).
pub fn write_rank_profile(
    path: &Path,
    rank: u32,
    world_size: u32,
    events: u64,
) -> Result<(), TraceError> {
    let header = Header {
        memsup_version: env!("CARGO_PKG_VERSION").to_string(),
        host: host_of(rank),
        mode: RecordMode::Run,
        target: vec![EXE.to_string()],
        start_unix_ns: 1_700_000_000_000_000_000,
        options: vec![format!("synthetic_rank={rank}")],
    };
    let mut writer = ProfileWriter::create(path, &header)?;
    let mut records = Vec::new();
    Rank::new(rank, world_size).write(events, &mut records);
    writer.push_all(&records)?;
    writer.finish()
}

struct Rank {
    rank: u32,
    world_size: u32,
    pid: u32,
    random: u64,
    time_ns: u64,
    live: Vec<u64>,
    live_bytes: u64,
}

impl Rank {
    fn new(rank: u32, world_size: u32) -> Self {
        Rank {
            rank,
            world_size,
            pid: pid_of(rank),
            random: 0x9e37_79b9_7f4a_7c15 ^ u64::from(rank) << 17,
            time_ns: 1000,
            live: vec![0; SLOTS as usize],
            live_bytes: 0,
        }
    }

    /// xorshift64*: the same stream for the same rank on every machine.
    fn next(&mut self) -> u64 {
        self.random ^= self.random >> 12;
        self.random ^= self.random << 25;
        self.random ^= self.random >> 27;
        self.random.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn write(mut self, events: u64, out: &mut Vec<Record>) {
        self.start(out);
        out.push(self.snapshot(SnapshotReason::Start));
        self.buffers(out);
        self.churn(events, out);
        let high = self.heap_rss() + Self::FIXED_RSS;
        let reason = SnapshotReason::RssHigh {
            bytes: high,
            delay_ns: 2_000_000,
        };
        out.push(self.snapshot(reason));
        self.time_ns += 1000;
        out.push(self.snapshot(SnapshotReason::Exit));
        self.end(out);
    }

    fn start(&self, out: &mut Vec<Record>) {
        let pid = self.pid;
        out.push(Record::ProcessStart {
            time_ns: 1,
            pid,
            parent_pid: None,
            cause: StartCause::Launch,
        });
        out.push(Record::Exec {
            time_ns: 2,
            pid,
            exe: EXE.to_string(),
            argv: vec![EXE.to_string(), "--steps".to_string(), "100".to_string()],
        });
        out.push(Record::ProcessRole {
            time_ns: 3,
            pid,
            role: ProcessRole::Rank(MpiRank {
                rank: self.rank,
                world_size: Some(self.world_size),
                job: "synthetic".to_string(),
                source: "PMI_RANK".to_string(),
            }),
        });
        for (path, start) in [(EXE, APP_START), (MPI, MPI_START), (LIBC, LIBC_START)] {
            out.push(Record::Module {
                time_ns: 4,
                pid,
                path: path.to_string(),
                start,
                end: start + 0x40_0000,
                bias: start,
            });
        }
        // Stack nodes, numbered in order as the interpret stage numbers them: 1 main; app
        // stacks 2..=5 (main → solve_k); 6 MPI_Init in libmpich; MPI stacks 7..=10
        // (main → MPI_Init → MPIR_alloc_k).
        out.push(self.node(1, 0, APP_START + 0x100));
        for k in 0..4u64 {
            out.push(self.node(2 + k, 1, APP_START + 0x1000 + k * 0x100));
        }
        out.push(self.node(6, 1, MPI_START + 0x100));
        for k in 0..4u64 {
            out.push(self.node(7 + k, 6, MPI_START + 0x1000 + k * 0x100));
        }
    }

    fn node(&self, id: u64, parent: u64, address: u64) -> Record {
        Record::StackNode {
            pid: self.pid,
            id: id as u32,
            parent: parent as u32,
            address,
        }
    }

    /// The two buffers held to the end: the app's, then the MPI library's.
    fn buffers(&mut self, out: &mut Vec<Record>) {
        let app = app_buffer(self.rank);
        out.push(self.alloc(HEAP_START + 0x1000_0000, app, 2));
        out.push(self.alloc(HEAP_START + 0x2000_0000, MPI_BUFFER, 7));
        self.live_bytes = app + MPI_BUFFER;
    }

    fn alloc(&mut self, address: u64, size: u64, stack: u32) -> Record {
        self.time_ns += 500;
        Record::Alloc {
            time_ns: self.time_ns,
            pid: self.pid,
            tid: self.pid,
            function: AllocFunction::Malloc,
            address,
            size,
            stack,
        }
    }

    fn churn(&mut self, events: u64, out: &mut Vec<Record>) {
        for event in 0..events {
            let draw = self.next();
            let slot = ((draw >> 16) % SLOTS) as usize;
            let address = HEAP_START + slot as u64 * 0x1000;
            if self.live[slot] > 0 {
                self.time_ns += 200 + draw % 1800;
                out.push(Record::Free {
                    time_ns: self.time_ns,
                    pid: self.pid,
                    tid: self.pid,
                    address,
                });
                self.live_bytes -= self.live[slot];
                self.live[slot] = 0;
            } else {
                let size = SIZES[(draw >> 48) as usize % SIZES.len()];
                let stack = [2, 3, 4, 5, 7, 8, 9, 10][(draw >> 40) as usize % 8];
                out.push(self.alloc(address, size, stack));
                self.live[slot] = size;
                self.live_bytes += size;
            }
            if event % 100 == 99 {
                out.push(self.status());
            }
            if event % 500 == 499 {
                out.push(self.rollup());
            }
        }
    }

    /// Resident heap: the live bytes rounded up to pages, plus a page of allocator state.
    fn heap_rss(&self) -> u64 {
        self.live_bytes.div_ceil(4096) * 4096 + 4096
    }

    /// Resident outside the heap: the three modules' text, a stack and the shm segment.
    const FIXED_RSS: u64 = 64 * 1024 + 1536 * 1024 + 1024 * 1024 + 128 * 1024 + 2 * MIB;

    fn status(&self) -> Record {
        let rss = self.heap_rss() + Self::FIXED_RSS;
        Record::StatusSample {
            time_ns: self.time_ns,
            pid: self.pid,
            rss,
            anon: self.heap_rss(),
            file: rss - self.heap_rss() - 2 * MIB,
            shmem: 2 * MIB,
            swap: 0,
        }
    }

    fn rollup(&self) -> Record {
        let rss = self.heap_rss() + Self::FIXED_RSS;
        // Library text and the shm segment are shared with the node's other ranks.
        let pss = rss - 1536 * 1024 / 2 - 1024 * 1024 / 2 - MIB;
        Record::RollupSample {
            time_ns: self.time_ns,
            pid: self.pid,
            rss,
            pss,
            pss_anon: self.heap_rss(),
            pss_file: pss - self.heap_rss() - MIB,
            pss_shmem: MIB,
            swap: 0,
            swap_pss: 0,
        }
    }

    fn snapshot(&self, reason: SnapshotReason) -> Record {
        let read_execute = MAPPING_READ | MAPPING_EXECUTE;
        let mapping =
            |start: u64, size: u64, flags: u8, path: &str, rss: u64, pss: u64| MappingResidency {
                start,
                end: start + size,
                flags,
                offset: 0,
                inode: 0,
                path: path.to_string(),
                rss,
                pss,
                shared: rss - pss.min(rss),
                private_dirty: 0,
                anonymous: 0,
                swap: 0,
                swap_pss: 0,
            };
        let heap = self.heap_rss();
        let read_write = MAPPING_READ | MAPPING_WRITE;
        let mappings = vec![
            mapping(APP_START, 0x10_0000, read_execute, EXE, 64 << 10, 64 << 10),
            mapping(HEAP_START, 0x4000_0000, read_write, "[heap]", heap, heap),
            mapping(
                MPI_START,
                0x40_0000,
                read_execute,
                MPI,
                1536 << 10,
                768 << 10,
            ),
            mapping(
                LIBC_START,
                0x20_0000,
                read_execute,
                LIBC,
                1 << 20,
                512 << 10,
            ),
            mapping(
                0x7f30_0000_0000,
                4 * MIB,
                read_write | MAPPING_SHARED,
                "/dev/shm/mpich_shar_tmp0",
                2 * MIB,
                MIB,
            ),
            mapping(
                0x7ffd_0000_0000,
                0x2_0000,
                read_write,
                "[stack]",
                128 << 10,
                128 << 10,
            ),
        ];
        Record::SmapsSnapshot {
            time_ns: self.time_ns,
            pid: self.pid,
            reason,
            cost_ns: 200_000,
            mappings,
        }
    }

    fn end(&mut self, out: &mut Vec<Record>) {
        let symbol = |address: u64, function: String, module: &str| Record::Symbol {
            pid: self.pid,
            address,
            function: function.clone(),
            offset: 0x10,
            module: module.to_string(),
            frames: vec![SourceFrame {
                function: function.clone(),
                raw_name: function,
                file: None,
                line: None,
                column: None,
                inlined: false,
            }],
        };
        out.push(symbol(APP_START + 0x100, "main".to_string(), EXE));
        out.push(symbol(MPI_START + 0x100, "MPI_Init".to_string(), MPI));
        for k in 0..4u64 {
            out.push(symbol(
                APP_START + 0x1000 + k * 0x100,
                format!("solve_{k}"),
                EXE,
            ));
            let mpi = format!("MPIR_alloc_{k}");
            out.push(symbol(MPI_START + 0x1000 + k * 0x100, mpi, MPI));
        }
        self.time_ns += 1000;
        out.push(Record::ProcessExit {
            time_ns: self.time_ns,
            pid: self.pid,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        });
        out.push(Record::End {
            time_ns: self.time_ns + 1,
        });
    }
}
