//! What an mpi_alltoall job must show: its own lines (one per rank, with the rank's pid) and,
//! in each rank's process image, the fixture's two buffers of n MiB each, requested from
//! make_send_buffer and make_receive_buffer.

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::Value;

use super::report::processes;
use super::run::split_stderr;

/// One MiB per destination rank, from each of the fixture's two sites.
const BLOCK_BYTES: u64 = 1 << 20;

/// The fixture's lines for `ranks` ranks and `iterations` alltoalls parsed into rank -> pid,
/// checking every line's text; panics on a line that is not the fixture's.
pub fn rank_pids(stdout: &[u8], ranks: u32, iterations: u32) -> BTreeMap<u32, i64> {
    let text = String::from_utf8_lossy(stdout);
    let mut pids = BTreeMap::new();
    for line in text.lines() {
        let (head, tail) = line
            .split_once(", pid ")
            .unwrap_or_else(|| panic!("not a line of mpi_alltoall: {line:?} in {text}"));
        let rank: u32 = head
            .strip_prefix("rank ")
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(rank, _)| rank.parse().ok())
            .unwrap_or_else(|| panic!("no rank in {line:?}"));
        assert_eq!(
            head,
            format!("rank {rank} of {ranks}: {iterations} alltoalls"),
            "{text}"
        );
        let (pid, status) = tail.split_once(", ").expect("pid, ok");
        assert_eq!(status, "ok", "{text}");
        assert!(
            pids.insert(rank, pid.parse().unwrap()).is_none(),
            "rank {rank} twice: {text}"
        );
    }
    assert_eq!(
        pids.keys().copied().collect::<Vec<_>>(),
        (0..ranks).collect::<Vec<_>>(),
        "{text}"
    );
    pids
}

/// The job under memsup behaves as natively: the same lines but for the pids, the same
/// exit status, the same stderr once memsup's own lines are taken out.
pub fn assert_same_job(supervised: &Output, native: &Output, ranks: u32, iterations: u32) {
    let (program_stderr, memsup_lines) = split_stderr(&supervised.stderr);
    assert_eq!(
        supervised.status.code(),
        native.status.code(),
        "exit status (memsup said {memsup_lines:?}, the job: {program_stderr})"
    );
    assert_eq!(program_stderr, String::from_utf8_lossy(&native.stderr));
    rank_pids(&native.stdout, ranks, iterations);
    rank_pids(&supervised.stdout, ranks, iterations);
}

/// The images of the report whose executable has file name `name`, by pid.
pub fn images_of<'a>(report: &'a Value, name: &str) -> BTreeMap<i64, &'a Value> {
    processes(report)
        .iter()
        .filter(|image| {
            image["exe"]
                .as_str()
                .is_some_and(|exe| exe.rsplit('/').next() == Some(name))
        })
        .map(|image| (image["pid"].as_i64().expect("pid"), image))
        .collect()
}

/// Allocations and bytes of the sites whose innermost frame is `function`.
pub fn requested_from(image: &Value, function: &str) -> (u64, u64) {
    let sites = image["sites"].as_array().expect("sites");
    sites
        .iter()
        .filter(|site| site["stack"][0]["function"] == function)
        .fold((0, 0), |(calls, bytes), site| {
            (
                calls + site["allocations"].as_u64().unwrap(),
                bytes + site["bytes_allocated"].as_u64().unwrap(),
            )
        })
}

/// The image holds exactly the fixture's buffers for a job of `ranks`: one block of
/// `ranks` MiB from each site, and it exited 0.
pub fn assert_fixture_buffers(image: &Value, ranks: u32, what: &str) {
    let expected = (1, u64::from(ranks) * BLOCK_BYTES);
    for function in ["make_send_buffer", "make_receive_buffer"] {
        assert_eq!(
            requested_from(image, function),
            expected,
            "{what}: {function} in pid {}",
            image["pid"]
        );
    }
    assert_eq!(
        (&image["exit"]["kind"], &image["exit"]["value"]),
        (&Value::from("code"), &Value::from(0)),
        "{what}: exit of pid {}",
        image["pid"]
    );
}

/// Mapping calls and bytes of an image's mapping sites whose stack `matches`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    pub mmap_calls: u64,
    pub mmap_bytes: u64,
    pub munmap_calls: u64,
    pub munmap_bytes: u64,
}

pub fn mapped_where(image: &Value, matches: impl Fn(&[Value]) -> bool) -> Mapped {
    let mut mapped = Mapped::default();
    for site in image["mapping_sites"].as_array().expect("mapping_sites") {
        if !matches(site["stack"].as_array().expect("stack")) {
            continue;
        }
        let count = |key: &str| site.pointer(key).and_then(Value::as_u64).unwrap();
        mapped.mmap_calls += count("/calls/mmap");
        mapped.mmap_bytes += count("/mmap_bytes");
        mapped.munmap_calls += count("/calls/munmap");
        mapped.munmap_bytes += count("/munmap_bytes");
    }
    mapped
}

/// True when `callee` is called from `caller` somewhere in `stack` (innermost first).
pub fn calls_from(stack: &[Value], callee: &str, caller: &str) -> bool {
    stack
        .windows(2)
        .any(|pair| pair[0]["function"] == callee && pair[1]["function"] == caller)
}

/// True when `stack` passes through `function`.
pub fn passes_through(stack: &[Value], function: &str) -> bool {
    stack.iter().any(|frame| frame["function"] == function)
}

/// True when some mapping call of the image went through UCX's memory hooks (`ucm_*`
/// frames): UCX patched the C library's mapping functions in this process.
pub fn went_through_ucx(image: &Value) -> bool {
    image["mapping_sites"]
        .as_array()
        .expect("mapping_sites")
        .iter()
        .flat_map(|site| site["stack"].as_array().into_iter().flatten())
        .any(|frame| {
            frame["function"]
                .as_str()
                .is_some_and(|name| name.starts_with("ucm_"))
        })
}
