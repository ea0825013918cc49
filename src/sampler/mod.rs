//! Residency sampling of /proc/PID/status and smaps (no ptrace). Arrives with the timelines.
