//! What keeps an attach safe for the processes it joins: each process joined once however
//! the user named it.

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
