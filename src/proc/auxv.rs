//! /proc/PID/auxv.

pub const AT_NULL: u64 = 0;
pub const AT_BASE: u64 = 7;
pub const AT_ENTRY: u64 = 9;

/// Parses the auxiliary vector (pairs of native-endian u64 up to AT_NULL).
pub fn parse_auxv(bytes: &[u8]) -> Vec<(u64, u64)> {
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().expect("8-byte word"));
    bytes
        .chunks_exact(16)
        .map(|pair| (word(&pair[..8]), word(&pair[8..])))
        .take_while(|&(key, _)| key != AT_NULL)
        .collect()
}

/// Reads /proc/PID/auxv and returns the value of `key`, if present.
pub fn read_auxv_value(pid: i32, key: u64) -> std::io::Result<Option<u64>> {
    let bytes = std::fs::read(format!("/proc/{pid}/auxv"))?;
    Ok(parse_auxv(&bytes)
        .into_iter()
        .find(|&(found, _)| found == key)
        .map(|(_, value)| value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(pairs: &[(u64, u64)]) -> Vec<u8> {
        pairs
            .iter()
            .flat_map(|&(key, value)| [key.to_ne_bytes(), value.to_ne_bytes()])
            .flatten()
            .collect()
    }

    #[test]
    fn stops_at_at_null_and_ignores_partial_pairs() {
        let mut bytes = encode(&[(AT_BASE, 0x7f00_0000_0000), (AT_ENTRY, 0x401020)]);
        bytes.extend(encode(&[(AT_NULL, 0), (AT_ENTRY, 0xdead)]));
        assert_eq!(
            parse_auxv(&bytes),
            vec![(AT_BASE, 0x7f00_0000_0000), (AT_ENTRY, 0x401020)]
        );
        let mut truncated = encode(&[(AT_ENTRY, 5)]);
        truncated.extend([1, 2, 3]);
        assert_eq!(parse_auxv(&truncated), vec![(AT_ENTRY, 5)]);
        assert!(parse_auxv(&[]).is_empty());
    }

    #[test]
    fn own_auxv_has_an_entry_point() {
        let pid = std::process::id() as i32;
        let entry = read_auxv_value(pid, AT_ENTRY).unwrap();
        assert!(entry.is_some_and(|entry| entry != 0));
        assert_eq!(read_auxv_value(pid, 0xffff).unwrap(), None);
    }
}
