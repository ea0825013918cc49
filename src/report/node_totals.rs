//! Node totals: for a profile holding several MPI ranks, the sum over the ranks of each
//! component's peak, PSS first (shared pages split among the processes mapping them, so the
//! sum is what the node spends; RSS sums count shared pages once per rank).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::analysis::ProcessAnalysis;
use crate::platform::libraries::file_name;
use crate::trace::format::ProcessRole;

/// Programs that start ranks rather than being one (launchers and their helpers).
const LAUNCHERS: &[&str] = &[
    "orterun",
    "mpirun",
    "mpiexec",
    "mpiexec.hydra",
    "hydra_pmi_proxy",
    "orted",
    "prted",
    "prterun",
    "srun",
];

/// The sums over the ranks, in JSON as `node_totals`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct NodeTotals {
    /// PIDs of the images counted, in report order.
    pub pids: Vec<u32>,
    /// Sums of the per-rank component peaks, by PSS (then name).
    pub components: Vec<ComponentTotal>,
    /// The sum of `pss_bytes` over the components.
    pub pss_bytes: u64,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ComponentTotal {
    pub name: String,
    pub pss_bytes: u64,
    pub rss_bytes: u64,
    pub requested_bytes: u64,
}

/// The ranks of `images`: those whose role is a rank; in a profile without roles, the images
/// with MPI memory (`mpi`, `mpi:shm`) that are no launcher. None for fewer than two.
pub fn node_totals(images: &[ProcessAnalysis]) -> Option<NodeTotals> {
    let is_rank = |image: &ProcessAnalysis| matches!(image.role, Some(ProcessRole::Rank(_)));
    let any_role = images.iter().any(|image| image.role.is_some());
    let ranks: Vec<&ProcessAnalysis> = images
        .iter()
        .filter(|image| match any_role {
            true => is_rank(image),
            false => holds_mpi(image) && !LAUNCHERS.contains(&file_name(&image.exe)),
        })
        .collect();
    if ranks.len() < 2 {
        return None;
    }
    let mut sums: BTreeMap<&str, ComponentTotal> = BTreeMap::new();
    for component in ranks.iter().flat_map(|image| &image.components.components) {
        let total = sums
            .entry(component.name.as_str())
            .or_insert_with(|| ComponentTotal {
                name: component.name.clone(),
                pss_bytes: 0,
                rss_bytes: 0,
                requested_bytes: 0,
            });
        total.pss_bytes += component.peak_pss_bytes;
        total.rss_bytes += component.peak_rss_bytes;
        total.requested_bytes += component.peak_requested_bytes;
    }
    let mut components: Vec<ComponentTotal> = sums.into_values().collect();
    components.sort_by(|a, b| b.pss_bytes.cmp(&a.pss_bytes).then(a.name.cmp(&b.name)));
    Some(NodeTotals {
        pids: ranks.iter().map(|image| image.pid).collect(),
        pss_bytes: components.iter().map(|c| c.pss_bytes).sum(),
        components,
    })
}

fn holds_mpi(image: &ProcessAnalysis) -> bool {
    let components = &image.components.components;
    components
        .iter()
        .any(|c| c.name == "mpi" || c.name == "mpi:shm")
}

/// The text section, after the process blocks.
pub fn render_text(images: &[ProcessAnalysis], out: &mut dyn Write) -> std::io::Result<()> {
    let Some(totals) = node_totals(images) else {
        return Ok(());
    };
    let pids: Vec<String> = totals.pids.iter().map(u32::to_string).collect();
    writeln!(
        out,
        "\n== node totals: {} ranks (pids {}), the sum of each rank's component peaks ==",
        totals.pids.len(),
        pids.join(", ")
    )?;
    let short = super::text::short_bytes;
    let width = totals.components.iter().map(|c| c.name.len()).max();
    let width = width.unwrap_or(0).max(18);
    writeln!(
        out,
        "  {:<width$} {:>12} {:>12} {:>12}",
        "component", "PSS", "RSS", "requested"
    )?;
    for component in &totals.components {
        writeln!(
            out,
            "  {:<width$} {:>12} {:>12} {:>12}",
            component.name,
            short(component.pss_bytes),
            short(component.rss_bytes),
            short(component.requested_bytes)
        )?;
    }
    writeln!(out, "  {:<width$} {:>12}", "total", short(totals.pss_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::{component, components_analysis};
    use crate::trace::format::MpiRank;

    /// Images: two ranks of a program, its launcher, and a helper without MPI memory.
    fn job() -> Vec<ProcessAnalysis> {
        let base = components_analysis().processes.remove(0);
        let image = |pid: u32, exe: &str, parts: &[(&str, u64, u64)]| {
            let mut image = base.clone();
            image.pid = pid;
            image.exe = exe.to_string();
            image.components.components = parts
                .iter()
                .map(|&(name, requested, pss)| {
                    component(name, &[(10, requested)], &[(10, 2 * pss, pss, 0)])
                })
                .collect();
            image
        };
        vec![
            image(
                10,
                "/usr/bin/orterun",
                &[("mpi", 100, 9000), ("mpi:shm", 0, 800)],
            ),
            image(
                11,
                "/home/u/solver",
                &[("app", 4096, 5000), ("mpi", 10, 3000)],
            ),
            image(
                12,
                "/home/u/solver",
                &[("mpi", 20, 3100), ("mpi:shm", 0, 60)],
            ),
            image(13, "/bin/sh", &[("libc", 0, 700)]),
        ]
    }

    #[test]
    fn without_roles_the_ranks_are_the_images_with_mpi_memory_that_launch_nothing() {
        let totals = node_totals(&job()).unwrap();
        assert_eq!(totals.pids, [11, 12]);
        let sums: Vec<(&str, u64, u64, u64)> = totals
            .components
            .iter()
            .map(|c| (c.name.as_str(), c.pss_bytes, c.rss_bytes, c.requested_bytes))
            .collect();
        assert_eq!(
            sums,
            [
                ("mpi", 6100, 12200, 30),
                ("app", 5000, 10000, 4096),
                ("mpi:shm", 60, 120, 0)
            ]
        );
        assert_eq!(totals.pss_bytes, 11160);
    }

    #[test]
    fn with_roles_the_ranks_are_the_images_whose_role_is_a_rank() {
        let mut images = job();
        images[2].role = Some(ProcessRole::Rank(MpiRank {
            rank: 0,
            world_size: Some(2),
            job: "j".to_string(),
            source: "PMI_RANK".to_string(),
        }));
        assert_eq!(
            node_totals(&images),
            None,
            "a single rank has no node totals"
        );
        images[3].role = images[2].role.clone();
        assert_eq!(node_totals(&images).unwrap().pids, [12, 13]);
    }

    #[test]
    fn the_text_section_lists_the_sums_by_pss() {
        let mut text = Vec::new();
        render_text(&job(), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(
            text,
            "\n== node totals: 2 ranks (pids 11, 12), the sum of each rank's component peaks ==\n\
             \x20 component                   PSS          RSS    requested\n\
             \x20 mpi                    5.96 KiB    11.91 KiB     30 bytes\n\
             \x20 app                    4.88 KiB     9.77 KiB     4.00 KiB\n\
             \x20 mpi:shm                60 bytes    120 bytes      0 bytes\n\
             \x20 total                 10.90 KiB\n"
        );
    }
}
