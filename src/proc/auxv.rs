//! /proc/PID/auxv.

pub const AT_BASE: u64 = 7;
pub const AT_ENTRY: u64 = 9;

/// Parses the auxiliary vector (pairs of native-endian u64 up to AT_NULL).
pub fn parse_auxv(bytes: &[u8]) -> Vec<(u64, u64)> {
    let _ = bytes;
    todo!()
}

/// Reads /proc/PID/auxv and returns the value of `key`, if present.
pub fn read_auxv_value(pid: i32, key: u64) -> std::io::Result<Option<u64>> {
    let _ = (pid, key);
    todo!()
}
