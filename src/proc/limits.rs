//! /proc/PID/limits: the resource limits memsup weighs a program's calls against.

/// The soft limit of locked memory (`Max locked memory`), in bytes: None when unlimited or
/// not listed.
pub fn locked_memory_soft_limit(text: &str) -> Option<u64> {
    soft_limit(text, "Max locked memory")
}

/// The soft limit of the address space (`Max address space`, RLIMIT_AS), in bytes: None
/// when unlimited or not listed.
pub fn address_space_soft_limit(text: &str) -> Option<u64> {
    soft_limit(text, "Max address space")
}

fn soft_limit(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find_map(|line| line.strip_prefix(name))?;
    line.split_whitespace().next()?.parse().ok()
}

pub fn read_locked_memory_soft_limit(pid: i32) -> std::io::Result<Option<u64>> {
    Ok(locked_memory_soft_limit(&read(pid)?))
}

pub fn read_address_space_soft_limit(pid: i32) -> std::io::Result<Option<u64>> {
    Ok(address_space_soft_limit(&read(pid)?))
}

fn read(pid: i32) -> std::io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Linux 6.x prints it (a few lines).
    const LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units     
Max stack size            8388608              unlimited            bytes     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
";

    #[test]
    fn the_locked_memory_limit_is_its_soft_value() {
        assert_eq!(locked_memory_soft_limit(LIMITS), Some(8_388_608));
        let unlimited = LIMITS.replace(
            "8388608              8388608",
            "unlimited            unlimited",
        );
        assert_eq!(locked_memory_soft_limit(&unlimited), None);
        assert_eq!(locked_memory_soft_limit("Limit Soft Hard Units\n"), None);
    }

    #[test]
    fn the_address_space_limit_is_its_soft_value() {
        assert_eq!(address_space_soft_limit(LIMITS), None);
        let limited = LIMITS.replace(
            "Max address space         unlimited            unlimited",
            "Max address space         1073741824           unlimited",
        );
        assert_eq!(address_space_soft_limit(&limited), Some(1 << 30));
    }
}
