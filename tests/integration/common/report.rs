//! Reading `memsup report --format json` (schema in docs/report-json.md).

use std::path::Path;

use serde_json::Value;

use super::run::{clean_command, memsup_binary, run_command};

/// Runs `memsup report --format json PROFILE`, requires success and parses stdout.
pub fn report_json(profile: &Path) -> Value {
    report_json_with(profile, &[])
}

/// `report_json` with more report options (`["--skip-frames", "grow_*"]`).
pub fn report_json_with(profile: &Path, options: &[&str]) -> Value {
    let mut arguments = vec!["--format", "json"];
    arguments.extend(options);
    let stdout = report_output(profile, &arguments);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("memsup report printed invalid JSON ({error}):\n{stdout}"));
    assert_eq!(report["schema"], "memsup-report", "schema name");
    assert_eq!(report["schema_version"], 3, "schema version");
    report
}

/// An image's warnings, in the order memsup gave them.
pub fn warnings(image: &Value) -> Vec<String> {
    image["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|warning| warning.as_str().expect("a string").to_string())
        .collect()
}

/// The records of `pid` in `memsup dump --format json PROFILE`: each record's kind and
/// fields, in profile order.
pub fn dump_records(profile: &Path, pid: u64) -> Vec<(String, Value)> {
    let mut command = clean_command(memsup_binary());
    command.args(["dump", "--format", "json"]).arg(profile);
    let output = run_command(command, None);
    assert!(output.status.success(), "memsup dump: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let record: Value = serde_json::from_str(line).unwrap();
            let (kind, fields) = record.as_object()?.iter().next()?;
            (fields["pid"].as_u64() == Some(pid)).then(|| (kind.clone(), fields.clone()))
        })
        .collect()
}

/// Runs `memsup report OPTIONS PROFILE`, requires success and returns stdout.
pub fn report_output(profile: &Path, options: &[&str]) -> String {
    let mut command = clean_command(memsup_binary());
    command.arg("report").args(options).arg(profile);
    let output = run_command(command, None);
    assert!(
        output.status.success(),
        "memsup report {options:?} {} failed with {:?}: {}",
        profile.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the report is UTF-8")
}

/// A required unsigned integer at a JSON pointer ("/calls/malloc").
pub fn number(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no unsigned integer at {pointer} in {value:#}"))
}

pub fn processes(report: &Value) -> &Vec<Value> {
    report["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("report without a processes array: {report:#}"))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub fn describe_images(report: &Value) -> String {
    processes(report)
        .iter()
        .map(|image| {
            format!(
                "pid {} exe {} cause {} exit {}",
                image["pid"], image["exe"], image["cause"], image["exit"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The one process image whose exe has basename `exe_basename` and whose cause is `cause`
/// ("launch", "fork", "vfork", "attach").
pub fn process_image<'a>(report: &'a Value, exe_basename: &str, cause: &str) -> &'a Value {
    let matching: Vec<&Value> = processes(report)
        .iter()
        .filter(|image| {
            image["exe"].as_str().map(basename) == Some(exe_basename) && image["cause"] == cause
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "expected exactly one process image of {exe_basename} with cause {cause}; images: {}",
        describe_images(report)
    );
    matching[0]
}

/// The report holds exactly `count` process images.
pub fn assert_image_count(report: &Value, count: usize) {
    assert_eq!(
        processes(report).len(),
        count,
        "number of process images; images: {}",
        describe_images(report)
    );
}

/// The image ended as `kind` ("code", "signal", "exec", "detached", "unknown") with `value`
/// (only for code and signal).
pub fn assert_exit(image: &Value, kind: &str, value: Option<i64>) {
    assert_eq!(image["exit"]["kind"], kind, "exit kind of {}", image["exe"]);
    match value {
        Some(value) => assert_eq!(
            image["exit"]["value"], value,
            "exit value of {}",
            image["exe"]
        ),
        None => assert!(
            image["exit"].get("value").map_or(true, Value::is_null),
            "exit {} of {} must have no value",
            image["exit"],
            image["exe"]
        ),
    }
}

/// The profile header as the report shows it.
pub fn assert_profile(report: &Value, mode: &str, target: &[String]) {
    let profile = &report["profile"];
    assert_eq!(profile["mode"], mode, "profile mode");
    assert_eq!(
        profile["truncated"], false,
        "a complete profile is not truncated"
    );
    let shown: Vec<&str> = profile["target"]
        .as_array()
        .unwrap_or_else(|| panic!("profile.target is not an array: {profile:#}"))
        .iter()
        .map(|item| item.as_str().unwrap_or_default())
        .collect();
    assert_eq!(shown, target, "profile.target");
    assert_eq!(profile["memsup_version"], env!("CARGO_PKG_VERSION"));
}

/// The resident point of `component` at the snapshot taken at `time_ns` (0 when absent).
pub fn resident_at(image: &Value, name: &str, time_ns: u64) -> u64 {
    let Some(component) = image["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
    else {
        return 0;
    };
    component["resident_timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|point| point[0].as_u64() == Some(time_ns))
        .map_or(0, |point| point[1].as_u64().unwrap())
}
