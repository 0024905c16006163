//! What /proc says about a process, for tests that look at nodes from
//! outside (their uid, capabilities, namespaces).

/// The value of `key` (with its colon: `"Uid:"`) in /proc/PID/status,
/// trimmed; empty when the process or the line is not there.
pub fn status_line(pid: u32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string())).unwrap_or_default()
}

/// The processes below `root` (by their parent links: children,
/// grandchildren, ...), each with its start time (field 22 of
/// /proc/PID/stat), so that a pid used again later is not taken for one
/// of them ([`running`]).
pub fn below(root: u32) -> Vec<(u32, u64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
    let stats: Vec<(u32, u32, u64)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (_, parent, start) = stat(pid)?;
            Some((pid, parent, start))
        })
        .collect();
    let parent = |pid: u32| stats.iter().find(|s| s.0 == pid).map(|s| s.1);
    let is_below = |pid: u32| {
        let mut p = pid;
        for _ in 0..64 {
            match parent(p) {
                Some(q) if q == root => return true,
                Some(q) if q > 1 => p = q,
                _ => return false,
            }
        }
        false
    };
    stats.iter().filter(|s| is_below(s.0)).map(|s| (s.0, s.2)).collect()
}

/// Those of `processes` ([`below`]) that still run (not zombies).
pub fn running(processes: &[(u32, u64)]) -> Vec<u32> {
    processes
        .iter()
        .filter(|(pid, start)| stat(*pid).is_some_and(|(state, _, s)| s == *start && state != "Z"))
        .map(|(pid, _)| *pid)
        .collect()
}

/// State, parent and start time of `pid`, from /proc/PID/stat.
fn stat(pid: u32) -> Option<(String, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (which may hold spaces and parentheses).
    let after: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((after.first()?.to_string(), after.get(1)?.parse().ok()?, after.get(19)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_child_is_below_this_process_until_it_ends() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let below = super::below(std::process::id());
        assert!(below.iter().any(|(pid, _)| *pid == child.id()), "{below:?}");
        assert_eq!(super::running(&below), vec![child.id()]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(super::running(&below).is_empty());
    }

    #[test]
    fn this_process_has_a_uid_line() {
        let uid = super::status_line(std::process::id(), "Uid:");
        assert_eq!(uid.split_whitespace().count(), 4, "{uid}");
        assert_eq!(super::status_line(std::process::id(), "NoSuchKey:"), "");
    }
}
