//! `memsup dump`: the record stream of a profile, one record per line, with damage and
//! truncation marked where the reader met them.
//!
//! Text: `Alloc { time_ns: 100, pid: 7, tid: 7, function: Malloc, address: 0x5000, size: 24,
//! stack: 2 }` (addresses in hex). JSON lines: each record as serde writes it
//! (`{"Alloc":{...}}`), damage as `{"damage":"..."}`, truncation as `{"truncated":true}`.

use std::io::Write;

use std::sync::OnceLock;

use regex::Regex;

use crate::trace::format::Record;
use crate::trace::reader::ProfileReader;

/// How `dump` writes each line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpFormat {
    Text,
    JsonLines,
}

/// Writes every record of `reader` (of process `pid` only, if given).
pub fn dump(
    reader: &mut ProfileReader,
    format: DumpFormat,
    pid: Option<u32>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut damage_shown = 0;
    while let Some(record) = reader.next() {
        damage_shown = write_damage(reader.damage(), damage_shown, format, out)?;
        if pid.is_none() || record.pid() == pid {
            writeln!(out, "{}", record_line(&record, format))?;
        }
    }
    write_damage(reader.damage(), damage_shown, format, out)?;
    if reader.status().truncated {
        match format {
            DumpFormat::Text => writeln!(
                out,
                "# truncated: the profile ends inside a block or without its End record"
            )?,
            DumpFormat::JsonLines => writeln!(out, "{{\"truncated\":true}}")?,
        }
    }
    Ok(())
}

/// Writes the damage lines after the first `shown`; returns how many are shown now.
fn write_damage(
    damage: &[String],
    shown: usize,
    format: DumpFormat,
    out: &mut dyn Write,
) -> std::io::Result<usize> {
    for line in &damage[shown..] {
        match format {
            DumpFormat::Text => writeln!(out, "# {line}")?,
            DumpFormat::JsonLines => writeln!(out, "{}", serde_json::json!({ "damage": line }))?,
        }
    }
    Ok(damage.len())
}

/// One record as one line.
pub fn record_line(record: &Record, format: DumpFormat) -> String {
    match format {
        DumpFormat::JsonLines => serde_json::to_string(record).expect("records serialise to JSON"),
        DumpFormat::Text => {
            let line = format!("{record:?}");
            address_fields()
                .replace_all(&line, |found: &regex::Captures| {
                    match found[2].parse::<u64>() {
                        Ok(address) => format!("{}: {address:#x}", &found[1]),
                        Err(_) => found[0].to_string(),
                    }
                })
                .into_owned()
        }
    }
}

/// Fields shown in hex in the text form.
fn address_fields() -> &'static Regex {
    static FIELDS: OnceLock<Regex> = OnceLock::new();
    FIELDS.get_or_init(|| {
        Regex::new(r"\b(address|start|end|bias|old_address|new_address): (\d+)")
            .expect("a valid pattern")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::{AllocFunction, SnapshotReason, ThreadActivity};

    #[test]
    fn text_lines_name_every_field_and_show_addresses_in_hex() {
        let alloc = Record::Alloc {
            time_ns: 100,
            pid: 7,
            tid: 8,
            function: AllocFunction::Calloc,
            address: 0x5000,
            size: 24,
            stack: 2,
        };
        assert_eq!(
            record_line(&alloc, DumpFormat::Text),
            "Alloc { time_ns: 100, pid: 7, tid: 8, function: Calloc, address: 0x5000, size: 24, stack: 2 }"
        );
        assert_eq!(
            record_line(&alloc, DumpFormat::JsonLines),
            "{\"Alloc\":{\"time_ns\":100,\"pid\":7,\"tid\":8,\"function\":\"Calloc\",\
             \"address\":20480,\"size\":24,\"stack\":2}}"
        );
        let snapshot = Record::SmapsSnapshot {
            time_ns: 1,
            pid: 7,
            reason: SnapshotReason::Exit,
            cost_ns: 2,
            mappings: Vec::new(),
        };
        assert_eq!(
            record_line(&snapshot, DumpFormat::Text),
            "SmapsSnapshot { time_ns: 1, pid: 7, reason: Exit, cost_ns: 2, mappings: [] }"
        );
        assert_eq!(
            record_line(&Record::End { time_ns: 9 }, DumpFormat::Text),
            "End { time_ns: 9 }"
        );
    }

    #[test]
    fn a_thread_state_shows_its_activity_kernel_state_and_stack() {
        let state = Record::ThreadState {
            time_ns: 3,
            pid: 7,
            tid: 9,
            activity: ThreadActivity::SystemCall(0),
            kernel_state: 'S',
            wchan: "pipe_read".to_string(),
            stack: 4,
        };
        assert_eq!(
            record_line(&state, DumpFormat::Text),
            "ThreadState { time_ns: 3, pid: 7, tid: 9, activity: SystemCall(0), \
             kernel_state: 'S', wchan: \"pipe_read\", stack: 4 }"
        );
        assert_eq!(
            record_line(&state, DumpFormat::JsonLines),
            "{\"ThreadState\":{\"time_ns\":3,\"pid\":7,\"tid\":9,\
             \"activity\":{\"SystemCall\":0},\"kernel_state\":\"S\",\
             \"wchan\":\"pipe_read\",\"stack\":4}}"
        );
    }
}
