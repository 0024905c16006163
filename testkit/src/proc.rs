//! What /proc says about a process, for tests that look at nodes from
//! outside (their uid, capabilities, namespaces).

/// The value of `key` (with its colon: `"Uid:"`) in /proc/PID/status,
/// trimmed; empty when the process or the line is not there.
pub fn status_line(pid: u32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_a_uid_line() {
        let uid = super::status_line(std::process::id(), "Uid:");
        assert_eq!(uid.split_whitespace().count(), 4, "{uid}");
        assert_eq!(super::status_line(std::process::id(), "NoSuchKey:"), "");
    }
}
